//! The history's side of a comparison: which pipeline's history a run belongs to, the spread
//! of each task's figures over its earlier runs, and the usual run of a pipeline.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    Spreads,
    judge::Spread,
    model::{Metric, Run, Task},
};
use pipetrace_core::diagnosis::{HistoryKept, RunFigures};

/// How to read one figure of a run of the history.
type Read = fn(&RunFigures) -> f64;

/// The figures the history keeps, and how to read each of a run.
const KEPT: [(Metric, Read); 3] = [
    (Metric::Wall, |r| r.wall_s),
    (Metric::Cpu, |r| r.cpu_s),
    (Metric::PeakMemory, |r| r.peak_bytes),
];

/// The history of the runs' pipeline: the one holding records of one of them; else the one
/// that has most of the first run's task names (at least half of them).
pub fn find_history<'a>(kept: &'a [HistoryKept], runs: &[&Run]) -> Option<&'a HistoryKept> {
    if let Some(h) = kept.iter().find(|h| {
        runs.iter()
            .any(|r| !r.trace.is_empty() && h.has_run(&r.trace))
    }) {
        return Some(h);
    }
    let names: BTreeSet<&str> = runs
        .first()?
        .tasks
        .iter()
        .map(|t| t.task.as_str())
        .collect();
    let shared = |h: &HistoryKept| names.iter().filter(|n| h.tasks.contains_key(**n)).count();
    let best = kept.iter().max_by_key(|h| shared(h))?;
    (!names.is_empty() && 2 * shared(best) >= names.len()).then_some(best)
}

/// Earlier runs of each task, leaving out the runs being compared.
fn earlier<'a>(runs: &'a [RunFigures], exclude: &[&str]) -> Vec<&'a RunFigures> {
    runs.iter()
        .filter(|r| !exclude.contains(&r.run.as_str()))
        .collect()
}

/// Per task name, the spread of each kept figure over its earlier runs (tasks with fewer
/// than `MIN_RUNS` have none).
pub fn spreads(h: &HistoryKept, exclude: &[&str]) -> Spreads {
    let mut out = Spreads::new();
    for (task, runs) in &h.tasks {
        let runs = earlier(runs, exclude);
        let mut per: BTreeMap<Metric, Spread> = BTreeMap::new();
        for (m, of) in KEPT {
            let values: Vec<f64> = runs.iter().map(|r| of(r)).collect();
            if let Some(s) = Spread::of(&values) {
                per.insert(m, s);
            }
        }
        if !per.is_empty() {
            out.insert(task.clone(), per);
        }
    }
    out
}

/// The usual run of a pipeline: per task, the median of its earlier runs' figures.
pub struct Usual {
    pub run: Run,
}

/// None when the history has no earlier run (other than `exclude`).
pub fn usual_of(h: &HistoryKept, exclude: &str) -> Option<Usual> {
    let mut tasks = Vec::new();
    let mut most = 0;
    for (name, runs) in &h.tasks {
        let runs = earlier(runs, &[exclude]);
        if runs.is_empty() {
            continue;
        }
        most = most.max(runs.len());
        let figures = (KEPT.iter())
            .map(|(m, of)| (*m, median(runs.iter().map(|r| of(r)).collect())))
            .collect();
        tasks.push(Task {
            name: name.clone(),
            task: name.clone(),
            jobs: runs.len() as u64,
            figures,
            ..Task::default()
        });
    }
    (!tasks.is_empty()).then(|| Usual {
        run: Run {
            label: format!("usual of {} (up to {most} earlier runs)", h.pipeline),
            name: h.pipeline.clone(),
            tasks,
            ..Run::default()
        },
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    pipetrace_core::diagnosis::median(&mut v)
}
