//! Snakemake jobs waiting for their names: a job's process ends a moment before Snakemake
//! logs that the job ended, and only then can the two be matched with certainty.
use super::{
    Attributor, Finished, ProcKey, TaskInfo, executable_name, naming, shell_command, snakemake,
};
use std::collections::HashSet;

use crate::{host, tree::Proc};

/// How an ended Snakemake job got its name.
enum Resolution {
    /// Its block in the log: rule, jobid, wildcards, threads.
    Job(snakemake::Job),
    /// Snakemake's metadata (quiet runs): the rule only.
    Rule(String),
    /// Neither said: named by its command.
    Unknown,
}

pub(super) struct Pending {
    pub(super) proc: Proc,
    /// The job's shell command, without Snakemake's prefix.
    pub(super) command: String,
    pub(super) since: std::time::Instant,
}

/// How often pending tasks look at the engine's log and metadata again.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// How long an ended job waits for Snakemake to log its end before it is matched anyway.
const LOG_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Attributor {
    /// Names the pending Snakemake tasks the log now accounts for; with `force`, all of
    /// them (at the end of `pipetrace run`). Also releases run spans that waited for them.
    /// `settling`: runs with processes that ended but whose end is not final yet. Their
    /// pending tasks wait: the log may already say those jobs ended, and a job named now
    /// could take one of theirs.
    pub fn poll(&mut self, force: bool, settling: &HashSet<ProcKey>) -> Vec<Finished> {
        let mut out = Vec::new();
        let keys: Vec<ProcKey> = self.runs.keys().copied().collect();
        for key in keys {
            if !force && settling.contains(&key) {
                continue;
            }
            for (p, how) in self.resolve(key, force) {
                let info = Self::info_for(&p, how);
                out.push(self.task_done(key, p, info));
            }
            let Some(run) = self.runs.get_mut(&key) else {
                continue;
            };
            let ended = match run.pending.is_empty() {
                true => run.ended_root.take().map(|root| (root, run.info.clone())),
                false => None,
            };
            if let Some((root, info)) = ended {
                out.push(self.run_done(root, info));
            }
        }
        out
    }

    /// The pending tasks of run `key` that can be named now, and how.
    fn resolve(&mut self, key: ProcKey, force: bool) -> Vec<(Proc, Resolution)> {
        let Some(run) = self.runs.get_mut(&key) else {
            return Vec::new();
        };
        let Some(log) = run.snakemake.as_mut() else {
            return Vec::new();
        };
        // Polls come with every batch of events: read the engine's files at most every
        // LOOK_EVERY, and its working directory only until its log is found.
        let recent = run.last_look.is_some_and(|t| t.elapsed() < LOOK_EVERY);
        if run.pending.is_empty() || (recent && !force) {
            return Vec::new();
        }
        run.last_look = Some(std::time::Instant::now());
        if log.log_path().is_none()
            && let Some(cwd) = host::cwd(key.pid)
        {
            log.set_workdir(cwd);
        }
        let overdue = |p: &Pending| force || p.since.elapsed() > LOG_WAIT;
        let late = run.pending.iter().any(overdue);
        // Equal matches go to the job that started first: ended jobs reach this list in the
        // order their usage reports arrive, which is not always the order they ran in.
        run.pending
            .sort_by_key(|p| (p.proc.start_ns, p.proc.key.pid));
        let commands: Vec<&str> = run.pending.iter().map(|p| p.command.as_str()).collect();
        let jobs = log.assign(&commands, late);
        let mut resolved = Vec::new();
        for (pending, job) in std::mem::take(&mut run.pending).into_iter().zip(jobs) {
            // A quiet log names no jobs: Snakemake's metadata still has the rule.
            let how = match job {
                Some(job) => Some(Resolution::Job(job)),
                None if log.is_quiet() => match log.rule_from_metadata(&pending.command) {
                    Some(rule) => Some(Resolution::Rule(rule)),
                    None => overdue(&pending).then_some(Resolution::Unknown),
                },
                None => overdue(&pending).then_some(Resolution::Unknown),
            };
            match how {
                Some(how) => resolved.push((pending.proc, how)),
                None => run.pending.push(pending),
            }
        }
        resolved
    }

    fn info_for(p: &Proc, how: Resolution) -> TaskInfo {
        match how {
            Resolution::Job(job) => TaskInfo {
                name: job.rule,
                run_id: job
                    .jobid
                    .unwrap_or_else(|| format!("{}-{}", p.key.pid, p.key.start_ticks)),
                wildcards: job.wildcards,
                // Snakemake logs threads only above 1: a job block without is 1 thread.
                threads: Some(job.threads.unwrap_or(1)),
                memory_bytes: job.mem_mb.map(|mb| mb << 20),
            },
            Resolution::Rule(rule) => Self::fallback_info(p, rule),
            Resolution::Unknown => {
                let command = p.first_image.as_ref().and_then(|i| shell_command(&i.argv));
                let first = command
                    .map(snakemake::strip_prefix)
                    .and_then(|c| naming::shell_words(c).into_iter().next())
                    .map(|w| executable_name(&w).to_string());
                Self::fallback_info(p, first.unwrap_or_else(|| Self::task_name(p)))
            }
        }
    }

    /// Tasks waiting for their names, across runs.
    pub fn pending(&self) -> usize {
        self.runs
            .values()
            .map(|r| r.pending.len() + usize::from(r.ended_root.is_some()))
            .sum()
    }
}
