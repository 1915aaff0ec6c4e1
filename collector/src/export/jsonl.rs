//! OTLP JSON lines: one ExportTraceServiceRequest per line, as the OTLP file exporter writes.
use std::{
    fs::{File, OpenOptions},
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use opentelemetry_proto::{
    tonic::collector::trace::v1::ExportTraceServiceRequest,
    transform::{
        common::tonic::ResourceAttributesWithSchema,
        trace::tonic::group_spans_by_resource_and_scope,
    },
};
use opentelemetry_sdk::trace::SpanData;

pub struct JsonLines {
    path: PathBuf,
    out: BufWriter<File>,
}

impl JsonLines {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let f = open_append(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            out: f,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(
        &mut self,
        spans: Vec<SpanData>,
        resource: &ResourceAttributesWithSchema,
    ) -> std::io::Result<()> {
        let req = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, resource),
        };
        serde_json::to_writer(&mut self.out, &req)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Opens `path` for appending, creating it and its folder.
pub fn open_append(path: &Path) -> std::io::Result<BufWriter<File>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let f = OpenOptions::new().create(true).append(true).open(path)?;
    Ok(BufWriter::new(f))
}
