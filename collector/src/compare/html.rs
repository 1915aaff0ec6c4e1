//! The comparison as a self-contained HTML page, styled as the report's: the runs, a table of
//! tasks with what moved in red, then per moved task its moves and tools. Every text escaped.
use std::fmt::Write as _;

use super::{
    Comparison, Metric, TaskChange,
    table::{basis, delta, row_name, tool_line, value},
};
use crate::report::esc;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}\
    table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:4px 8px;\
    text-align:right}td:first-child,th:first-child{text-align:left}\
    .moved{color:#d9534f;font-weight:bold}.quiet{color:#888}";

const COLUMNS: [Metric; 8] = [
    Metric::Wall,
    Metric::Cpu,
    Metric::PeakMemory,
    Metric::DiskRead,
    Metric::DiskWrite,
    Metric::RunQueueDelay,
    Metric::DiskWait,
    Metric::Cost,
];

pub fn render(c: &Comparison) -> String {
    let title = format!("compare {} with {}", c.a.label, c.b.label);
    let mut out = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}\
         </style></head><body><h1>{t}</h1><ul>",
        t = esc(&title)
    );
    for (side, s) in [("A", &c.a), ("B", &c.b)] {
        let failed = if s.failed {
            " — <span class=\"moved\">failed</span>"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<li>{side}: {} — {} <span class=\"quiet\">trace {}</span>{failed}</li>",
            esc(&s.label),
            esc(&s.name),
            esc(&s.trace)
        );
    }
    let by = c.history.as_ref().map_or_else(
        || "the measurement floors (no history of these tasks)".to_string(),
        |h| {
            format!(
                "the history of {} where a task has 3+ earlier runs, else the floors",
                esc(h)
            )
        },
    );
    let _ = write!(out, "</ul><p>Noise judged by {by}. Each cell: A → B.</p>");
    tasks_table(c, &mut out);
    findings(c, &mut out);
    for t in c.tasks.iter().filter(|t| t.moved) {
        moved_task(t, &mut out);
    }
    for (side, names) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !names.is_empty() {
            let items: String = names
                .iter()
                .map(|n| format!("<li>{}</li>", esc(n)))
                .collect();
            let _ = write!(out, "<h2>Only in {side}</h2><ul>{items}</ul>");
        }
    }
    for (side, s) in [("A", &c.a), ("B", &c.b)] {
        if !s.who.is_empty() {
            let _ = write!(out, "<h2>{side}</h2>{}", s.who.html());
        }
    }
    if let Some(m) = &c.machines {
        for (side, s) in [("A", &m.a), ("B", &m.b)] {
            if let Some(s) = s {
                let _ = write!(out, "<h2>{side}: machines</h2>{}", crate::sizing::html(s));
            }
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn tasks_table(c: &Comparison, out: &mut String) {
    out.push_str("<table><tr><th>task</th>");
    for m in COLUMNS {
        let _ = write!(out, "<th>{}</th>", esc(m.label()));
    }
    out.push_str("<th>failed</th></tr>");
    for t in &c.tasks {
        let class = if t.moved { "moved" } else { "" };
        let _ = write!(out, "<tr><td class=\"{class}\">{}</td>", esc(&row_name(t)));
        for m in COLUMNS {
            match t.figures.iter().find(|f| f.metric == m) {
                Some(f) => {
                    let class = if f.verdict.moved { "moved" } else { "" };
                    let _ = write!(
                        out,
                        "<td class=\"{class}\">{} → {}</td>",
                        esc(&value(m, f.a)),
                        esc(&value(m, f.b))
                    );
                }
                None => out.push_str("<td class=\"quiet\">-</td>"),
            }
        }
        let _ = write!(out, "<td>{} → {}</td></tr>", t.failed.0, t.failed.1);
    }
    out.push_str("</table>");
}

fn moved_task(t: &TaskChange, out: &mut String) {
    let _ = write!(out, "<h2>{}</h2><ul>", esc(&row_name(t)));
    if let Some(e) = &t.new_failure {
        let _ = write!(out, "<li class=\"moved\">failed in B only: {}</li>", esc(e));
    }
    for f in t.moved_figures() {
        let _ = write!(
            out,
            "<li>{}: {} → {} ({}; noise {} by {})</li>",
            esc(f.metric.label()),
            esc(&value(f.metric, f.a)),
            esc(&value(f.metric, f.b)),
            esc(&delta(f.metric, f.b - f.a)),
            esc(&value(f.metric, f.verdict.noise)),
            esc(&basis(f))
        );
    }
    let tools: Vec<String> = t
        .explaining()
        .take(10)
        .map(|x| format!("<li>{}</li>", esc(&tool_line(x))))
        .collect();
    if !tools.is_empty() {
        let _ = write!(
            out,
            "</ul><p>Tools that explain it:</p><ul>{}",
            tools.concat()
        );
    }
    out.push_str("</ul>");
}

/// B's findings A had not, then A's B no longer has, in the judgement's words.
fn findings(c: &Comparison, out: &mut String) {
    let f = &c.findings;
    for (title, list) in [
        ("Findings new in B", &f.new_in_b),
        ("Gone in B", &f.gone_in_b),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = write!(out, "<h2>{title}</h2><ul>");
        for x in list {
            let who = x
                .job
                .as_deref()
                .map_or(String::new(), |j| format!("{}: ", esc(j)));
            let _ = write!(
                out,
                "<li><b>{}</b> {who}{}</li>",
                esc(&x.kind),
                esc(&x.text)
            );
        }
        out.push_str("</ul>");
    }
}
