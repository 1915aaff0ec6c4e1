//! Queued, running and done while a Nextflow run goes, as its own records say: `pipetrace
//! status` and the live metrics count the tasks `.nextflow.log` says were submitted and
//! completed, and with the Slurm executor those whose job has not begun (no `.command.begin`
//! in its work directory, Nextflow's own test) as queued. The run is the real Nextflow
//! (24.10.0 from Maven Central).
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    Agent, nextflow, own_agent,
    progress::{agent_entry, entry_summary, metric_values, run_in},
    slurm_up, slurm_wait_gone,
};
use pipetrace_semconv::metric;
use serde_json::Value;

const TASKS: usize = 6;

/// What the run's records say now: tasks submitted, completed, and (grid jobs) submitted,
/// not completed and not begun.
#[derive(Debug, PartialEq, Eq)]
struct Records {
    submitted: u64,
    completed: u64,
    waiting: u64,
}

/// The work directory a `… workDir: DIR` message names.
fn work_dir(line: &str) -> Option<PathBuf> {
    let (_, rest) = line.rsplit_once("workDir: ")?;
    Some(PathBuf::from(rest.split([' ', ']']).next()?))
}

fn records(launch: &Path) -> Records {
    let log = std::fs::read_to_string(launch.join(".nextflow.log")).unwrap_or_default();
    let submitted = log.lines().filter(|l| l.contains("] Submitted process > "));
    let completed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" - Task completed > "))
        .collect();
    let ended: BTreeSet<PathBuf> = completed.iter().filter_map(|l| work_dir(l)).collect();
    let grid = (log.lines())
        .filter(|l| l.contains("[SLURM] submitted process "))
        .filter_map(work_dir);
    let waiting = grid
        .filter(|d| !ended.contains(d) && !d.join(".command.begin").exists())
        .count();
    Records {
        submitted: submitted.count() as u64,
        completed: completed.len() as u64,
        waiting: waiting as u64,
    }
}

/// The agent's counts of a run: done, total, queued.
fn counts(now: &Value) -> Option<Records> {
    Some(Records {
        submitted: now["total"].as_u64()?,
        completed: now["done"].as_u64()?,
        waiting: now["queued"].as_u64()?,
    })
}

/// The process every task of `name` runs: named after the test's process, so that its Slurm
/// jobs (`nf-<PROCESS>_(<tag>)`) are this test's.
fn process_of(name: &str) -> String {
    let kind = if name.contains("slurm") {
        "SLURM"
    } else {
        "LOCAL"
    };
    format!("STEP_{kind}_{}", std::process::id())
}

/// Nextflow running pipeline `name` in `launch` (six tasks of `script`), with `args`; Slurm's
/// queue and the jobs' `.exitcode` polled every second.
fn start(launch: &Path, name: &str, script: &str, args: &[&str]) -> Child {
    let process = process_of(name);
    let pipeline = format!(
        "process {process} {{\n    tag \"s${{i}}\"\n    input:\n    val i\n    script:\n    \
         \"\"\"\n    {script}\n    \"\"\"\n}}\n\nworkflow {{\n    {process}(Channel.of(0..{}))\n}}\n",
        TASKS - 1
    );
    std::fs::write(launch.join(name), pipeline).unwrap();
    let config = "executor {\n    pollInterval = '1 sec'\n    queueStatInterval = '1 sec'\n}\n";
    std::fs::write(launch.join("nextflow.config"), config).unwrap();
    Command::new(nextflow::launcher())
        .args(["run", name])
        .args(args)
        .current_dir(launch)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls until the agent's view of run `name` and the records agree at a moment `wanted`
/// holds; the view then, or a panic with what both said.
fn agreed(
    agent: &Agent,
    name: &str,
    launch: &Path,
    run: &mut Child,
    wanted: fn(&Records) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = Vec::new();
    while Instant::now() < deadline && run.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(250));
        // The agent's view is of a moment between these two looks at the records.
        let before = records(launch);
        let entry = agent_entry(agent.pid());
        let now = entry.as_ref().and_then(|e| run_in(e, name));
        let after = records(launch);
        let seen = now.as_ref().and_then(counts);
        let also = match now {
            Some(_) => String::new(),
            None => format!(" ({})", entry_summary(entry.as_ref())),
        };
        last.push(format!("{before:?} <= {seen:?} <= {after:?}{also}"));
        if let (Some(now), Some(seen)) = (now, seen)
            && [&before, &after].contains(&&seen)
            && wanted(&seen)
        {
            return now;
        }
    }
    // What it lost, if anything: its entry in the node's registry says.
    let entry = std::fs::read_to_string(format!("/run/pipetrace/agents/{}.json", agent.pid()));
    panic!(
        "the agent's view never matched the run's records:\n{}\nits registry entry: {}\n\
         the agent logged:\n{}",
        last.join("\n"),
        entry.unwrap_or_default(),
        agent
            .said()
            .iter()
            .rev()
            .take(40)
            .rev()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn status_counts_a_local_run_as_its_log_does_while_tasks_wait_for_a_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(dir.path(), "agent", "metrics:\n  interval: 500ms\n");
    let name = format!("progress-{}.nf", std::process::id());
    // Tasks of 6 s: each stage of the run (some done, not all submitted) lasts several of the
    // test's looks (each up to a few seconds on a busy machine).
    let mut run = start(dir.path(), &name, "sleep 6", &["-process.maxForks=2"]);
    // Some done, not all submitted: Nextflow logs a task only as a slot frees for it.
    let now = agreed(&agent, &name, dir.path(), &mut run, |r| {
        r.completed >= 1 && r.submitted < TASKS as u64
    });
    let (done, total) = (
        now["done"].as_u64().unwrap(),
        now["total"].as_u64().unwrap(),
    );
    assert_eq!(now["queued"], 0, "a local task runs once submitted: {now}");
    assert_eq!(now["running"].as_u64(), Some(total - done), "{now}");
    assert!(total - done <= 2, "maxForks 2: {now}");
    assert!(run.wait().unwrap().success());
    agent.stop();
    // The metrics carried the log's counts as they grew, to all six done.
    let of = |m: &str| metric_values(&out, &name, m);
    let (totals, dones) = (of(metric::TASKS_TOTAL), of(metric::TASKS_DONE));
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{totals:?}");
    assert!(dones.windows(2).all(|w| w[0] <= w[1]), "{dones:?}");
    assert!(totals.iter().any(|t| *t < TASKS as f64), "{totals:?}");
    assert_eq!(totals.last(), Some(&(TASKS as f64)), "{totals:?}");
    assert!(dones.last().is_some_and(|d| *d >= 4.0), "{dones:?}");
    assert!(of(metric::TASKS_QUEUED).iter().all(|q| *q == 0.0));
}

#[test]
fn status_counts_jobs_pending_in_slurm_as_queued() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(dir.path(), "agent", "metrics:\n  interval: 500ms\n");
    let name = format!("progress-slurm-{}.nf", std::process::id());
    // More jobs than the single node has CPUs: some wait in Slurm.
    let mut run = start(
        dir.path(),
        &name,
        "sleep 4",
        &["-process.executor=slurm", "-executor.queueSize=10"],
    );
    let now = agreed(&agent, &name, dir.path(), &mut run, |r| {
        r.submitted == TASKS as u64 && r.waiting >= 1
    });
    let (done, total) = (
        now["done"].as_u64().unwrap(),
        now["total"].as_u64().unwrap(),
    );
    let queued = now["queued"].as_u64().unwrap();
    assert_eq!(
        now["running"].as_u64(),
        Some(total - done - queued),
        "the jobs begun run, though no process of theirs is the head's: {now}"
    );
    let ok = run.wait().unwrap().success();
    let jobs: Vec<String> = (0..TASKS)
        .map(|i| format!("nf-{}_(s{i})", process_of(&name)))
        .collect();
    slurm_wait_gone(&["-n", &jobs.join(",")]);
    agent.stop();
    assert!(ok);
    let queued_seen = metric_values(&out, &name, metric::TASKS_QUEUED);
    assert!(queued_seen.iter().any(|q| *q >= 1.0), "{queued_seen:?}");
    let totals = metric_values(&out, &name, metric::TASKS_TOTAL);
    assert_eq!(totals.last(), Some(&(TASKS as f64)), "{totals:?}");
}
