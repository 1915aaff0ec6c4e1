//! `pipetrace suggest`: per task, the CPUs, memory and time limit to ask for next time, from
//! what its jobs used in the runs given: a high percentile of the jobs' figures with a
//! stated margin, never below a peak seen, more for a task the kernel OOM-killed. Written in
//! the engine's own settings (`formats`).
pub mod formats;

use std::collections::{BTreeMap, HashMap};

use pipetrace_semconv::{attr, event};
use serde::Serialize;

use crate::report::{Kind, ReportSpan};

/// How the figures become asks.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Of the jobs' figures, this percentile (0..=100).
    pub percentile: f64,
    /// Added on top: 0.2 asks 20 % more than the percentile.
    pub margin: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            percentile: 95.0,
            margin: 0.2,
        }
    }
}

/// Busy CPUs over a whole number by at most this are that number.
const CPU_NOISE: f64 = 0.1;
/// Memory is asked in whole MiB, and never below this.
const MIN_MEMORY: u64 = 64 << 20;
/// Time is asked in whole minutes, and never below one.
const MIN_TIME_SECS: u64 = 60;

/// One task's figures over its jobs, and what to ask for next time.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Suggestion {
    /// The engine's name for it: Snakemake's rule, Nextflow's process, CWL's step.
    pub task: String,
    pub jobs: usize,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub time_seconds: u64,
    /// What the jobs were given, where the engine said (the largest).
    pub asked_cpus: Option<f64>,
    pub asked_memory_bytes: Option<u64>,
    /// The figures behind it: the largest seen.
    pub busy_cpus_max: f64,
    pub memory_peak_max: u64,
    pub wall_seconds_max: f64,
    /// Jobs the kernel killed for memory.
    pub oom_killed: usize,
    /// Why the asks are what they are, in words.
    pub why: Vec<String>,
}

/// One job's figures.
#[derive(Clone, Debug, Default)]
pub struct Job {
    busy: f64,
    peak: u64,
    wall: f64,
    asked_cpus: Option<f64>,
    asked_memory: Option<u64>,
    /// The limit it was killed at, when the kernel killed it for memory.
    oom_limit: Option<u64>,
    oom: bool,
}

/// Each task's jobs, by task name, gathered from trace files and kept runs alike.
#[derive(Default)]
pub struct Jobs(BTreeMap<String, Vec<Job>>);

/// The suggestions for every task in `spans` (any number of runs), by task name.
#[cfg(test)]
pub fn suggest(spans: &[ReportSpan], policy: Policy) -> Vec<Suggestion> {
    let mut jobs = Jobs::default();
    jobs.add_spans(spans);
    jobs.suggest(policy)
}

impl Jobs {
    pub fn suggest(self, policy: Policy) -> Vec<Suggestion> {
        (self.0.into_iter())
            .map(|(task, jobs)| one(task, &jobs, policy))
            .collect()
    }

    /// A run `pipetrace run` kept for compare (by its id): each job's figures, without
    /// what it was given or whether it was OOM-killed (the kept summary holds neither).
    pub fn add_kept(&mut self, run: &crate::compare::Run) {
        use crate::compare::Metric;
        for t in &run.tasks {
            let n = t.jobs.max(1);
            let f = |m: Metric| t.figures.get(&m).copied().unwrap_or(0.0);
            let wall = f(Metric::Wall) / n as f64;
            let job = Job {
                busy: if wall > 0.0 {
                    f(Metric::Cpu) / n as f64 / wall
                } else {
                    0.0
                },
                peak: f(Metric::PeakMemory) as u64,
                wall,
                ..Job::default()
            };
            let list = self.0.entry(t.task.clone()).or_default();
            list.extend(std::iter::repeat_n(job, n as usize));
        }
    }

    pub fn add_spans(&mut self, spans: &[ReportSpan]) {
        let ooms = oom_kills(spans);
        let jobs = &mut self.0;
        for s in spans.iter().filter(|s| s.kind == Kind::Task) {
            let Some(name) = s.text(attr::CICD_PIPELINE_TASK_NAME) else {
                continue;
            };
            let wall = s.secs();
            let oom_limit = ooms.get(s.id.as_str()).copied();
            let job = Job {
                busy: if wall > 0.0 { s.cpu() / wall } else { 0.0 },
                peak: s.num(attr::MEMORY_PEAK) as u64,
                wall,
                asked_cpus: s.numbers.get(attr::CPU_ALLOCATED).copied(),
                asked_memory: s.numbers.get(attr::MEMORY_LIMIT).map(|m| *m as u64),
                oom_limit: oom_limit.flatten(),
                oom: oom_limit.is_some(),
            };
            // A folded span stands for its repeats, each alike.
            let n = (s.num(attr::FOLD_SPANS) as usize).max(1);
            jobs.entry(name.to_string())
                .or_default()
                .extend(std::iter::repeat_n(job, n));
        }
    }
}

/// The tasks (by span id) whose process the kernel OOM-killed, with the limit it hit.
fn oom_kills(spans: &[ReportSpan]) -> HashMap<&str, Option<u64>> {
    let by_id: HashMap<&str, &ReportSpan> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut out = HashMap::new();
    for s in spans {
        let Some(e) = s.events.iter().find(|e| e.name == event::OOM_KILL) else {
            continue;
        };
        // The killed process is a tool somewhere under its task.
        let mut at = Some(s);
        while let Some(span) = at {
            if span.kind == Kind::Task {
                let limit = e.numbers.get(attr::MEMORY_LIMIT).map(|l| *l as u64);
                out.insert(span.id.as_str(), limit);
                break;
            }
            at = span.parent.as_deref().and_then(|p| by_id.get(p).copied());
        }
    }
    out
}

/// The `p`th percentile of `v` (nearest rank).
fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn one(task: String, jobs: &[Job], policy: Policy) -> Suggestion {
    let grow = 1.0 + policy.margin;
    let pct = |f: fn(&Job) -> f64| percentile(jobs.iter().map(f).collect(), policy.percentile);
    let max = |f: fn(&Job) -> f64| jobs.iter().map(f).fold(0.0, f64::max);
    let (busy_max, peak_max, wall_max) = (max(|j| j.busy), max(|j| j.peak as f64), max(|j| j.wall));
    let mut why = Vec::new();
    // No margin on CPUs: a job given fewer runs slower, it does not fail; a tenth of a CPU
    // over a whole one is the measure's noise, not a second CPU.
    let cpus = ((pct(|j| j.busy) - CPU_NOISE).ceil() as u32).max(1);
    // Memory: never below a peak seen; a job killed for memory used all it had and wanted
    // more, so at least twice what it was killed at.
    let mut memory = (pct(|j| j.peak as f64) * grow).max(peak_max) as u64;
    let oom: Vec<&Job> = jobs.iter().filter(|j| j.oom).collect();
    if !oom.is_empty() {
        let hit = (oom.iter())
            .map(|j| j.oom_limit.or(j.asked_memory).unwrap_or(j.peak).max(j.peak))
            .max()
            .unwrap_or(0);
        memory = memory.max(2 * hit);
        why.push(format!(
            "{} of {} jobs killed for memory at {}: twice that",
            oom.len(),
            jobs.len(),
            mib(hit)
        ));
    }
    let memory = round_up(memory.max(MIN_MEMORY), 1 << 20);
    let time = round_up(
        ((pct(|j| j.wall) * grow).ceil() as u64).max(MIN_TIME_SECS),
        60,
    );
    let asked_cpus = jobs.iter().filter_map(|j| j.asked_cpus).reduce(f64::max);
    let asked_memory = jobs.iter().filter_map(|j| j.asked_memory).max();
    if let Some(a) = asked_cpus.filter(|a| f64::from(cpus) < *a) {
        why.push(format!("asked {a} CPUs, used at most {busy_max:.2}"));
    }
    if let Some(a) = asked_memory.filter(|a| memory < *a) {
        why.push(format!(
            "asked {}, peaked at {}",
            mib(a),
            mib(peak_max as u64)
        ));
    }
    Suggestion {
        task,
        jobs: jobs.len(),
        cpus,
        memory_bytes: memory,
        time_seconds: time,
        asked_cpus,
        asked_memory_bytes: asked_memory,
        busy_cpus_max: busy_max,
        memory_peak_max: peak_max as u64,
        wall_seconds_max: wall_max,
        oom_killed: oom.len(),
        why,
    }
}

fn round_up(v: u64, unit: u64) -> u64 {
    v.div_ceil(unit) * unit
}

pub fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests;
