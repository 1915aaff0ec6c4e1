//! Which task of one run is which of the other: the same span name (task and wildcards or
//! tag) first; then, for what is left, the same task name where each run has one task of
//! that name only (a single job whose wildcards changed between the runs).
use std::collections::BTreeMap;

use super::model::Task;

/// Index pairs into the two runs' tasks, and what was left on each side.
#[derive(Debug, Default, PartialEq)]
pub struct Matched {
    pub pairs: Vec<(usize, usize)>,
    pub only_a: Vec<usize>,
    pub only_b: Vec<usize>,
}

pub(crate) fn pair(a: &[Task], b: &[Task]) -> Matched {
    let mut m = Matched::default();
    let by_name: BTreeMap<&str, usize> = b
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut taken = vec![false; b.len()];
    let mut left_a = Vec::new();
    for (i, t) in a.iter().enumerate() {
        match by_name.get(t.name.as_str()) {
            Some(&j) if !taken[j] => {
                taken[j] = true;
                m.pairs.push((i, j));
            }
            _ => left_a.push(i),
        }
    }
    let left_b: Vec<usize> = (0..b.len()).filter(|j| !taken[*j]).collect();
    let count = |tasks: &[Task], name: &str| tasks.iter().filter(|t| t.task == name).count();
    for &i in &left_a {
        let name = a[i].task.as_str();
        let unique = !name.is_empty() && count(a, name) == 1 && count(b, name) == 1;
        match left_b.iter().find(|&&j| unique && b[j].task == name) {
            Some(&j) => {
                taken[j] = true;
                m.pairs.push((i, j));
            }
            None => m.only_a.push(i),
        }
    }
    m.only_b = (0..b.len()).filter(|j| !taken[*j]).collect();
    m
}

/// Against a usual (one entry per task name): every task of the run by its task name.
pub(crate) fn pair_with_usual(a: &[Task], usual: &[Task]) -> Matched {
    let mut m = Matched::default();
    let mut used = vec![false; usual.len()];
    for (i, t) in a.iter().enumerate() {
        match usual.iter().position(|u| u.task == t.task) {
            Some(j) => {
                used[j] = true;
                m.pairs.push((i, j));
            }
            None => m.only_a.push(i),
        }
    }
    m.only_b = (0..usual.len()).filter(|j| !used[*j]).collect();
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, task: &str) -> Task {
        Task {
            name: name.into(),
            task: task.into(),
            ..Task::default()
        }
    }

    #[test]
    fn tasks_pair_by_name_with_wildcards_and_the_rest_are_listed_per_side() {
        let a = [
            t("stats (s=A)", "stats"),
            t("stats (s=B)", "stats"),
            t("all", "all"),
        ];
        let b = [
            t("stats (s=B)", "stats"),
            t("stats (s=C)", "stats"),
            t("all", "all"),
            t("index", "index"),
        ];
        let m = pair(&a, &b);
        assert_eq!(m.pairs, [(1, 0), (2, 2)]);
        // s=A and s=C are not the same job: two of a task name were never one.
        assert_eq!((m.only_a, m.only_b), (vec![0], vec![1, 3]));
    }

    #[test]
    fn a_lone_task_whose_wildcards_changed_still_pairs_by_task_name() {
        let a = [t("align (ref=v1)", "align"), t("x", "x")];
        let b = [t("align (ref=v2)", "align"), t("y", "y")];
        let m = pair(&a, &b);
        assert_eq!(m.pairs, [(0, 0)]);
        assert_eq!((m.only_a, m.only_b), (vec![1], vec![1]));
    }

    #[test]
    fn against_the_usual_every_job_meets_its_task_name() {
        let a = [
            t("stats (s=A)", "stats"),
            t("stats (s=B)", "stats"),
            t("new", "new"),
        ];
        let usual = [t("stats", "stats"), t("gone", "gone")];
        let m = pair_with_usual(&a, &usual);
        assert_eq!(m.pairs, [(0, 0), (1, 0)]);
        assert_eq!((m.only_a, m.only_b), (vec![2], vec![1]));
    }
}
