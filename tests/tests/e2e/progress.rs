//! Queued, running and done while a Snakemake run goes: `pipetrace status` and the live
//! metrics count them as Snakemake's own log does (`N of M steps (P%) done`).
use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    own_agent, pipetrace,
    progress::{metric_values, status_of},
    snakemake::latest_log,
    stderr,
};
use pipetrace_semconv::{attr, metric};

/// What Snakemake's log says last: (done, total).
fn log_progress(workdir: &Path) -> Option<(u32, u32)> {
    let log = std::fs::read_to_string(latest_log(workdir)?).ok()?;
    let last = log.lines().rev().find(|l| l.ends_with("%) done"))?;
    let (counts, _) = last.split_once(" steps (")?;
    let (done, total) = counts.split_once(" of ")?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

#[test]
fn status_and_metrics_count_queued_running_and_done_as_snakemakes_log_does() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(dir.path(), "agent", "metrics:\n  interval: 500ms\n");
    let name = format!("progress-{}", std::process::id());
    let wf = dir.path().join(&name);
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(
        wf.join("Snakefile"),
        "rule all:\n    input: expand('out/{i}.txt', i=range(6))\n\
         rule step:\n    output: 'out/{i}.txt'\n    shell: 'sleep 2.5; echo {wildcards.i} > {output}'\n",
    )
    .unwrap();
    let mut run = Command::new("snakemake")
        .args(["--cores", "1"])
        .current_dir(&wf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // A moment where the agent's view and Snakemake's log agree on what is done: then the
    // queued are those neither done nor running, one at a time with --cores 1.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut seen, mut last) = (None, Vec::new());
    while seen.is_none() && Instant::now() < deadline && run.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(250));
        let (now, log) = (status_of(agent.pid(), &name), log_progress(&wf));
        last.push(format!("{now:?} / {log:?}"));
        let (Some(now), Some((done, total))) = (now, log) else {
            continue;
        };
        let running = now["tasks"].as_array().map_or(0, Vec::len) as u64;
        if now["done"] == done && done >= 1 && running == 1 {
            seen = Some((now, done, total));
        }
    }
    let (now, done, total) = seen.unwrap_or_else(|| {
        panic!(
            "the agent's view never matched Snakemake's log:\n{}",
            last.join("\n")
        )
    });
    // Six jobs and the target rule `all`.
    assert_eq!(total, 7);
    assert_eq!(now["total"], total, "{now}");
    assert_eq!(
        now["queued"].as_u64().unwrap_or(u64::MAX),
        u64::from(total - done - 1),
        "{now}"
    );
    // No history yet: the time left is the tasks not done at the pace of those done.
    let elapsed = now["elapsed_s"].as_f64().unwrap();
    let pace = elapsed / f64::from(done) * f64::from(total - done);
    let left = now["left_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no time left: {now}"));
    assert!((left - pace).abs() < 1e-6, "{left} against {pace}: {now}");
    assert!(run.wait().unwrap().success());
    agent.stop();
    // The live metrics carried the same counts.
    let of = |m: &str| metric_values(&out, &name, m);
    assert!(
        of(metric::TASKS_TOTAL).iter().all(|v| *v == 7.0) && !of(metric::TASKS_TOTAL).is_empty()
    );
    assert!(
        of(metric::TASKS_QUEUED).iter().any(|v| *v >= 1.0),
        "{:?}",
        of(metric::TASKS_QUEUED)
    );
    let done_seen = of(metric::TASKS_DONE);
    assert!(
        done_seen.windows(2).all(|w| w[0] <= w[1]),
        "done never goes back: {done_seen:?}"
    );
    assert!(done_seen.last().is_some_and(|d| *d >= 5.0), "{done_seen:?}");
    // The run span says how far it got as Snakemake's log last said.
    let (done, total) = log_progress(&wf).expect("Snakemake's last count");
    let spans = pipetrace_e2e::read_jsonl(&out);
    let run = (spans.iter())
        .find(|s| s.is_run() && s.str(attr::CICD_PIPELINE_NAME) == name)
        .expect("the run span");
    assert_eq!(
        run.int(attr::RUN_TASKS_PLANNED),
        Some(i64::from(total)),
        "{run:?}"
    );
    assert_eq!(
        run.int(attr::RUN_TASKS_DONE),
        Some(i64::from(done)),
        "{run:?}"
    );
}

/// The expected end of a run: from the fourth run of a pipeline on, its `run started` span
/// carries what its last runs took (the median of the first three, as their run spans say).
#[test]
fn a_run_started_span_carries_what_the_pipelines_runs_usually_take() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(format!("usual-{}", std::process::id()));
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(
        wf.join("Snakefile"),
        "rule all:\n    input: 'a.txt'\nrule a:\n    output: 'a.txt'\n    shell: 'sleep 2; touch {output}'\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let mut runs = Vec::new();
    for i in 0..4 {
        let file = dir.path().join(format!("t{i}.otlp.jsonl"));
        let o = pipetrace()
            .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
            // Sampled often: the run is announced while its task runs, named once a second
            // old (a younger task is not named yet): the task runs a second more.
            .env("PIPETRACE_METRICS__INTERVAL", "250ms")
            .args(["run", "--output"])
            .arg(&file)
            .args(["--", "snakemake", "--cores", "1", "--forceall"])
            .current_dir(&wf)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        runs.push(pipetrace_e2e::read_jsonl(&file));
    }
    let started = |spans: &[pipetrace_e2e::spans::RecvSpan]| {
        let found = (spans.iter()).find(|s| s.name == "run started").cloned();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        found.unwrap_or_else(|| panic!("a run started span among {names:?}"))
    };
    for earlier in &runs[..3] {
        let s = started(earlier);
        assert_eq!(
            s.num(attr::HISTORY_USUAL_DURATION),
            None,
            "too few runs yet: {s:?}"
        );
    }
    let mut walls: Vec<f64> = (runs[..3].iter())
        .map(|spans| {
            let r = spans.iter().find(|s| s.is_run()).expect("the run span");
            (r.end - r.start) as f64 / 1e9
        })
        .collect();
    walls.sort_by(f64::total_cmp);
    let s = started(&runs[3]);
    let usual = s.num(attr::HISTORY_USUAL_DURATION).expect("the usual");
    assert!((usual - walls[1]).abs() < 1e-3, "{usual} against {walls:?}");
}
