//! The OTLP trace exporter (gRPC or HTTP/protobuf) built from the resolved config.
use std::collections::HashMap;

use opentelemetry_otlp::{
    Compression, SpanExporter, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use pipetrace_config::{Compression as Comp, Otlp, Protocol};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("OTLP header `{0}` is not a valid gRPC metadata key or value")]
    Header(String),
    #[error("cannot build the OTLP exporter for {endpoint}: {reason}")]
    Build { endpoint: String, reason: String },
}

fn compression(c: Comp) -> Option<Compression> {
    match c {
        Comp::None => None,
        Comp::Gzip => Some(Compression::Gzip),
        Comp::Zstd => Some(Compression::Zstd),
    }
}

pub fn build(otlp: &Otlp, endpoint: &str) -> Result<SpanExporter, OtlpError> {
    let headers = otlp.headers();
    let built = match otlp.protocol() {
        Protocol::Grpc => {
            let mut md = MetadataMap::new();
            for (k, v) in &headers {
                let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                    .map_err(|_| OtlpError::Header(k.clone()))?;
                let val = MetadataValue::try_from(v.as_str())
                    .map_err(|_| OtlpError::Header(k.clone()))?;
                md.insert(key, val);
            }
            let mut b = SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(otlp.timeout())
                .with_metadata(md);
            if let Some(c) = compression(otlp.compression()) {
                b = b.with_compression(c);
            }
            b.build()
        }
        Protocol::HttpProtobuf => {
            let mut b = SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(endpoint)
                .with_timeout(otlp.timeout())
                .with_headers(headers.into_iter().collect::<HashMap<_, _>>());
            if let Some(c) = compression(otlp.compression()) {
                b = b.with_compression(c);
            }
            b.build()
        }
    };
    built.map_err(|e| OtlpError::Build {
        endpoint: endpoint.into(),
        reason: e.to_string(),
    })
}
