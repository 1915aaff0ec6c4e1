//! Host-level idle detection end to end: a real agent's `pipetrace.host.idle` at a real OTLP
//! receiver rises once the node has run nothing for `host.idle_after`, drops to 0 while a run
//! is active, and never rises while the CPU is busy.
use std::{
    path::Path,
    time::{Duration, SystemTime},
};

use pipetrace_e2e::{Agent, Background, CpuLoad, metrics::RecvPoint, receiver::Receiver};
use pipetrace_semconv::metric;

/// Generous: the agent exports every few hundred milliseconds.
const WAIT: Duration = Duration::from_secs(90);

/// An agent exporting to `rx` whose only runs are processes with `marker` in their command
/// line: other tests' pipelines on this machine are no work of its node.
fn agent(rx: &Receiver, dir: &Path, marker: &str, host: &str, interval: &str) -> Agent {
    let cfg = dir.join("pipetrace.yaml");
    let yaml = format!(
        "metrics:\n  interval: {interval}\nhost:\n{host}attribution:\n  engines: []\n  \
         run_rules:\n    - match: {{ argv: '{marker}' }}\n      name: idle-test\n"
    );
    std::fs::write(&cfg, yaml).unwrap();
    Agent::start(&["--endpoint", &rx.grpc_url(), "-c", cfg.to_str().unwrap()])
}

/// The host idle points received, in arrival order.
fn idle_points(rx: &Receiver) -> Vec<RecvPoint> {
    let all = rx.metrics().into_iter();
    all.filter(|p| p.name == metric::HOST_IDLE).collect()
}

/// Waits until `done` holds for the idle points received; panics with `what` past `WAIT`.
async fn wait_until(rx: &Receiver, what: &str, done: impl Fn(&[RecvPoint]) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done(&idle_points(rx)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {:?}",
            values(&idle_points(rx))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn values(points: &[RecvPoint]) -> Vec<f64> {
    points.iter().map(|p| p.value).collect()
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_node_is_idle_until_a_run_starts_and_again_after_it_ends() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("pipetrace-idle-{}", std::process::id());
    // More CPUs than the machine has: whatever else runs here, only runs count.
    let cpus = std::thread::available_parallelism().unwrap().get() + 1;
    let host = format!("  idle_after: 2s\n  idle_cpu_below: {cpus}\n");
    let agent = agent(&rx, dir.path(), &marker, &host, "300ms");

    wait_until(&rx, "the node never became idle", |p| {
        p.iter().any(|p| p.value > 0.0)
    })
    .await;
    let first = idle_points(&rx);
    assert!(first.iter().all(|p| p.kind == "gauge" && p.unit == "s"));
    // Nonzero only once idleness lasted host.idle_after.
    assert!(first.iter().all(|p| p.value == 0.0 || p.value >= 2.0));

    // A run that waits for the test to end it.
    let stop = dir.path().join("stop");
    let script = format!("while [ ! -e {} ]; do sleep 0.2; done", stop.display());
    let run = Background::shell(&format!("exec bash -c '{script}' {marker}"));
    let started = nanos(SystemTime::now());
    wait_until(&rx, "a run did not end idleness", |p| {
        p.iter().any(|p| p.time > started && p.value == 0.0)
    })
    .await;
    // It stays 0 while the run lasts, well past host.idle_after.
    let zero_at = (idle_points(&rx).iter())
        .find(|p| p.time > started && p.value == 0.0)
        .map(|p| p.time)
        .unwrap();
    let later = zero_at + 3 * 2_000_000_000;
    wait_until(&rx, "exports stopped", |p| p.iter().any(|p| p.time > later)).await;
    let during: Vec<RecvPoint> = (idle_points(&rx).into_iter())
        .filter(|p| p.time >= zero_at && p.time <= later)
        .collect();
    assert!(
        during.len() >= 5 && during.iter().all(|p| p.value == 0.0),
        "idle while a run was active: {:?}",
        values(&during)
    );

    // Over: the node becomes idle again.
    std::fs::write(&stop, "").unwrap();
    drop(run);
    let ended = nanos(SystemTime::now());
    wait_until(&rx, "idle never came back after the run", |p| {
        p.iter().any(|p| p.time > ended && p.value > 0.0)
    })
    .await;
    agent.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_busy_outside_any_pipeline_is_never_idle() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("pipetrace-busy-{}", std::process::id());
    // One core kept busy: far above a twentieth of a CPU.
    let _load = CpuLoad::start();
    let host = "  idle_after: 1s\n  idle_cpu_below: 0.05\n";
    let agent = agent(&rx, dir.path(), &marker, host, "250ms");
    let first = nanos(SystemTime::now());
    // Many times idle_after, judged over many intervals.
    let until = first + 6 * 1_000_000_000;
    wait_until(&rx, "exports stopped", |p| p.iter().any(|p| p.time > until)).await;
    agent.stop();
    let points = idle_points(&rx);
    assert!(points.len() >= 10, "{} points", points.len());
    assert!(
        points.iter().all(|p| p.value == 0.0),
        "idle with a CPU busy: {:?}",
        values(&points)
    );
}
