//! OpenTelemetry's span and attribute limits, as the OTEL_*_LIMIT variables set them: no
//! attribute value longer than the limit (cut and marked), no span with more attributes
//! than its count (the rest counted as dropped), in the trace file and over OTLP alike.
use pipetrace_e2e::{
    pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Val},
    stderr,
};

/// `pipetrace run -o DIR/t.otlp.jsonl --endpoint URL -- sh -c SCRIPT` with `env`: the
/// spans of the file and those the receiver got.
async fn run(env: &[(&str, &str)], script: &str) -> (Vec<RecvSpan>, Vec<RecvSpan>, String) {
    let (file, rx, err) = run_into(env, script).await;
    (file, rx.spans(), err)
}

/// [`run`], handing back the receiver.
async fn run_into(env: &[(&str, &str)], script: &str) -> (Vec<RecvSpan>, Receiver, String) {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(env.iter().copied())
        .args(["run", "-o"])
        .arg(&file)
        .args(["--endpoint", &rx.grpc_url(), "--", "sh", "-c", script])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    (read_jsonl(&file), rx, err)
}

/// The longest string in a value (each string of a list).
fn longest(v: &Val) -> usize {
    match v {
        Val::Str(s) => s.len(),
        Val::List(items) => items.iter().map(longest).max().unwrap_or(0),
        _ => 0,
    }
}

fn truncated(s: &RecvSpan) -> Vec<&str> {
    match s.attr("pipetrace.attributes.truncated") {
        Some(Val::List(keys)) => keys.iter().map(Val::str).collect(),
        _ => Vec::new(),
    }
}

/// The example: a 4 KB command line went out at 4,097 bytes under
/// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=2048.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_value_length_limit_bounds_every_attribute_and_marks_the_cut() {
    let long = "x".repeat(4000);
    // The echo's span leaves before the run's last metrics, which count the cut.
    let script = format!("/bin/echo {long} >/dev/null; sleep 0.5");
    let env = [
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "2048"),
        ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "10ms"),
    ];
    let (file, rx, err) = run_into(&env, &script).await;
    let got = rx.spans();
    for (what, spans) in [("file", &file), ("OTLP", &got)] {
        assert!(spans.len() >= 2, "{what}: {} spans: {err}", spans.len());
        for s in spans.iter() {
            for (k, v) in &s.attrs {
                assert!(
                    longest(v) <= 2048,
                    "{what}: {} {k}: {} bytes",
                    s.name,
                    longest(v)
                );
            }
        }
        let echo = (spans.iter())
            .find(|s| s.str("process.executable.name") == "echo")
            .unwrap_or_else(|| panic!("{what}: no echo span: {err}"));
        assert_eq!(echo.str("process.command_line").len(), 2048, "{what}");
        assert!(
            truncated(echo).contains(&"process.command_line"),
            "{what}: marked as cut: {:?}",
            echo.attrs
        );
        let whole = spans.iter().filter(|s| truncated(s).is_empty());
        assert!(
            whole
                .clone()
                .all(|s| s.str("process.command_line").len() < 2048),
            "{what}: only cut values are marked"
        );
    }
    assert!(err.contains("export.limits (OTEL_*_LIMIT) cut "), "{err}");
    // The agent's own counter of cut values (the echo's and the run's command lines).
    let cut = (rx.metrics().into_iter())
        .filter(|p| p.name == "pipetrace.agent.attributes.truncated")
        .map(|p| p.value)
        .fold(0.0, f64::max);
    assert!(cut >= 1.0, "{cut} values counted as cut: {err}");
}

/// A small span attribute count: no span carries more, and what was left out is counted
/// in its dropped_attributes_count; the general limit yields to the span's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_span_attribute_count_limit_drops_and_counts() {
    let env = [
        ("OTEL_ATTRIBUTE_COUNT_LIMIT", "50"),
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "5"),
    ];
    let (file, got, err) = run(&env, "/bin/true; /bin/true").await;
    for (what, spans) in [("file", &file), ("OTLP", &got)] {
        assert!(spans.len() >= 3, "{what}: {err}");
        for s in spans.iter() {
            assert!(
                s.attrs.len() <= 5,
                "{what}: {} has {}",
                s.name,
                s.attrs.len()
            );
        }
        let at_limit = spans.iter().filter(|s| s.attrs.len() == 5);
        assert!(
            at_limit.clone().all(|s| s.dropped_attributes > 0),
            "{what}: a span at the limit counts what it left out"
        );
        assert!(spans.iter().any(|s| s.dropped_attributes > 10), "{what}");
    }
}

/// A limit that is no count starts nothing, and the error names the variable.
#[test]
fn a_limit_that_is_no_count_is_a_usage_error_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = pipetrace()
        .env("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "many")
        .args(["run", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"), "{err}");
    assert!(!marker.exists(), "the command ran");
}
