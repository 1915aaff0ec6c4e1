//! Flows whose task runs tag the processes they start (`TR=<task run id>` in a command
//! line): each tagged process is judged by the task run it names, called or submitted,
//! mapped on threads, and beside the flow body's own processes.
use super::*;

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

/// The trace's task spans, by task run id -> name (as [`task_runs_that_ran`] lists them).
fn task_spans_by_run(t: &Trace) -> BTreeMap<String, String> {
    (t.tasks().into_iter())
        .map(|s| {
            let id = s.str("cicd.pipeline.task.run.id").to_string();
            (id, s.str("cicd.pipeline.task.name").to_string())
        })
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
pub(super) fn assert_tagged_tools_under_their_task_runs(t: &Trace) -> usize {
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
    let named = task_spans_by_run(&t);
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
    let named = task_spans_by_run(&t);
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
