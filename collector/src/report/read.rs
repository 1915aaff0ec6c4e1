//! Spans back from an OTLP JSON lines file, as pipetrace (or the OTLP file exporter) wrote it.
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::ReportSpan;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path} line {line} is not an OTLP JSON trace request ({reason}); give the trace file \
         pipetrace wrote (`*.otlp.jsonl`), not its metrics file"
    )]
    Line {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{0} holds no spans")]
    Empty(String),
}

pub fn read_file(path: &Path) -> Result<Vec<ReportSpan>, ReadError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: p.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let req: ExportTraceServiceRequest =
            serde_json::from_str(line).map_err(|e| ReadError::Line {
                path: p.clone(),
                line: i + 1,
                reason: e.to_string(),
            })?;
        for rs in &req.resource_spans {
            for ss in &rs.scope_spans {
                out.extend(ss.spans.iter().map(ReportSpan::from_proto));
            }
        }
    }
    if out.is_empty() {
        return Err(ReadError::Empty(p));
    }
    Ok(out)
}
