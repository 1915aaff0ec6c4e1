//! Slower than usual: a small local history per pipeline and task name (durations, CPU,
//! peaks; the last few runs), kept in a `Store` (the state directory's `history/`), to tell
//! when a task took far longer than it usually does.
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::port::Store;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Record {
    wall_s: f64,
    cpu_s: f64,
    peak_bytes: u64,
    /// The run it was part of: history counts runs, not jobs (a run of five `sleep` jobs
    /// is one earlier run). Empty in records written before runs were kept: not judged by.
    #[serde(default)]
    run: String,
}

/// A finished task, to judge against its history and add to it.
pub struct Job<'a> {
    pub pipeline: &'a str,
    pub task: &'a str,
    /// Its run's identity (the trace id).
    pub run: &'a str,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_bytes: u64,
    /// It exited 0: only such jobs become history (a killed or failed one says nothing
    /// about how long the task usually takes).
    pub succeeded: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PipelineHistory {
    tasks: BTreeMap<String, Vec<Record>>,
    /// The runs themselves, one record each (those that succeeded): for the expected end
    /// of a run.
    #[serde(default)]
    runs: Vec<Record>,
    /// Per task, the judgement of the run its last job came from: earlier runs do not change
    /// while one run adds its jobs, so its later jobs are judged without going over the
    /// records again (a fan-out of thousands of jobs).
    #[serde(skip)]
    judged: HashMap<String, Judged>,
}

#[derive(Debug)]
struct Judged {
    run: String,
    /// Earlier runs with the task, and its usual wall time over them.
    runs: usize,
    usual: Option<f64>,
    /// Jobs of this run kept.
    kept: usize,
}

impl Judged {
    fn of(records: &[Record], run: &str) -> Self {
        Self {
            run: run.to_string(),
            runs: runs_of(records, run),
            usual: usual_of(records, run),
            kept: records.iter().filter(|r| r.run == run).count(),
        }
    }
}

/// Task names kept per pipeline at most.
const MAX_TASKS: usize = 1000;
/// Earlier runs (not jobs) with the task needed before it is judged.
pub const MIN_RUNS: usize = 3;
/// Jobs of one run kept per task: a 10,000-job fan-out must not push out earlier runs.
const JOBS_PER_RUN: usize = 32;

/// A finished task against its usual, once [`MIN_RUNS`] earlier runs have it: every task's
/// report row, slower or not.
#[derive(Clone, Debug, PartialEq)]
pub struct Against {
    pub usual_s: f64,
    pub runs: usize,
    pub this_s: f64,
    /// It took at least `slower_factor` times the usual (and `min_wall` more).
    pub slower: bool,
}

pub struct History {
    store: Option<Box<dyn Store>>,
    keep: usize,
    factor: f64,
    min_wall_s: f64,
    loaded: HashMap<String, PipelineHistory>,
    dirty: HashSet<String>,
}

/// A file name for a pipeline name: what is not [A-Za-z0-9._-] becomes `_`.
fn file_name(pipeline: &str) -> String {
    let safe: String = pipeline
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(100)
        .collect();
    format!("{}.json", safe.trim_start_matches('.'))
}

/// The median (0 of none).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How many earlier runs (other than `this`) have records of a task.
fn runs_of(records: &[Record], this: &str) -> usize {
    let runs: std::collections::BTreeSet<&str> = (records.iter())
        .filter(|r| !r.run.is_empty() && r.run != this)
        .map(|r| r.run.as_str())
        .collect();
    runs.len()
}

/// The median over earlier runs (other than `this`) of each run's median wall time, once
/// [`MIN_RUNS`] runs have it.
fn usual_of(records: &[Record], this: &str) -> Option<f64> {
    let mut per_run: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| !r.run.is_empty() && r.run != this)
    {
        per_run.entry(&r.run).or_default().push(r.wall_s);
    }
    (per_run.len() >= MIN_RUNS).then(|| {
        let mut medians: Vec<f64> = per_run.values_mut().map(|v| median(v)).collect();
        median(&mut medians)
    })
}

impl History {
    /// Kept in `store` (none: no history, nothing judged slower).
    pub fn new(cfg: &pipetrace_config::Diagnosis, store: Option<Box<dyn Store>>) -> Self {
        Self {
            store,
            keep: cfg.history_runs.max(1),
            factor: cfg.slower_factor,
            min_wall_s: cfg.min_wall.as_secs_f64(),
            loaded: HashMap::new(),
            dirty: HashSet::new(),
        }
    }

    fn pipeline(&mut self, name: &str) -> &mut PipelineHistory {
        if !self.loaded.contains_key(name) {
            let h = (self.store.as_ref())
                .and_then(|s| s.load(&file_name(name)))
                .and_then(|t| serde_json::from_slice(&t).ok())
                .unwrap_or_default();
            self.loaded.insert(name.to_string(), h);
        }
        self.loaded.get_mut(name).expect("inserted above")
    }

    /// What task `task` of `pipeline` usually takes: the median over its earlier runs of
    /// each run's median, once [`MIN_RUNS`] runs have it.
    pub fn usual(&mut self, pipeline: &str, task: &str) -> Option<f64> {
        self.store.as_ref()?;
        let records = self.pipeline(pipeline).tasks.get(task)?;
        usual_of(records, "")
    }

    /// Judges a finished task against the earlier runs of its task, then adds it. Each
    /// earlier run counts once, with the median of its jobs; the task is judged once
    /// [`MIN_RUNS`] runs have it, against the median over runs, slower or not.
    pub fn judge(&mut self, job: &Job) -> Option<Against> {
        self.store.as_ref()?;
        let (keep, factor, min_wall) = (self.keep, self.factor, self.min_wall_s);
        let h = self.pipeline(job.pipeline);
        if !h.tasks.contains_key(job.task) {
            if h.tasks.len() >= MAX_TASKS {
                return None;
            }
            h.tasks.insert(job.task.to_string(), Vec::new());
        }
        let records = h.tasks.get_mut(job.task).expect("inserted above");
        let judged = match h.judged.get_mut(job.task) {
            Some(j) if j.run == job.run => j,
            _ => {
                let j = Judged::of(records, job.run);
                h.judged.insert(job.task.to_string(), j);
                h.judged.get_mut(job.task).expect("inserted above")
            }
        };
        let (n, usual) = (judged.runs, judged.usual);
        if job.succeeded {
            if judged.kept < JOBS_PER_RUN {
                records.push(Record {
                    wall_s: job.wall_s,
                    cpu_s: job.cpu_s,
                    peak_bytes: job.peak_bytes,
                    run: job.run.to_string(),
                });
                judged.kept += 1;
                // Only a run's first job can bring the task over `keep` runs.
                if judged.kept == 1 {
                    keep_last_runs(records, keep);
                }
            }
            if !self.dirty.contains(job.pipeline) {
                self.dirty.insert(job.pipeline.to_string());
            }
        }
        let usual = usual?;
        let wall_s = job.wall_s;
        Some(Against {
            usual_s: usual,
            runs: n,
            this_s: wall_s,
            slower: wall_s >= usual * factor && wall_s - usual >= min_wall,
        })
    }

    /// What a run of `pipeline` usually takes: the median of its last runs that succeeded,
    /// once [`MIN_RUNS`] have.
    pub fn usual_run(&mut self, pipeline: &str) -> Option<f64> {
        self.store.as_ref()?;
        usual_of(&self.pipeline(pipeline).runs, "")
    }

    /// Adds a finished run (`job.task` is not read): only one that succeeded.
    pub fn record_run(&mut self, job: &Job) {
        if self.store.is_none() || !job.succeeded || job.pipeline.is_empty() {
            return;
        }
        let keep = self.keep;
        let h = self.pipeline(job.pipeline);
        h.runs.push(Record {
            wall_s: job.wall_s,
            cpu_s: job.cpu_s,
            peak_bytes: job.peak_bytes,
            run: job.run.to_string(),
        });
        keep_last_runs(&mut h.runs, keep);
        self.dirty.insert(job.pipeline.to_string());
    }

    /// Writes what changed; a failure is logged and the history stays in memory.
    pub fn save(&mut self) {
        let Some(store) = self.store.as_ref() else {
            return;
        };
        for name in std::mem::take(&mut self.dirty) {
            let Some(h) = self.loaded.get(&name) else {
                continue;
            };
            let saved = serde_json::to_vec(h).map_err(std::io::Error::other);
            if let Err(e) = saved.and_then(|bytes| store.save(&file_name(&name), &bytes)) {
                log::warn!("cannot save task history in {}: {e}", store.place());
            }
        }
    }
}

/// One earlier run of a task as `pipetrace compare` reads it: the medians of its jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFigures {
    pub run: String,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_bytes: f64,
}

/// A pipeline's history file, read back for `pipetrace compare`: per task, its runs.
#[derive(Debug, Default)]
pub struct Kept {
    /// The file's name less `.json` (the pipeline's name, made safe for a file).
    pub pipeline: String,
    pub tasks: BTreeMap<String, Vec<RunFigures>>,
}

impl Kept {
    /// Whether run `trace` left records here.
    pub fn has_run(&self, trace: &str) -> bool {
        (self.tasks.values()).any(|runs| runs.iter().any(|r| r.run == trace))
    }
}

/// Every pipeline's history in `store` (unreadable documents are skipped: they are
/// rewritten by the next run).
pub fn read_all(store: &dyn Store) -> Vec<Kept> {
    let mut out = Vec::new();
    for name in store.names() {
        let Some(pipeline) = name.strip_suffix(".json") else {
            continue;
        };
        let Some(h) =
            (store.load(&name)).and_then(|t| serde_json::from_slice::<PipelineHistory>(&t).ok())
        else {
            continue;
        };
        let tasks = (h.tasks.iter())
            .map(|(task, records)| (task.clone(), per_run(records)))
            .collect();
        out.push(Kept {
            pipeline: pipeline.to_string(),
            tasks,
        });
    }
    out.sort_by(|a, b| a.pipeline.cmp(&b.pipeline));
    out
}

/// Each run's medians, runs in the order they were kept.
fn per_run(records: &[Record]) -> Vec<RunFigures> {
    let mut runs: Vec<(&str, Vec<&Record>)> = Vec::new();
    for r in records.iter().filter(|r| !r.run.is_empty()) {
        match runs.iter_mut().find(|(run, _)| *run == r.run) {
            Some((_, v)) => v.push(r),
            None => runs.push((&r.run, vec![r])),
        }
    }
    let med = |v: &[&Record], f: fn(&Record) -> f64| {
        median(&mut v.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    (runs.into_iter())
        .map(|(run, v)| RunFigures {
            run: run.to_string(),
            wall_s: med(&v, |r| r.wall_s),
            cpu_s: med(&v, |r| r.cpu_s),
            peak_bytes: med(&v, |r| r.peak_bytes as f64),
        })
        .collect()
}

/// Drops the records of all but the last `keep` runs (by first appearance, oldest first).
fn keep_last_runs(records: &mut Vec<Record>, keep: usize) {
    let mut runs: Vec<&str> = Vec::new();
    for r in records.iter() {
        if !runs.contains(&r.run.as_str()) {
            runs.push(&r.run);
        }
    }
    if runs.len() <= keep {
        return;
    }
    let gone: HashSet<String> = runs[..runs.len() - keep]
        .iter()
        .map(|r| r.to_string())
        .collect();
    records.retain(|r| !gone.contains(&r.run));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::fake::MemoryStore;

    /// The task judged far slower than usual, or None.
    fn slower(h: &mut History, job: &Job) -> Option<Against> {
        h.judge(job).filter(|a| a.slower)
    }

    /// A history kept in `store`, as an agent starting anew reads it.
    fn kept_in(store: &MemoryStore) -> History {
        let cfg = pipetrace_config::Diagnosis {
            history_runs: 5,
            ..Default::default()
        };
        History::new(&cfg, Some(Box::new(store.clone())))
    }

    fn job<'a>(run: &'a str, wall_s: f64, succeeded: bool) -> Job<'a> {
        Job {
            pipeline: "rna/seq",
            task: "align",
            run,
            wall_s,
            cpu_s: 1.0,
            peak_bytes: 1,
            succeeded,
        }
    }

    #[test]
    fn a_runs_usual_time_is_the_median_of_its_last_runs_that_succeeded_and_is_kept() {
        let d = MemoryStore::default();
        let mut h = kept_in(&d);
        for (i, wall, ok) in [(1, 10.0, true), (2, 500.0, false), (3, 12.0, true)] {
            h.record_run(&job(&format!("r{i}"), wall, ok));
        }
        assert_eq!(h.usual_run("rna/seq"), None, "two runs that succeeded");
        h.record_run(&job("r4", 30.0, true));
        assert_eq!(
            h.usual_run("rna/seq"),
            Some(12.0),
            "a failed run is not usual"
        );
        assert_eq!(h.usual("rna/seq", "align"), None, "runs are not a task");
        h.save();
        let mut again = kept_in(&d);
        assert_eq!(again.usual_run("rna/seq"), Some(12.0), "read back");
    }

    #[test]
    fn a_task_far_slower_than_its_median_is_flagged_and_history_is_bounded() {
        let d = MemoryStore::default();
        let mut h = kept_in(&d);
        for (run, w) in [("r1", 10.0), ("r2", 11.0), ("r3", 9.0)] {
            assert_eq!(slower(&mut h, &job(run, w, true)), None);
        }
        assert_eq!(
            slower(&mut h, &job("r4", 15.0, true)),
            None,
            "1.5x is usual"
        );
        let s = slower(&mut h, &job("r5", 25.0, true)).unwrap();
        assert_eq!((s.usual_s, s.runs), (10.5, 4));
        h.save();
        // A new agent reads it back; only the last 5 runs are kept.
        let mut again = kept_in(&d);
        assert_eq!(again.pipeline("rna/seq").tasks["align"].len(), 5);
        assert_eq!(d.names(), ["rna_seq.json"]);
        for i in 0..10 {
            slower(&mut again, &job(&format!("later{i}"), 10.0, true));
        }
        assert_eq!(again.pipeline("rna/seq").tasks["align"].len(), 5);
    }

    #[test]
    fn history_counts_runs_not_jobs_and_keeps_only_jobs_that_succeeded() {
        let d = MemoryStore::default();
        let mut h = kept_in(&d);
        // Two earlier runs of five quick jobs each, one job killed: two runs, not ten jobs.
        for run in ["a", "b"] {
            for _ in 0..5 {
                assert_eq!(slower(&mut h, &job(run, 0.2, true)), None);
            }
        }
        assert_eq!(slower(&mut h, &job("b", 0.01, false)), None);
        assert_eq!(
            slower(&mut h, &job("c", 5.0, true)),
            None,
            "two earlier runs are too few"
        );
        // The jobs of the run being judged are never its own history.
        for _ in 0..6 {
            assert_eq!(slower(&mut h, &job("d", 0.2, true)), None);
        }
        // Three earlier runs now (a, b, c; d's own jobs not counted while d runs).
        let s = slower(&mut h, &job("e", 20.0, true)).unwrap();
        assert_eq!(s.runs, 4);
        let killed = h.pipeline("rna/seq").tasks["align"]
            .iter()
            .filter(|r| r.wall_s == 0.01)
            .count();
        assert_eq!(killed, 0, "a killed job is not history");
    }

    #[test]
    fn compare_reads_each_run_of_a_task_as_the_medians_of_its_jobs() {
        let d = MemoryStore::default();
        let mut h = kept_in(&d);
        for (run, w) in [("r1", 1.0), ("r1", 3.0), ("r1", 2.0), ("r2", 5.0)] {
            slower(&mut h, &job(run, w, true));
        }
        h.save();
        let all = read_all(&d);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].pipeline, "rna_seq");
        let runs = &all[0].tasks["align"];
        assert_eq!(
            runs.iter().map(|r| r.wall_s).collect::<Vec<_>>(),
            [2.0, 5.0]
        );
        assert!(all[0].has_run("r2") && !all[0].has_run("r3"));
    }

    #[test]
    fn every_job_of_a_run_is_judged_against_the_same_earlier_runs() {
        let d = MemoryStore::default();
        let mut h = kept_in(&d);
        for (run, w) in [
            ("r1", 1.0),
            ("r2", 10.0),
            ("r3", 10.0),
            ("r4", 10.0),
            ("r5", 10.0),
        ] {
            slower(&mut h, &job(run, w, true));
        }
        // r6's first job makes six runs: r1 goes, but r6's other jobs (and those of a run
        // in between) are judged as its first was, over all five earlier runs.
        let first = slower(&mut h, &job("r6", 30.0, true)).unwrap();
        assert_eq!((first.usual_s, first.runs), (10.0, 5));
        for _ in 0..40 {
            assert_eq!(slower(&mut h, &job("r6", 30.0, true)), Some(first.clone()));
        }
        let kept = |h: &mut History, run: &str| {
            let records = &h.pipeline("rna/seq").tasks["align"];
            records.iter().filter(|r| r.run == run).count()
        };
        assert_eq!(
            kept(&mut h, "r6"),
            JOBS_PER_RUN,
            "a run keeps at most its quota"
        );
        assert_eq!(kept(&mut h, "r1"), 0, "only the last five runs are kept");
        let other = slower(&mut h, &job("x", 30.0, true)).unwrap();
        assert_eq!(other.runs, 5, "r2..r6 for a new run");
        assert_eq!(slower(&mut h, &job("r6", 30.0, true)).unwrap().runs, 4);
    }
}
