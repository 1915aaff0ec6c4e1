//! What `pipetrace run` writes is named one way, whatever the trace file is called, and it
//! always says where the data went, even without its summary.
use pipetrace_e2e::{pipetrace, stderr};

/// The files the run's closing lines name, as `... to PATH (...)` or `... to PATH` (the
/// first line, which says where data will go, is not one of them).
fn named_files(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("pipetrace: ") && !l.starts_with("pipetrace: tracing"))
        .filter_map(|l| l.split(" to ").nth(1))
        .map(|rest| rest.split(" (").next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn a_trace_files_companions_share_its_stem_and_no_summary_still_says_where_data_went() {
    let dir = tempfile::tempdir().unwrap();
    for (file, metrics, report) in [
        (
            "mytrace.jsonl",
            "mytrace.metrics.jsonl",
            "mytrace.report.html",
        ),
        ("x.otlp.jsonl", "x.metrics.otlp.jsonl", "x.report.html"),
    ] {
        let o = pipetrace()
            .args(["run", "--no-summary", "-o"])
            .arg(dir.path().join(file))
            .args(["--", "sh", "-c", "true"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stderr(&o);
        assert!(!text.contains("tasks ("), "no summary: {text}");
        let mut named = named_files(&text);
        named.sort();
        let mut want: Vec<String> = [file, metrics, report]
            .iter()
            .map(|f| dir.path().join(f).display().to_string())
            .collect();
        want.sort();
        assert_eq!(named, want, "{text}");
        assert!(named.iter().all(|f| std::path::Path::new(f).is_file()));
    }
}
