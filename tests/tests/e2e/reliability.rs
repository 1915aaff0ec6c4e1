//! A backend that fails, refuses or is away: retries with backoff and Retry-After, the
//! bounded queue whose drops are counted, and the spool that carries spans across restarts.
use std::{
    collections::BTreeSet,
    path::Path,
    process::Output,
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    pipetrace, read_jsonl,
    receiver::{Fault, Options, Receiver, free_port},
    stderr,
};

/// `pipetrace run -o FILE --endpoint URL -- sh -c SCRIPT`: the file keeps every span, so
/// it is the truth what the backend must end up with.
fn run(dir: &Path, url: &str, env: &[(&str, &str)], script: &str) -> (BTreeSet<String>, Output) {
    let file = dir.join("t.otlp.jsonl");
    let _ = std::fs::remove_file(&file);
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

/// The summary's line about spans sent over OTLP (metric exports have a line of their own).
fn spans_line(err: &str) -> &str {
    err.lines()
        .find(|l| l.contains(" spans sent over OTLP to ") || l.contains(" span sent over OTLP to "))
        .unwrap_or_default()
}

/// The summary warns of no dropped span: no warning, or one that counts 0 of them.
fn no_span_dropped(err: &str) -> bool {
    !err.contains("WARNING") || err.contains(", 0 spans dropped,")
}

/// What the run's last lines say it kept for `pipetrace send`: (spans, metric exports).
fn kept(err: &str) -> (usize, usize) {
    let line = (err.lines())
        .find_map(|l| {
            l.strip_prefix("pipetrace: ")?
                .split_once(" not delivered by the end")
        })
        .map_or("0 spans and 0 metric exports", |(l, _)| l);
    let n: Vec<usize> = (line.split_whitespace())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1])
}

/// The count before `what` in the run's warning line (`7 spans dropped`).
fn dropped(err: &str, what: &str) -> usize {
    let line = err
        .lines()
        .find(|l| l.contains("WARNING"))
        .unwrap_or_default();
    let at = line
        .find(what)
        .unwrap_or_else(|| panic!("no `{what}` in: {err}"));
    let n = line[..at].trim_end().rsplit(' ').next().unwrap_or_default();
    n.parse()
        .unwrap_or_else(|_| panic!("no count before `{what}`: {err}"))
}

fn received(rx: &Receiver) -> Vec<String> {
    rx.spans().into_iter().map(|s| s.span_id).collect()
}

const HTTP: (&str, &str) = ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
const FAST_RETRY: (&str, &str) = ("PIPETRACE_EXPORT__RETRY__INITIAL_INTERVAL", "100ms");
/// The spool is on by default: the bound's drops need it off.
const NO_SPOOL: (&str, &str) = ("PIPETRACE_EXPORT__SPOOL__ENABLED", "false");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_429_502_503_are_retried_honouring_retry_after() {
    let rx = Receiver::start().await;
    rx.fail_next([
        Fault::Http {
            status: 503,
            retry_after: Some("2".into()),
        },
        Fault::Http {
            status: 429,
            retry_after: Some("1".into()),
        },
        Fault::Http {
            status: 502,
            retry_after: None,
        },
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (want, o) = run(
        dir.path(),
        &rx.http_url(),
        &[HTTP, FAST_RETRY],
        "true; true",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = received(&rx);
    assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(got.len(), want.len(), "each span once");
    let reqs = rx.trace_requests();
    let taken: Vec<bool> = reqs.iter().map(|r| r.1).collect();
    assert_eq!(&taken[..4], [false, false, false, true], "{taken:?}");
    let gap = |i: usize| reqs[i + 1].0 - reqs[i].0;
    assert!(
        gap(0) >= Duration::from_secs(2),
        "Retry-After: 2 waited {:?}",
        gap(0)
    );
    assert!(
        gap(1) >= Duration::from_secs(1),
        "Retry-After: 1 waited {:?}",
        gap(1)
    );
    assert!(
        gap(2) < Duration::from_secs(1),
        "backoff from 100 ms: {:?}",
        gap(2)
    );
    let err = stderr(&o);
    assert!(spans_line(&err).contains("(0 failed, 3 retries)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_for_good_is_counted_and_not_retried() {
    let rx = Receiver::start().await;
    rx.fail_next([Fault::Http {
        status: 400,
        retry_after: None,
    }]);
    let dir = tempfile::tempdir().unwrap();
    let (want, o) = run(
        dir.path(),
        &rx.http_url(),
        &[HTTP, FAST_RETRY],
        "true; true",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = received(&rx);
    let refused = want.len() - got.len();
    assert!(refused > 0, "the first batch was refused");
    let reqs = rx.trace_requests();
    assert_eq!(
        reqs.iter().filter(|r| !r.1).count(),
        1,
        "asked once: {reqs:?}"
    );
    let err = stderr(&o);
    assert!(
        spans_line(&err).contains(&format!("({refused} failed, 0 retries)")),
        "{refused} failed: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_unavailable_is_retried() {
    let rx = Receiver::start().await;
    rx.fail_next([
        Fault::Grpc(tonic::Code::Unavailable),
        Fault::Grpc(tonic::Code::ResourceExhausted),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (want, o) = run(dir.path(), &rx.grpc_url(), &[FAST_RETRY], "true; true");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(received(&rx).into_iter().collect::<BTreeSet<_>>(), want);
    assert!(
        spans_line(&stderr(&o)).contains("(0 failed, 2 retries)"),
        "{}",
        stderr(&o)
    );
}

/// Past `export.queue_bytes` with the spool off, batches are dropped, and every one is
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_bound_every_drop_is_counted() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let script = "for i in 1 2 3 4 5 6; do true; sleep 0.3; done";
    let env = [
        FAST_RETRY,
        ("PIPETRACE_EXPORT__QUEUE_BYTES", "1"),
        ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "100ms"),
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s"),
        ("PIPETRACE_METRICS__ENABLED", "false"),
        NO_SPOOL,
    ];
    let (want, o) = run(
        dir.path(),
        &format!("http://127.0.0.1:{port}"),
        &env,
        script,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(want.len() >= 13, "{} spans", want.len());
    // Dropped as they came, but for the last batch: kept at the end for `pipetrace send`.
    let (dropped, kept) = (dropped(&err, " spans dropped"), kept(&err).0);
    assert!(dropped > 0, "{err}");
    assert_eq!(dropped + kept, want.len(), "every span counted: {err}");
}

/// Metric exports take the same bounded path: past the bound with no spool, each one is
/// dropped and counted, and the count is the number of exports the file holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_bound_every_metric_export_dropped_is_counted() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        FAST_RETRY,
        ("PIPETRACE_EXPORT__QUEUE_BYTES", "1"),
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s"),
        ("PIPETRACE_METRICS__INTERVAL", "200ms"),
        NO_SPOOL,
    ];
    let url = format!("http://127.0.0.1:{port}");
    let (_, o) = run(dir.path(), &url, &env, "sleep 1.5");
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let file = dir.path().join("t.metrics.otlp.jsonl");
    let n = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .count();
    assert!(n >= 5, "{n} metric exports in the file");
    assert!(
        err.contains(&format!("0 metric exports sent over OTLP to {url}")),
        "{err}"
    );
    let (dropped, kept) = (dropped(&err, " metric exports dropped"), kept(&err).1);
    assert!(dropped > 0, "{err}");
    assert_eq!(dropped + kept, n, "every metric export counted: {err}");
}

fn spooled_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("traces"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pb"))
                .count()
        })
        .unwrap_or(0)
}

/// A backend away during a run: what does not fit in memory waits on disk and the next
/// pipetrace sends it once the backend is back; what was still in memory at the end is
/// kept in the file the run names, for `pipetrace send`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spool_carries_spans_across_an_outage_and_a_restart() {
    let [gp, hp] = pipetrace_e2e::receiver::free_ports();
    let spool = tempfile::tempdir().unwrap();
    let spool_dir = spool.path().to_str().unwrap();
    let env = [
        FAST_RETRY,
        ("PIPETRACE_EXPORT__SPOOL__DIR", spool_dir),
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s"),
        ("PIPETRACE_EXPORT__QUEUE_BYTES", "1"),
        ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "100ms"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{gp}");
    let script = "for i in 1 2 3 4 5 6; do true; sleep 0.3; done";
    let (first, o) = run(dir.path(), &url, &env, script);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let spooled = spooled_count(&err);
    assert!(spooled > 0, "{err}");
    assert_eq!(spooled + kept(&err).0, first.len(), "{err}");
    assert!(no_span_dropped(&err), "{err}");
    assert!(spooled_files(spool.path()) > 0);

    let rx = Receiver::start_with(Options {
        ports: Some((gp, hp)),
        ..Default::default()
    })
    .await;
    let (second, o) = run(dir.path(), &url, &env[..2], "true");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = pipetrace()
        .args(["--endpoint", &url, "send"])
        .arg(dir.path().join("t.unsent.pb"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let got: BTreeSet<String> = received(&rx).into_iter().collect();
    assert!(
        first.is_subset(&got),
        "the first run's spans came from the spool and the kept file"
    );
    assert!(second.is_subset(&got));
    assert_eq!(
        spooled_files(spool.path()),
        0,
        "the spool is empty once sent"
    );
}

/// `N spooled to disk` on the summary's spans line.
pub(crate) fn spooled_count(err: &str) -> usize {
    let line = spans_line(err);
    let at = line
        .find(" spooled to disk")
        .unwrap_or_else(|| panic!("{err}"));
    line[..at].rsplit(' ').next().unwrap().parse().unwrap()
}

/// The backend is down for five minutes in the middle of a run: nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_five_minute_outage_loses_nothing() {
    let [gp, hp] = pipetrace_e2e::receiver::free_ports();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.otlp.jsonl");
    // A process every second for 5.5 minutes: spans finish all through the outage.
    let child = pipetrace()
        .env("PIPETRACE_EXPORT__RETRY__MAX_INTERVAL", "5s")
        .args(["run", "-o"])
        .arg(&file)
        .args(["--endpoint", &format!("http://127.0.0.1:{gp}"), "--"])
        .args(["sh", "-c", "for i in $(seq 330); do true; sleep 1; done"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(300)).await;
    let rx = Receiver::start_with(Options {
        ports: Some((gp, hp)),
        ..Default::default()
    })
    .await;
    let back = started.elapsed();
    let o = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let want: BTreeSet<String> = read_jsonl(&file).into_iter().map(|s| s.span_id).collect();
    assert!(want.len() > 600, "{} spans", want.len());
    let got: BTreeSet<String> = received(&rx).into_iter().collect();
    assert_eq!(
        want.difference(&got).count(),
        0,
        "spans lost after an outage of {back:?}"
    );
    let reqs = rx.trace_requests();
    assert!(!reqs.is_empty());
    let err = stderr(&o);
    assert!(
        spans_line(&err).contains("(0 failed, ") && no_span_dropped(&err),
        "{err}"
    );
    // The metrics of the outage came too, with the agent's own count of retries.
    let retries = rx
        .metrics()
        .into_iter()
        .filter(|p| p.name == "pipetrace.agent.export.retries")
        .map(|p| p.value)
        .fold(0.0, f64::max);
    assert!(retries >= 10.0, "{retries} retries in 5 minutes");
}

/// OTLP over mutual TLS: the backend's CA from OTEL_EXPORTER_OTLP_CERTIFICATE, the client's
/// identity from _CLIENT_CERTIFICATE and _CLIENT_KEY, over gRPC; spans and metrics arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_over_grpc_from_the_environment() {
    let certs = pipetrace_e2e::tls::Certs::new();
    let rx = Receiver::start_with(Options {
        tls: Some(&certs),
        ..Default::default()
    })
    .await;
    assert!(rx.grpc_url().starts_with("https://"));
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", certs.ca.to_str().unwrap()),
        (
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            certs.client_cert.to_str().unwrap(),
        ),
        (
            "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            certs.client_key.to_str().unwrap(),
        ),
        ("PIPETRACE_METRICS__INTERVAL", "200ms"),
    ];
    let (want, o) = run(dir.path(), &rx.grpc_url(), &env, "true; sleep 0.5");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(received(&rx).into_iter().collect::<BTreeSet<_>>(), want);
    assert!(!rx.metrics().is_empty(), "metrics over the same TLS");

    // Without a client certificate the backend refuses the handshake: nothing arrives, and
    // every span is kept for `pipetrace send`.
    let rx = Receiver::start_with(Options {
        tls: Some(&certs),
        ..Default::default()
    })
    .await;
    let env = [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", certs.ca.to_str().unwrap()),
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s"),
        FAST_RETRY,
    ];
    let (want, o) = run(dir.path(), &rx.grpc_url(), &env, "true");
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
    assert!(rx.spans().is_empty());
    let err = stderr(&o);
    assert_eq!(kept(&err).0, want.len(), "{err}");
}

/// The same with the YAML settings, over HTTP/protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_over_http_from_the_config_file() {
    let certs = pipetrace_e2e::tls::Certs::new();
    let rx = Receiver::start_with(Options {
        tls: Some(&certs),
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pipetrace.yaml");
    std::fs::write(
        &config,
        format!(
            "export:\n  otlp:\n    protocol: http/protobuf\n    certificate: {}\n    \
             client_certificate: {}\n    client_key: {}\n",
            certs.ca.display(),
            certs.client_cert.display(),
            certs.client_key.display()
        ),
    )
    .unwrap();
    let env = [("PIPETRACE_CONFIG", config.to_str().unwrap())];
    let (want, o) = run(dir.path(), &rx.http_url(), &env, "true; true");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(received(&rx).into_iter().collect::<BTreeSet<_>>(), want);
}

/// A TLS file that cannot be read, or TLS on a plain http:// endpoint, is a usage error
/// that names the setting, and nothing runs.
#[test]
fn bad_tls_settings_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let cases = [
        (
            "https://127.0.0.1:1",
            "/nonexistent/ca.pem",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        ),
        ("http://127.0.0.1:1", "/etc/hostname", "https://"),
    ];
    for (url, ca, says) in cases {
        let o = pipetrace()
            .env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
            .args(["run", "--endpoint", url, "--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!marker.exists(), "the command ran");
    }
}

/// Over `export.memory_limit`, what waits in memory goes to the spool: a backend that is
/// away cannot make the agent grow. (A limit below the agent's own size moves everything.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_memory_limit_queued_spans_go_to_the_spool() {
    let [gp, hp] = pipetrace_e2e::receiver::free_ports();
    // The default spool: `spool/` in the state directory (this test process's own).
    let spool = pipetrace_e2e::state_dir().join("spool");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{gp}");
    let mut env = vec![
        ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "100ms"),
        ("PIPETRACE_EXPORT__RETRY__INITIAL_INTERVAL", "10s"),
        ("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s"),
    ];
    env.push(("PIPETRACE_EXPORT__MEMORY_LIMIT", "1 MiB"));
    let (first, o) = run(
        dir.path(),
        &url,
        &env,
        "for i in 1 2 3 4 5; do true; sleep 0.4; done",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("over export.memory_limit"), "{err}");
    // Spooled while it ran; what was still in memory at the end is kept for `pipetrace send`.
    assert_eq!(spooled_count(&err) + kept(&err).0, first.len(), "{err}");
    assert!(spooled_count(&err) > 0, "{err}");
    assert!(no_span_dropped(&err), "{err}");
    // Nothing was lost: the next run sends them.
    let rx = Receiver::start_with(Options {
        ports: Some((gp, hp)),
        ..Default::default()
    })
    .await;
    assert!(spooled_files(&spool) > 0, "spooled by default");
    let (_, o) = run(dir.path(), &url, &[], "true");
    assert!(o.status.success(), "{}", stderr(&o));
    let unsent = dir.path().join("t.unsent.pb");
    if unsent.exists() {
        let o = pipetrace()
            .args(["--endpoint", &url, "send"])
            .arg(&unsent)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let got: BTreeSet<String> = received(&rx).into_iter().collect();
    assert!(first.is_subset(&got));
    assert_eq!(spooled_files(&spool), 0, "the spool is empty once sent");
}
