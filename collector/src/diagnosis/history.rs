//! Slower than usual: a small local history per pipeline and task name (durations, CPU,
//! peaks; the last few runs) under the state directory, to tell when a task took far longer
//! than it usually does.
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Record {
    wall_s: f64,
    cpu_s: f64,
    peak_bytes: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PipelineHistory {
    tasks: BTreeMap<String, Vec<Record>>,
}

/// Task names kept per pipeline at most.
const MAX_TASKS: usize = 1000;
/// Runs needed before a task is judged.
const MIN_RUNS: usize = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct Slower {
    pub usual_s: f64,
    pub runs: usize,
    pub this_s: f64,
}

pub struct History {
    dir: Option<PathBuf>,
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl History {
    pub fn new(cfg: &pipetrace_config::Diagnosis) -> Self {
        Self {
            dir: cfg.state_dir.as_ref().map(|d| d.join("history")),
            keep: cfg.history_runs.max(1),
            factor: cfg.slower_factor,
            min_wall_s: cfg.min_wall.as_secs_f64(),
            loaded: HashMap::new(),
            dirty: HashSet::new(),
        }
    }

    fn pipeline(&mut self, name: &str) -> &mut PipelineHistory {
        let dir = self.dir.clone();
        self.loaded.entry(name.to_string()).or_insert_with(|| {
            dir.map(|d| d.join(file_name(name)))
                .and_then(|p| std::fs::read_to_string(p).ok())
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default()
        })
    }

    /// Judges a finished task against its history, then adds it.
    pub fn record(
        &mut self,
        pipeline: &str,
        task: &str,
        wall_s: f64,
        cpu_s: f64,
        peak_bytes: u64,
    ) -> Option<Slower> {
        self.dir.as_ref()?;
        let (keep, factor, min_wall) = (self.keep, self.factor, self.min_wall_s);
        let h = self.pipeline(pipeline);
        if !h.tasks.contains_key(task) && h.tasks.len() >= MAX_TASKS {
            return None;
        }
        let runs = h.tasks.entry(task.to_string()).or_default();
        let verdict = (runs.len() >= MIN_RUNS).then(|| {
            let mut walls: Vec<f64> = runs.iter().map(|r| r.wall_s).collect();
            median(&mut walls)
        });
        let n = runs.len();
        runs.push(Record {
            wall_s,
            cpu_s,
            peak_bytes,
        });
        if runs.len() > keep {
            runs.drain(..runs.len() - keep);
        }
        self.dirty.insert(pipeline.to_string());
        let usual = verdict?;
        (wall_s >= usual * factor && wall_s - usual >= min_wall).then_some(Slower {
            usual_s: usual,
            runs: n,
            this_s: wall_s,
        })
    }

    /// Writes what changed; a failure is logged and the history stays in memory.
    pub fn save(&mut self) {
        let Some(dir) = self.dir.clone() else { return };
        for name in std::mem::take(&mut self.dirty) {
            let Some(h) = self.loaded.get(&name) else {
                continue;
            };
            if let Err(e) = write(&dir, &file_name(&name), h) {
                log::warn!("cannot save task history in {}: {e}", dir.display());
            }
        }
    }
}

fn write(dir: &Path, file: &str, h: &PipelineHistory) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Whole or not at all: a reader never sees half a file.
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(h)?)?;
    std::fs::rename(tmp, dir.join(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path) -> pipetrace_config::Diagnosis {
        pipetrace_config::Diagnosis {
            state_dir: Some(dir.to_path_buf()),
            history_runs: 5,
            ..Default::default()
        }
    }

    #[test]
    fn a_task_far_slower_than_its_median_is_flagged_and_history_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        let mut h = History::new(&cfg(d.path()));
        for w in [10.0, 11.0, 9.0] {
            assert_eq!(h.record("rna/seq", "align", w, 1.0, 1), None);
        }
        assert_eq!(
            h.record("rna/seq", "align", 15.0, 1.0, 1),
            None,
            "1.5x is usual"
        );
        let s = h.record("rna/seq", "align", 25.0, 1.0, 1).unwrap();
        assert_eq!((s.usual_s, s.runs), (10.5, 4));
        h.save();
        // A new agent reads it back; only the last 5 runs are kept.
        let mut again = History::new(&cfg(d.path()));
        let p = again.pipeline("rna/seq");
        assert_eq!(p.tasks["align"].len(), 5);
        assert!(d.path().join("history/rna_seq.json").exists());
        for _ in 0..10 {
            again.record("rna/seq", "align", 10.0, 1.0, 1);
        }
        assert_eq!(again.pipeline("rna/seq").tasks["align"].len(), 5);
    }
}
