//! What a run writes beside its trace file, named one way whatever the trace file is
//! called: the stem and extension of `X.otlp.jsonl` (or `X.jsonl`, `X.json`) give
//! `X.metrics.otlp.jsonl` (`X.metrics.jsonl`, ...) and `X.report.html`.
use std::path::{Path, PathBuf};

/// Extensions a trace file is known by, longest first.
const EXTENSIONS: &[&str] = &[".otlp.jsonl", ".jsonl", ".json"];

/// The trace file's path without its extension, and the extension (`.otlp.jsonl` where it
/// has none of those).
fn split(trace: &Path) -> (String, &'static str) {
    let s = trace.to_string_lossy();
    for ext in EXTENSIONS {
        if let Some(stem) = s.strip_suffix(ext).filter(|st| !st.ends_with('/')) {
            return (stem.to_string(), ext);
        }
    }
    (s.into_owned(), EXTENSIONS[0])
}

/// The metrics file beside a trace file.
pub fn metrics_beside(trace: &Path) -> PathBuf {
    let (stem, ext) = split(trace);
    PathBuf::from(format!("{stem}.metrics{ext}"))
}

/// The HTML report beside a trace file.
pub fn report_beside(trace: &Path) -> PathBuf {
    let (stem, _) = split(trace);
    PathBuf::from(format!("{stem}.report.html"))
}

/// Where `pipetrace run` keeps what it could not deliver, beside a trace file.
pub fn unsent_beside(trace: &Path) -> PathBuf {
    let (stem, _) = split(trace);
    PathBuf::from(format!("{stem}.unsent.pb"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_file_name_gives_its_companions_one_way() {
        for (trace, metrics, report) in [
            (
                "d/x.otlp.jsonl",
                "d/x.metrics.otlp.jsonl",
                "d/x.report.html",
            ),
            (
                "mytrace.jsonl",
                "mytrace.metrics.jsonl",
                "mytrace.report.html",
            ),
            ("t.json", "t.metrics.json", "t.report.html"),
            ("trace", "trace.metrics.otlp.jsonl", "trace.report.html"),
            (
                "d/.jsonl",
                "d/.jsonl.metrics.otlp.jsonl",
                "d/.jsonl.report.html",
            ),
        ] {
            assert_eq!(
                metrics_beside(Path::new(trace)),
                Path::new(metrics),
                "{trace}"
            );
            assert_eq!(
                report_beside(Path::new(trace)),
                Path::new(report),
                "{trace}"
            );
        }
        assert_eq!(
            unsent_beside(Path::new("d/x.otlp.jsonl")),
            Path::new("d/x.unsent.pb")
        );
    }
}
