//! `pipetrace status` and `pipetrace top` show what the node's agent sees running now: two
//! pipelines running at once under one agent, each with its running task, as their spans
//! name them when they end.
use std::{process::Command, time::Duration};

use pipetrace_e2e::{
    Agent, own_agent, pipetrace, pipetrace_bin, read_jsonl, stderr, wait_for_runs, wait_until,
};

/// Two runs (run rules `first` and `second`), each a task that runs for a while.
fn two_pipelines(dir: &std::path::Path) -> (Agent, Vec<std::process::Child>, std::path::PathBuf) {
    let (agent, out) = own_agent(
        dir,
        "agent",
        "attribution:\n  run_rules:\n\
         \x20   - match: { argv: 'pipetrace-top-first' }\n      name: first\n\
         \x20   - match: { argv: 'pipetrace-top-second' }\n      name: second\n",
    );
    let runs = ["first", "second"]
        .iter()
        .map(|m| {
            Command::new("bash")
                .args(["-c", "sleep 15; true", &format!("pipetrace-top-{m}")])
                .spawn()
                .unwrap()
        })
        .collect();
    (agent, runs, out)
}

#[test]
fn status_and_top_show_two_pipelines_running_under_one_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, mut runs, out) = two_pipelines(dir.path());
    // The agent writes what runs every 2 s: until it shows both runs' tasks a second old.
    let running_for_a_second = |mine: &serde_json::Value, run: &str| {
        let runs = mine["runs"].as_array().cloned().unwrap_or_default();
        (runs.iter().find(|r| r["run"] == run))
            .and_then(|r| r["tasks"].as_array().cloned())
            .is_some_and(|t| t.iter().any(|t| t["elapsed_s"].as_f64() > Some(1.0)))
    };
    let mine = wait_until(Duration::from_secs(20), "both runs in `status`", || {
        let o = pipetrace().args(["status", "--json"]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let agents: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mine = (agents.as_array()?.iter()).find(|a| a["pid"] == agent.pid())?;
        let both = ["first", "second"]
            .iter()
            .all(|r| running_for_a_second(mine, r));
        both.then(|| mine.clone())
    });
    let runs_now = mine["runs"].as_array().unwrap();
    let running = |name: &str| {
        (runs_now.iter())
            .find(|r| r["run"] == name)
            .and_then(|r| r["tasks"].as_array().cloned())
            .unwrap_or_default()
    };
    for run in ["first", "second"] {
        let tasks = running(run);
        assert_eq!(tasks.len(), 1, "{run}: {mine:#}");
        assert!(tasks[0]["elapsed_s"].as_f64().unwrap() > 1.0, "{tasks:?}");
    }
    // top, in a real terminal, shows both.
    let session = format!("pipetrace-top-{}", std::process::id());
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "140", "-y", "30"])
        .arg(format!(
            "{} top 2> {}; echo rc=$? >> {}",
            pipetrace_bin().display(),
            dir.path().join("top.err").display(),
            dir.path().join("top.err").display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    // Until both runs show (the agent answers within 2 s of being asked).
    let mut screen = String::new();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()
            .unwrap();
        screen = String::from_utf8_lossy(&o.stdout).to_string();
        let shown = |r: &&str| screen.contains(&format!("pipetrace ▸ {r} "));
        if ["first", "second"].iter().all(shown) {
            break;
        }
    }
    let _ = Command::new("tmux")
        .args(["send-keys", "-t", &session, "q"])
        .status();
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    for r in &mut runs {
        r.wait().unwrap();
    }
    wait_for_runs(&out, &["first", "second"]);
    agent.stop();
    // Each run's task as its span names it, under its run, on top's screen.
    let spans = read_jsonl(&out);
    for run in ["first", "second"] {
        let root = (spans.iter())
            .find(|s| s.is_run() && s.str("cicd.pipeline.name") == run)
            .unwrap_or_else(|| panic!("run {run}"));
        let task = (spans.iter())
            .find(|s| s.is_task() && s.parent.as_deref() == Some(root.span_id.as_str()))
            .expect("its task");
        let named = task.str("cicd.pipeline.task.name");
        assert_eq!(
            running(run)[0]["name"],
            named,
            "status names it as its span"
        );
        let err = std::fs::read_to_string(dir.path().join("top.err")).unwrap_or_default();
        let at = (screen.find(&format!("pipetrace ▸ {run} ")))
            .unwrap_or_else(|| panic!("{screen}\n(top said: {err})"));
        assert!(screen[at..].contains(&format!("  {named} ")), "{screen}");
    }
}
