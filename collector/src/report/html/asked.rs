//! What each task asked for and used, with what to ask for next time: the judgement's
//! asks (`judgement::asks`), as a table.
use std::fmt::Write as _;

use super::units::{bytes, pct};
use pipetrace_core::judgement::asks::{Asked, next_time};

use crate::report::markup::esc;

pub(crate) fn render(
    asked: &std::collections::BTreeMap<String, Asked>,
    engine: &str,
    out: &mut String,
) {
    if asked.is_empty() {
        return;
    }
    // The memory columns only where some task had memory asked for it.
    let memory = asked.values().any(|a| a.memory.is_some());
    out.push_str(
        "<h2 id=\"asked\">Asked for and used</h2><div class=\"scroll\"><table><tr><th>task</th>\
         <th>CPUs asked</th><th>CPUs used (busiest job)</th>",
    );
    if memory {
        out.push_str("<th>memory asked</th><th>peak memory</th><th>% of memory asked</th>");
    }
    out.push_str("<th class=\"l\">ask next time</th></tr>");
    for (task, a) in asked {
        let opt = |v: Option<String>| v.unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td>",
            esc(task),
            opt(a.cpus.map(|n| format!("{n:.0}"))),
            a.cpus_used,
        );
        if memory {
            let _ = write!(
                out,
                "<td>{}</td><td>{}</td><td>{}</td>",
                opt(a.memory.map(bytes)),
                bytes(a.peak),
                opt(a.memory.map(|m| pct(a.peak / m))),
            );
        }
        let next = next_time(a, engine);
        let _ = match next.is_empty() {
            true => write!(out, "<td class=\"l\">as now</td></tr>"),
            false => write!(out, "<td class=\"l\"><code>{}</code></td></tr>", esc(&next)),
        };
    }
    out.push_str("</table></div>");
}
