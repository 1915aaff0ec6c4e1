//! The judgement stage: one judgement of a run, computed once from its spans (as exported,
//! or read back from a trace file) — its jobs, what each task asked for and should ask for
//! next time, and what to look at first. Every view renders it and computes none of its
//! own: the terminal's end of a run, the HTML page, `report --json`, `report --fail-on`
//! and `suggest` (whose asks are `sizing`'s rule).
pub mod asks;
mod events;
mod findings;
pub mod job;
mod span;
#[cfg(any(test, feature = "fake-host"))]
pub mod testing;
pub mod units;

use std::collections::BTreeMap;

pub use findings::{Finding, JobRef, Rank, What, findings};
use pipetrace_semconv::attr;
pub use span::{Kind, ReportEvent, ReportSpan};

/// Per task name, what to say in a table's advice column.
pub type Advice = BTreeMap<String, String>;

/// A run's jobs, what each task asked for and should ask for next time, and its findings,
/// most serious first.
pub struct Judgement<'a> {
    pub run: Option<&'a ReportSpan>,
    /// The run's engine (`snakemake`, `nextflow`...), whose words the asks are in.
    pub engine: &'a str,
    pub jobs: Vec<job::Job<'a>>,
    pub asks: BTreeMap<String, asks::Asked>,
    pub findings: Vec<Finding>,
}

impl<'a> Judgement<'a> {
    /// The judgement of one run's spans (one trace).
    pub fn of(spans: &'a [ReportSpan]) -> Self {
        let run = spans.iter().find(|s| s.kind == Kind::Run);
        let engine = run
            .and_then(|r| r.text(attr::RUN_ENGINE))
            .unwrap_or_default();
        let jobs = job::jobs_of(spans);
        let asks = asks::by_task(&jobs);
        let findings = findings(run, &jobs, (&asks, engine));
        Judgement {
            run,
            engine,
            jobs,
            asks,
            findings,
        }
    }

    /// Each task's ask for next time where it asked for anything: what should change, or
    /// `as now`.
    pub fn advice(&self) -> Advice {
        (self.asks.iter())
            .map(|(task, a)| {
                let next = asks::next_time(a, self.engine);
                let said = if next.is_empty() {
                    "as now".into()
                } else {
                    next
                };
                (task.clone(), said)
            })
            .collect()
    }

    /// Its findings of these ranks.
    pub fn of_ranks<'s>(&'s self, ranks: &'s [Rank]) -> impl Iterator<Item = &'s Finding> + 's {
        (self.findings.iter()).filter(move |f| ranks.contains(&f.rank))
    }
}

/// One job as `report --json` gives it: figures in bytes and seconds, no units to parse.
#[derive(serde::Serialize)]
pub struct JobRow {
    pub task: String,
    pub tag: Option<String>,
    pub span_id: String,
    /// `ok`, `failed` or `OOM-killed`.
    pub status: &'static str,
    /// How it ended where that says more than "ok": `exit 3`, `SIGTERM`, `SIGKILL (OOM)`.
    pub ending: Option<String>,
    /// The jobs this row stands for (a folded span holds short, successful repeats).
    pub repeats: u64,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    pub cpus_asked: Option<f64>,
    pub cpus_used: f64,
    pub memory_peak_bytes: f64,
    pub memory_asked_bytes: Option<f64>,
    /// The time it was given (Snakemake's `runtime`, Slurm's `--time`), seconds.
    pub time_asked_seconds: Option<f64>,
    pub bottleneck: Option<String>,
}

impl Judgement<'_> {
    /// Its jobs, by start.
    pub fn rows(&self) -> Vec<JobRow> {
        (self.jobs.iter())
            .map(|j| JobRow {
                task: j.task().to_string(),
                tag: j.tag().map(str::to_string),
                span_id: j.span.id.clone(),
                status: j.status(),
                ending: j.ending(),
                repeats: j.repeats(),
                wall_seconds: j.wall(),
                cpu_seconds: j.cpu(),
                cpus_asked: j.cpus_asked(),
                cpus_used: j.cpus_used(),
                memory_peak_bytes: j.peak_seen(),
                memory_asked_bytes: j.memory_asked(),
                time_asked_seconds: j.time_asked(),
                bottleneck: j.verdict(),
            })
            .collect()
    }
}

/// One task's asks as `report --json` gives them: what it asked for and used, and what it
/// should ask for next time (as the page's "ask next time" and `suggest` say).
#[derive(serde::Serialize)]
pub struct AskRow {
    pub task: String,
    pub cpus_asked: Option<f64>,
    /// The busiest job's CPUs.
    pub cpus_used: f64,
    pub memory_asked_bytes: Option<f64>,
    pub memory_peak_bytes: f64,
    pub oom_killed: bool,
    /// Next time: whole CPUs, bytes in whole MiB, seconds in whole minutes.
    pub cpus: u32,
    pub memory_bytes: u64,
    pub time_seconds: u64,
    /// What should change, in the engine's words (`threads: 1, mem_mb: 430`), or `as now`.
    pub next_time: String,
}

impl Judgement<'_> {
    pub fn ask_rows(&self) -> Vec<AskRow> {
        let advice = self.advice();
        (self.asks.iter())
            .map(|(task, a)| {
                let next = a.asks();
                AskRow {
                    task: task.clone(),
                    cpus_asked: a.cpus,
                    cpus_used: a.cpus_used,
                    memory_asked_bytes: a.memory,
                    memory_peak_bytes: a.peak,
                    oom_killed: a.oom,
                    cpus: next.cpus,
                    memory_bytes: next.memory_bytes,
                    time_seconds: next.time_seconds,
                    next_time: advice.get(task).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }
}
