//! Nothing lost at the end of a run: a backend that refuses its first calls while the run
//! ends still gets every span (metric retries never hold the spans), and what a backend that
//! never answered did not get is kept in a file that `pipetrace send` delivers later.
use std::{collections::BTreeSet, path::Path, process::Output};

use pipetrace_e2e::{
    pipetrace, read_jsonl,
    receiver::{Receiver, free_port},
    stderr,
};

/// `pipetrace run -o DIR/t.otlp.jsonl --endpoint URL -- sh -c SCRIPT`; the file holds every
/// span, the truth the backend must end up with.
fn run(dir: &Path, url: &str, env: &[(&str, &str)], script: &str) -> (Vec<String>, Output) {
    let file = dir.join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(env.iter().copied())
        .args(["run", "-o"])
        .arg(&file)
        .args(["--endpoint", url, "--", "sh", "-c", script])
        .output()
        .unwrap();
    let ids = read_jsonl(&file).into_iter().map(|s| s.span_id).collect();
    (ids, o)
}

fn received(rx: &Receiver) -> Vec<String> {
    rx.spans().into_iter().map(|s| s.span_id).collect()
}

const THOUSAND: &str = "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done";

/// The regression: a collector restarting as the run ends refuses its first 8 calls
/// (about 15 s of the default backoff); with one queue for both signals, the metric exports
/// took every retry of the flush window and 0 of 1,003 spans arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_refusing_its_first_calls_at_the_end_still_gets_every_span() {
    let rx = Receiver::start().await;
    rx.refuse_first(8);
    let dir = tempfile::tempdir().unwrap();
    let (want, o) = run(dir.path(), &rx.grpc_url(), &[], THOUSAND);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(want.len() > 1000, "{} spans in the file", want.len());
    let (traces, metrics, still) = rx.refused();
    assert_eq!(
        still, 0,
        "8 calls refused ({traces} traces, {metrics} metrics): {err}"
    );
    let got = received(&rx);
    let unique: BTreeSet<&String> = got.iter().collect();
    let want: BTreeSet<&String> = want.iter().collect();
    assert_eq!(
        want.difference(&unique).count(),
        0,
        "{} of {} spans arrived: {err}",
        unique.len(),
        want.len()
    );
    assert!(!err.contains("not delivered"), "{err}");
    assert!(!rx.metrics().is_empty(), "the metrics came too: {err}");
}

/// The command the run's last lines give, as words.
fn send_command(err: &str) -> Vec<String> {
    let line = (err.lines())
        .find_map(|l| l.split_once("send them once it answers: "))
        .unwrap_or_else(|| panic!("no send command in: {err}"))
        .1;
    line.split_whitespace().map(String::from).collect()
}

/// A backend down for the whole run: the run keeps everything in a file and prints the
/// command; `pipetrace send` against a backend still away says so and keeps the file, and
/// against a live one delivers the whole run, each span once, and removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_backend_never_answered_is_delivered_by_pipetrace_send() {
    let dir = tempfile::tempdir().unwrap();
    let away = format!("http://127.0.0.1:{}", free_port());
    let quick = [
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "2s"),
        ("PIPETRACE_METRICS__INTERVAL", "300ms"),
    ];
    let script = "for i in $(seq 40); do /bin/true; done; sleep 0.7";
    let (want, o) = run(dir.path(), &away, &quick, script);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let words = send_command(&err);
    assert_eq!(
        words[..3],
        ["pipetrace", "--endpoint", away.as_str()],
        "{err}"
    );
    assert_eq!(words[3], "send", "{err}");
    let file = Path::new(&words[4]).to_path_buf();
    assert_eq!(
        file,
        dir.path().join("t.unsent.pb"),
        "beside the trace file"
    );
    assert!(
        err.contains(&format!("{} spans and ", want.len())),
        "every span kept: {err}"
    );
    assert!(!err.contains("WARNING"), "nothing dropped: {err}");

    // Still away: a clear message, a non-zero exit, and the file kept as it was.
    let before = std::fs::read(&file).unwrap();
    let o = pipetrace()
        .env("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s")
        .args(["--endpoint", &away, "send"])
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("still does not take spans"), "{err}");
    // The command to run again carries the endpoint it needs.
    let again = format!(
        "`pipetrace --endpoint {away} send {}` again",
        file.display()
    );
    assert!(err.contains(&again), "{again} in: {err}");
    assert_eq!(std::fs::read(&file).unwrap(), before);

    // Back (over HTTP this time, and told so by OpenTelemetry's variables alone): the whole
    // run arrives, each span once.
    let rx = Receiver::start().await;
    let o = pipetrace()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.http_url())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .arg("send")
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let mut got = received(&rx);
    got.sort();
    let mut want = want;
    want.sort();
    assert_eq!(got, want, "{err}");
    assert!(
        err.contains(&format!("{} spans accepted by ", want.len())),
        "{err}"
    );
    // The receiver leaves out staleness markers, which the count includes.
    let points: usize = (err.lines())
        .find_map(|l| {
            l.strip_prefix("pipetrace: ")?
                .split_once(" metric points accepted by ")
        })
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of metric points: {err}"));
    let recorded = rx.metrics().len();
    assert!(
        recorded > 0 && points >= recorded,
        "{points} against {recorded}: {err}"
    );
    assert!(!file.exists(), "sent in full, the file is removed: {err}");
}

/// A file that is not one a run kept, or none at all: exit 2, saying what to do.
#[test]
fn pipetrace_send_refuses_a_foreign_or_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("t.otlp.jsonl");
    std::fs::write(&foreign, "{\"resourceSpans\":[]}\n").unwrap();
    let o = pipetrace()
        .args(["--endpoint", "http://127.0.0.1:1", "send"])
        .arg(&foreign)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not a file of undelivered telemetry"), "{err}");
    let o = pipetrace()
        .arg("send")
        .arg(dir.path().join("missing.unsent.pb"))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot read"), "{err}");
}
