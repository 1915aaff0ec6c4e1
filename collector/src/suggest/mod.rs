//! `pipetrace suggest`: per task, the CPUs, memory and time limit to ask for next time, from
//! what its jobs used in the runs given: a high percentile of the jobs' figures with a
//! stated margin, never below a peak seen, more for a task the kernel OOM-killed. Written in
//! the engine's own settings (`formats`).
pub mod formats;

use std::collections::BTreeMap;

use pipetrace_semconv::attr;
use serde::Serialize;

use pipetrace_core::judgement::ReportSpan;

use pipetrace_core::sizing::{JobFigures, Policy};

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
pub struct Jobs(BTreeMap<String, Vec<JobFigures>>);

/// The suggestions for every task in `spans` (any number of runs), by task name.
#[cfg(test)]
pub(crate) fn suggest(spans: &[ReportSpan], policy: Policy) -> Vec<Suggestion> {
    let mut jobs = Jobs::default();
    jobs.add_spans(spans);
    jobs.suggest(policy)
}

impl Jobs {
    pub(crate) fn suggest(self, policy: Policy) -> Vec<Suggestion> {
        (self.0.into_iter())
            .map(|(task, jobs)| one(task, &jobs, policy))
            .collect()
    }

    /// A run `pipetrace run` kept for compare (by its id): each job's figures, without
    /// what it was given or whether it was OOM-killed (the kept summary holds neither).
    pub(crate) fn add_kept(&mut self, run: &crate::compare::Run) {
        use crate::compare::Metric;
        for t in &run.tasks {
            let n = t.jobs.max(1);
            let f = |m: Metric| t.figures.get(&m).copied().unwrap_or(0.0);
            let wall = f(Metric::Wall) / n as f64;
            let job = JobFigures {
                busy: if wall > 0.0 {
                    f(Metric::Cpu) / n as f64 / wall
                } else {
                    0.0
                },
                peak: f(Metric::PeakMemory) as u64,
                wall,
                ..JobFigures::default()
            };
            let list = self.0.entry(t.task.clone()).or_default();
            list.extend(std::iter::repeat_n(job, n as usize));
        }
    }

    /// A pipeline's task history (what `compare --usual` reads): each earlier run of a task
    /// as one job of the medians of its jobs (the history keeps no more).
    pub(crate) fn add_history(&mut self, kept: &pipetrace_core::diagnosis::HistoryKept) {
        for (task, runs) in &kept.tasks {
            let list = self.0.entry(task.clone()).or_default();
            list.extend(runs.iter().map(|r| JobFigures {
                busy: if r.wall_s > 0.0 {
                    r.cpu_s / r.wall_s
                } else {
                    0.0
                },
                peak: r.peak_bytes as u64,
                wall: r.wall_s,
                ..JobFigures::default()
            }));
        }
    }

    /// Each job of the spans, read as the page reads it (`judgement::job`): one rule, one
    /// answer.
    pub(crate) fn add_spans(&mut self, spans: &[ReportSpan]) {
        for j in pipetrace_core::judgement::job::jobs_of(spans) {
            if j.span.text(attr::CICD_PIPELINE_TASK_NAME).is_none() {
                continue;
            }
            // A folded span stands for its repeats, each alike.
            let n = j.repeats() as usize;
            (self.0.entry(j.task().to_string()).or_default())
                .extend(std::iter::repeat_n(j.figures(), n));
        }
    }
}

fn one(task: String, jobs: &[JobFigures], policy: Policy) -> Suggestion {
    let a = pipetrace_core::sizing::asks(jobs, policy);
    let max = |f: fn(&JobFigures) -> f64| jobs.iter().map(f).fold(0.0, f64::max);
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

pub(crate) fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests;
