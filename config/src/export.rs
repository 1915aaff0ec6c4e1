//! Where telemetry goes and how it survives a backend that is down: OTLP endpoints, TLS,
//! the bounded queue, retries and the on-disk spool.
use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
}

/// Settings for one signal; each one present wins over the general one.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpSettings {
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub headers: BTreeMap<String, String>,
    #[serde(with = "humantime_serde")]
    pub timeout: Option<Duration>,
    pub compression: Option<Compression>,
    pub certificate: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub client_certificate: Option<PathBuf>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Otlp {
    /// Base endpoint; for HTTP, `/v1/traces` is appended (OTEL_EXPORTER_OTLP_ENDPOINT).
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub headers: BTreeMap<String, String>,
    #[serde(with = "humantime_serde")]
    pub timeout: Option<Duration>,
    pub compression: Option<Compression>,
    /// PEM file of the CA that signed the backend's certificate (OTEL_EXPORTER_OTLP_CERTIFICATE).
    pub certificate: Option<PathBuf>,
    /// PEM private key for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_KEY).
    pub client_key: Option<PathBuf>,
    /// PEM certificate chain for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE).
    pub client_certificate: Option<PathBuf>,
    /// Trace-only settings (OTEL_EXPORTER_OTLP_TRACES_*). Its endpoint is used as is.
    pub traces: OtlpSettings,
    /// Metric-only settings, likewise (OTEL_EXPORTER_OTLP_METRICS_*).
    pub metrics: OtlpSettings,
}

/// Which telemetry an endpoint carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalKind {
    Traces,
    Metrics,
}

impl SignalKind {
    pub(crate) fn path(self) -> &'static str {
        match self {
            SignalKind::Traces => "/v1/traces",
            SignalKind::Metrics => "/v1/metrics",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SignalKind::Traces => "traces",
            SignalKind::Metrics => "metrics",
        }
    }
}

/// TLS material, as file paths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tls {
    pub ca: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub client_certificate: Option<PathBuf>,
}

impl Tls {
    pub fn is_set(&self) -> bool {
        self.ca.is_some() || self.client_key.is_some() || self.client_certificate.is_some()
    }
}

/// One signal's endpoint with every setting resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    pub url: String,
    pub protocol: Protocol,
    pub headers: BTreeMap<String, String>,
    pub timeout: Duration,
    pub compression: Compression,
    pub tls: Tls,
}

impl Otlp {
    fn settings(&self, kind: SignalKind) -> &OtlpSettings {
        match kind {
            SignalKind::Traces => &self.traces,
            SignalKind::Metrics => &self.metrics,
        }
    }

    /// The endpoint as the OTLP exporter spec resolves it, or None for "not configured".
    pub fn resolve(&self, kind: SignalKind) -> Option<Endpoint> {
        let own = self.settings(kind);
        let protocol = own.protocol.or(self.protocol).unwrap_or_default();
        let url = match (&own.endpoint, &self.endpoint) {
            (Some(e), _) => e.clone(),
            (None, Some(base)) => match protocol {
                Protocol::Grpc => base.clone(),
                Protocol::HttpProtobuf => {
                    format!("{}{}", base.trim_end_matches('/'), kind.path())
                }
            },
            (None, None) => return None,
        };
        let mut headers = self.headers.clone();
        headers.extend(own.headers.clone());
        let pick = |o: &Option<PathBuf>, g: &Option<PathBuf>| o.clone().or_else(|| g.clone());
        Some(Endpoint {
            url,
            protocol,
            headers,
            timeout: own
                .timeout
                .or(self.timeout)
                .unwrap_or(crate::defaults::OTLP_TIMEOUT),
            compression: own.compression.or(self.compression).unwrap_or_default(),
            tls: Tls {
                ca: pick(&own.certificate, &self.certificate),
                client_key: pick(&own.client_key, &self.client_key),
                client_certificate: pick(&own.client_certificate, &self.client_certificate),
            },
        })
    }

    pub fn traces_endpoint(&self) -> Option<String> {
        self.resolve(SignalKind::Traces).map(|e| e.url)
    }
}

/// Retries of a failed export: exponential backoff with full jitter, or the server's
/// Retry-After when it gives one. A retryable failure is retried while the agent runs.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Retry {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub initial_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub max_interval: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(30),
        }
    }
}

/// Batches that do not fit in memory, or are still unsent when the agent stops, go to files
/// here and are sent first by the next agent. On by default, in the state directory: a
/// collector restarting must not lose what the agent holds.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Spool {
    pub enabled: bool,
    /// Where; None: `spool/` in `diagnosis.state_dir`.
    pub dir: Option<PathBuf>,
    /// Past this, new batches are dropped and counted.
    pub max_size: ByteSize,
}

impl Default for Spool {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
            max_size: ByteSize::mib(512),
        }
    }
}

impl Spool {
    /// Where batches wait on disk: `dir`, else `spool/` in the state directory; none when
    /// off or when there is neither.
    pub fn folder(&self, state_dir: Option<&std::path::Path>) -> Option<PathBuf> {
        let dir = self
            .dir
            .clone()
            .or_else(|| state_dir.map(|d| d.join("spool")));
        dir.filter(|_| self.enabled)
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Export {
    pub otlp: Otlp,
    /// OTLP JSON lines file. Written when set, and by default when no OTLP endpoint is set.
    pub file: Option<PathBuf>,
    /// OpenTelemetry's span and attribute limits (OTEL_*_LIMIT), applied as spans are
    /// encoded for export, to the file and over OTLP alike.
    pub limits: crate::Limits,
    /// Finished spans waiting to be batched at most; past it, spans are dropped and counted.
    pub queue_spans: usize,
    /// Encoded batches waiting to be sent at most, traces and metrics each; past it, batches
    /// go to the spool, or are dropped and counted.
    pub queue_bytes: ByteSize,
    pub batch_spans: usize,
    #[serde(with = "humantime_serde")]
    pub batch_timeout: Duration,
    /// How long `pipetrace run` (and a stopping agent) waits at the end for telemetry to leave.
    #[serde(with = "humantime_serde")]
    pub flush_timeout: Duration,
    pub retry: Retry,
    pub spool: Spool,
    /// Past this resident memory, telemetry waiting in memory goes to the spool, or is
    /// dropped and counted. The ring buffer (mapped twice) and the process table stay.
    pub memory_limit: ByteSize,
    /// A run's trace at most, as OTLP protobuf: Grafana Tempo refuses a trace past its
    /// `max_bytes_per_trace` (5,000,000 by default). Past half of it, repeated short spans
    /// fold; what still does not fit goes into further traces linked to the run. 0: no limit.
    pub max_trace_bytes: u64,
    /// Spans shorter than this may fold with their repeats once a trace is past half its
    /// budget; longer ones keep their own.
    #[serde(with = "humantime_serde")]
    pub fold_under: Duration,
}

impl Default for Export {
    fn default() -> Self {
        Self {
            otlp: Otlp::default(),
            file: None,
            limits: crate::Limits::default(),
            queue_spans: 200_000,
            queue_bytes: ByteSize::mib(64),
            batch_spans: 2048,
            batch_timeout: Duration::from_millis(500),
            flush_timeout: Duration::from_secs(15),
            retry: Retry::default(),
            spool: Spool::default(),
            memory_limit: ByteSize::mib(256),
            max_trace_bytes: 5_000_000,
            fold_under: Duration::from_secs(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spool_is_in_the_state_directory_unless_set_or_off() {
        let state = std::path::Path::new("/var/lib/pipetrace");
        let on = Spool::default();
        assert_eq!(on.folder(Some(state)), Some(state.join("spool")));
        assert_eq!(on.folder(None), None);
        let set = Spool {
            dir: Some("/spool".into()),
            ..Default::default()
        };
        assert_eq!(set.folder(Some(state)), Some("/spool".into()));
        let off = Spool {
            enabled: false,
            ..set
        };
        assert_eq!(off.folder(Some(state)), None);
    }

    #[test]
    fn per_signal_settings_win_and_http_gets_the_path() {
        let o = Otlp {
            endpoint: Some("https://c:4318/".into()),
            protocol: Some(Protocol::HttpProtobuf),
            certificate: Some("/ca.pem".into()),
            metrics: OtlpSettings {
                certificate: Some("/m-ca.pem".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let t = o.resolve(SignalKind::Traces).unwrap();
        assert_eq!(t.url, "https://c:4318/v1/traces");
        assert_eq!(t.tls.ca.as_deref(), Some(std::path::Path::new("/ca.pem")));
        let m = o.resolve(SignalKind::Metrics).unwrap();
        assert_eq!(m.url, "https://c:4318/v1/metrics");
        assert_eq!(m.tls.ca.as_deref(), Some(std::path::Path::new("/m-ca.pem")));
        assert!(Otlp::default().resolve(SignalKind::Traces).is_none());
    }
}
