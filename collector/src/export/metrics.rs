//! The metrics sink: OTLP over gRPC or HTTP/protobuf, and/or an OTLP JSON lines file.
use std::{
    io::Write,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, metrics_service_client::MetricsServiceClient,
};
use pipetrace_config::{Compression, Protocol};
use prost::Message;
use tokio::sync::mpsc;
use tonic::{
    codec::CompressionEncoding,
    metadata::{MetadataKey, MetadataValue},
    transport::Channel,
};

use super::OtlpError;

/// Counters of metric exports (requests, one per interval).
#[derive(Debug, Default)]
pub struct MetricStats {
    pub exported: AtomicU64,
    pub failed: AtomicU64,
    pub written_file: AtomicU64,
    pub failed_file: AtomicU64,
    /// Requests refused because the queue was full (the backend is far behind).
    pub dropped: AtomicU64,
}

enum Otlp {
    Grpc {
        client: MetricsServiceClient<Channel>,
        headers: Vec<(
            MetadataKey<tonic::metadata::Ascii>,
            MetadataValue<tonic::metadata::Ascii>,
        )>,
    },
    Http {
        client: reqwest::Client,
        endpoint: String,
        headers: Vec<(String, String)>,
        compression: Compression,
    },
}

pub struct MetricsExporter {
    tx: mpsc::Sender<ExportMetricsServiceRequest>,
    pub stats: Arc<MetricStats>,
    task: tokio::task::JoinHandle<()>,
    pub endpoint: Option<String>,
    pub file: Option<PathBuf>,
}

fn build_otlp(cfg: &pipetrace_config::Otlp, endpoint: &str) -> Result<Otlp, OtlpError> {
    let build_err = |reason: String| OtlpError::Build {
        endpoint: endpoint.into(),
        reason,
    };
    let timeout = cfg.metrics_timeout();
    match cfg.metrics_protocol() {
        Protocol::Grpc => {
            let channel = Channel::from_shared(endpoint.to_string())
                .map_err(|e| build_err(e.to_string()))?
                .timeout(timeout)
                .connect_lazy();
            let mut client = MetricsServiceClient::new(channel);
            match cfg.metrics_compression() {
                Compression::None => {}
                Compression::Gzip => client = client.send_compressed(CompressionEncoding::Gzip),
                Compression::Zstd => client = client.send_compressed(CompressionEncoding::Zstd),
            }
            let mut headers = Vec::new();
            for (k, v) in cfg.metrics_headers() {
                let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                    .map_err(|_| OtlpError::Header(k.clone()))?;
                let val = MetadataValue::try_from(v.as_str()).map_err(|_| OtlpError::Header(k))?;
                headers.push((key, val));
            }
            Ok(Otlp::Grpc { client, headers })
        }
        Protocol::HttpProtobuf => {
            let client = reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .map_err(|e| build_err(e.to_string()))?;
            Ok(Otlp::Http {
                client,
                endpoint: endpoint.into(),
                headers: cfg.metrics_headers().into_iter().collect(),
                compression: cfg.metrics_compression(),
            })
        }
    }
}

impl Otlp {
    async fn send(&mut self, req: ExportMetricsServiceRequest) -> Result<(), String> {
        match self {
            Otlp::Grpc { client, headers } => {
                let mut r = tonic::Request::new(req);
                for (k, v) in headers.iter() {
                    r.metadata_mut().insert(k.clone(), v.clone());
                }
                client
                    .export(r)
                    .await
                    .map(|_| ())
                    .map_err(|s| s.to_string())
            }
            Otlp::Http {
                client,
                endpoint,
                headers,
                compression,
            } => {
                let body = req.encode_to_vec();
                let mut b = client
                    .post(endpoint.as_str())
                    .header("content-type", "application/x-protobuf");
                for (k, v) in headers.iter() {
                    b = b.header(k.as_str(), v.as_str());
                }
                let body = match compression {
                    Compression::None => body,
                    Compression::Gzip => {
                        b = b.header("content-encoding", "gzip");
                        let mut e = flate2::write::GzEncoder::new(
                            Vec::new(),
                            flate2::Compression::default(),
                        );
                        e.write_all(&body).map_err(|e| e.to_string())?;
                        e.finish().map_err(|e| e.to_string())?
                    }
                    Compression::Zstd => {
                        b = b.header("content-encoding", "zstd");
                        zstd::encode_all(body.as_slice(), 0).map_err(|e| e.to_string())?
                    }
                };
                let resp = b.body(body).send().await.map_err(|e| e.to_string())?;
                if resp.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("HTTP {}", resp.status()))
                }
            }
        }
    }
}

impl MetricsExporter {
    /// Sends to the OTLP metrics endpoint if one is configured, and to `file` if given.
    pub fn start(
        cfg: &pipetrace_config::Config,
        file: Option<PathBuf>,
    ) -> Result<Self, super::ExportError> {
        let endpoint = cfg.export.otlp.metrics_endpoint();
        let mut otlp = match &endpoint {
            Some(ep) => Some(build_otlp(&cfg.export.otlp, ep)?),
            None => None,
        };
        let mut out =
            match &file {
                Some(p) => Some(super::jsonl::open_append(p).map_err(|source| {
                    super::ExportError::File {
                        path: p.display().to_string(),
                        source,
                    }
                })?),
                None => None,
            };
        // A few intervals' worth: each request carries every series.
        let (tx, mut rx) = mpsc::channel::<ExportMetricsServiceRequest>(8);
        let stats = Arc::new(MetricStats::default());
        let st = stats.clone();
        let path = file.clone();
        let task = tokio::spawn(async move {
            while let Some(req) = rx.recv().await {
                if let Some(f) = out.as_mut() {
                    let line = serde_json::to_vec(&req).map_err(std::io::Error::from);
                    let written = line.and_then(|mut l| {
                        l.push(b'\n');
                        f.write_all(&l)?;
                        f.flush()
                    });
                    match written {
                        Ok(()) => st.written_file.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            let p = path.as_ref().map(|p| p.display().to_string());
                            log::error!("writing metrics to {}: {e}", p.unwrap_or_default());
                            st.failed_file.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
                if let Some(o) = otlp.as_mut() {
                    match o.send(req).await {
                        Ok(()) => st.exported.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            log::warn!("OTLP metrics export failed: {e}");
                            st.failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }
        });
        Ok(Self {
            tx,
            stats,
            task,
            endpoint,
            file,
        })
    }

    pub fn send(&self, req: ExportMetricsServiceRequest) {
        if self.tx.try_send(req).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends what is queued, waiting at most `timeout`. Returns false if time ran out.
    pub async fn shutdown(self, timeout: Duration) -> bool {
        drop(self.tx);
        tokio::time::timeout(timeout, self.task).await.is_ok()
    }
}
