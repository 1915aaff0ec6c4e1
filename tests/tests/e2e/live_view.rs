//! The live view of `pipetrace run` in a real terminal (tmux): the first line says what is
//! traced and where the data goes; while the command runs, the terminal's last lines name
//! the running task as its span will and update; the command's output scrolls above them
//! intact, and at the end nothing of the view is left. Off a terminal, nothing is drawn.
use std::{process::Command, time::Duration};

use pipetrace_e2e::{pipetrace, pipetrace_bin, read_jsonl, stderr};

const ROWS: usize = 30;

struct Tmux(String);

impl Tmux {
    fn start(command: &str) -> Self {
        let name = format!("pipetrace-live-{}", std::process::id());
        let st = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "150", "-y"])
            .arg(ROWS.to_string())
            .arg(command)
            .status()
            .expect("tmux");
        assert!(st.success());
        Self(name)
    }

    /// The screen, with `history` lines of scrollback above it.
    fn screen(&self, history: usize) -> Vec<String> {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0, "-S"])
            .arg(format!("-{history}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// The numbers of the `out-line-N` lines on a screen, in screen order.
fn out_lines(screen: &[String]) -> Vec<u32> {
    (screen.iter())
        .filter_map(|l| l.trim().strip_prefix("out-line-")?.parse().ok())
        .collect()
}

#[test]
fn the_live_view_updates_below_the_commands_output_and_leaves_it_intact() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.otlp.jsonl");
    let done = dir.path().join("done");
    let job = "for i in 1 2 3 4 5 6 7 8; do echo out-line-$i; sleep 1; done";
    let command = format!(
        "{} run -o {} -- sh -c '{job}'; touch {}; sleep 60",
        pipetrace_bin().display(),
        trace.display(),
        done.display()
    );
    let tmux = Tmux::start(&command);
    let mut views = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(700));
        let screen = tmux.screen(0);
        // The command's output so far, in order, and never below the view's first line.
        let view_at = screen.iter().position(|l| l.starts_with("pipetrace ▸"));
        if let Some(at) = view_at {
            let outs = out_lines(&screen[..at]);
            assert!(outs.windows(2).all(|w| w[1] == w[0] + 1), "{screen:#?}");
            assert!(out_lines(&screen[at..]).is_empty(), "{screen:#?}");
            assert!(at >= ROWS - 10, "the view is at the bottom: {screen:#?}");
            views.push(screen[at..].join("\n"));
        }
    }
    assert!(done.exists(), "the run ended");
    // It updated: at least two different views, each naming a running task.
    views.dedup();
    assert!(views.len() >= 2, "{views:#?}");
    let spans = read_jsonl(&trace);
    let task = spans.iter().find(|s| s.is_task()).expect("the task span");
    let named = format!("  {}", task.str("cicd.pipeline.task.name"));
    assert!(
        views
            .iter()
            .any(|v| v.contains("1 running") && v.contains(&named)),
        "the view names the running task as its span does ({named}): {views:#?}"
    );
    // At the end: every line of the command's output once, in order, and no view left.
    let end = tmux.screen(200);
    assert_eq!(out_lines(&end), (1..=8).collect::<Vec<_>>(), "{end:#?}");
    assert!(
        !end.iter().any(|l| l.starts_with("pipetrace ▸")),
        "{end:#?}"
    );
    let first = end.iter().find(|l| l.starts_with("pipetrace: tracing"));
    let first = first.unwrap_or_else(|| panic!("the first line: {end:#?}"));
    assert!(first.contains(&trace.display().to_string()), "{first}");
    let tasks = spans.iter().filter(|s| s.is_task()).count();
    let summary = format!("pipetrace: {tasks} tasks (0 failed)");
    assert!(end.iter().any(|l| l.starts_with(&summary)), "{end:#?}");
}

#[test]
fn off_a_terminal_only_the_first_line_and_the_summary_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .arg("run")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "sleep 2.5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stderr(&o);
    assert!(text.starts_with("pipetrace: tracing `sh -c"), "{text}");
    assert!(
        !text.contains("pipetrace ▸") && !text.contains('\x1b'),
        "{text}"
    );
}
