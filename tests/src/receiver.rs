//! An OTLP trace and metrics receiver over gRPC (the opentelemetry-proto tonic services) and
//! over HTTP/protobuf (POST /v1/traces, /v1/metrics), keeping what it receives.
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::StatusCode, routing::post};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    metrics_service_server::{MetricsService, MetricsServiceServer},
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use prost::Message;
use tokio::net::TcpListener;

use crate::{
    metrics::{RecvPoint, flatten_metrics},
    spans::{RecvSpan, flatten},
};

#[derive(Clone, Default)]
struct Store {
    spans: Arc<Mutex<Vec<RecvSpan>>>,
    metrics: Arc<Mutex<Vec<RecvPoint>>>,
    /// `name=value` of every `x-` request header seen (auth and tenant headers).
    headers: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl Store {
    fn add(&self, req: ExportTraceServiceRequest) {
        self.spans.lock().expect("store lock").extend(flatten(req));
    }

    fn saw<'a>(&self, headers: impl Iterator<Item = (&'a str, &'a str)>) {
        let mut seen = self.headers.lock().expect("headers lock");
        seen.extend(
            headers
                .filter(|(k, _)| k.starts_with("x-"))
                .map(|(k, v)| format!("{k}={v}")),
        );
    }
}

#[tonic::async_trait]
impl TraceService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let headers = request.metadata().clone().into_headers();
        self.saw(
            headers
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
        );
        self.add(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

async fn http_traces(
    State(store): State<Store>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    store.saw(
        headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
    );
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            store.add(req);
            (
                StatusCode::OK,
                ExportTraceServiceResponse {
                    partial_success: None,
                }
                .encode_to_vec(),
            )
        }
        Err(_) => (StatusCode::BAD_REQUEST, Vec::new()),
    }
}

#[tonic::async_trait]
impl MetricsService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let points = flatten_metrics(request.into_inner());
        self.metrics.lock().expect("store lock").extend(points);
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

async fn http_metrics(State(store): State<Store>, body: Bytes) -> (StatusCode, Vec<u8>) {
    match ExportMetricsServiceRequest::decode(body) {
        Ok(req) => {
            let points = flatten_metrics(req);
            store.metrics.lock().expect("store lock").extend(points);
            let ok = ExportMetricsServiceResponse {
                partial_success: None,
            };
            (StatusCode::OK, ok.encode_to_vec())
        }
        Err(_) => (StatusCode::BAD_REQUEST, Vec::new()),
    }
}

pub struct Receiver {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    store: Store,
}

impl Receiver {
    /// Listens on two free loopback ports.
    pub async fn start() -> Self {
        let store = Store::default();
        let grpc_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind gRPC");
        let http_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind HTTP");
        let (grpc, http) = (
            grpc_listener.local_addr().unwrap(),
            http_listener.local_addr().unwrap(),
        );
        // Collectors compress by default; a real receiver accepts it.
        let svc = TraceServiceServer::new(store.clone())
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .accept_compressed(tonic::codec::CompressionEncoding::Zstd);
        let metrics = MetricsServiceServer::new(store.clone())
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .accept_compressed(tonic::codec::CompressionEncoding::Zstd);
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(grpc_listener);
            tonic::transport::Server::builder()
                .add_service(svc)
                .add_service(metrics)
                .serve_with_incoming(incoming)
                .await
                .expect("gRPC receiver");
        });
        let app = Router::new()
            .route("/v1/traces", post(http_traces))
            .route("/v1/metrics", post(http_metrics))
            .with_state(store.clone());
        tokio::spawn(async move {
            axum::serve(http_listener, app)
                .await
                .expect("HTTP receiver")
        });
        Self { grpc, http, store }
    }

    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }

    pub fn spans(&self) -> Vec<RecvSpan> {
        self.store.spans.lock().expect("store lock").clone()
    }

    /// Every metric data point received, in arrival order.
    pub fn metrics(&self) -> Vec<RecvPoint> {
        self.store.metrics.lock().expect("store lock").clone()
    }

    /// `name=value` of the `x-` request headers received.
    pub fn headers(&self) -> std::collections::BTreeSet<String> {
        self.store.headers.lock().expect("headers lock").clone()
    }

    /// Waits until `done` holds for the spans received, or `timeout` passes.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[RecvSpan]) -> bool,
    ) -> Vec<RecvSpan> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || tokio::time::Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
