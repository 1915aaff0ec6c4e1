//! Spans back from an OTLP JSON lines file, as pipetrace (or the OTLP file exporter) wrote it.
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::Decode;
use pipetrace_core::judgement::ReportSpan;

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

/// The spans of every whole line. A line that is not one (torn by a crash, a full disk or
/// a copy still under way, or an agent's file read while it appends) is skipped with a
/// warning naming it, so the runs of the others stay readable; a file none of whose lines
/// is a trace request (a metrics file) is refused.
pub fn read_file(path: &Path) -> Result<Vec<ReportSpan>, ReadError> {
    let p = path.display().to_string();
    let text = std::fs::read(path).map_err(|source| ReadError::Io {
        path: p.clone(),
        source,
    })?;
    let mut out = Vec::new();
    let (mut requests, mut skipped) = (0usize, Vec::new());
    let mut offset = 0;
    for (i, raw) in text.split_inclusive(|b| *b == b'\n').enumerate() {
        let at = offset;
        offset += raw.len();
        let line = String::from_utf8_lossy(raw);
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ExportTraceServiceRequest>(&line) {
            Ok(req) => {
                requests += 1;
                for ss in req.resource_spans.iter().flat_map(|rs| &rs.scope_spans) {
                    out.extend(ss.spans.iter().map(ReportSpan::from_proto));
                }
            }
            Err(e) => skipped.push((i + 1, at, e.to_string())),
        }
    }
    if requests == 0
        && let Some((line, _, reason)) = skipped.first()
    {
        return Err(ReadError::Line {
            path: p,
            line: *line,
            reason: reason.clone(),
        });
    }
    warn_skipped(&p, &skipped);
    if out.is_empty() {
        return Err(ReadError::Empty(p));
    }
    Ok(out)
}

/// One warning per line skipped, the first few; then how many more.
fn warn_skipped(path: &str, skipped: &[(usize, usize, String)]) {
    const NAMED: usize = 3;
    for (line, at, reason) in skipped.iter().take(NAMED) {
        log::warn!(
            "{path} line {line} (byte {at}) is not a whole OTLP trace request ({reason}): \
             skipped; the other lines are read"
        );
    }
    if skipped.len() > NAMED {
        log::warn!(
            "{path}: {} more lines skipped alike ({} in all)",
            skipped.len() - NAMED,
            skipped.len()
        );
    }
}

/// One request of `spans`, as the tests write them.
#[cfg(test)]
pub(crate) fn request_of(
    spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>,
) -> ExportTraceServiceRequest {
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::trace::v1::Span;

    use super::*;

    /// One request of one span, as a line of a trace file.
    fn line(trace: u8) -> String {
        let span = Span {
            trace_id: vec![trace; 16],
            span_id: vec![1; 8],
            name: format!("run {trace}"),
            ..Default::default()
        };
        serde_json::to_string(&request_of(vec![span])).unwrap() + "\n"
    }

    #[test]
    fn a_torn_line_is_skipped_and_the_whole_ones_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.otlp.jsonl");
        let third = line(3);
        let torn = format!("{}{}{}", line(1), line(2), &third[..third.len() / 2]);
        std::fs::write(&path, torn).unwrap();
        let spans = read_file(&path).unwrap();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["run 1", "run 2"]);
        // Torn in the middle too (a line overwritten): the lines around it still count.
        let middle = format!("{}{{\"resourceSpans\": [\n{}", line(1), line(2));
        std::fs::write(&path, middle).unwrap();
        assert_eq!(read_file(&path).unwrap().len(), 2);
    }

    #[test]
    fn a_file_of_no_trace_request_is_refused_naming_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.metrics.otlp.jsonl");
        std::fs::write(&path, "\n{\"resourceMetrics\": 3}\nnot json\n").unwrap();
        let e = read_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("line 2 is not an OTLP JSON trace request"),
            "{e}"
        );
        assert!(e.contains("not its metrics file"), "{e}");
    }
}
