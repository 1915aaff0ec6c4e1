//! OTLP JSON lines: one export request per line (ExportTraceServiceRequest in the trace
//! file, ExportMetricsServiceRequest in the metrics file), as the OTLP file exporter writes.
use std::{
    fs::{File, OpenOptions},
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use opentelemetry_proto::{
    tonic::collector::metrics::v1::ExportMetricsServiceRequest,
    transform::common::tonic::ResourceAttributesWithSchema,
};
use opentelemetry_sdk::trace::SpanData;

/// The most a trace line's buffer keeps between writes: a full default batch's line (2,048
/// spans) is about 5 MB (2.3 KB a span in a storm's trace file).
const LINE_KEPT: usize = 8 << 20;

pub struct JsonLines {
    path: PathBuf,
    out: BufWriter<File>,
    /// A trace request's line, kept between writes for its capacity.
    line: Vec<u8>,
    /// Bytes per span of the last trace line: the next one is reserved at once from it.
    span_bytes: usize,
}

impl JsonLines {
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        let f = open_append(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            out: f,
            line: Vec::new(),
            span_bytes: 0,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn write_spans(
        &mut self,
        spans: &[SpanData],
        resource: &ResourceAttributesWithSchema,
    ) -> std::io::Result<()> {
        self.line.clear();
        // A batch's line is megabytes: grown by doubling it was copied or remapped at each
        // step (several per cent of the agent's CPU in a storm). One reservation, an eighth
        // to spare.
        self.line.reserve(self.span_bytes * spans.len() / 8 * 9);
        super::otlp_json::write_spans(&mut self.line, spans, resource);
        self.line.push(b'\n');
        self.span_bytes = self.line.len() / spans.len().max(1);
        let written = self
            .out
            .write_all(&self.line)
            .and_then(|()| self.out.flush());
        // A busy batch's line is megabytes. Allocated afresh for each batch, its pages were
        // faulted in and zeroed by the kernel every time (5% of the agent's CPU in a storm);
        // kept, it adds nothing to the peak, which a write reaches anyway. Only a line of
        // batches larger than the default is let go.
        if self.line.capacity() > LINE_KEPT {
            self.line = Vec::new();
        }
        written
    }

    pub(crate) fn write_metrics(
        &mut self,
        req: &ExportMetricsServiceRequest,
    ) -> std::io::Result<()> {
        self.write_line(req)
    }

    fn write_line(&mut self, req: &impl serde::Serialize) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, req)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Opens `path` for appending, creating it and its folder.
fn open_append(path: &Path) -> std::io::Result<BufWriter<File>> {
    super::paths::make_folder_of(path)?;
    let f = OpenOptions::new().create(true).append(true).open(path)?;
    Ok(BufWriter::new(f))
}
