//! The comparison for a terminal: a row per matched task (A → B, a `*` on what moved), then
//! for each task that moved its moves with their noise and the tools that explain them.
use std::fmt::Write as _;

use super::{Basis, Comparison, FigureChange, Metric, TaskChange, ToolChange};
use pipetrace_core::diagnosis::gib;

/// A figure in its unit.
pub(crate) fn value(m: Metric, v: f64) -> String {
    match m {
        _ if m.is_bytes() => gib(v.max(0.0) as u64),
        Metric::Cost => format!("{v:.4}"),
        _ => format!("{v:.2}s"),
    }
}

/// A signed change in its unit.
pub(crate) fn delta(m: Metric, d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    format!("{sign}{}", value(m, d.abs()))
}

/// Where the noise came from, in words.
pub(crate) fn basis(f: &FigureChange) -> String {
    match &f.verdict.basis {
        Basis::History { runs, .. } => format!("spread of {runs} earlier runs"),
        Basis::Floor => "floor".into(),
    }
}

const COLUMNS: [Metric; 4] = [
    Metric::Wall,
    Metric::Cpu,
    Metric::PeakMemory,
    Metric::DiskWrite,
];

fn cell(t: &TaskChange, m: Metric) -> String {
    match t.figures.iter().find(|f| f.metric == m) {
        Some(f) => format!(
            "{}→{}{}",
            value(m, f.a),
            value(m, f.b),
            if f.verdict.moved { "*" } else { "" }
        ),
        None => "-".into(),
    }
}

pub fn render(c: &Comparison, out: &mut String) {
    for (side, s) in [("A", &c.a), ("B", &c.b)] {
        let status = if s.failed { "  failed" } else { "" };
        let _ = writeln!(out, "{side}: {}  {}{status}", s.label, s.name);
    }
    let by = c.history.as_deref().map_or_else(
        || "the measurement floors (no history of these tasks)".to_string(),
        |h| format!("the history of {h} where a task has 3+ earlier runs, else the floors"),
    );
    let _ = writeln!(out, "noise judged by {by}; * moved beyond noise\n");
    let _ = writeln!(
        out,
        "{:<28} {:>18} {:>18} {:>20} {:>20} {:>7}",
        "task", "wall", "cpu", "peak mem", "disk write", "failed"
    );
    for t in &c.tasks {
        let mark = if t.moved { "!" } else { " " };
        let name = format!("{mark}{}", short(&row_name(t), 27));
        let [w, u, p, d] = COLUMNS.map(|m| cell(t, m));
        let failed = format!("{}→{}", t.failed.0, t.failed.1);
        let _ = writeln!(
            out,
            "{name:<28} {w:>18} {u:>18} {p:>20} {d:>20} {failed:>7}"
        );
    }
    for t in c.tasks.iter().filter(|t| t.moved) {
        moves(t, out);
    }
    for (side, names) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !names.is_empty() {
            let _ = writeln!(
                out,
                "\nonly in {side}: {}",
                super::listed(names.iter().map(String::as_str))
            );
        }
    }
    for (side, s) in [("A", &c.a), ("B", &c.b)] {
        if s.who.tells() {
            let _ = write!(out, "\n{side}, by who:");
            s.who.render(out);
        }
    }
    findings(c, out);
    if let Some(m) = &c.machines {
        for (side, s) in [("A", &m.a), ("B", &m.b)] {
            if let Some(s) = s {
                let _ = writeln!(out, "\n{side}, machines:");
                crate::sizing::text(s, out);
            }
        }
    }
    match c.moved.len() {
        0 => out.push_str("\nnothing moved beyond noise\n"),
        n => {
            let _ = writeln!(
                out,
                "\n{n} task(s) moved beyond noise: {}",
                super::listed(c.moved.iter().map(String::as_str))
            );
        }
    }
}

/// The runs' findings that differ: B's new ones first (the judgement's words), then A's
/// that B no longer has; those both runs share are counted.
fn findings(c: &Comparison, out: &mut String) {
    let f = &c.findings;
    for (title, list) in [
        ("findings new in B", &f.new_in_b),
        ("gone in B", &f.gone_in_b),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title}:");
        for x in list.iter().take(20) {
            let who = x.job.as_deref().map_or(String::new(), |j| format!("{j}: "));
            let _ = writeln!(out, "  {:<10} {who}{}", x.kind, x.text);
        }
        if list.len() > 20 {
            let _ = writeln!(out, "  … and {} more", list.len() - 20);
        }
    }
    if !f.both.is_empty() {
        let n = f.both.len();
        let _ = writeln!(out, "\nfindings in both runs: {n} (see each run's report)");
    }
}

/// A row's name: the task's, with B's where its wildcards changed.
pub(crate) fn row_name(t: &TaskChange) -> String {
    match &t.b_name {
        Some(b) => format!("{} → {b}", t.name),
        None => t.name.clone(),
    }
}

fn short(s: &str, n: usize) -> String {
    match s.chars().count() <= n {
        true => s.to_string(),
        false => s.chars().take(n - 1).chain(['…']).collect(),
    }
}

/// A task's moves and its tools that changed, under the table.
fn moves(t: &TaskChange, out: &mut String) {
    let _ = writeln!(out, "\n{}", t.name);
    if let Some(e) = &t.new_failure {
        let _ = writeln!(out, "  failed in B only: {e}");
    }
    for f in t.moved_figures() {
        let _ = writeln!(
            out,
            "  {:<10} {} → {} ({}; noise {} by {})",
            f.metric.label(),
            value(f.metric, f.a),
            value(f.metric, f.b),
            delta(f.metric, f.b - f.a),
            value(f.metric, f.verdict.noise),
            basis(f)
        );
    }
    for tool in t.explaining().take(5) {
        let _ = writeln!(out, "  tool {}", tool_line(tool));
    }
}

/// One tool's change in words.
pub(crate) fn tool_line(t: &ToolChange) -> String {
    use super::Change::*;
    let what = match t.change {
        New => "new in B",
        Gone => "gone in B",
        Slower => "slower",
        Faster => "faster",
        MoreIoWait => "more I/O wait",
        Same => "same",
    };
    let moved: Vec<String> = (t.moved.iter())
        .filter_map(|m| {
            let (a, b) = (t.a.as_ref()?.get(m)?, t.b.as_ref()?.get(m)?);
            Some(format!("{} {}→{}", m.label(), value(*m, *a), value(*m, *b)))
        })
        .collect();
    let detail = match (moved.is_empty(), &t.a, &t.b) {
        (false, _, _) => moved.join(", "),
        (true, None, Some(f)) | (true, Some(f), None) => {
            let cpu = f.get(&Metric::Cpu).copied().unwrap_or(0.0);
            format!("cpu {}", value(Metric::Cpu, cpu))
        }
        _ => String::new(),
    };
    format!("{} {what}: {detail} ({:+.2}s busy)", t.name, t.extra_s)
}
