//! Prefect 3.8.8 (PyPI, the venv scripts/setup.sh makes), and the newest Prefect 3 PyPI had
//! when setup ran, running a flow with direct and submitted tasks that start subprocesses, a
//! subflow and a failing task, with its temporary local server, under `pipetrace run` and
//! `pipetrace agent`. Judged by Prefect's own
//! database: the run is the flow, every task run is one task span, and the processes it
//! started are its tools.
use std::{collections::BTreeMap, path::Path, time::Duration};

mod standing;
mod tagged;
use tagged::assert_tagged_tools_under_their_task_runs;

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Trace, Val},
    stderr,
};
use pipetrace_semconv::attr;

/// The Prefect a test runs: the pinned release most tests run, or the newest 3.x.
#[derive(Clone, Copy, Debug)]
enum Prefect {
    Pinned,
    Newest,
}

impl Prefect {
    fn python(self) -> std::path::PathBuf {
        let venv = match self {
            Prefect::Pinned => "prefect",
            Prefect::Newest => "prefect-newest",
        };
        pipetrace_e2e::venv_program(venv, "python")
    }
}

fn python() -> std::path::PathBuf {
    Prefect::Pinned.python()
}

fn flow() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/prefect/flow.py")
}

/// The id of the one top flow run in `home`'s database (a temporary server's, or a standing
/// server's that ran one flow).
fn only_flow_run(home: &Path) -> String {
    let runs = top_flow_runs(home);
    assert_eq!(runs.len(), 1, "one top flow run: {runs:?}");
    runs.into_iter().next().unwrap()
}

/// The ids of the top flow runs (no subflow's) in `home`'s database.
fn top_flow_runs(home: &Path) -> std::collections::BTreeSet<String> {
    let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT id FROM flow_run WHERE parent_task_run_id IS NULL")
        .unwrap();
    let ids = stmt.query_map([], |r| r.get(0)).unwrap();
    ids.map(Result::unwrap).collect()
}

/// Prefect's records of top flow run `flow_run`: its flow's name and its own name, and every
/// task run of it and its subflows that is not a subflow's placeholder, by id -> name.
fn records(home: &Path, flow_run: &str) -> (String, String, BTreeMap<String, String>) {
    let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
    let (flow, run): (String, String) = db
        .query_row(
            "SELECT f.name, fr.name FROM flow_run fr JOIN flow f ON f.id = fr.flow_id \
             WHERE fr.id = ?1",
            [flow_run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut stmt = db
        .prepare(
            "WITH RECURSIVE runs(id) AS (SELECT ?1 UNION SELECT c.id FROM flow_run c \
             JOIN task_run t ON t.id = c.parent_task_run_id JOIN runs ON runs.id = t.flow_run_id) \
             SELECT tr.id, tr.name FROM task_run tr JOIN runs ON runs.id = tr.flow_run_id \
             WHERE NOT EXISTS (SELECT 1 FROM flow_run c WHERE c.parent_task_run_id = tr.id)",
        )
        .unwrap();
    let tasks = stmt
        .query_map([flow_run], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (flow, run, tasks)
}

/// Prefect's settings for a run of its own: its database in `home`, a patient server start.
fn prefect_env(home: &Path) -> [(&'static str, std::ffi::OsString); 3] {
    [
        ("PREFECT_HOME", home.into()),
        ("PREFECT_SERVER_ANALYTICS_ENABLED", "false".into()),
        (
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
            "120".into(),
        ),
    ]
}

/// Runs `data/prefect/<script>` under `pipetrace run` (arguments: paths in its Prefect
/// home); its home and its spans.
fn traced_flow(script: &str, args: &[&str]) -> (tempfile::TempDir, Vec<RecvSpan>) {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(prefect_env(home.path()))
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(python())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("data/prefect")
                .join(script),
        )
        .args(args.iter().map(|a| home.path().join(a)))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&out);
    (home, spans)
}

/// When Prefect says each task run ran, by id: Unix ns of its start and end.
fn task_run_times(home: &Path) -> BTreeMap<String, (u64, u64)> {
    let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
    let ns =
        |col: &str| format!("CAST((julianday({col}) - 2440587.5) * 86400000000 AS INTEGER) * 1000");
    let sql = format!(
        "SELECT id, {}, {} FROM task_run",
        ns("start_time"),
        ns("end_time")
    );
    let mut stmt = db.prepare(&sql).unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Every process ran while the task run it is under ran (a thread waits for what it starts):
/// task runs that ran at once but for different times cannot swap their processes.
fn assert_tools_within_their_task_runs(home: &Path, t: &Trace) {
    const SLACK_NS: u64 = 50_000_000;
    let times = task_run_times(home);
    for tool in t.tools() {
        let Some(task) = t.task_of(tool) else {
            continue;
        };
        let id = task.str("cicd.pipeline.task.run.id");
        let (start, end) = times[id];
        assert!(
            start <= tool.start + SLACK_NS && tool.end <= end + SLACK_NS,
            "{} ran {}..{} ms, outside task run {} ({}..{} ms)",
            tool.name,
            tool.start / 1_000_000,
            tool.end / 1_000_000,
            task.str("cicd.pipeline.task.name"),
            start / 1_000_000,
            end / 1_000_000,
        );
    }
}

/// Judges top flow run `run` of `flow.py` (`failed`: asked to fail) by the database in
/// `home`. `temporary`: the flow started Prefect's temporary server, a helper of the run.
fn judge(home: &Path, run: &str, spans: &[RecvSpan], failed: bool, temporary: bool) {
    let t = Trace::new(spans);
    t.assert_well_formed();
    t.assert_names_registered(&[]);
    let (flow, flow_run, task_runs) = records(home, run);
    // checksum, three sort_words, compress in the subflow, and flaky when asked to fail.
    assert_eq!(task_runs.len(), 5 + usize::from(failed), "{task_runs:?}");
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("pipetrace.run.engine"), "prefect");
    assert_eq!(run.str("cicd.pipeline.name"), flow);
    assert_eq!(run.str("pipetrace.run.label"), flow_run);
    // Every task run's processes are tasks named by it; no other task.
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for task in t.tasks() {
        let id = task.str("cicd.pipeline.task.run.id").to_string();
        let name = task.str("cicd.pipeline.task.name").to_string();
        assert_eq!(
            task_runs.get(&id),
            Some(&name),
            "{} is no task run of Prefect's",
            task.name
        );
        named.insert(id, name);
    }
    assert_eq!(named, task_runs, "every task run's processes were found");
    assert_tools_within_their_task_runs(home, &t);
    assert_eq!(
        t.tasks().len(),
        task_runs.len(),
        "one task span per task run"
    );
    // Each task's own programs: sort under sort_words, gzip under compress, and so on.
    for (program, task) in [
        ("sort", "sort_words"),
        ("gzip", "compress"),
        ("sha256sum", "checksum"),
    ] {
        let spans: Vec<_> = t
            .tools()
            .into_iter()
            .filter(|s| s.str("pipetrace.tool.name") == program)
            .collect();
        assert!(!spans.is_empty(), "no {program}");
        for s in spans {
            let under = t
                .task_of(s)
                .map(|x| x.str("cicd.pipeline.task.name"))
                .unwrap_or("");
            assert!(
                under.starts_with(&format!("{task}-")),
                "{program} under {under}"
            );
        }
    }
    // The server and what Prefect's imports start are the engine's.
    let engine = spans
        .iter()
        .find(|s| s.attr("pipetrace.engine.helpers").is_some());
    if temporary {
        assert!(engine.is_some_and(|e| e.int("pipetrace.engine.helpers").unwrap() >= 1));
    }
    assert!(
        t.tools()
            .iter()
            .all(|s| !s.str("process.command_line").contains("uvicorn"))
    );
    let failures = t.tasks().iter().filter(|s| s.status == 2).count();
    assert_eq!(failures, usize::from(failed));
}

/// The flow that fails on purpose, run by `cmd` (pipetrace with its settings) under
/// `pipetrace run`: its spans.
fn failing_flow_under_run(
    mut cmd: std::process::Command,
    home: &Path,
    prefect: Prefect,
) -> Vec<RecvSpan> {
    let out = home.join("t.otlp.jsonl");
    let o = cmd
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(prefect.python())
        .arg(flow())
        .arg("fail")
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "the flow fails on purpose: {}",
        stderr(&o)
    );
    read_jsonl(&out)
}

/// A flow's first run in a fresh Prefect home (its temporary server migrates a new
/// database first), judged by that database.
fn task_runs_name_their_processes(prefect: Prefect) {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = pipetrace();
    cmd.envs(prefect_env(home.path()));
    let spans = failing_flow_under_run(cmd, home.path(), prefect);
    judge(home.path(), &only_flow_run(home.path()), &spans, true, true);
    // The version Prefect itself says, from the interpreter that ran the flow.
    let said = std::process::Command::new(prefect.python())
        .args(["-c", "import prefect; print(prefect.__version__)"])
        .output()
        .unwrap();
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(
        run.str("pipetrace.run.engine_version"),
        String::from_utf8_lossy(&said.stdout).trim()
    );
}

#[test]
fn prefect_task_runs_name_their_processes() {
    task_runs_name_their_processes(Prefect::Pinned);
}

#[test]
fn the_newest_prefects_task_runs_name_their_processes() {
    task_runs_name_their_processes(Prefect::Newest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_prefect_flow_by_its_server() {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let home = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(python())
        .arg(flow())
        .envs(prefect_env(home.path()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let run = only_flow_run(home.path());
    let (_, spans) = flow_run_trace(&rx, home.path(), &run).await;
    agent.stop();
    judge(home.path(), &run, &spans, false, true);
}

/// What `rx` got once the run span of top flow run `run` in `home` came: every span, and the
/// spans of that run's trace (other tests run the same flow on this host).
async fn flow_run_trace(rx: &Receiver, home: &Path, run: &str) -> (Vec<RecvSpan>, Vec<RecvSpan>) {
    let (_, flow_run, _) = records(home, run);
    let ours = |s: &RecvSpan| s.is_run() && s.str("pipetrace.run.label") == flow_run;
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| s.iter().any(ours))
        .await;
    let trace = (spans.iter().find(|s| ours(s)))
        .unwrap_or_else(|| panic!("no run span of flow run {flow_run}"))
        .trace_id
        .clone();
    let traced = (spans.iter()).filter(|s| s.trace_id == trace).cloned();
    let traced = traced.collect();
    (spans, traced)
}

/// The `__OTEL_TRACEPARENT` label Prefect stored on a run, as (trace, span) in hex.
fn label_context(labels: Option<String>) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(&labels?).ok()?;
    let tp = v.get("__OTEL_TRACEPARENT")?.as_str()?.to_string();
    let parts: Vec<&str> = tp.split('-').collect();
    Some((parts.get(1)?.to_string(), parts.get(2)?.to_string()))
}

/// With Prefect's own tracing on (its OpenTelemetry extra, under `opentelemetry-instrument`),
/// pipetrace's run and task spans join Prefect's trace: the run under Prefect's flow-run span,
/// each task under its task-run span, all in the one trace both export to the same backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_holds_prefects_view_and_the_kernels() {
    let rx = Receiver::start().await;
    let home = tempfile::tempdir().unwrap();
    let o = pipetrace()
        .envs(prefect_env(home.path()))
        // Read by Prefect's OpenTelemetry SDK and by pipetrace alike: one backend for both.
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.grpc_url())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_METRICS_EXPORTER", "none")
        .env("OTEL_LOGS_EXPORTER", "none")
        .args(["run", "--"])
        .arg(pipetrace_e2e::venv_program(
            "prefect",
            "opentelemetry-instrument",
        ))
        .arg(python())
        .arg(flow())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let db = rusqlite::Connection::open(home.path().join("prefect.db")).unwrap();
    let flow_labels: Option<String> = db
        .query_row(
            "SELECT labels FROM flow_run WHERE parent_task_run_id IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let (trace, flow_span) = label_context(flow_labels).expect("Prefect traced its flow run");
    let mut stmt = db.prepare("SELECT id, labels FROM task_run").unwrap();
    let task_spans: BTreeMap<String, Option<(String, String)>> = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, label_context(r.get(1)?)))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // Prefect's own spans and ours arrive at the same receiver.
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| {
            s.iter().any(|s| s.span_id == flow_span) && s.iter().any(|s| s.is_run())
        })
        .await;
    assert!(
        spans.iter().any(|s| s.span_id == flow_span),
        "Prefect exported its flow-run span"
    );
    let run = spans
        .iter()
        .find(|s| s.is_run())
        .expect("pipetrace's run span");
    assert_eq!(run.trace_id, trace, "the run is in Prefect's trace");
    assert_eq!(
        run.parent.as_deref(),
        Some(flow_span.as_str()),
        "under the flow-run span"
    );
    let ours: Vec<_> = spans
        .iter()
        .filter(|s| s.attrs.contains_key("process.pid"))
        .collect();
    assert!(
        ours.iter().all(|s| s.trace_id == trace),
        "every span of the run is in that trace"
    );
    let tasks: Vec<_> = ours.iter().filter(|s| s.is_task()).collect();
    assert!(!tasks.is_empty());
    for task in tasks {
        let id = task.str("cicd.pipeline.task.run.id");
        let (t, span) = task_spans[id].clone().expect("Prefect traced the task run");
        assert_eq!(t, trace);
        assert_eq!(
            task.parent.as_deref(),
            Some(span.as_str()),
            "{} under its task-run span",
            task.name
        );
        assert!(
            spans.iter().any(|s| s.span_id == span),
            "Prefect exported {}'s span",
            task.name
        );
    }
}
