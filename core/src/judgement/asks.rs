//! What each task asked for (the engine's threads and memory, a cgroup's quota and limit,
//! a cpuset) against what its jobs used, and the one ask for next time, in the engine's own
//! words: what the page's "ask next time", the terminal's and the page's tables' advice,
//! `report --json`'s asks and the over-ask finding say alike (`suggest` reads the same jobs
//! with the same rule, `report::asks`).
use std::collections::BTreeMap;

use pipetrace_semconv::attr;

use super::{job::Job, units::bytes};
use crate::sizing as asks;

/// One task's asks and uses over its jobs.
#[derive(Default, Debug, PartialEq)]
pub struct Asked {
    pub cpus: Option<f64>,
    pub cpus_used: f64,
    pub memory: Option<f64>,
    pub peak: f64,
    pub oom: bool,
    /// What the engine or the system asked by (`engine.threads`, `cgroup.cpu.max`...).
    pub source: Option<String>,
    /// Each job's figures, for the next time's asks (`report::asks`, as `suggest` asks).
    pub jobs: Vec<asks::JobFigures>,
}

impl Asked {
    fn add(&mut self, j: &Job) {
        if let Some(n) = j.cpus_asked() {
            self.cpus = Some(self.cpus.unwrap_or(0.0).max(n));
            self.source = j.span.text(attr::CPU_ALLOCATION_SOURCE).map(str::to_string);
        }
        self.cpus_used = self.cpus_used.max(j.cpus_used());
        if let Some(m) = j.memory_asked() {
            self.memory = Some(self.memory.unwrap_or(0.0).max(m));
        }
        self.peak = self.peak.max(j.peak_seen());
        self.oom |= j.oom().is_some();
        self.jobs.push(j.figures());
    }

    pub(crate) fn asks(&self) -> asks::Asks {
        asks::asks(&self.jobs, asks::Policy::default())
    }

    /// Whether its asks fit what its jobs needed (the rule every view reads).
    pub(crate) fn fitted(&self) -> asks::Fitted {
        asks::fit(&self.jobs, asks::Policy::default())
    }

    /// CPUs to ask for next time, where some were asked for.
    pub(crate) fn next_cpus(&self) -> Option<f64> {
        self.cpus.map(|_| f64::from(self.asks().cpus))
    }

    /// Memory to ask for next time, where the jobs had a peak.
    pub(crate) fn next_memory(&self) -> Option<f64> {
        (self.peak > 0.0 || self.oom).then(|| self.asks().memory_bytes as f64)
    }
}

/// The asks of each task that asked for anything.
pub fn by_task(jobs: &[Job]) -> BTreeMap<String, Asked> {
    let mut all: BTreeMap<String, Asked> = BTreeMap::new();
    for j in jobs {
        all.entry(j.task().to_string()).or_default().add(j);
    }
    all.retain(|_, a| a.cpus.is_some() || a.memory.is_some());
    all
}

/// The words an engine asks in: Snakemake's `threads` and `mem_mb`, Nextflow's `cpus` and
/// `memory`, CWL's `coresMin` and `ramMin`.
fn words(engine: &str) -> (&'static str, &'static str) {
    match engine {
        "snakemake" => ("threads", "mem_mb"),
        "nextflow" => ("cpus", "memory"),
        "cwl" | "cwltool" | "toil" => ("coresMin", "ramMin"),
        _ => ("CPUs", "memory"),
    }
}

/// The asks that should change, in the engine's words (`threads: 1, mem_mb: 430`);
/// empty when it should ask as now.
pub fn next_time(a: &Asked, engine: &str) -> String {
    let (cpus, mem) = words(engine);
    let mut parts = Vec::new();
    // Only what should change.
    if let Some(n) = a.next_cpus().filter(|n| Some(*n) != a.cpus) {
        parts.push(format!("{cpus}: {n:.0}"));
    }
    let new = |m: &f64| (a.memory.is_some() || a.oom) && Some(*m) != a.memory;
    if let Some(m) = a.next_memory().filter(new) {
        let mib = m / 1048576.0;
        // Nextflow's MB is a MiB.
        parts.push(match engine {
            "nextflow" => format!("{mem}: '{mib:.0} MB'"),
            // Snakemake's mem_mb counts 10^6 bytes.
            "snakemake" => format!("{mem}: {:.0}", (m / 1e6).ceil()),
            _ if mem == "memory" => format!("{mem}: {}", bytes(m)),
            _ => format!("{mem}: {mib:.0}"),
        });
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::{
        super::{job::jobs_of, testing::*},
        *,
    };

    const MIB: f64 = 1048576.0;

    #[test]
    fn next_time_asks_for_what_the_busiest_job_used_with_room() {
        let job = |id: &str, cpu: f64, peak: f64| {
            with(
                task(id, "align", None, (0.0, 10.0)),
                &[
                    (attr::CPU_ALLOCATED, 4.0),
                    (attr::CPU_USER_TIME, cpu),
                    (attr::MEMORY_PEAK, peak),
                    (attr::MEMORY_LIMIT, 1024.0 * MIB),
                ],
                &[(attr::CPU_ALLOCATION_SOURCE, "engine.threads")],
            )
        };
        let spans = [job("a", 12.0, 100.0 * MIB), job("b", 15.0, 300.0 * MIB)];
        let jobs = jobs_of(&spans);
        let a = &by_task(&jobs)["align"];
        assert_eq!(a.next_cpus(), Some(2.0), "1.5 CPUs busy at most");
        assert_eq!(a.next_memory(), Some(360.0 * MIB), "300 MiB and 20%");
        assert_eq!(next_time(a, "snakemake"), "threads: 2, mem_mb: 378");
        assert_eq!(next_time(a, "nextflow"), "cpus: 2, memory: '360 MB'");
    }

    #[test]
    fn a_task_that_asked_for_nothing_is_not_listed_and_an_oom_asks_for_twice() {
        let spans = [task("a", "free", None, (0.0, 1.0))];
        assert!(by_task(&jobs_of(&spans)).is_empty());
        let a = Asked {
            memory: Some(64.0 * MIB),
            peak: 64.0 * MIB,
            oom: true,
            jobs: vec![asks::JobFigures {
                peak: 64 << 20,
                oom: true,
                oom_limit: Some(64 << 20),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(a.next_memory(), Some(128.0 * MIB));
    }
}
