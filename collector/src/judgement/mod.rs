//! One judgement of a run, computed once from its spans: its jobs and what to look at first.
//! Every view renders it and computes none of its own: the terminal's end of a run, the
//! HTML page, `report --json` and `report --fail-on`.
mod findings;
pub mod job;
pub mod units;

pub use findings::{Finding, Rank, findings};

use crate::report::{Kind, ReportSpan};

/// A run's jobs and its findings, most serious first.
pub struct Judgement<'a> {
    pub run: Option<&'a ReportSpan>,
    pub jobs: Vec<job::Job<'a>>,
    pub findings: Vec<Finding>,
}

impl<'a> Judgement<'a> {
    /// The judgement of one run's spans (one trace).
    pub fn of(spans: &'a [ReportSpan]) -> Self {
        let run = spans.iter().find(|s| s.kind == Kind::Run);
        let jobs = job::jobs_of(spans);
        let findings = findings(run, &jobs);
        Judgement {
            run,
            jobs,
            findings,
        }
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
                bottleneck: j.verdict(),
            })
            .collect()
    }
}
