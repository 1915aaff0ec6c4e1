//! The tree of a large run, its jobs folded per task: `make ×240  ok  median 0.01s`. Every
//! job counts, however many; its figures are kept bounded.
use std::{collections::HashMap, fmt::Write as _};

/// Walls kept per task for its median at most; past it the median is of the first ones.
const MAX_WALLS: usize = 100_000;

#[derive(Default)]
struct Rule {
    first_start: u64,
    jobs: u64,
    failed: u64,
    walls: Vec<f64>,
}

/// Each task's jobs, counted as they end.
#[derive(Default)]
pub struct Rules {
    by_name: HashMap<String, Rule>,
}

/// Task names kept at most, against runaway naming; past it jobs are counted under "…".
const MAX_RULES: usize = 1000;

impl Rules {
    /// One job (or `n`, a folded span's repeats) of `name`, started at `start` (Unix ns).
    pub(crate) fn record(&mut self, name: &str, start: u64, secs: f64, failed: bool, n: u64) {
        let key = match self.by_name.contains_key(name) || self.by_name.len() < MAX_RULES {
            true => name,
            false => "…",
        };
        let r = self.by_name.entry(key.to_string()).or_insert_with(|| Rule {
            first_start: start,
            ..Default::default()
        });
        r.first_start = r.first_start.min(start);
        r.jobs += n;
        r.failed += u64::from(failed);
        if r.walls.len() < MAX_WALLS {
            r.walls.push(secs);
        }
    }

    /// Under the run's line: one line per task, in the order they first started.
    pub(crate) fn render(&self, out: &mut String) {
        let mut rules: Vec<(&String, &Rule)> = self.by_name.iter().collect();
        rules.sort_by_key(|(name, r)| (r.first_start, name.as_str()));
        for (i, (name, r)) in rules.iter().enumerate() {
            let branch = if i + 1 == rules.len() {
                "└─"
            } else {
                "├─"
            };
            let state = match (r.failed, r.jobs - r.failed.min(r.jobs)) {
                (0, _) => "ok".to_string(),
                (f, 0) => format!("{f} FAILED"),
                (f, ok) => format!("{ok} ok, {f} FAILED"),
            };
            let _ = match r.jobs {
                1 => writeln!(out, "{branch} {name}  {:.2}s  {state}", median(&r.walls)),
                n => writeln!(
                    out,
                    "{branch} {name} ×{n}  {state}  median {:.2}s",
                    median(&r.walls)
                ),
            };
        }
    }
}

fn median(walls: &[f64]) -> f64 {
    let mut v = walls.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_fold_per_task_in_the_order_tasks_first_started_with_failures_counted() {
        let mut r = Rules::default();
        for i in 0..240u64 {
            r.record("make", 10 + i, 0.01, false, 1);
            r.record("filter", 20 + i, 0.05, i >= 236, 1);
        }
        r.record("merge", 5000, 0.02, false, 1);
        // A folded span stands for its repeats.
        r.record("touch", 1, 0.001, false, 10);
        let mut out = String::new();
        r.render(&mut out);
        assert_eq!(
            out,
            "├─ touch ×10  ok  median 0.00s\n\
             ├─ make ×240  ok  median 0.01s\n\
             ├─ filter ×240  236 ok, 4 FAILED  median 0.05s\n\
             └─ merge  0.02s  ok\n"
        );
    }
}
