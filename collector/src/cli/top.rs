//! `pipetrace status` and `pipetrace top`: what the node's running agents see running now,
//! read from what each agent writes beside its entry in the node's registry (no network, the
//! agent's own file permissions). `status` prints it once, as text or JSON; `top` keeps it
//! on a full screen, updated every second, one run selected and shown whole.
use std::{io::Write, time::Duration};

use crossterm::{
    QueueableCommand,
    cursor::{Hide, MoveTo, Show},
    event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen},
};
use serde::Serialize;

use crate::{live_view as live, registry::AgentStatus};

/// How long an agent may take to answer (it writes its runs every 2 s while asked).
const ANSWER: Duration = Duration::from_secs(3);

/// One running agent and its runs now.
#[derive(Serialize)]
struct AgentNow {
    pid: u32,
    mode: String,
    exporting_to: String,
    runs: Vec<live::Now>,
    /// Why its runs cannot be shown (not written yet, not readable).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Every running agent's runs, each waited for up to `wait`; the error says why there are
/// none to show.
fn agents(wait: Duration) -> Result<Vec<AgentNow>, String> {
    let running = AgentStatus::running();
    if running.is_empty() {
        return Err(format!(
            "no pipetrace agent runs on this node (none registered in {}): start one with \
             `pipetrace agent` (or `systemctl start pipetrace`)",
            crate::registry::REGISTRY
        ));
    }
    let pids: Vec<u32> = running.iter().map(|(_, s)| s.pid).collect();
    let answers = crate::registry::read_runs(&pids, wait);
    let mut out = Vec::new();
    for ((_, s), answer) in running.into_iter().zip(answers) {
        let (runs, note) = match answer {
            Ok(runs) => (runs, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        out.push(AgentNow {
            pid: s.pid,
            mode: s.mode,
            exporting_to: s.exporting_to,
            runs,
            note,
        });
    }
    Ok(out)
}

/// The text of every agent's runs; the run at `selected` (counted over all agents) whole,
/// the others with their first few tasks.
fn text(agents: &[AgentNow], selected: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    for a in agents {
        out.push(format!(
            "agent pid {} ({}), exporting to {}: {} runs",
            a.pid,
            a.mode,
            a.exporting_to,
            a.runs.len()
        ));
        out.extend(a.note.iter().map(|n| format!("  ({n})")));
        for run in &a.runs {
            let whole = selected.is_none_or(|s| s == i);
            let mut lines = live::lines(run, usize::MAX, if whole { usize::MAX } else { 3 });
            if selected == Some(i) {
                lines[0] = format!("> {}", lines[0]);
            }
            out.extend(lines);
            i += 1;
        }
    }
    out
}

/// `pipetrace status [--json]`.
pub(crate) fn status(json: bool) -> i32 {
    match agents(ANSWER) {
        Ok(a) if json => match serde_json::to_string_pretty(&a) {
            Ok(s) => {
                outln!("{s}");
                0
            }
            Err(e) => {
                errln!("pipetrace: {e}");
                1
            }
        },
        Ok(a) => {
            outln!("{}", text(&a, None).join("\n"));
            0
        }
        Err(e) => {
            // A script reads "no agent" as the empty list; the exit status says it too.
            if json {
                outln!("[]");
            }
            errln!("pipetrace: {e}");
            1
        }
    }
}

/// `pipetrace top`: up and down choose a run, q (or Ctrl-C) quits.
pub(crate) fn top() -> i32 {
    if AgentStatus::running().is_empty() {
        let e = agents(Duration::ZERO).err().unwrap_or_default();
        errln!("pipetrace: {e}");
        return 1;
    }
    let mut out = std::io::stdout();
    if terminal::enable_raw_mode().is_err() {
        errln!("pipetrace: top needs a terminal: use `pipetrace status` for a one-off look");
        return super::EXIT_USAGE;
    }
    let _ = out.queue(EnterAlternateScreen).and_then(|o| o.queue(Hide));
    let mut selected = 0usize;
    let code = loop {
        let agents = agents(Duration::from_millis(300)).unwrap_or_default();
        let runs: usize = agents.iter().map(|a| a.runs.len()).sum();
        selected = selected.min(runs.saturating_sub(1));
        let (width, height) = terminal::size().unwrap_or((80, 24));
        let mut lines = text(&agents, Some(selected));
        lines.push(String::new());
        lines.push("↑/↓ choose a run · q quits".into());
        let _ = out.queue(Clear(ClearType::All));
        for (row, l) in lines.iter().take(usize::from(height)).enumerate() {
            let cut: String = l.chars().take(usize::from(width)).collect();
            let _ = out.queue(MoveTo(0, row as u16)).map(|o| write!(o, "{cut}"));
        }
        // A screen nobody reads any more (stdout a closed pipe, SIGPIPE ignored): done.
        if out.flush().is_err() {
            break 0;
        }
        match key(Duration::from_secs(1)) {
            Some(KeyCode::Up) => selected = selected.saturating_sub(1),
            Some(KeyCode::Down) => selected += 1,
            Some(KeyCode::Char('q')) => break 0,
            Some(KeyCode::Null) => break 130,
            _ => {}
        }
    };
    let _ = out.queue(Show).and_then(|o| o.queue(LeaveAlternateScreen));
    let _ = out.flush();
    let _ = terminal::disable_raw_mode();
    code
}

/// A key pressed within `wait`, Ctrl-C as `Null`.
fn key(wait: Duration) -> Option<KeyCode> {
    if !event::poll(wait).ok()? {
        return None;
    }
    match event::read().ok()? {
        Event::Key(k) if k.kind == KeyEventKind::Press => {
            let ctrl_c =
                k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
            Some(if ctrl_c { KeyCode::Null } else { k.code })
        }
        _ => None,
    }
}
