//! The per-task table: one row per task name, as the terminal prints it.
use std::fmt::Write as _;

use super::units::bytes;
use pipetrace_core::judgement::Advice;

use crate::report::{markup::esc, table::Table};

/// The table by task name, with the judgement's advice.
pub(crate) fn render(table: &Table, advice: &Advice, out: &mut String) {
    let rows = table.rows(advice);
    // A column only where some task has something in it.
    let gpu = table.has_gpu();
    let verdict = rows.iter().any(|r| r.bottleneck != "-");
    let failed = rows.iter().any(|r| r.failed > 0);
    let advice = rows.iter().any(|r| r.advice != "-");
    let th = |on: bool, h: &str| {
        if on {
            format!("<th>{h}</th>")
        } else {
            String::new()
        }
    };
    let _ = write!(
        out,
        "<h2 id=\"tasks\">Tasks</h2><div class=\"scroll\"><table><tr><th>task</th><th>jobs</th>\
         <th>wall s</th><th>cpu s</th><th>peak memory</th>{}<th>disk I/O</th>{}{}{}</tr>",
        th(gpu, "GPU busy, memory"),
        th(verdict, "bottleneck"),
        th(failed, "failed"),
        th(advice, "advice"),
    );
    for r in &rows {
        let td = |on: bool, v: String| {
            if on {
                format!("<td>{}</td>", esc(&v))
            } else {
                String::new()
            }
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td>{}<td>{}</td>{}{}{}\
             </tr>",
            esc(r.name),
            r.jobs,
            r.wall,
            r.cpu,
            bytes(r.peak as f64),
            td(gpu, r.gpu.clone().unwrap_or_else(|| "-".into())),
            bytes(r.disk as f64),
            td(verdict, r.bottleneck.to_string()),
            td(failed, r.failed.to_string()),
            match advice {
                true => format!("<td class=\"wrap\">{}</td>", esc(&r.advice)),
                false => String::new(),
            },
        );
    }
    out.push_str("</table></div>");
}
