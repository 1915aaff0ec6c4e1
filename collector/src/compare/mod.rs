//! `pipetrace compare`: two runs (or a run and the usual of its pipeline) side by side, task
//! by task: what moved beyond noise, and the tools that explain it. See docs/compare.md.
mod html;
mod judge;
pub mod keeper;
mod matching;
mod model;
pub mod store;
mod table;
mod tools;
mod usual;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

pub use html::render as html;
pub use judge::{Basis, Spread, Verdict};
pub use model::{Found, Metric, Run, Task};
pub use table::render as table;
pub use tools::{Change, ToolChange};
pub use usual::{find_history, spreads, usual_of};

/// Per task name, the spread of each figure over its earlier runs.
pub type Spreads = HashMap<String, BTreeMap<Metric, Spread>>;

#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub label: String,
    pub trace: String,
    pub name: String,
    pub start_unix_nano: u64,
    pub failed: bool,
    /// Cost and work by user and cost centre (empty where no span names one).
    pub who: crate::report::who::ByWho,
}

impl Side {
    fn of(r: &Run) -> Self {
        Self {
            label: r.label.clone(),
            trace: r.trace.clone(),
            name: r.name.clone(),
            start_unix_nano: r.start,
            failed: r.failed,
            who: r.who.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FigureChange {
    pub metric: Metric,
    pub a: f64,
    pub b: f64,
    pub verdict: Verdict,
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskChange {
    /// The span name in A (and in B, unless `b_name` says otherwise); against the usual, B's.
    pub name: String,
    pub task: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_name: Option<String>,
    /// Something moved beyond noise, or it failed in one run only.
    pub moved: bool,
    pub jobs: (u64, u64),
    pub failed: (u64, u64),
    /// B's failure, where A did not fail.
    pub new_failure: Option<String>,
    pub figures: Vec<FigureChange>,
    /// All its tools, the ones that took the most extra time first.
    pub tools: Vec<ToolChange>,
}

impl TaskChange {
    pub(crate) fn moved_figures(&self) -> impl Iterator<Item = &FigureChange> {
        self.figures.iter().filter(|f| f.verdict.moved)
    }

    /// The tools that explain the move: those that changed.
    pub(crate) fn explaining(&self) -> impl Iterator<Item = &ToolChange> {
        self.tools.iter().filter(|t| t.change != Change::Same)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub currency: Option<String>,
    /// The history the noise was judged by (a pipeline's file), if any.
    pub history: Option<String>,
    /// Matched tasks, in A's order.
    pub tasks: Vec<TaskChange>,
    /// Span names of the tasks that moved.
    pub moved: Vec<String>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    /// The cheapest machines for each side, where sizing is on (a usual has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machines: Option<Machines>,
    /// Each run's findings as its judgement gave them: what B has that A had not (of a
    /// kind, on a task), and what A had that B no longer has. Against the usual, B's own.
    pub findings: Findings,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Findings {
    pub new_in_b: Vec<Found>,
    pub gone_in_b: Vec<Found>,
    /// B's findings that A had too.
    pub both: Vec<Found>,
}

impl Findings {
    fn of(a: &Run, b: &Run, against_usual: bool) -> Self {
        let in_a = |f: &Found| !against_usual && a.findings.iter().any(|o| o.same_as(f));
        let (both, new_in_b) = b.findings.iter().cloned().partition(|f| in_a(f));
        let gone_in_b = (a.findings.iter())
            .filter(|f| !b.findings.iter().any(|o| o.same_as(f)))
            .cloned()
            .collect();
        Findings {
            new_in_b,
            gone_in_b,
            both,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Machines {
    pub a: Option<crate::sizing::Sizing>,
    pub b: Option<crate::sizing::Sizing>,
}

impl Machines {
    /// Each side's machines from its runs' needs, at `headroom`.
    pub(crate) fn of(a: &Run, b: &Run, catalog: &crate::sizing::Catalog, headroom: f64) -> Self {
        let size = |r: &Run| {
            (r.needs.as_ref()).map(|n| crate::sizing::recommend_needs(n, catalog, headroom))
        };
        Self {
            a: size(a),
            b: size(b),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(
        "{a} and {b} have no task in common (A: {names_a}; B: {names_b}): compare two runs of \
         the same pipeline"
    )]
    NothingInCommon {
        a: String,
        b: String,
        names_a: String,
        names_b: String,
    },
}

/// Compares A and B; `against_usual` when A is the usual of B's pipeline (one entry per task
/// name, each met by every job of that name in B). `spreads` are the history's, by task name.
pub(crate) fn compare(
    a: &Run,
    b: &Run,
    against_usual: bool,
    spreads: &Spreads,
    history: Option<String>,
) -> Result<Comparison, CompareError> {
    // The usual is a task's median job: a run's entry of several jobs (repeats of one name)
    // meets it as its mean job, like with like.
    let per_job;
    let b = match against_usual {
        true => {
            per_job = b.per_job();
            &per_job
        }
        false => b,
    };
    let m = match against_usual {
        true => {
            let m = matching::pair_with_usual(&b.tasks, &a.tasks);
            matching::Matched {
                pairs: m.pairs.iter().map(|&(j, i)| (i, j)).collect(),
                only_a: m.only_b,
                only_b: m.only_a,
            }
        }
        false => matching::pair(&a.tasks, &b.tasks),
    };
    if m.pairs.is_empty() {
        let names = |r: &Run| listed(r.tasks.iter().map(|t| t.name.as_str()));
        return Err(CompareError::NothingInCommon {
            a: a.label.clone(),
            b: b.label.clone(),
            names_a: names(a),
            names_b: names(b),
        });
    }
    let tasks: Vec<TaskChange> = (m.pairs.iter())
        .map(|&(i, j)| {
            let spread = spreads.get(&a.tasks[i].task);
            task_change(&a.tasks[i], &b.tasks[j], spread, against_usual)
        })
        .collect();
    let findings = Findings::of(a, b, against_usual);
    Ok(Comparison {
        findings,
        a: Side::of(a),
        b: Side::of(b),
        currency: a.currency.clone().or_else(|| b.currency.clone()),
        history,
        moved: (tasks.iter().filter(|t| t.moved))
            .map(|t| t.name.clone())
            .collect(),
        tasks,
        only_a: m.only_a.iter().map(|&i| a.tasks[i].name.clone()).collect(),
        only_b: m.only_b.iter().map(|&j| b.tasks[j].name.clone()).collect(),
        machines: None,
    })
}

/// Up to ten names, then how many more.
pub(crate) fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    let mut s = all.iter().take(10).copied().collect::<Vec<_>>().join(", ");
    if all.len() > 10 {
        s.push_str(&format!(" and {} more", all.len() - 10));
    }
    if s.is_empty() { "no tasks".into() } else { s }
}

fn task_change(
    a: &Task,
    b: &Task,
    spreads: Option<&BTreeMap<Metric, Spread>>,
    against_usual: bool,
) -> TaskChange {
    let figures: Vec<FigureChange> = (Metric::ALL.iter().copied())
        .filter(|m| a.figures.contains_key(m) && b.figures.contains_key(m))
        .map(|m| {
            let (fa, fb) = (a.figures[&m], b.figures[&m]);
            let spread = spreads.and_then(|s| s.get(&m));
            FigureChange {
                metric: m,
                a: fa,
                b: fb,
                verdict: judge::judge(m, fa, fb, spread),
            }
        })
        .collect();
    let new_failure =
        (a.failed == 0 && b.failed > 0).then(|| b.error.clone().unwrap_or_else(|| "failed".into()));
    let moved = figures.iter().any(|f| f.verdict.moved) || (a.failed == 0) != (b.failed == 0);
    // Against the usual, a row is the run's job: the usual has task names only.
    let name = if against_usual { &b.name } else { &a.name };
    TaskChange {
        name: name.clone(),
        task: b.task.clone(),
        b_name: (!against_usual && a.name != b.name).then(|| b.name.clone()),
        moved,
        jobs: (a.jobs, b.jobs),
        failed: (a.failed, b.failed),
        new_failure,
        figures,
        tools: tools::compare(&a.tools, &b.tools),
    }
}

#[cfg(test)]
mod tests;
