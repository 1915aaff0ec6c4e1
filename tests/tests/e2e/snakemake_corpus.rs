//! The workflow corpus (tests/workflows/snakemake) on Debian's Snakemake 7.21 and on 8.30
//! from PyPI under `pipetrace run`, and on 9 under `pipetrace agent`, each case on one
//! version in turn (`snakemake::corpus_for`; `CORPUS_ALL=1` runs each on all; CI's time: the
//! agent's way of seeing jobs is the same for every version, and the adapter reads each
//! version's records alike in both modes; 9 under run is in the other Snakemake tests),
//! judged by
//! Snakemake's own records: every job attempt the log records is one task named by its
//! rule and wildcards, every metadata record's exact shell command is the command of a
//! task of that rule, failures are the log's, and the engine's helpers are no tasks. A
//! case that runs Snakemake several times in one directory (a rerun) has each run judged
//! by its own log and the records of the jobs that ended during it.
use std::{path::Path, time::Duration};

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl,
    receiver::Receiver,
    snakemake::{Block, Case, Records, Version, corpus_for, counts, newest_log, normalize},
    spans::{RecvSpan, Trace},
    stderr,
};

/// Helpers of the engine and of version-manager shims: never a task or a tool.
const NEVER_SPANS: [&str; 6] = ["cbc", "glpsol", "uname", "readlink", "basename", "pyenv"];

/// The shell script a task's process ran (its `-c` argument), white space folded.
fn job_script(task: &RecvSpan) -> String {
    let line = task.str("process.command_line");
    let script = line.split_once(" -c ").map_or(line, |(_, s)| s);
    normalize(&script.trim_matches('\'').replace("'\\''", "'"))
}

/// Snakemake's MAX_ARG_LEN (shell.py, 7 to 9): a longer command (quotes escaped, with its
/// strict-mode prefix) runs from `.snakemake/shell_tmp.XXXXXXXX/script.sh`.
const MAX_ARG_LEN: usize = 16 * 4096 - 1;

/// Whether a task ran Snakemake's recorded command `cmd`: its script is the command, with
/// the workflow's `shell.prefix` around it; of a command line the kernel cut, the start;
/// of a command over MAX_ARG_LEN, the script file Snakemake wrote it to.
fn ran(task: &RecvSpan, cmd: &str) -> bool {
    let script = job_script(task);
    if script.contains(cmd) {
        return true;
    }
    if cmd.replace('\'', "'\\''").len() + 2 > MAX_ARG_LEN - 64 {
        return script.contains(".snakemake/shell_tmp.") && script.contains("/script.sh");
    }
    let head: String = cmd.chars().take(64).collect();
    script.len() >= 3000
        && script
            .find(&head)
            .is_some_and(|at| cmd.starts_with(&script[at..]))
}

/// The words of a command line that can be paths: split at white space, quotes,
/// redirections and separators.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || "'\"<>=;|(),".contains(c))
        .map(|w| w.trim_start_matches("./"))
        .filter(|w| !w.is_empty())
}

/// Every tool of a task belongs to that task's job, judged by the log's job blocks: a
/// path a tool's (or the task's) command line names that is some job's output is an
/// output or an input of a job the task's rule and wildcards are.
fn tools_belong_to_their_jobs(what: &str, t: &Trace, spans: &[RecvSpan], blocks: &[Block]) {
    let mut output_of: std::collections::BTreeMap<&str, &Block> = Default::default();
    for b in blocks {
        b.outputs.iter().for_each(|o| {
            output_of.insert(o, b);
        });
    }
    for s in spans.iter().filter(|s| !s.is_run()) {
        let task = if s.is_task() { Some(s) } else { t.task_of(s) };
        let Some(task) = task else { continue };
        let rule = task.str("cicd.pipeline.task.name");
        let wildcards = task.str("pipetrace.task.wildcards");
        let own: Vec<&Block> = (blocks.iter())
            .filter(|b| b.rule == rule && b.wildcards == wildcards)
            .collect();
        for w in words(s.str("process.command_line")) {
            let Some(job) = output_of.get(w) else {
                continue;
            };
            let its_own = (own.iter()).any(|b| b.outputs.iter().chain(&b.inputs).any(|p| p == w));
            assert!(
                its_own,
                "{what}: `{}` under the task {rule} ({wildcards}) names {w}, an output of \
                 {} ({}) in Snakemake's log",
                s.str("process.command_line"),
                job.rule,
                job.wildcards
            );
        }
    }
}

/// One run of a case as it went: its trace, and Snakemake's records of it, read as it
/// exited (a later run rewrites the records of the jobs it runs again).
struct Ran {
    /// Which run of the case (0 the first).
    index: usize,
    records: Records,
    spans: Vec<RecvSpan>,
}

fn now() -> f64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    t.unwrap().as_secs_f64()
}

/// The records of the run that started at `since` and just exited.
fn records_since(workdir: &Path, since: f64) -> Records {
    Records::read_run(workdir, &newest_log(workdir), since)
}

/// Judges every run of a case once all ran: a job a run left unfinished (interrupted)
/// leaves a record of its rule only when a later run reruns it.
fn judge_runs(case: &Case, v: Version, workdir: &Path, runs: &mut [Ran]) {
    let rules = Records::read(workdir).recorded_rules;
    for ran in runs.iter_mut() {
        ran.records.recorded_rules.extend(rules.iter().cloned());
        judge(case, v, ran);
    }
}

fn judge(case: &Case, v: Version, run: &Ran) {
    let records = &run.records;
    let what = match case.runs.len() {
        1 => format!("{} on {v:?}", case.name),
        _ => format!("{} (run {}) on {v:?}", case.name, run.index + 1),
    };
    let exit = case.runs[run.index].exit;
    let spans = &run.spans;
    let t = Trace::new(spans);
    t.assert_well_formed();
    // An interrupted run may have finished no job.
    assert!(
        !records.metadata.is_empty() || exit != 0,
        "{what}: Snakemake left records"
    );

    let tasks = t.tasks();
    let mut named: Vec<(String, String)> = tasks
        .iter()
        .map(|s| {
            let wildcards = s.str("pipetrace.task.wildcards").to_string();
            (s.str("cicd.pipeline.task.name").to_string(), wildcards)
        })
        .collect();
    named.sort();
    let attempts = records.attempts();
    assert_eq!(
        counts(&named),
        counts(&attempts),
        "{what}: tasks (left) against the job attempts Snakemake's log records (right)"
    );

    // A job Snakemake runs in a subprocess (`run:`, `shadow:`) runs its command one level
    // down: the command is then a tool's within the task.
    for (rule, cmd) in &records.metadata {
        let Some(cmd) = cmd else { continue };
        let ran_it: Vec<&RecvSpan> = spans
            .iter()
            .filter(|s| ran(s, cmd))
            .filter_map(|s| if s.is_task() { Some(s) } else { t.task_of(s) })
            .collect();
        assert!(!ran_it.is_empty(), "{what}: no task ran `{cmd}` ({rule})");
        assert!(
            ran_it
                .iter()
                .any(|task| task.str("cicd.pipeline.task.name") == rule),
            "{what}: `{cmd}` ran under {:?}, not {rule}",
            ran_it.iter().map(|t| &t.name).collect::<Vec<_>>()
        );
    }

    tools_belong_to_their_jobs(&what, &t, spans, &records.blocks);

    let failed: Vec<_> = tasks.iter().filter(|s| s.status == 2).collect();
    assert_eq!(
        failed.len(),
        records.failed.len(),
        "{what}: failed tasks against the log's errors {:?}",
        records.failed
    );
    let run = spans.iter().find(|s| s.is_run()).expect("run span");
    assert_eq!(run.str("pipetrace.run.engine"), "snakemake");
    assert_eq!(
        run.str("pipetrace.run.engine_version"),
        v.says_version(),
        "{what}: the engine's version against `snakemake --version`"
    );
    assert_eq!(
        run.status,
        if exit == 0 { 1 } else { 2 },
        "{what}: run status"
    );

    let engine = spans
        .iter()
        .find(|s| s.attr("pipetrace.engine.helpers").is_some());
    let engine = engine.unwrap_or_else(|| panic!("{what}: no engine span"));
    assert!(
        engine.int("pipetrace.engine.helpers").unwrap() >= 1,
        "{what}: the scheduler ran"
    );
    // A program the workflow itself runs may share a helper's name.
    let snakefile = std::fs::read_to_string(case.dir.join("Snakefile")).unwrap();
    for s in spans {
        let first = s.name.split([' ', '(']).next().unwrap_or("");
        let its_own = snakefile.contains(&format!("{first} "));
        assert!(
            !NEVER_SPANS.contains(&first) || its_own,
            "{what}: a span named {}",
            s.name
        );
        let exe = s.str("process.executable.path");
        assert!(
            !exe.contains("/shims/") && !exe.contains("/.pyenv/libexec/"),
            "{what}: a shim's plumbing is a span: {exe}"
        );
        assert!(
            !s.name.chars().any(char::is_control) && s.name.chars().count() <= 100,
            "{what}: a name unfit for display: {:?}",
            s.name
        );
    }
    // Clean runs, minutes after boot in CI and beside a second CPU load under `run`.
    if exit == 0 && records.failed.is_empty() {
        pipetrace_e2e::spans::assert_no_false_flags(&what, spans);
    }
    for tool in t.tools() {
        assert!(
            t.task_of(tool).is_some(),
            "{what}: tool {} is in no task",
            tool.name
        );
        if exit == 0 && records.failed.is_empty() {
            assert_eq!(
                tool.status, 1,
                "{what}: {} failed in a clean run",
                tool.name
            );
        }
    }
}

/// `loaded`: every third case beside a second CPU load, so that a clean run's verdicts are
/// seen not to change because someone else uses the machine (once per suite, and not for
/// every case: the load takes a core from the tests beside it).
fn under_run(v: Version, loaded: bool) {
    for (i, case) in corpus_for(v).into_iter().enumerate() {
        let _load = (loaded && i % 3 == 0).then(pipetrace_e2e::CpuLoad::start);
        let dir = case.copy();
        let mut runs = Vec::new();
        for (index, inv) in case.runs.iter().enumerate() {
            case.clean(dir.path(), inv);
            let file = dir.path().join(format!("trace-{index}.otlp.jsonl"));
            let since = now();
            let out = pipetrace()
                .args(["run", "--output"])
                .arg(&file)
                .arg("--")
                .arg(v.program())
                .args(&inv.args)
                .current_dir(dir.path())
                .output()
                .expect("pipetrace run");
            assert_eq!(
                out.status.code(),
                Some(inv.exit),
                "{} (run {}): {}",
                case.name,
                index + 1,
                stderr(&out)
            );
            runs.push(Ran {
                index,
                records: records_since(dir.path(), since),
                spans: read_jsonl(&file),
            });
        }
        judge_runs(&case, v, dir.path(), &mut runs);
    }
}

async fn under_agent(v: Version) {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    for case in corpus_for(v) {
        let dir = case.copy();
        // Each run is named by its directory: the n-th run span of that name is run n's.
        let name = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut runs = Vec::new();
        for (index, inv) in case.runs.iter().enumerate() {
            case.clean(dir.path(), inv);
            let since = now();
            let status = std::process::Command::new(v.program())
                .args(&inv.args)
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .expect("snakemake");
            assert_eq!(
                status.code(),
                Some(inv.exit),
                "{} (run {})",
                case.name,
                index + 1
            );
            let records = records_since(dir.path(), since);
            let spans = rx
                .nth_run_trace(&name, index, Duration::from_secs(30))
                .await;
            runs.push(Ran {
                index,
                records,
                spans,
            });
        }
        judge_runs(&case, v, dir.path(), &mut runs);
    }
    agent.stop();
}

#[test]
fn corpus_on_snakemake_7_under_run() {
    under_run(Version::Seven, false);
}

#[test]
fn corpus_on_snakemake_8_under_run() {
    under_run(Version::Eight, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_on_snakemake_9_under_the_agent() {
    under_agent(Version::Nine).await;
}
