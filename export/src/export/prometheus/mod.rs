//! A Prometheus scrape endpoint (`metrics.prometheus.listen`): `GET /metrics` serves the
//! live metrics as the latest export left them, named as Prometheus' OTLP translation
//! names them. Bound before anything starts, so a taken port starts nothing.
mod names;
mod store;
mod text;

use std::sync::{Arc, Mutex};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, header},
    response::IntoResponse,
    routing::get,
};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;

use store::Store;

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error(
        "cannot serve metrics on {addr} (metrics.prometheus.listen): {source}; choose a free \
         address and port, or unset it"
    )]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

struct Shared {
    store: Mutex<Store>,
    promote: Vec<String>,
}

/// The endpoint's side the metrics tick feeds.
#[derive(Clone)]
pub struct Endpoint {
    shared: Arc<Shared>,
    /// Where it listens (the port chosen when 0 was asked).
    pub addr: std::net::SocketAddr,
}

/// A bound socket not served yet: binding comes before the probes load, serving once the
/// runtime runs.
pub struct Bound {
    listener: std::net::TcpListener,
    endpoint: Endpoint,
}

impl Bound {
    /// Binds `metrics.prometheus.listen`, if set.
    pub fn bind(cfg: &pipetrace_config::Prometheus) -> Result<Option<Self>, EndpointError> {
        let Some(addr) = &cfg.listen else {
            return Ok(None);
        };
        let err = |source| EndpointError::Bind {
            addr: addr.clone(),
            source,
        };
        let listener = std::net::TcpListener::bind(addr.as_str()).map_err(err)?;
        listener.set_nonblocking(true).map_err(err)?;
        let addr = listener.local_addr().map_err(err)?;
        let shared = Arc::new(Shared {
            store: Mutex::new(Store {
                keep_ended: cfg.keep_ended,
                ..Store::default()
            }),
            promote: cfg.promote_resource_attributes.clone(),
        });
        Ok(Some(Self {
            listener,
            endpoint: Endpoint { shared, addr },
        }))
    }

    /// Serves scrapes from now on (in the current tokio runtime).
    pub fn serve(self) -> std::io::Result<Endpoint> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        let app = Router::new()
            .route("/metrics", get(scrape))
            .with_state(self.endpoint.shared.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                log::error!("the Prometheus endpoint stopped: {e}");
            }
        });
        Ok(self.endpoint)
    }
}

impl Endpoint {
    /// Takes the latest export of the live metrics.
    pub(crate) fn update(&self, req: &ExportMetricsServiceRequest) {
        let mut store = self.shared.store.lock().unwrap_or_else(|p| p.into_inner());
        store.update(req, &self.shared.promote);
    }
}

async fn scrape(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let openmetrics = accept.is_some_and(|a| a.contains("application/openmetrics-text"));
    let body = {
        let store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
        text::render(&store, openmetrics)
    };
    let content_type = if openmetrics {
        text::OPENMETRICS
    } else {
        text::TEXT
    };
    ([(header::CONTENT_TYPE, content_type)], body)
}

#[cfg(test)]
mod tests;
