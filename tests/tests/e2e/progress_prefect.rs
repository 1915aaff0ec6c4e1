//! Queued, running and done while a Prefect 3 flow runs (3.8.8, the venv scripts/setup.sh
//! makes), as Prefect's own database says: `pipetrace status` and the live metrics count the
//! flow run's task runs by the type of their state (Pending ones, waiting for the runs whose
//! results they take, queued).
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    own_agent,
    progress::{metric_values, status_of},
    venv_program,
};
use pipetrace_semconv::metric;
use serde_json::Value;

/// Task runs as Prefect's database counts them now: (done, total, queued).
fn records(home: &Path) -> Option<(u64, u64, u64)> {
    let db = rusqlite::Connection::open_with_flags(
        home.join("prefect.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    db.query_row(
        "SELECT COALESCE(SUM(state_type IN ('COMPLETED', 'FAILED', 'CRASHED', 'CANCELLED')), 0), \
         COUNT(*), \
         COALESCE(SUM(state_type IS NULL OR state_type IN ('PENDING', 'SCHEDULED', 'PAUSED')), 0) \
         FROM task_run",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .ok()
}

fn counts(now: &Value) -> Option<(u64, u64, u64)> {
    Some((
        now["done"].as_u64()?,
        now["total"].as_u64()?,
        now["queued"].as_u64()?,
    ))
}

/// The flow of `data/prefect/queued.py` as script `name` (the run's name before Prefect
/// names its flow), with its database in `home`.
fn start(home: &Path, name: &str) -> Child {
    let flow = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/prefect/queued.py");
    let script = home.join(name);
    std::fs::copy(flow, &script).unwrap();
    Command::new(venv_program("prefect", "python"))
        .arg(script)
        .arg(name)
        .env("PREFECT_HOME", home)
        .env("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        .env("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn status_counts_task_runs_by_their_state_in_prefects_database() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(dir.path(), "agent", "metrics:\n  interval: 500ms\n");
    let home = dir.path().join("prefect-home");
    std::fs::create_dir_all(&home).unwrap();
    let name = format!("progress-{}.py", std::process::id());
    let mut run = start(&home, &name);
    // A moment where the agent's view and the database agree with task runs waiting.
    let deadline = Instant::now() + Duration::from_secs(180);
    let (mut seen, mut last) = (None, Vec::new());
    while seen.is_none() && Instant::now() < deadline && run.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(250));
        let (now, db) = (status_of(agent.pid(), &name), records(&home));
        last.push(format!("{:?} / {db:?}", now.as_ref().and_then(counts)));
        if let (Some(now), Some(db)) = (now, db)
            && counts(&now) == Some(db)
            && db.2 >= 1
        {
            seen = Some(now);
        }
    }
    let now = seen.unwrap_or_else(|| {
        panic!(
            "the agent's view never matched Prefect's database:\n{}",
            last.join("\n")
        )
    });
    let (done, total, queued) = counts(&now).unwrap();
    assert_eq!(
        now["running"].as_u64(),
        Some(total - done - queued),
        "{now}"
    );
    assert!(run.wait().unwrap().success());
    agent.stop();
    // Three `make`, three `use` and the summary, all done in the end.
    let (done, total, queued) = records(&home).unwrap();
    assert_eq!((done, total, queued), (7, 7, 0));
    let of = |m: &str| metric_values(&out, &name, m);
    let queued_seen = of(metric::TASKS_QUEUED);
    assert!(queued_seen.iter().any(|q| *q >= 1.0), "{queued_seen:?}");
    let dones = of(metric::TASKS_DONE);
    assert!(dones.windows(2).all(|w| w[0] <= w[1]), "{dones:?}");
    assert!(dones.last().is_some_and(|d| *d >= 6.0), "{dones:?}");
}
