//! The real Nextflow (24.10.0 from Maven Central: `make nextflow`), run offline by its JVM,
//! which starts each task from a thread pool with `ProcessBuilder` (`/bin/bash -ue
//! .command.run` in `work/<2 hex>/<30 hex>`, through `jspawnhelper` under Java's default
//! POSIX_SPAWN; `-with-trace` runs the wrapper again as `nxf_trace`, sampling /proc). Judged
//! by what the run left on disk: `.command.run` headers, `.exitcode`, the commands of
//! `.command.sh`; never by names written into the test.
use std::{collections::BTreeMap, path::Path, time::Duration};

use pipetrace_e2e::{
    Agent, nextflow, pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Trace},
    stderr,
};

/// Every task starts at once (two CPUs here would run two at a time, and the failure would
/// stop the rest before they start).
const CONFIG: &str = "executor {\n    cpus = 8\n}\n";

/// BROKEN runs too and fails (sort of a missing file): with `errorStrategy 'finish'` the run
/// ends in error once the tasks already submitted finished.
const FAILED_ARGS: [&str; 4] = [
    "--broken",
    "true",
    "-process.errorStrategy=finish",
    "-process.maxForks=4",
];

/// A launch directory holding the pipeline as `script`, its config and its input.
fn pipeline(script: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(script), nextflow::QC_PIPELINE).unwrap();
    std::fs::write(dir.path().join("nextflow.config"), CONFIG).unwrap();
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").unwrap();
    dir
}

/// One task as its work directory records it.
struct OnDisk {
    /// The header's `PROC (tag)`.
    name: String,
    /// `.exitcode`.
    exit: Option<i32>,
    /// The programs `.command.sh` runs, one per command, in order.
    programs: Vec<String>,
}

/// The commands of a task script: its lines after the shebang, split at `;`, `|`, `&`, each
/// command's first word (redirections and assignments aside), builtins left out.
fn programs(script: &str) -> Vec<String> {
    let body = script.lines().filter(|l| !l.starts_with("#!"));
    let commands = body.flat_map(|l| l.split([';', '|', '&']).collect::<Vec<_>>());
    let first = |c: &str| {
        let w = c
            .split_whitespace()
            .find(|w| !w.contains('=') && !w.starts_with('>'));
        w.map(str::to_string)
    };
    let builtin = |w: &String| matches!(w.as_str(), "echo" | "exit" | "true" | "cd" | "set");
    commands.filter_map(first).filter(|w| !builtin(w)).collect()
}

/// Every work directory's task, by its hash. A directory without a wrapper is a task that
/// never started (Nextflow stopping after a failure leaves it empty).
fn on_disk(dir: &Path) -> BTreeMap<String, OnDisk> {
    let mut out = BTreeMap::new();
    for prefix in std::fs::read_dir(dir.join("work")).unwrap().flatten() {
        for task in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let read = |f: &str| std::fs::read_to_string(task.path().join(f));
            let Ok(text) = read(".command.run") else {
                continue;
            };
            let name = text.lines().find_map(|l| {
                l.strip_prefix("### name: ")
                    .map(|n| n.trim_matches('\''))
                    .or_else(|| l.strip_prefix("# NEXTFLOW TASK: "))
            });
            let hash = format!(
                "{}/{}",
                prefix.file_name().to_string_lossy(),
                task.file_name().to_string_lossy()
            );
            let task = OnDisk {
                name: name.expect("a header").to_string(),
                exit: read(".exitcode").ok().and_then(|c| c.trim().parse().ok()),
                programs: programs(&read(".command.sh").unwrap()),
            };
            out.insert(hash, task);
        }
    }
    out
}

fn judge(dir: &Path, spans: &[RecvSpan]) {
    let t = Trace::new(spans);
    t.assert_well_formed();
    t.assert_names_registered(&[]);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("pipetrace.run.engine"), "nextflow");
    let want = on_disk(dir);
    assert!(want.len() >= 3, "the run's tasks left their directories");
    let by_hash: BTreeMap<&str, &RecvSpan> = (t.tasks().into_iter())
        .map(|s| (s.str("cicd.pipeline.task.run.id"), s))
        .collect();
    let got: BTreeMap<&str, &str> = (by_hash.iter())
        .map(|(h, s)| (*h, s.name.as_str()))
        .collect();
    let named: BTreeMap<&str, &str> = (want.iter())
        .map(|(h, d)| (h.as_str(), d.name.as_str()))
        .collect();
    assert_eq!(
        got, named,
        "tasks by work directory, named as .command.run names them"
    );
    assert_eq!(t.tasks().len(), want.len(), "one span per task");
    for (hash, disk) in &want {
        let task = by_hash[hash.as_str()];
        let tag = task.attr("pipetrace.task.tag").map(|v| v.str().to_string());
        let expected =
            (disk.name.strip_suffix(')').and_then(|n| n.split_once(" ("))).map(|x| x.1.to_string());
        assert_eq!(tag, expected, "{}", task.name);
        // Where Nextflow keeps its stderr and output: named on the span, there on disk.
        let logs: Vec<String> = match task.attr("pipetrace.task.logs") {
            Some(pipetrace_e2e::spans::Val::List(l)) => l.iter().map(|v| v.str().into()).collect(),
            other => panic!("{}: no logs: {other:?}", task.name),
        };
        let work = std::fs::canonicalize(dir.join("work").join(hash)).unwrap();
        let want_logs = [".command.err", ".command.log"].map(|f| work.join(f));
        let real = |p: &String| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
        let logs: Vec<std::path::PathBuf> = logs.iter().map(real).collect();
        assert_eq!(logs, want_logs, "{}", task.name);
        assert!(want_logs[0].exists(), "{}", want_logs[0].display());
        let failed = disk.exit != Some(0);
        assert_eq!(
            task.status == 2,
            failed,
            "{} exited {:?}",
            task.name,
            disk.exit
        );
        // Its tools are exactly the commands of its script: none of the wrapper's plumbing
        // (tee, date, ps, grep, awk on /proc, .command.run again), no .command.sh of its own.
        let mut tools: Vec<&str> = (t.tools().into_iter())
            .filter(|s| t.task_of(s).map(|k| k.span_id.as_str()) == Some(task.span_id.as_str()))
            .map(|s| s.str("pipetrace.tool.name"))
            .collect();
        let mut programs: Vec<&str> = disk.programs.iter().map(String::as_str).collect();
        tools.sort();
        programs.sort();
        assert_eq!(tools, programs, "{}: its script's commands", task.name);
    }
    // The wrapper's plumbing went into the engine span, counted, never a failure.
    let engine = spans
        .iter()
        .find(|s| s.attr("pipetrace.engine.helpers").is_some())
        .expect("an engine span");
    let helpers = engine.int("pipetrace.engine.helpers").unwrap();
    assert!(
        helpers >= 2 * want.len() as i64,
        "{helpers}: a tee, a touch... a task"
    );
    assert_ne!(engine.status, 2);
    let failed_tools = t.tools().iter().filter(|s| s.status == 2).count();
    let failed_tasks = want.values().filter(|d| d.exit != Some(0)).count();
    assert_eq!(
        failed_tools, failed_tasks,
        "only the failed task's command failed"
    );
    // A few spans per real tool: the run, the engine, each task and its commands.
    let commands: usize = want.values().map(|d| d.programs.len()).sum();
    let kept = spans
        .iter()
        .filter(|s| s.is_run() || s.is_task() || s.is_tool());
    assert_eq!(kept.count(), 1 + want.len() + commands);
}

/// `pipetrace run` over Nextflow, its JVM launching tasks as `mechanism` says.
fn traced_run(mechanism: &str, extra: &[&str]) -> (tempfile::TempDir, Vec<RecvSpan>, bool) {
    let dir = pipeline("main.nf");
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(nextflow::launcher())
        .args(["run", "main.nf"])
        .args(FAILED_ARGS)
        .args(extra)
        .env(
            "NXF_OPTS",
            format!("-Djdk.lang.Process.launchMechanism={mechanism}"),
        )
        .current_dir(dir.path())
        .output()
        .unwrap();
    let spans = read_jsonl(&out);
    assert!(!spans.is_empty(), "{}", stderr(&o));
    (dir, spans, o.status.success())
}

fn a_real_jvm_run_is_named_by_its_records(mechanism: &str, extra: &[&str]) {
    let (dir, spans, ok) = traced_run(mechanism, extra);
    assert!(!ok, "a task failed: the run fails");
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("cicd.pipeline.name"), "main.nf");
    assert_eq!(run.status, 2, "the run failed");
    judge(dir.path(), &spans);
}

/// Java's default on Linux: `jspawnhelper` first, which execs the wrapper in its own pid.
#[test]
fn tasks_a_jvm_spawns_through_jspawnhelper_are_named_with_task_metrics_on() {
    a_real_jvm_run_is_named_by_its_records("POSIX_SPAWN", &["-with-trace"]);
}

#[test]
fn tasks_a_jvm_vforks_are_named_with_task_metrics_on() {
    a_real_jvm_run_is_named_by_its_records("VFORK", &["-with-report"]);
}

#[test]
fn tasks_a_jvm_forks_are_named_without_task_metrics() {
    a_real_jvm_run_is_named_by_its_records("FORK", &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_agent_names_nextflow_tasks_and_scheduler_started_ones() {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let pipeline_name = format!("nf-demo-{}.nf", std::process::id());
    let dir = pipeline(&pipeline_name);
    let st = std::process::Command::new(nextflow::launcher())
        .args(["run", &pipeline_name, "-with-trace"])
        .args(FAILED_ARGS)
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(!st.success(), "a task failed");
    let mine = rx.run_trace(&pipeline_name, Duration::from_secs(30)).await;
    let trace = mine[0].trace_id.clone();
    judge(dir.path(), &mine);

    // A batch scheduler on this node runs one task's .command.run itself, no Nextflow here
    // (on a fresh node: no output of an earlier attempt, which `bash -C` would not clobber).
    let disk = on_disk(dir.path());
    let (hash, task) = disk.iter().find(|(_, d)| d.exit == Some(0)).unwrap();
    let work = dir.path().join("work").join(hash);
    std::fs::remove_file(work.join("out.txt")).unwrap();
    let st = std::process::Command::new("/bin/bash")
        .args(["-ue", ".command.run"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(st.success());
    let task_of_node = |s: &RecvSpan| {
        s.is_task() && s.str("cicd.pipeline.task.run.id") == hash && s.trace_id != trace
    };
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| s.iter().any(task_of_node))
        .await;
    let span = spans.iter().find(|s| task_of_node(s)).unwrap();
    assert_eq!(
        span.name, task.name,
        "named on the node from the same .command.run"
    );
    let t = Trace::new(&spans);
    let mut tools: Vec<&str> = (t.tools().into_iter())
        .filter(|s| t.task_of(s).map(|k| &k.span_id) == Some(&span.span_id))
        .map(|s| s.str("pipetrace.tool.name"))
        .collect();
    tools.sort();
    let mut programs: Vec<&str> = task.programs.iter().map(String::as_str).collect();
    programs.sort();
    assert_eq!(
        tools, programs,
        "its script's commands, none of the wrapper's"
    );
    agent.stop();
}

/// `-resume` takes every task of an earlier run from Nextflow's cache: the run span counts
/// them as the log's `Cached process` lines do, and names the version the log's banner says;
/// the report page says both.
#[test]
fn a_resumed_run_counts_what_nextflow_took_from_its_cache_and_names_its_version() {
    let dir = pipeline("main.nf");
    let first = std::process::Command::new(nextflow::launcher())
        .args(["run", "main.nf"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(nextflow::launcher())
        .args(["run", "main.nf", "-resume"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The resumed run's own log, as Nextflow wrote it.
    let log = std::fs::read_to_string(dir.path().join(".nextflow.log")).unwrap();
    let cached = log
        .lines()
        .filter(|l| l.contains("] Cached process > "))
        .count();
    assert!(cached >= 3, "{log}");
    let version = (log.lines())
        .find_map(|l| l.split_once("N E X T F L O W")?.1.split_once("version "))
        .map(|(_, v)| v.split_whitespace().next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no banner: {log}"));
    let spans = read_jsonl(&out);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.int("pipetrace.run.tasks_cached"), Some(cached as i64));
    assert_eq!(run.str("pipetrace.run.engine_version"), version);
    let page = std::fs::read_to_string(dir.path().join("t.report.html")).unwrap();
    assert!(
        page.contains(&format!("<dd>nextflow {version}</dd>")),
        "{page}"
    );
    assert!(page.contains(&format!(", {cached} cached (")), "{page}");
}
