//! Spans built by hand for the judgement's tests (and the views' tests in the command
//! crate): tasks, tools and events with the figures a test names.
use std::collections::BTreeMap;

use pipetrace_semconv::{attr, event};

use super::{Kind, ReportEvent, ReportSpan};

/// A task span of `name` (tag `tag`) from `start` to `end` seconds with `numbers`.
pub fn task(id: &str, name: &str, tag: Option<&str>, secs: (f64, f64)) -> ReportSpan {
    let mut texts = BTreeMap::new();
    texts.insert(attr::CICD_PIPELINE_TASK_NAME.to_string(), name.to_string());
    if let Some(t) = tag {
        texts.insert(attr::TASK_WILDCARDS.to_string(), t.to_string());
    }
    ReportSpan {
        trace: "t".into(),
        id: id.into(),
        parent: Some("r".into()),
        kind: Kind::Task,
        name: name.into(),
        start: 1_000_000_000_000 + (secs.0 * 1e9) as u64,
        end: 1_000_000_000_000 + (secs.1 * 1e9) as u64,
        error: None,
        numbers: BTreeMap::new(),
        texts,
        lists: BTreeMap::new(),
        events: Vec::new(),
    }
}

/// `stats sample=B` that exited with code 3, and `align sample=A` whose `bwa` the OOM
/// killer took at 80 MiB resident over a 64 MiB limit.
pub fn a_failure_and_an_oom_kill() -> [ReportSpan; 3] {
    let mut failed = task("f", "stats", Some("sample=B"), (0.0, 1.0));
    failed.error = Some("task stats exited with code 3".into());
    let mut oom = task("o", "align", Some("sample=A"), (0.5, 2.0));
    oom.error = Some("killed".into());
    let mut victim = tool("v", "o", "bwa");
    let kill = [
        (attr::OOM_RSS, 80.0 * 1048576.0),
        (attr::MEMORY_LIMIT, 64.0 * 1048576.0),
    ];
    victim.events.push(ev(event::OOM_KILL, &kill, &[]));
    [failed, oom, victim]
}

/// `n` jobs of task `stats` (tags `n=0`...), each exited with code 3.
pub fn failed_jobs(n: usize) -> Vec<ReportSpan> {
    (0..n)
        .map(|i| {
            let tag = format!("n={i}");
            let mut t = task(&format!("t{i}"), "stats", Some(&tag), (0.0, 1.0));
            t.error = Some("task stats exited with code 3".into());
            t
        })
        .collect()
}

pub fn with(mut s: ReportSpan, numbers: &[(&str, f64)], texts: &[(&str, &str)]) -> ReportSpan {
    s.numbers
        .extend(numbers.iter().map(|(k, v)| (k.to_string(), *v)));
    s.texts
        .extend(texts.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    s
}

pub(crate) fn tool(id: &str, parent: &str, name: &str) -> ReportSpan {
    let mut s = task(id, name, None, (0.0, 1.0));
    (s.kind, s.parent) = (Kind::Tool, Some(parent.into()));
    s.texts.clear();
    s
}

pub fn ev(name: &str, numbers: &[(&str, f64)], texts: &[(&str, &str)]) -> ReportEvent {
    ReportEvent {
        name: name.into(),
        time: 1_000_000_000_000,
        numbers: numbers.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        texts: texts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}
