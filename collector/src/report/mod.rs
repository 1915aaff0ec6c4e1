//! The end-of-run report: a per-task table and a self-contained HTML page (timeline of tasks
//! and tools; CPU, memory and disk I/O per task; events and failures in words), built from
//! spans, whether just made by `pipetrace run` or read back from an OTLP JSON lines file
//! (`pipetrace report FILE`).
mod files;
mod html;
pub mod keep;
mod markup;
mod model;
mod read;
pub mod table;
pub mod tails;
pub mod who;

pub use html::{render_run as html_of_run, render_with as html_with};
pub use markup::esc;
pub use model::{Decode, TASK_KEYS, TOOL_KEYS, event_from_sdk};
use pipetrace_core::judgement::ReportSpan;

pub use read::{ReadError, read_file};

/// The spans of each run (its trace), runs in the order they started.
pub(crate) fn by_run(spans: &[ReportSpan]) -> Vec<Vec<ReportSpan>> {
    let mut runs: Vec<Vec<ReportSpan>> = Vec::new();
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for s in spans {
        let i = *at.entry(s.trace.as_str()).or_insert_with(|| {
            runs.push(Vec::new());
            runs.len() - 1
        });
        runs[i].push(s.clone());
    }
    let start = |run: &Vec<ReportSpan>| run.iter().map(|s| s.start).min().unwrap_or(0);
    runs.sort_by_key(start);
    runs
}
