//! What one Snakemake run's records say, joined: the log's job blocks and failures, and the
//! metadata's finished jobs. An ended job process is matched to its record by the exact
//! command it ran; each record names one process (a retried job logs each attempt).
use std::{collections::HashSet, path::Path, time::Duration, time::SystemTime};

use super::{
    log::{Entry, Failure, Job, LogFile},
    long,
    metadata::{Metadata, Record},
    script,
};
use crate::attribution::TaskInfo;

/// Clocks and Snakemake's own stamps may differ by this much.
const SLACK: Duration = Duration::from_secs(2);

pub struct Records {
    log: LogFile,
    pub metadata: Metadata,
    /// Job blocks, and whether a process was named by one through its paths or `-p` command.
    jobs: Vec<(Job, bool)>,
    failures: Vec<(Failure, bool)>,
    ended: HashSet<String>,
    /// The log shows each job's block (not `--quiet`): a record waits for its block.
    blocks_expected: bool,
    /// Jobs logged by their rule's message (no block) not named yet.
    messages: usize,
    /// Jobs done of all the run will run, as the log last said.
    pub progress: Option<(u32, u32)>,
}

/// What a job process ran, as the records spell it.
#[derive(Clone, Copy)]
pub struct Ran<'a> {
    /// Its shell command, normalized, without the strict-mode prefix.
    pub command: &'a str,
    pub start: SystemTime,
    pub end: SystemTime,
    pub failed: bool,
    /// The script a `script:` job's command runs (`.snakemake/scripts/tmpXXXXXXXX.NAME`).
    pub script: Option<&'a str>,
    /// The part of that script's preamble naming the job's outputs, read as it started.
    pub script_outputs: Option<&'a str>,
    /// The kernel kept only the start of its command line (a very long command).
    pub truncated: bool,
    /// This is the last look: name it with what the records hold now.
    pub last_look: bool,
}

impl Ran<'_> {
    /// How well a command the records hold fits what this process ran: the same text
    /// best; then the process's command wrapping it (a `shell.prefix` or `shell.suffix`),
    /// the longer the better; for a command line the kernel cut, the record it starts.
    fn fit(&self, recorded: Option<&str>) -> Option<usize> {
        let r = recorded?;
        if r == self.command {
            return Some(usize::MAX);
        }
        if self.command.contains(r) {
            return Some(r.len());
        }
        if !self.truncated {
            return None;
        }
        let head = r.char_indices().nth(64).map_or(r, |(i, _)| &r[..i]);
        let at = self.command.find(head)?;
        r.starts_with(&self.command[at..])
            .then(|| self.command.len() - at)
    }
}

impl Records {
    pub(crate) fn new(
        workdir: &Path,
        started: SystemTime,
        host: crate::port::SharedHost,
        blocks_expected: bool,
    ) -> Self {
        Self {
            log: LogFile::new(workdir.to_path_buf(), started, host.clone()),
            metadata: Metadata::new(workdir, started, host),
            jobs: Vec::new(),
            failures: Vec::new(),
            ended: HashSet::new(),
            blocks_expected,
            messages: 0,
            progress: None,
        }
    }

    /// The jobs run in `workdir` (a `workdir:` directive): the metadata is there, and the
    /// log may be (8.30; 7 and 9 keep it where Snakemake started).
    /// The run's log, once found.
    pub(crate) fn log_path(&self) -> Option<&Path> {
        self.log.path()
    }

    pub(crate) fn move_to(&mut self, workdir: &Path) {
        self.metadata.move_to(workdir);
        self.log.also_in(workdir);
    }

    /// Reads what the engine wrote since the last call.
    pub(crate) fn refresh(&mut self) {
        for e in self.log.read_new() {
            match e {
                Entry::Job(j) => {
                    self.metadata.expect(&j.outputs);
                    self.jobs.push((j, false));
                }
                Entry::Ended(id) => {
                    self.ended.insert(id);
                }
                Entry::Failed(f) => self.failures.push((f, false)),
                Entry::Message(_) => self.messages += 1,
                // A table logged late never takes back steps already done.
                Entry::Progress { done, total } => {
                    let before = self.progress.map_or(0, |p| p.0);
                    self.progress = Some((done.max(before), total));
                }
            }
        }
        self.metadata.refresh();
    }

    /// The job's record by its exact command: the metadata of a finished job, else the
    /// log's failure or `-p` line. Among equals, the one that started nearest the process.
    pub(crate) fn exact(&mut self, ran: &Ran) -> Option<TaskInfo> {
        let record = (self.metadata.records.iter_mut())
            .filter(|r| !r.claimed)
            .filter_map(|r| Some((ran.fit(r.shellcmd.as_deref())?, r)))
            .min_by_key(|(fit, r)| (std::cmp::Reverse(*fit), abs_diff(r.start, ran.start)));
        if let Some((_, r)) = record {
            // The log's job block gives the wildcards and job id: a record read before its
            // block (the log is written as it goes, a busy machine reads it late) waits.
            if waits(&self.jobs, &mut self.messages, self.blocks_expected, r, ran) {
                return None;
            }
            r.claimed = true;
            let r = r.clone();
            return Some(self.info_from_record(&r));
        }
        let failure = (self.failures.iter_mut())
            .filter(|(_, taken)| !taken)
            .filter_map(|(f, taken)| Some((ran.fit(f.shell.as_deref())?, f, taken)))
            .min_by_key(|(fit, _, _)| std::cmp::Reverse(*fit));
        if let Some((_, f, taken)) = failure {
            *taken = true;
            let f = f.clone();
            return Some(self.info_from_failure(&f));
        }
        let block = (self.jobs.iter_mut())
            .filter(|(_, taken)| !taken)
            .filter_map(|(j, taken)| Some((ran.fit(j.shell.as_deref())?, j, taken)))
            .min_by_key(|(fit, _, _)| std::cmp::Reverse(*fit));
        if let Some((_, job, taken)) = block {
            *taken = true;
            return Some(info_from_job(job));
        }
        self.repeat(ran)
    }

    /// What the records hold, in a line, for a debug log of a job no record named.
    pub(crate) fn describe(&self) -> String {
        let secs = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64()
        };
        let records: Vec<String> = (self.metadata.records.iter())
            .map(|r| {
                let (start, end, claimed) = (secs(r.start), secs(r.end), r.claimed);
                format!(
                    "{} {:?} {start:.3}-{end:.3} claimed {claimed}",
                    r.rule, r.outputs
                )
            })
            .collect();
        format!(
            "{} job blocks; records: {}",
            self.jobs.len(),
            records.join("; ")
        )
    }

    /// A job benchmarked with `repeat(..., n)` runs its exact command n times in one
    /// attempt: a run within a taken record's time that ran its very command is that job.
    /// A `script:` job writes its script anew for each run: the run whose script names
    /// the taken record's outputs in its time is that job.
    fn repeat(&self, ran: &Ran) -> Option<TaskInfo> {
        let same_job = |r: &Record| match (&r.shellcmd, ran.script) {
            (Some(cmd), _) => cmd == ran.command,
            (None, Some(name)) => {
                r.runs_script(name)
                    && (ran.script_outputs).is_some_and(|t| script::fit(t, &r.outputs).is_some())
            }
            (None, None) => false,
        };
        let r = (self.metadata.records.iter()).find(|r| {
            r.claimed && same_job(r) && r.start <= ran.start + SLACK && ran.end <= r.end + SLACK
        })?;
        Some(block_of(&self.jobs, r).map_or_else(
            || TaskInfo {
                name: r.rule.clone(),
                ..Default::default()
            },
            info_from_job,
        ))
    }

    /// A `script:` job: the record of a job of no shell command that ran that script (8/9
    /// keep the script's name) while the process ran. The record whose outputs the job's
    /// own script names is it; where the script could not be read, the nearest in start.
    pub(crate) fn script(&mut self, ran: &Ran) -> Option<TaskInfo> {
        let name = ran.script?;
        let fits = |r: &Record| {
            !r.claimed
                && r.shellcmd.is_none()
                && r.runs_script(name)
                && r.start <= ran.end + SLACK
                && ran.start <= r.end + SLACK
        };
        let candidates = (self.metadata.records.iter_mut()).filter(|r| fits(r));
        let r = match ran.script_outputs {
            // Its record not written yet: wait for it rather than take another job's.
            Some(text) => candidates
                .filter_map(|r| Some((script::fit(text, &r.outputs)?, r)))
                .max_by_key(|(fit, r)| (*fit, std::cmp::Reverse(abs_diff(r.start, ran.start))))
                .map(|(_, r)| r),
            None => candidates.min_by_key(|r| abs_diff(r.start, ran.start)),
        };
        let Some(r) = r else {
            // At the last look a job whose script named no record takes the nearest.
            return match ran.last_look && ran.script_outputs.is_some() {
                true => self.script(&Ran {
                    script_outputs: None,
                    ..*ran
                }),
                false => None,
            };
        };
        if waits(&self.jobs, &mut self.messages, self.blocks_expected, r, ran) {
            return None;
        }
        r.claimed = true;
        ::log::debug!(
            "snakemake: a {name} job (script read: {}, last look: {}) took the record of {:?}",
            ran.script_outputs.is_some(),
            ran.last_look,
            r.outputs
        );
        let r = r.clone();
        Some(self.info_from_record(&r))
    }

    /// A job whose command was too long for a command line, its script file gone before it
    /// was read: the record of a command that long (`long::runs_from_file`) whose times
    /// cover the process, nearest in start.
    pub(crate) fn long(&mut self, ran: &Ran) -> Option<TaskInfo> {
        let r = (self.metadata.records.iter_mut())
            .filter(|r| !r.claimed && r.start <= ran.end + SLACK && ran.start <= r.end + SLACK)
            .filter(|r| r.shellcmd.as_deref().is_some_and(long::runs_from_file))
            .min_by_key(|r| abs_diff(r.start, ran.start))?;
        if waits(&self.jobs, &mut self.messages, self.blocks_expected, r, ran) {
            return None;
        }
        r.claimed = true;
        let r = r.clone();
        Some(self.info_from_record(&r))
    }

    /// A job run in a Snakemake subprocess (`--target-jobs RULE:WILDCARDS`, as for `run:`
    /// jobs): its record of no shell command, if any, is taken so no other process takes it.
    pub(crate) fn claim_target(&mut self, rule: &str, ran: &Ran) {
        let r = (self.metadata.records.iter_mut())
            .filter(|r| !r.claimed && r.shellcmd.is_none() && r.rule == rule)
            .min_by_key(|r| abs_diff(r.end, ran.end));
        if let Some(r) = r {
            r.claimed = true;
        }
    }

    /// What a job ended long ago still unmatched can be: a failure the log records without
    /// a command (a failed `script:` job in 7), else the job block whose paths its command
    /// names best: one Snakemake logged as finished, or one it never saw end whose outputs
    /// the command names (a run interrupted, by Ctrl-C say: its running jobs end with no
    /// record, `Finished` line or error, finished or killed).
    pub(crate) fn best_guess(&mut self, ran: &Ran) -> Option<TaskInfo> {
        if ran.failed
            && let Some((f, taken)) =
                (self.failures.iter_mut()).find(|(f, t)| !t && f.shell.is_none())
        {
            *taken = true;
            let f = f.clone();
            return Some(self.info_from_failure(&f));
        }
        let ended = &self.ended;
        let (job, taken) = (self.jobs.iter_mut())
            .filter(|(_, taken)| !taken)
            .filter_map(|(j, t)| {
                let done = j.jobid.as_ref().is_some_and(|id| ended.contains(id));
                let outputs = j.outputs.iter().any(|o| ran.command.contains(o.as_str()));
                (done || outputs).then(|| ((score(j, ran.command), done), j, t))
            })
            .filter(|((s, _), _, _)| *s > 0)
            .max_by_key(|(key, _, _)| *key)
            .map(|(_, j, t)| (j, t))?;
        *taken = true;
        Some(info_from_job(job))
    }

    /// The rule of a running job: its `-p` command's block, else the rule every block that
    /// names its paths best agrees on.
    pub(crate) fn likely_rule(&self, command: &str) -> Option<String> {
        if let Some((j, _)) = self
            .jobs
            .iter()
            .find(|(j, _)| j.shell.as_deref() == Some(command))
        {
            return Some(j.rule.clone());
        }
        let best = self.jobs.iter().map(|(j, _)| score(j, command)).max()?;
        if best == 0 {
            return None;
        }
        let mut rules = (self.jobs.iter())
            .filter(|(j, _)| score(j, command) == best)
            .map(|(j, _)| j.rule.as_str());
        let first = rules.next()?;
        rules.all(|r| r == first).then(|| first.to_string())
    }

    /// The block of the job a metadata record is about: same rule, one of its outputs. The
    /// block is taken: it names this process, no other by a guess.
    fn info_from_record(&mut self, r: &Record) -> TaskInfo {
        match block_at(&self.jobs, r) {
            Some(at) => take(&mut self.jobs[at]),
            None => TaskInfo {
                name: r.rule.clone(),
                ..Default::default()
            },
        }
    }

    fn info_from_failure(&mut self, f: &Failure) -> TaskInfo {
        let block = (self.jobs.iter())
            .rposition(|(j, _)| j.rule == f.rule && j.jobid.is_some() && j.jobid == f.jobid);
        match block {
            Some(at) => take(&mut self.jobs[at]),
            None => TaskInfo {
                name: f.rule.clone(),
                run_id: f.jobid.clone().unwrap_or_default(),
                ..Default::default()
            },
        }
    }
}

/// Whether record `r` waits for its job's block: the log is written as it goes, and a
/// busy machine reads a block late (the log's last block is read once a line follows it).
/// A job of a rule with a `message:` has no block: a record of a rule no block names is
/// one while the log shows such a job not named yet.
fn waits(
    jobs: &[(Job, bool)],
    messages: &mut usize,
    blocks_expected: bool,
    r: &Record,
    ran: &Ran,
) -> bool {
    if ran.last_look || !blocks_expected || block_of(jobs, r).is_some() {
        return false;
    }
    if *messages > 0 && !jobs.iter().any(|(j, _)| j.rule == r.rule) {
        *messages -= 1;
        return false;
    }
    true
}

/// A job block names the process it is: marked so that no guess reuses it.
fn take((job, taken): &mut (Job, bool)) -> TaskInfo {
    *taken = true;
    info_from_job(job)
}

/// Where the log's block of the job that wrote record `r` is (see [`block_of`]).
fn block_at(jobs: &[(Job, bool)], r: &Record) -> Option<usize> {
    let listed = |o: &String| r.outputs.iter().any(|ro| names_output(o, ro));
    jobs.iter()
        .rposition(|(j, _)| j.rule == r.rule && j.outputs.iter().any(listed))
}

/// Whether a block's output names `path`: the same path, or (7's `dynamic()` outputs,
/// logged as `clusters/{*}.txt`) a pattern it fits.
fn names_output(listed: &str, path: &str) -> bool {
    match listed.split_once("{*}") {
        Some((head, tail)) => {
            path.len() >= head.len() + tail.len() && path.starts_with(head) && path.ends_with(tail)
        }
        None => listed == path,
    }
}

/// The log's block of the job that wrote record `r`: the same rule and an output in common
/// (the latest: a retried job logs a block per attempt).
fn block_of<'a>(jobs: &'a [(Job, bool)], r: &Record) -> Option<&'a Job> {
    block_at(jobs, r).map(|at| &jobs[at].0)
}

fn abs_diff(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b)
        .or_else(|_| b.duration_since(a))
        .unwrap_or_default()
}

pub(crate) fn info_from_job(job: &Job) -> TaskInfo {
    TaskInfo {
        name: job.rule.clone(),
        run_id: job.jobid.clone().unwrap_or_default(),
        wildcards: job.wildcards.clone(),
        // Snakemake logs threads only above 1: a job block without is 1 thread.
        threads: Some(job.threads.unwrap_or(1)),
        memory_bytes: job.memory_bytes,
        time_limit_s: job.time_limit_s,
        logs: job.logs.clone(),
        ..Default::default()
    }
}

/// How strongly a job's block matches a shell command: outputs count double.
fn score(job: &Job, command: &str) -> usize {
    let named = |paths: &[String]| {
        paths
            .iter()
            .filter(|p| command.contains(p.as_str()))
            .count()
    };
    2 * named(&job.outputs) + named(&job.inputs)
}
