//! Sends one encoded OTLP request and says whether a failure is worth retrying, as the OTLP
//! specification lists: gRPC UNAVAILABLE and friends; HTTP 429, 502, 503, 504 and
//! connection failures, honouring Retry-After.
use std::{io::Write, time::Duration};

use bytes::Bytes;
use pipetrace_config::{Compression, Endpoint, Protocol, SignalKind, Tls};
use tonic::{
    codec::CompressionEncoding,
    metadata::{Ascii, MetadataKey, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
};

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("OTLP header `{0}` is not a valid gRPC metadata key or value")]
    Header(String),
    #[error("cannot build the OTLP {signal} exporter for {endpoint}: {reason}")]
    Build {
        signal: &'static str,
        endpoint: String,
        reason: String,
    },
    #[error(
        "cannot read the {what} {path} ({setting}): {source}; check the path and that \
         pipetrace may read it"
    )]
    TlsFile {
        what: &'static str,
        path: String,
        setting: &'static str,
        source: std::io::Error,
    },
    #[error(
        "the OTLP {signal} endpoint {endpoint} is plain http:// but TLS files are set; use \
         https:// or remove export.otlp.certificate / client_key / client_certificate"
    )]
    TlsOnPlainHttp {
        signal: &'static str,
        endpoint: String,
    },
    #[error(
        "mutual TLS needs both a client certificate and its key \
         (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY); only one is set"
    )]
    HalfIdentity,
}

/// What a backend took of a request: all of it, or all but what its partial success says
/// it rejected (a trace past Tempo's size limit, spans past a quota).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Spans or data points rejected.
    pub rejected: u64,
    /// Why, as the backend says it.
    pub message: String,
}

/// An Export*ServiceResponse: traces', metrics' and logs' share the layout (field 1, a
/// partial success of the count rejected and an error message).
#[derive(Clone, PartialEq, prost::Message)]
struct ExportResponse {
    #[prost(message, optional, tag = "1")]
    partial_success: Option<PartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PartialSuccess {
    #[prost(int64, tag = "1")]
    rejected: i64,
    #[prost(string, tag = "2")]
    error_message: String,
}

impl Accepted {
    /// A response's body (protobuf): an empty or unreadable one takes everything, as the
    /// specification's "success" does.
    pub(crate) fn of(body: &[u8]) -> Self {
        let Ok(r) = <ExportResponse as prost::Message>::decode(body) else {
            return Self::default();
        };
        let p = r.partial_success.unwrap_or_default();
        Self {
            rejected: u64::try_from(p.rejected).unwrap_or(0),
            message: p.error_message,
        }
    }
}

/// A failed send.
#[derive(Debug)]
pub struct SendError {
    pub retryable: bool,
    /// The server's own wait (HTTP Retry-After), if it gave one.
    pub retry_after: Option<Duration>,
    pub message: String,
}

type Headers = Vec<(MetadataKey<Ascii>, MetadataValue<Ascii>)>;

enum Transport {
    Grpc {
        channel: Channel,
        headers: Headers,
        compression: Option<CompressionEncoding>,
    },
    Http {
        client: reqwest::Client,
        headers: Vec<(String, String)>,
        compression: Compression,
    },
}

/// One connection to one endpoint, for each signal it carries: over gRPC one channel, with
/// the signal's service path; over HTTP one connection pool, with the signal's URL.
pub struct Client {
    urls: BySignal<Option<String>>,
    transport: Transport,
}

/// A value for traces and one for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BySignal<T> {
    pub traces: T,
    pub metrics: T,
}

impl<T> BySignal<T> {
    pub fn get(&self, kind: SignalKind) -> &T {
        match kind {
            SignalKind::Traces => &self.traces,
            SignalKind::Metrics => &self.metrics,
        }
    }

    pub fn get_mut(&mut self, kind: SignalKind) -> &mut T {
        match kind {
            SignalKind::Traces => &mut self.traces,
            SignalKind::Metrics => &mut self.metrics,
        }
    }
}

struct Pem {
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

fn read_pem(
    path: &Option<std::path::PathBuf>,
    what: &'static str,
    setting: &'static str,
) -> Result<Option<Vec<u8>>, OtlpError> {
    path.as_ref()
        .map(|p| {
            std::fs::read(p).map_err(|source| OtlpError::TlsFile {
                what,
                path: p.display().to_string(),
                setting,
                source,
            })
        })
        .transpose()
}

fn load_tls(tls: &Tls) -> Result<Pem, OtlpError> {
    let ca = read_pem(
        &tls.ca,
        "CA certificate",
        "export.otlp.certificate / OTEL_EXPORTER_OTLP_CERTIFICATE",
    )?;
    let cert = read_pem(
        &tls.client_certificate,
        "client certificate",
        "export.otlp.client_certificate / OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    )?;
    let key = read_pem(
        &tls.client_key,
        "client key",
        "export.otlp.client_key / OTEL_EXPORTER_OTLP_CLIENT_KEY",
    )?;
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err(OtlpError::HalfIdentity),
    };
    Ok(Pem { ca, identity })
}

impl Client {
    /// A connection with `ep`'s settings, sending each signal to its URL in `urls`.
    pub fn new(ep: &Endpoint, urls: BySignal<Option<String>>) -> Result<Self, OtlpError> {
        let signal = match (&urls.traces, &urls.metrics) {
            (Some(_), Some(_)) => "traces and metrics",
            (None, Some(_)) => "metrics",
            _ => "traces",
        };
        let build_err = |reason: String| OtlpError::Build {
            signal,
            endpoint: ep.url.clone(),
            reason,
        };
        if ep.tls.is_set() && ep.url.starts_with("http://") {
            return Err(OtlpError::TlsOnPlainHttp {
                signal,
                endpoint: ep.url.clone(),
            });
        }
        let pem = load_tls(&ep.tls)?;
        let transport = match ep.protocol {
            Protocol::Grpc => grpc_transport(ep, &pem, &build_err)?,
            Protocol::HttpProtobuf => http_transport(ep, &pem, &build_err)?,
        };
        Ok(Self { urls, transport })
    }

    /// Where `kind` goes.
    pub fn url(&self, kind: SignalKind) -> &str {
        self.urls.get(kind).as_deref().unwrap_or_default()
    }

    /// Sends one encoded request of signal `kind`.
    pub async fn send(&self, kind: SignalKind, body: &Bytes) -> Result<Accepted, SendError> {
        match &self.transport {
            Transport::Grpc {
                channel,
                headers,
                compression,
            } => send_grpc(kind, channel, headers, *compression, body).await,
            Transport::Http {
                client,
                headers,
                compression,
            } => send_http(client, self.url(kind), headers, *compression, body).await,
        }
    }
}

fn grpc_transport(
    ep: &Endpoint,
    pem: &Pem,
    build_err: &dyn Fn(String) -> OtlpError,
) -> Result<Transport, OtlpError> {
    let mut b = Channel::from_shared(ep.url.clone())
        .map_err(|e| build_err(e.to_string()))?
        .timeout(ep.timeout)
        .connect_timeout(ep.timeout);
    if ep.url.starts_with("https://") {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &pem.ca {
            tls = tls.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((c, k)) = &pem.identity {
            tls = tls.identity(Identity::from_pem(c, k));
        }
        b = b.tls_config(tls).map_err(|e| build_err(e.to_string()))?;
    }
    let mut headers = Vec::new();
    for (k, v) in &ep.headers {
        let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
            .map_err(|_| OtlpError::Header(k.clone()))?;
        let val = MetadataValue::try_from(v.as_str()).map_err(|_| OtlpError::Header(k.clone()))?;
        headers.push((key, val));
    }
    let compression = match ep.compression {
        Compression::None => None,
        Compression::Gzip => Some(CompressionEncoding::Gzip),
        Compression::Zstd => Some(CompressionEncoding::Zstd),
    };
    Ok(Transport::Grpc {
        channel: b.connect_lazy(),
        headers,
        compression,
    })
}

fn http_transport(
    ep: &Endpoint,
    pem: &Pem,
    build_err: &dyn Fn(String) -> OtlpError,
) -> Result<Transport, OtlpError> {
    let mut b = reqwest::Client::builder()
        .timeout(ep.timeout)
        .connect_timeout(ep.timeout);
    if let Some(ca) = &pem.ca {
        let cert = reqwest::Certificate::from_pem(ca)
            .map_err(|e| build_err(format!("bad CA certificate: {e}")))?;
        b = b.add_root_certificate(cert);
    }
    if let Some((c, k)) = &pem.identity {
        let mut both = c.clone();
        both.push(b'\n');
        both.extend_from_slice(k);
        let id = reqwest::Identity::from_pem(&both)
            .map_err(|e| build_err(format!("bad client certificate or key: {e}")))?;
        b = b.identity(id);
    }
    Ok(Transport::Http {
        client: b.build().map_err(|e| build_err(e.to_string()))?,
        headers: ep.headers.clone().into_iter().collect(),
        compression: ep.compression,
    })
}

async fn send_grpc(
    kind: SignalKind,
    channel: &Channel,
    headers: &Headers,
    compression: Option<CompressionEncoding>,
    body: &Bytes,
) -> Result<Accepted, SendError> {
    let path = match kind {
        SignalKind::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        SignalKind::Metrics => "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
    };
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    if let Some(enc) = compression {
        grpc = grpc.send_compressed(enc);
    }
    let mut req = tonic::Request::new(body.clone());
    for (k, v) in headers {
        req.metadata_mut().insert(k.clone(), v.clone());
    }
    let result = match grpc.ready().await {
        Ok(()) => grpc
            .unary::<Bytes, Bytes, _>(
                req,
                tonic::codegen::http::uri::PathAndQuery::from_static(path),
                super::raw::RawCodec,
            )
            .await
            .map(|r| Accepted::of(r.get_ref())),
        Err(e) => Err(tonic::Status::unavailable(error_chain(&e))),
    };
    result.map_err(|s| {
        // No answer at all (refused, reset, handshake failed): the backend is away or
        // not yet right, as for HTTP; queued data is kept.
        let transport = std::error::Error::source(&s)
            .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some());
        SendError {
            retryable: transport || grpc_retryable(s.code()),
            retry_after: None,
            message: format!("gRPC {:?}: {}", s.code(), error_chain(&s)),
        }
    })
}

/// The OTLP specification's retryable gRPC codes.
fn grpc_retryable(code: tonic::Code) -> bool {
    use tonic::Code::*;
    matches!(
        code,
        Cancelled
            | DeadlineExceeded
            | ResourceExhausted
            | Aborted
            | OutOfRange
            | Unavailable
            | DataLoss
    )
}

fn compress(c: Compression, body: &[u8]) -> std::io::Result<Option<(&'static str, Vec<u8>)>> {
    Ok(match c {
        Compression::None => None,
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(body)?;
            Some(("gzip", e.finish()?))
        }
        Compression::Zstd => Some(("zstd", zstd::encode_all(body, 0)?)),
    })
}

async fn send_http(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    compression: Compression,
    body: &Bytes,
) -> Result<Accepted, SendError> {
    let mut b = client
        .post(url)
        .header("content-type", "application/x-protobuf");
    for (k, v) in headers {
        b = b.header(k.as_str(), v.as_str());
    }
    let body = match compress(compression, body) {
        Ok(Some((enc, packed))) => {
            b = b.header("content-encoding", enc);
            Bytes::from(packed)
        }
        // The batch's own bytes, shared rather than copied for each attempt.
        Ok(None) => body.clone(),
        Err(e) => {
            return Err(SendError {
                retryable: false,
                retry_after: None,
                message: format!("compressing: {e}"),
            });
        }
    };
    let resp = b.body(body).send().await.map_err(|e| SendError {
        // Connection refused, reset, timed out: the backend is away, not refusing.
        retryable: true,
        retry_after: None,
        message: error_chain(&e),
    })?;
    let status = resp.status();
    if status.is_success() {
        // A body that does not arrive is no rejection said.
        let body = resp.bytes().await.unwrap_or_default();
        return Ok(Accepted::of(&body));
    }
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(super::retry::parse_retry_after);
    Err(SendError {
        retryable: matches!(status.as_u16(), 429 | 502 | 503 | 504),
        retry_after,
        message: format!("HTTP {status}"),
    })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::{
        metrics::v1::{ExportMetricsPartialSuccess, ExportMetricsServiceResponse},
        trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse},
    };
    use prost::Message;

    use super::Accepted;

    #[test]
    fn a_partial_success_says_how_much_was_rejected_and_why() {
        let traces = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: 3,
                error_message: "TRACE_TOO_LARGE".into(),
            }),
        };
        let got = Accepted::of(&traces.encode_to_vec());
        assert_eq!((got.rejected, got.message.as_str()), (3, "TRACE_TOO_LARGE"));
        let metrics = ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess {
                rejected_data_points: 7,
                error_message: "quota".into(),
            }),
        };
        assert_eq!(Accepted::of(&metrics.encode_to_vec()).rejected, 7);
        // Success: no body, an empty message, or one the backend garbled.
        assert_eq!(Accepted::of(&[]), Accepted::default());
        let none = ExportTraceServiceResponse {
            partial_success: None,
        };
        assert_eq!(Accepted::of(&none.encode_to_vec()), Accepted::default());
        assert_eq!(Accepted::of(&[0xff, 0xff]), Accepted::default());
    }
}
