//! Exit and failure as a user expects them: the run's status follows the command's exit
//! code, a process the pipeline stopped on purpose is no failure, builtins name nothing, and
//! when `pipetrace run` is told to stop, the command's whole tree stops with it.
use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{pipetrace, read_jsonl, spans::RecvSpan, stderr};

fn traced(dir: &Path, script: &str) -> (std::process::Output, Vec<RecvSpan>) {
    let (spans, o) = pipetrace_e2e::run_shell(dir, "bash", script, &[]);
    (o, spans)
}

#[test]
fn a_background_job_the_script_stops_on_purpose_is_no_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (o, spans) = traced(
        dir.path(),
        "sleep 30 & p=$!; sleep 0.3; kill $p; wait $p; /bin/true; exit 0",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stderr(&o);
    assert!(!text.contains("FAILED"), "nothing failed: {text}");
    assert!(text.contains("(0 failed)"), "{text}");
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_ne!(run.status, 2, "the command exited 0: {run:?}");
    assert_eq!(run.int("pipetrace.run.tasks_failed"), Some(0));
    let sleep = spans
        .iter()
        .find(|s| s.is_task() && s.str("process.command_line") == "sleep 30")
        .expect("the background sleep is a task");
    assert_ne!(sleep.status, 2, "stopped by its own script: {sleep:?}");
    // Recorded as ended by a signal, with who sent it.
    assert_eq!(sleep.str("pipetrace.process.signal"), "SIGTERM");
    let ev = sleep
        .events
        .iter()
        .find(|e| e.name == "pipetrace.signal")
        .expect("a signal event");
    let sender = match ev.attrs.get("pipetrace.signal.sender") {
        Some(pipetrace_e2e::spans::Val::Str(s)) => s.as_str(),
        _ => "",
    };
    assert!(
        sender.contains("bash"),
        "sent by the script's shell: {ev:?}"
    );
}

#[test]
fn a_process_that_kills_itself_has_failed() {
    let dir = tempfile::tempdir().unwrap();
    let (o, spans) = traced(dir.path(), "sh -c 'kill -TERM $$'; exit 0");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let task = spans
        .iter()
        .find(|s| s.is_task() && s.str("pipetrace.process.signal") == "SIGTERM")
        .expect("the task that killed itself");
    assert_eq!(
        task.status, 2,
        "its own signal is its own failure: {task:?}"
    );
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.int("pipetrace.run.tasks_failed"), Some(1));
}

#[test]
fn the_runs_status_follows_the_commands_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    // A task fails, the command still exits 0: the run is not an error.
    let (o, spans) = traced(dir.path(), "/bin/false; /bin/true");
    assert_eq!(o.status.code(), Some(0));
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_ne!(run.status, 2, "{run:?}");
    assert_eq!(run.int("pipetrace.run.tasks_failed"), Some(1));
    // Every task succeeds, the command exits 3: the run is an error.
    let dir = tempfile::tempdir().unwrap();
    let (o, spans) = traced(dir.path(), "/bin/true; exit 3");
    assert_eq!(o.status.code(), Some(3));
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.status_message.contains("code 3"),
        "{}",
        run.status_message
    );
}

#[test]
fn a_shell_builtin_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (o, spans) = traced(dir.path(), "kill -KILL $$");
    assert_eq!(o.status.code(), Some(137), "{}", stderr(&o));
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("cicd.pipeline.name"), "bash", "{run:?}");
    assert!(spans.iter().all(|s| s.str("pipetrace.tool.name") != "kill"));
}

/// `pipetrace run -- bash -c 'sleep 60 & sleep 60 & touch READY; wait'`, started; returns
/// once both sleeps run.
fn start_two_sleeps(dir: &Path, extra: &[&str]) -> (Child, PathBuf) {
    let out = dir.join("t.otlp.jsonl");
    let ready = dir.join("READY");
    // The sleeps keep no pipe of ours open: one left running must not hold our read of
    // pipetrace's stderr.
    let script = format!(
        "sleep 60 >/dev/null 2>&1 & sleep 60 >/dev/null 2>&1 & touch {}; wait",
        ready.display()
    );
    let child = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run"])
        .args(extra)
        .args(["--", "bash", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the script never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, out)
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with("sleep"))
}

#[test]
fn told_to_stop_the_whole_tree_stops_and_every_process_is_exported() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = start_two_sleeps(dir.path(), &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let text = stderr(&o);
    assert!(text.contains("stopped with it"), "{text}");
    let spans = read_jsonl(&out);
    let sleeps: Vec<&RecvSpan> = spans
        .iter()
        .filter(|s| s.is_tool() && s.str("pipetrace.tool.name") == "sleep")
        .collect();
    assert_eq!(sleeps.len(), 2, "both background sleeps exported: {text}");
    for s in sleeps {
        let pid = s.int("process.pid").unwrap();
        assert!(!alive(pid), "sleep {pid} was left running");
        assert_eq!(s.str("pipetrace.process.signal"), "SIGTERM", "{s:?}");
    }
}

#[test]
fn told_to_stop_with_keep_running_the_rest_runs_on_and_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = start_two_sleeps(dir.path(), &["--keep-running"]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let text = stderr(&o);
    let line = text
        .lines()
        .find(|l| l.contains("left running"))
        .unwrap_or_else(|| panic!("it says what it left running: {text}"));
    let pids: Vec<i64> = line
        .split("pids ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{line}");
    for pid in pids {
        assert!(alive(pid), "sleep {pid} keeps running");
        // SAFETY: ending the test's own leftover.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let ready = dir.path().join("READY");
    // Not the script's last command, which dash would exec in its own place.
    let script = format!("trap '' TERM; touch {}; sleep 120; true", ready.display());
    let started = Instant::now();
    let child = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--stop-grace", "1s"])
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let text = stderr(&o);
    // Not the 120 s the command would have run on, had SIGTERM been all.
    assert!(started.elapsed() < Duration::from_secs(90), "{text}");
    assert_eq!(o.status.code(), Some(128 + 9), "{text}");
    assert!(text.contains("did not end within 1s"), "{text}");
    let spans = read_jsonl(&out);
    // The command is the run's root: its span says it was killed, and by whom.
    let run = (spans.iter().find(|s| s.is_run())).unwrap_or_else(|| panic!("{spans:?}"));
    assert_eq!(run.str("pipetrace.process.signal"), "SIGKILL", "{run:?}");
    let sent = (run.events.iter()).find(|e| e.name == "pipetrace.signal");
    let sender = sent.and_then(|e| e.attrs.get("pipetrace.signal.sender"));
    assert_eq!(
        format!("{sender:?}"),
        r#"Some(Str("pipetrace"))"#,
        "{run:?}"
    );
    let sleep = (spans.iter())
        .find(|s| s.is_tool() && s.str("pipetrace.tool.name") == "sleep")
        .unwrap_or_else(|| panic!("the sleep that ignored SIGTERM too: {spans:?}"));
    let pid = sleep.int("process.pid").unwrap();
    assert!(!alive(pid), "sleep {pid} was left running");
}
