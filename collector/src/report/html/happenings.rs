//! Failures, then events, in time order, in words, placed on their job and tool.
use std::{collections::HashMap, fmt::Write as _};

use super::job::task_of;
use crate::report::markup::{MAX_LISTED, esc, more};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// Where a span sits, for a reader: its task's name before a tool's own.
fn place(s: &ReportSpan, by_id: &HashMap<&str, &ReportSpan>) -> String {
    match task_of(s, by_id) {
        Some(t) if s.kind == Kind::Tool => format!("{} › {}", t.name, s.name),
        _ => s.name.clone(),
    }
}

/// Failures, then events, each in time order, in words: the failures right after the
/// findings, before the jobs table and the figures.
pub(crate) fn render(spans: &[ReportSpan], out: &mut String) {
    let t0 = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let by_id: HashMap<&str, &ReportSpan> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    failures(spans, (t0, &by_id), out);
    events(spans, (t0, &by_id), out);
}

type Places<'a, 's> = (u64, &'a HashMap<&'s str, &'s ReportSpan>);

/// What failed, by the end of its span: a task's own or a tool's within one.
fn failures(spans: &[ReportSpan], (t0, by_id): Places, out: &mut String) {
    // The engine's own helpers (a shim's probe that exits 1) are not the pipeline's failures:
    // they are counted, not listed.
    let (mut failed, engine): (Vec<&ReportSpan>, Vec<&ReportSpan>) = spans
        .iter()
        .filter(|s| s.error.is_some() && s.kind != Kind::Run)
        .partition(|s| task_of(s, by_id).is_some());
    failed.sort_by_key(|s| (s.end, s.id.clone()));
    if !failed.is_empty() {
        out.push_str(
            "<h2 id=\"failures\">Failures</h2><div class=\"scroll\"><table><tr><th>ended at s</th>\
             <th class=\"l\">where</th><th class=\"l\">why</th></tr>",
        );
        for s in failed.iter().take(MAX_LISTED) {
            let _ = write!(
                out,
                "<tr><td>{:.1}</td><td class=\"l place\">{}</td><td class=\"wrap err\">{}</td></tr>",
                s.end.saturating_sub(t0) as f64 / 1e9,
                esc(&place(s, by_id)),
                esc(s.error.as_deref().unwrap_or_default())
            );
        }
        out.push_str("</table></div>");
        more(failed.len(), out);
    }
    if !engine.is_empty() {
        let _ = write!(
            out,
            "<p>{} process(es) outside any task (the engine's own) exited non-zero; the trace \
             has them.</p>",
            engine.len()
        );
    }
}

/// The spans' events (stalls, OOM kills, signals), each placed on its job and tool.
fn events(spans: &[ReportSpan], (t0, by_id): Places, out: &mut String) {
    let mut events: Vec<(u64, String, String)> = spans
        .iter()
        .flat_map(|s| {
            s.events
                .iter()
                .map(|e| (e.time, place(s, by_id), e.describe()))
        })
        .collect();
    events.sort();
    if events.is_empty() {
        return;
    }
    out.push_str(
        "<h2 id=\"events\">Events</h2><div class=\"scroll\"><table><tr><th>at s</th><th class=\"l\">where</th>\
         <th class=\"l\">what</th></tr>",
    );
    for (t, at, what) in events.iter().take(MAX_LISTED) {
        let _ = write!(
            out,
            "<tr><td>{:.1}</td><td class=\"l place\">{}</td><td class=\"wrap\">{}</td></tr>",
            t.saturating_sub(t0) as f64 / 1e9,
            esc(at),
            esc(what)
        );
    }
    out.push_str("</table></div>");
    more(events.len(), out);
}
