//! An OTLP/gRPC sink that counts what it gets and keeps nothing: a million processes'
//! spans are gigabytes, kept neither on disk nor in the bench.
use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
};

use opentelemetry_proto::tonic::collector::{
    metrics::v1::{
        ExportMetricsServiceRequest, ExportMetricsServiceResponse,
        metrics_service_server::{MetricsService, MetricsServiceServer},
    },
    trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
};

#[derive(Clone, Default)]
struct Counts {
    spans: Arc<AtomicU64>,
    /// A run's own span came (the one with `pipetrace.run.tasks`, exported as it ends).
    run_ended: Arc<AtomicBool>,
    /// Each trace's size as Grafana Tempo counts it (a few numbers per trace).
    sizes: Arc<std::sync::Mutex<crate::tempo::TraceSizes>>,
}

#[tonic::async_trait]
impl TraceService for Counts {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let req = req.into_inner();
        self.sizes.lock().expect("sizes lock").add(&req);
        let n: usize = (req.resource_spans.iter())
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.spans.fetch_add(n as u64, Relaxed);
        let spans = (req.resource_spans.iter())
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans);
        if spans
            .flat_map(|s| &s.attributes)
            .any(|a| a.key == pipetrace_semconv::attr::RUN_TASKS)
        {
            self.run_ended.store(true, Relaxed);
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Counts {
    async fn export(
        &self,
        _req: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// Listens on a free loopback port, served by a thread of its own.
pub struct Sink {
    url: String,
    counts: Counts,
}

impl Sink {
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the sink");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("sink address"));
        let counts = Counts::default();
        let served = counts.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("sink runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                let gzip = tonic::codec::CompressionEncoding::Gzip;
                tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(served.clone()).accept_compressed(gzip))
                    .add_service(MetricsServiceServer::new(served).accept_compressed(gzip))
                    .serve_with_incoming(incoming)
                    .await
                    .expect("the sink serves");
            });
        });
        Self { url, counts }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Each trace received so far, as Grafana Tempo counts it.
    pub fn sizes(&self) -> crate::tempo::TraceSizes {
        self.counts.sizes.lock().expect("sizes lock").clone()
    }

    /// Whether a run's own span came.
    pub fn run_ended(&self) -> bool {
        self.counts.run_ended.load(Relaxed)
    }

    /// Spans received so far.
    pub fn spans(&self) -> u64 {
        self.counts.spans.load(Relaxed)
    }

    /// Waits until at least `n` spans came (or `within` passed); whether they did.
    pub fn wait_for(&self, n: u64, within: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + within;
        while self.spans() < n {
            if std::time::Instant::now() > end {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        true
    }
}
