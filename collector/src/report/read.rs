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
    Metrics {
        path: String,
        line: usize,
        reason: String,
    },
    #[error(
        "{path} holds no complete trace request: line {line} (byte {at}) is torn or not JSON \
         ({reason}), the rest is empty; give the trace file of a run that ended (a copy or a \
         write still under way leaves its last line cut)"
    )]
    Torn {
        path: String,
        line: usize,
        at: usize,
        reason: String,
    },
    #[error(
        "{path} line {line} is not an OTLP JSON trace request ({reason}); give the trace file \
         pipetrace wrote (`*.otlp.jsonl`)"
    )]
    Line {
        path: String,
        line: usize,
        reason: String,
    },
    #[error(
        "{0} is empty: no run was written to it yet; give the trace file of a run that \
         traced something (`pipetrace run` names it in its last lines)"
    )]
    Blank(String),
    #[error("{0} holds no spans")]
    Empty(String),
}

/// A line that is not a trace request: where, why, and what it looks like.
struct Skipped {
    line: usize,
    at: usize,
    reason: String,
    kind: LineKind,
}

enum LineKind {
    /// Not JSON: cut short (a crash, a full disk, a copy or write under way) or garbage.
    Torn,
    /// A metrics request: the metrics file given for the trace file.
    Metrics,
    /// JSON, but of something else.
    Other,
}

/// The spans of every whole line. A line that is not one (torn by a crash, a full disk or
/// a copy still under way, or an agent's file read while it appends) is skipped with a
/// warning naming it, so the runs of the others stay readable; a file none of whose lines
/// is a trace request (torn, a metrics file, an empty file) is refused, saying which.
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
            Err(e) => skipped.push(Skipped {
                line: i + 1,
                at,
                reason: e.to_string(),
                kind: kind_of(&line),
            }),
        }
    }
    if let (0, Some(first)) = (requests, skipped.first()) {
        return Err(refused(p, first));
    }
    warn_skipped(&p, &skipped);
    match (out.is_empty(), requests) {
        (true, 0) => Err(ReadError::Blank(p)),
        (true, _) => Err(ReadError::Empty(p)),
        (false, _) => Ok(out),
    }
}

/// What a line that is no trace request is.
fn kind_of(line: &str) -> LineKind {
    match serde_json::from_str::<serde_json::Value>(line) {
        Err(_) => LineKind::Torn,
        Ok(v) if v.get("resourceMetrics").is_some() => LineKind::Metrics,
        Ok(_) => LineKind::Other,
    }
}

/// The error of a file with no trace request, by what its first other line is.
fn refused(path: String, first: &Skipped) -> ReadError {
    let (line, reason) = (first.line, first.reason.clone());
    match first.kind {
        LineKind::Torn => ReadError::Torn {
            path,
            line,
            at: first.at,
            reason,
        },
        LineKind::Metrics => ReadError::Metrics { path, line, reason },
        LineKind::Other => ReadError::Line { path, line, reason },
    }
}

/// One warning per line skipped, the first few; then how many more.
fn warn_skipped(path: &str, skipped: &[Skipped]) {
    const NAMED: usize = 3;
    for s in skipped.iter().take(NAMED) {
        log::warn!(
            "{path} line {} (byte {}) is not a whole OTLP trace request ({}): skipped; the \
             other lines are read",
            s.line,
            s.at,
            s.reason
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

    /// Garbage and bytes that are not UTF-8 (a disk's zeroed block, a binary file appended)
    /// are lines skipped like torn ones: the whole lines around them are read.
    #[test]
    fn garbage_and_bytes_not_utf8_are_skipped_and_the_whole_lines_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.otlp.jsonl");
        let mut bytes = line(1).into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\x00\x80garbage\n");
        bytes.extend_from_slice(b"@@@ not a request @@@\n");
        bytes.extend_from_slice(line(2).as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let spans = read_file(&path).unwrap();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["run 1", "run 2"]);
    }

    #[test]
    fn an_empty_file_is_refused_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.otlp.jsonl");
        for text in ["", "\n\n"] {
            std::fs::write(&path, text).unwrap();
            let e = read_file(&path).unwrap_err();
            assert!(matches!(e, ReadError::Blank(_)), "{e}");
            let said = e.to_string();
            assert!(said.contains("t.otlp.jsonl is empty"), "{said}");
            assert!(said.contains("give the trace file of a run"), "{said}");
        }
    }

    /// The run's only line cut short (a copy still under way): the file holds no complete
    /// request, said with where the torn line starts, and not taken for a metrics file.
    #[test]
    fn a_file_whose_only_line_is_torn_says_so_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.otlp.jsonl");
        let one = line(1);
        for text in [&one[..one.len() / 2], &format!("\n{}", &one[..10])[..]] {
            std::fs::write(&path, text).unwrap();
            let e = read_file(&path).unwrap_err();
            let said = e.to_string();
            assert!(matches!(e, ReadError::Torn { .. }), "{said}");
            assert!(said.contains("holds no complete trace request"), "{said}");
            let at = text.find('{').unwrap();
            let line = 1 + text[..at].matches('\n').count();
            assert!(said.contains(&format!("line {line} (byte {at})")), "{said}");
            assert!(!said.contains("metrics"), "no metrics file here: {said}");
        }
    }
}
