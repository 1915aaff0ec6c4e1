//! Prefect 3.8.8 (PyPI, the venv scripts/setup.sh makes), and the newest Prefect 3 PyPI had
//! when setup ran, running a flow with direct and submitted tasks that start subprocesses, a
//! subflow and a failing task, with its temporary local server, under `pipetrace run` and
//! `pipetrace agent`. Judged by Prefect's own
//! database: the run is the flow, every task run is one task span, and the processes it
//! started are its tools.
use std::{collections::BTreeMap, path::Path, time::Duration};

mod standing;

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

/// The id of the task run a process says it was started by (`TR=<id>` in its command line).
fn tagged_task_run(command_line: &str) -> Option<&str> {
    let at = command_line.find("TR=")? + 3;
    command_line.get(at..at + 36)
}

/// Prefect's task runs that ran (a cache hit runs nothing), by id -> name.
fn task_runs_that_ran(home: &Path) -> BTreeMap<String, String> {
    let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT id, name FROM task_run WHERE state_name IS NOT 'Cached'")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A process that carries its task run's id: the id it carries, and the task run it is
/// under.
struct Tagged<'a> {
    tool: &'a RecvSpan,
    want: &'a str,
    under: Option<&'a str>,
}

/// Every process of the trace that carries its task run's id.
fn tagged_tools<'a>(t: &'a Trace) -> Vec<Tagged<'a>> {
    (t.tools().into_iter())
        .filter_map(|tool| {
            let want = tagged_task_run(tool.str("process.command_line"))?;
            let under = t.task_of(tool).map(|s| s.str("cicd.pipeline.task.run.id"));
            Some(Tagged { tool, want, under })
        })
        .collect()
}

/// Every process that carries its task run's id is under that task run's span.
fn assert_tagged_tools_under_their_task_runs(t: &Trace) -> usize {
    let tagged = tagged_tools(t);
    for x in &tagged {
        let task = t.task_of(x.tool).map(|s| s.str("cicd.pipeline.task.name"));
        assert_eq!(
            x.under,
            Some(x.want),
            "{} is under {task:?}",
            x.tool.str("process.command_line"),
        );
    }
    tagged.len()
}

/// Task runs called one after another on the flow's thread start within milliseconds of the
/// one before ending: each keeps its last processes (the next one took them), whether it
/// retried, failed, was renamed or named by a template; a cache hit has no span.
#[test]
fn called_task_runs_keep_their_last_processes() {
    let (home, spans) = traced_flow("called.py", &["retried"]);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let (_, _, task_runs) = records(home.path(), &only_flow_run(home.path()));
    let ran = task_runs_that_ran(home.path());
    assert!(ran.len() < task_runs.len(), "one task run was a cache hit");
    let named: BTreeMap<String, String> = (t.tasks().into_iter())
        .map(|s| {
            let id = s.str("cicd.pipeline.task.run.id").to_string();
            (id, s.str("cicd.pipeline.task.name").to_string())
        })
        .collect();
    assert_eq!(named, ran, "one span per task run that ran, named by it");
    assert!(assert_tagged_tools_under_their_task_runs(&t) >= 15);
    assert_tools_within_their_task_runs(home.path(), &t);
    let failed: Vec<_> = (t.tasks().into_iter())
        .filter(|s| s.status == 2)
        .map(|s| s.str("cicd.pipeline.task.name"))
        .collect();
    assert_eq!(failed.len(), 1, "the task run that failed: {failed:?}");
}

/// What the flow body runs around a task run (submitted, stamped running a few tens of
/// milliseconds later, or ended a moment before) is none of its; what the script runs before
/// it calls the flow leaves the run Prefect's.
#[test]
fn the_flow_bodys_own_processes_are_no_task_runs() {
    let (home, spans) = traced_flow("body.py", &[]);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let (flow, _, task_runs) = records(home.path(), &only_flow_run(home.path()));
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(
        (
            run.str("pipetrace.run.engine"),
            run.str("cicd.pipeline.name")
        ),
        ("prefect", flow.as_str()),
        "a setup step before the flow leaves the run Prefect's"
    );
    assert_eq!(assert_tagged_tools_under_their_task_runs(&t), 1);
    // The setup shell runs only builtins: a task of its own with no tool under it.
    let setup: Vec<_> = (spans.iter())
        .filter(|s| s.str("process.command_line").contains("SETUP"))
        .collect();
    assert!(!setup.is_empty(), "the setup step is in the trace");
    for s in setup {
        let task = if s.is_task() { Some(s) } else { t.task_of(s) };
        let id = task.map(|s| s.str("cicd.pipeline.task.run.id"));
        assert!(id.is_none_or(|id| !task_runs.contains_key(id)), "{id:?}");
    }
    let body: Vec<_> = (t.tools().into_iter())
        .filter(|s| s.str("process.command_line").contains("BODY"))
        .collect();
    assert_eq!(body.len(), 9);
    // One that starts while the task run runs may still be given it (see docs/engines.md),
    // and so may one within the adapter's slack before the task run's first stamp.
    const SLACK_NS: u64 = 20_000_000;
    let times = task_run_times(home.path());
    let outside =
        |s: &&RecvSpan| (times.values()).all(|&(b, e)| s.start + SLACK_NS < b || s.start > e);
    let body: Vec<_> = body.into_iter().filter(outside).collect();
    assert!(!body.is_empty());
    for tool in body {
        let run = t.task_of(tool).map(|s| s.str("cicd.pipeline.task.run.id"));
        assert!(
            run.is_none_or(|id| !task_runs.contains_key(id)),
            "{} went to task run {run:?} (started at {} ns; task runs' times {times:?})",
            tool.str("process.command_line"),
            tool.start
        );
    }
}

/// Equal task runs that run together (`.map()` of ten on four worker threads) start about
/// 1 ms apart, and on a loaded machine their threads fork 3 to 15 ms later in any order:
/// each process goes to the task run whose thread started it, or, where Prefect's stamps
/// allow others as well, to one of them with the others named on its span, its own among
/// them. Never silently to a sibling.
#[test]
fn concurrent_equal_task_runs_keep_their_own_processes() {
    let (home, spans) = traced_flow("mapped.py", &[]);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let ran = task_runs_that_ran(home.path());
    assert_eq!(ran.len(), 10, "the flow waits until the server has all ten");
    let named: BTreeMap<String, String> = (t.tasks().into_iter())
        .map(|s| {
            let id = s.str("cicd.pipeline.task.run.id").to_string();
            (id, s.str("cicd.pipeline.task.name").to_string())
        })
        .collect();
    assert_eq!(named, ran, "one span per task run, named by it");
    let (mut own, mut allowed, mut naming) = (0, 0, 0);
    for Tagged { tool, want, under } in tagged_tools(&t) {
        let others: Vec<&str> = match tool.attr(attr::TOOL_TASK_RUN_ALTERNATIVES) {
            Some(Val::List(ids)) => ids.iter().map(Val::str).collect(),
            _ => Vec::new(),
        };
        let line = tool.str("process.command_line");
        naming += usize::from(!others.is_empty());
        assert!(
            others
                .iter()
                .all(|o| ran.contains_key(*o) && Some(*o) != under),
            "{line}: under {under:?}, others {others:?}"
        );
        match under == Some(want) {
            true => own += 1,
            false => {
                assert!(
                    others.contains(&want),
                    "{line}: under {under:?}, others {others:?}"
                );
                allowed += 1;
            }
        }
    }
    assert_eq!(own + allowed, 20, "every tagged process is a tool");
    eprintln!("{own} under their own task run, {allowed} under one allowed as well (named)");
    assert_tools_within_their_task_runs(home.path(), &t);
    // The report's findings say which jobs' processes may be each other's, and only then.
    let page = std::fs::read_to_string(home.path().join("t.report.html")).unwrap();
    let said = page.matches(" may as well be those of ").count();
    assert_eq!(said > 0, naming > 0, "{naming} processes name others");
}
