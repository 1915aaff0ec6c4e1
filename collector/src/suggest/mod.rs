//! `pipetrace suggest`: per task, the CPUs, memory and time limit to ask for next time, from
//! what its jobs used in the runs given: a high percentile of the jobs' figures with a
//! stated margin, never below a peak seen, more for a task the kernel OOM-killed. Written in
//! the engine's own settings (`formats`).
pub mod formats;

use std::collections::{BTreeMap, HashMap};

use pipetrace_semconv::{attr, event};
use serde::Serialize;

use crate::report::{Kind, ReportSpan};

pub use crate::report::asks::{JobFigures as Job, Policy};

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

    /// A pipeline's task history (what `compare --usual` reads): each earlier run of a task
    /// as one job of the medians of its jobs (the history keeps no more).
    pub fn add_history(&mut self, kept: &crate::diagnosis::HistoryKept) {
        for (task, runs) in &kept.tasks {
            let list = self.0.entry(task.clone()).or_default();
            list.extend(runs.iter().map(|r| Job {
                busy: if r.wall_s > 0.0 {
                    r.cpu_s / r.wall_s
                } else {
                    0.0
                },
                peak: r.peak_bytes as u64,
                wall: r.wall_s,
                ..Job::default()
            }));
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
                asked_cpus: asked_cpus(s),
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

/// The CPUs a job was given, where something gave them: an engine's threads, a cgroup's
/// quota or a cpuset (a job on the host's CPUs asked for nothing).
fn asked_cpus(s: &ReportSpan) -> Option<f64> {
    let n = s.num(attr::CPU_ALLOCATED);
    let by = s.text(attr::CPU_ALLOCATION_SOURCE);
    (n > 0.0 && by.is_some_and(|b| b != "host")).then_some(n)
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

fn one(task: String, jobs: &[Job], policy: Policy) -> Suggestion {
    let a = crate::report::asks::asks(jobs, policy);
    let max = |f: fn(&Job) -> f64| jobs.iter().map(f).fold(0.0, f64::max);
    let (busy_max, wall_max) = (max(|j| j.busy), max(|j| j.wall));
    let peak_max = jobs.iter().map(|j| j.peak).max().unwrap_or(0);
    let oom = jobs.iter().filter(|j| j.oom).count();
    let mut why = Vec::new();
    if let Some(hit) = a.oom_hit {
        why.push(format!(
            "{oom} of {} jobs killed for memory at {}: twice that",
            jobs.len(),
            mib(hit)
        ));
    }
    let asked_cpus = jobs.iter().filter_map(|j| j.asked_cpus).reduce(f64::max);
    let asked_memory = jobs.iter().filter_map(|j| j.asked_memory).max();
    if let Some(n) = asked_cpus.filter(|n| f64::from(a.cpus) < *n) {
        why.push(format!("asked {n} CPUs, used at most {busy_max:.2}"));
    }
    if let Some(m) = asked_memory.filter(|m| a.memory_bytes < *m) {
        why.push(format!("asked {}, peaked at {}", mib(m), mib(peak_max)));
    }
    Suggestion {
        task,
        jobs: jobs.len(),
        cpus: a.cpus,
        memory_bytes: a.memory_bytes,
        time_seconds: a.time_seconds,
        asked_cpus,
        asked_memory_bytes: asked_memory,
        busy_cpus_max: busy_max,
        memory_peak_max: peak_max,
        wall_seconds_max: wall_max,
        oom_killed: oom,
        why,
    }
}

pub fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests;
