//! Export: one sink for spans and metrics, batched to OTLP and/or OTLP JSON lines files.
mod feed;
mod jsonl;
pub mod limits;
pub mod otlp;
pub(crate) mod otlp_json;
pub mod own;
pub mod paths;
pub mod prometheus;
mod sink;
mod stats;

use std::path::PathBuf;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use pipetrace_semconv::attr;

pub use otlp::OutboxStats;
use pipetrace_core::machine::HostInfo;
pub use sink::{Kept, Sink};
pub use stats::{SinkStats, StreamStats};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Otlp(#[from] otlp::StartError),
    #[error("cannot open the {what} file {path}: {source}; choose another with --output")]
    File {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
}

/// Where one signal goes, in words, for the summary.
#[derive(Clone, Debug, Default)]
pub struct Place {
    pub otlp: Option<String>,
    pub file: Option<PathBuf>,
}

/// Where everything the sink takes goes.
#[derive(Clone, Debug, Default)]
pub struct Destinations {
    pub spans: Place,
    pub metrics: Place,
    /// The agent's own spans (`self_telemetry.traces`): over OTLP only.
    pub own_spans: Option<String>,
}

pub fn resource(cfg: &pipetrace_config::Config, host: &HostInfo) -> Resource {
    let service = cfg
        .service_name
        .clone()
        .unwrap_or_else(|| "pipetrace".into());
    let mut attrs = vec![
        KeyValue::new(attr::SERVICE_NAME, service),
        KeyValue::new(attr::HOST_NAME, host.host_name.clone()),
        KeyValue::new(attr::HOST_ID, host.host_id.clone()),
        KeyValue::new(attr::OS_TYPE, pipetrace_core::machine::OS_TYPE),
    ];
    // What the machine says of itself; left out where it says nothing.
    let c = &host.cloud;
    attrs.extend(
        [
            (attr::HOST_ARCH, host.arch.clone()),
            (attr::OS_VERSION, host.os_version.clone()),
            (attr::CLOUD_PROVIDER, c.provider.map(str::to_string)),
            (attr::HOST_TYPE, c.host_type.clone()),
            (attr::CLOUD_REGION, c.region.clone()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some(KeyValue::new(k, v?))),
    );
    attrs.extend(
        cfg.resource_attributes
            .iter()
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
    );
    Resource::builder_empty().with_attributes(attrs).build()
}
