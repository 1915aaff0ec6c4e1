//! An OTLP trace and metrics receiver over gRPC (the opentelemetry-proto tonic services) and
//! over HTTP/protobuf (POST /v1/traces, /v1/metrics), keeping what it receives.
use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
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

/// An answer the receiver gives to the next trace request instead of taking it.
#[derive(Clone, Debug)]
pub enum Fault {
    Http {
        status: u16,
        retry_after: Option<String>,
    },
    Grpc(tonic::Code),
}

#[derive(Clone, Default)]
struct Store {
    faults: Arc<Mutex<VecDeque<Fault>>>,
    /// Export calls of either signal still to refuse as unavailable (a collector
    /// restarting), and how many of each signal were refused.
    refusing: Arc<Mutex<(usize, usize, usize)>>,
    /// When each trace request came, and whether it was taken.
    requests: Arc<Mutex<Vec<(Instant, bool)>>>,
    spans: Arc<Mutex<Vec<RecvSpan>>>,
    metrics: Arc<Mutex<Vec<RecvPoint>>>,
    /// `name=value` of every `x-` request header seen (auth and tenant headers).
    headers: Arc<Mutex<std::collections::BTreeSet<String>>>,
    /// Each trace's size as Grafana Tempo counts it.
    sizes: Arc<Mutex<crate::tempo::TraceSizes>>,
    /// Keeps what Tempo keeps (`tempo::admit`), and says what it discarded.
    tempo: bool,
}

impl Store {
    /// Whether to refuse this call as unavailable (one of the first ones).
    fn refuse(&self, traces: bool) -> bool {
        let mut r = self.refusing.lock().expect("refusing lock");
        if r.0 == 0 {
            return false;
        }
        r.0 -= 1;
        if traces {
            r.1 += 1
        } else {
            r.2 += 1
        }
        true
    }

    /// The planted fault for this trace request, if any (the request is then not taken).
    fn fault(&self) -> Option<Fault> {
        let f = self.faults.lock().expect("faults lock").pop_front();
        let mut r = self.requests.lock().expect("requests lock");
        r.push((Instant::now(), f.is_none()));
        f
    }

    /// Takes a request; returns the spans it discarded (as Tempo would).
    fn add(&self, mut req: ExportTraceServiceRequest) -> u64 {
        let rejected = {
            let mut sizes = self.sizes.lock().expect("sizes lock");
            if self.tempo {
                crate::tempo::admit(&mut sizes, &mut req, crate::tempo::MAX_BYTES_PER_TRACE)
            } else {
                sizes.add(&req);
                0
            }
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let spans = flatten(req)
            .into_iter()
            .map(|s| RecvSpan { received: now, ..s });
        self.spans.lock().expect("store lock").extend(spans);
        rejected
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

/// The OTLP partial success that says `rejected` spans were discarded, as Tempo words it.
fn partial(
    rejected: u64,
) -> Option<opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess> {
    (rejected > 0).then(|| {
        opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess {
            rejected_spans: rejected as i64,
            error_message: format!(
                "TRACE_TOO_LARGE: max size of trace ({}) exceeded",
                crate::tempo::MAX_BYTES_PER_TRACE
            ),
        }
    })
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
        if self.refuse(true) {
            return Err(tonic::Status::unavailable("restarting"));
        }
        match self.fault() {
            Some(Fault::Grpc(code)) => return Err(tonic::Status::new(code, "planted fault")),
            Some(Fault::Http { .. }) => return Err(tonic::Status::unavailable("planted fault")),
            None => {}
        }
        let rejected = self.add(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: partial(rejected),
        }))
    }
}

async fn http_traces(
    State(store): State<Store>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    store.saw(
        headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
    );
    if store.refuse(true) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    if let Some(f) = store.fault() {
        let (status, retry_after) = match f {
            Fault::Http {
                status,
                retry_after,
            } => (status, retry_after),
            Fault::Grpc(_) => (503, None),
        };
        let status = StatusCode::from_u16(status).expect("status");
        return match retry_after {
            Some(ra) => (status, [("retry-after", ra)]).into_response(),
            None => status.into_response(),
        };
    }
    let r = match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            let rejected = store.add(req);
            (
                StatusCode::OK,
                ExportTraceServiceResponse {
                    partial_success: partial(rejected),
                }
                .encode_to_vec(),
            )
        }
        Err(_) => (StatusCode::BAD_REQUEST, Vec::new()),
    };
    r.into_response()
}

#[tonic::async_trait]
impl MetricsService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        if self.refuse(false) {
            return Err(tonic::Status::unavailable("restarting"));
        }
        let points = flatten_metrics(request.into_inner());
        self.metrics.lock().expect("store lock").extend(points);
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

async fn http_metrics(State(store): State<Store>, body: Bytes) -> (StatusCode, Vec<u8>) {
    if store.refuse(false) {
        return (StatusCode::SERVICE_UNAVAILABLE, Vec::new());
    }
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
    tls: bool,
}

/// How to start a receiver.
#[derive(Default)]
pub struct Options<'a> {
    /// Serve TLS with the server certificate, and require a client certificate signed by
    /// the CA (mutual TLS).
    pub tls: Option<&'a crate::tls::Certs>,
    /// Fixed ports (a backend coming back where it was); free ones otherwise.
    pub ports: Option<(u16, u16)>,
    /// Behave as Grafana Tempo does with its default limits (`tempo::admit`).
    pub tempo: bool,
}

/// `N` distinct free loopback ports, for servers started later (a backend coming back where
/// it was). Taken below the kernel's ephemeral range (`ip_local_port_range`): a port let go
/// there may be the next one the kernel hands out, to a `bind(0)` or as the source port of
/// any connection on the machine, and the server could not bind it again (seen: a five-minute
/// outage's backend found its port taken). Each is held until all are chosen.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (from, span) = (20_000u16, low.saturating_sub(20_000).max(1));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    let mut held: Vec<std::net::TcpListener> = Vec::new();
    for i in 0..u32::from(span) {
        if held.len() == N {
            break;
        }
        let port = from + ((seed.wrapping_add(i.wrapping_mul(7_919))) % u32::from(span)) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
        }
    }
    assert_eq!(held.len(), N, "free ports below {low}");
    std::array::from_fn(|i| held[i].local_addr().expect("its address").port())
}

/// A free loopback port, for a server bound at once.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Receiver {
    /// Listens on two free loopback ports.
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    /// Listens on two free loopback ports, and keeps what Grafana Tempo keeps: a trace past
    /// 5,000,000 bytes loses its further spans (said in the OTLP partial success), an
    /// attribute past 2,048 bytes is cut.
    pub async fn start_as_tempo() -> Self {
        Self::start_with(Options {
            tempo: true,
            ..Default::default()
        })
        .await
    }

    pub async fn start_with(opts: Options<'_>) -> Self {
        let store = Store {
            tempo: opts.tempo,
            ..Store::default()
        };
        let (gp, hp) = opts.ports.unwrap_or((0, 0));
        let grpc_listener = TcpListener::bind(("127.0.0.1", gp))
            .await
            .expect("bind gRPC");
        let http_listener = TcpListener::bind(("127.0.0.1", hp))
            .await
            .expect("bind HTTP");
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
        let mut server = tonic::transport::Server::builder();
        if let Some(c) = opts.tls {
            let pem = |p: &std::path::Path| std::fs::read(p).expect("test certificate");
            let tls = tonic::transport::ServerTlsConfig::new()
                .identity(tonic::transport::Identity::from_pem(
                    pem(&c.server_cert),
                    pem(&c.server_key),
                ))
                .client_ca_root(tonic::transport::Certificate::from_pem(pem(&c.ca)));
            server = server.tls_config(tls).expect("server TLS");
        }
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(grpc_listener);
            server
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
        let tls = opts.tls.is_some();
        match opts.tls {
            Some(c) => {
                tokio::spawn(crate::tls_server::serve(http_listener, app, c.into()));
            }
            None => {
                tokio::spawn(async move {
                    axum::serve(http_listener, app)
                        .await
                        .expect("HTTP receiver")
                });
            }
        }
        Self {
            grpc,
            http,
            store,
            tls,
        }
    }

    fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    pub fn grpc_url(&self) -> String {
        format!("{}://{}", self.scheme(), self.grpc)
    }

    pub fn http_url(&self) -> String {
        format!("{}://{}", self.scheme(), self.http)
    }

    /// Answers the next trace requests with these faults, in order.
    pub fn fail_next(&self, faults: impl IntoIterator<Item = Fault>) {
        self.store
            .faults
            .lock()
            .expect("faults lock")
            .extend(faults);
    }

    /// Refuses the next `n` export calls of either signal as unavailable (gRPC UNAVAILABLE,
    /// HTTP 503), as a collector that is restarting does.
    pub fn refuse_first(&self, n: usize) {
        self.store.refusing.lock().expect("refusing lock").0 = n;
    }

    /// Calls refused by [`Self::refuse_first`] so far: (traces, metrics), and how many
    /// are still to refuse.
    pub fn refused(&self) -> (usize, usize, usize) {
        let r = *self.store.refusing.lock().expect("refusing lock");
        (r.1, r.2, r.0)
    }

    /// When each trace request came, and whether it was taken.
    pub fn trace_requests(&self) -> Vec<(Instant, bool)> {
        self.store.requests.lock().expect("requests lock").clone()
    }

    /// Each trace taken, as Grafana Tempo counts it.
    /// Spans discarded as Tempo discards them (`start_as_tempo`), over all traces.
    pub fn discarded(&self) -> u64 {
        self.trace_sizes().discarded.values().sum()
    }

    pub fn trace_sizes(&self) -> crate::tempo::TraceSizes {
        self.store.sizes.lock().expect("sizes lock").clone()
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

    /// The trace of the run of pipeline `name` (for Snakemake, its directory's name), once
    /// its run span arrived (up to `timeout`): an agent sees every pipeline on the host, so
    /// other tests' runs arrive here too.
    pub async fn run_trace(&self, name: &str, timeout: Duration) -> Vec<RecvSpan> {
        let ours = |s: &RecvSpan| s.is_run() && s.str("cicd.pipeline.name") == name;
        let spans = self.wait_for(timeout, |s| s.iter().any(ours)).await;
        let run = spans.iter().find(|s| ours(s));
        let trace = run
            .unwrap_or_else(|| panic!("the run span of {name} never arrived"))
            .trace_id
            .clone();
        spans.into_iter().filter(|s| s.trace_id == trace).collect()
    }

    /// The trace of the `n`-th run (from 0, by start) named `name`, once that many arrived:
    /// runs in one directory share its name.
    pub async fn nth_run_trace(&self, name: &str, n: usize, timeout: Duration) -> Vec<RecvSpan> {
        let ours = |s: &&RecvSpan| s.is_run() && s.str("cicd.pipeline.name") == name;
        let spans = (self.wait_for(timeout, |s| s.iter().filter(ours).count() > n)).await;
        let mut runs: Vec<&RecvSpan> = spans.iter().filter(ours).collect();
        runs.sort_by_key(|s| s.start);
        let run = runs.get(n);
        let trace = run
            .unwrap_or_else(|| panic!("run {} of {name} never arrived", n + 1))
            .trace_id
            .clone();
        spans.into_iter().filter(|s| s.trace_id == trace).collect()
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
