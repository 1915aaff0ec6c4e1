//! How far a Nextflow run is, from its `.nextflow.log` (logback: `MMM-dd HH:mm:ss.SSS
//! [thread] LEVEL logger - message`). Nextflow logs each task as it submits it, at INFO
//! (`Session.notifyTaskSubmit`: `[ab/123456] Submitted process > NAME (tag)`, `Re-submitted
//! process` for a retry; `TaskProcessor`: `[ab/123456] Cached process > NAME` for a task
//! `-resume` takes from its cache), and as its monitor sees it end, at DEBUG, which the file
//! always has (`TaskPollingMonitor.checkTaskStatus`: `Task completed > TaskHandler[id: 1;
//! name: NAME; status: COMPLETED; exit: 0; error: -; workDir: /w/ab/123456…]`, or `Task
//! timed-out > …`). It does not log the tasks waiting for a free slot, so the total is what
//! it has submitted so far.
//!
//! A grid executor (Slurm, SGE, PBS, LSF…) also logs where each job runs as it submits it
//! (`GridTaskHandler.submit`: `[SLURM] submitted process NAME > jobId: 42; workDir: /w/ab/…`),
//! and counts the job running once its wrapper has touched `.command.begin` there
//! (`GridTaskHandler.checkIfRunning`): until then it is queued (pending in the scheduler).
//! A local task runs as soon as it is submitted.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::SystemTime,
};

use super::super::Progress;
use crate::port::SharedHost;

/// What a look reads of the log at most: a long run's log is caught up over a few looks.
const READ: usize = 16 << 20;
/// How many queued tasks' `.command.begin` a look checks at most (the oldest first).
const CHECKS: usize = 256;
/// A line longer than this is no line the counts need: dropped.
const LONGEST: usize = 1 << 20;

/// What a line of the log says about the run's tasks.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    /// `Session UUID: …`: whose log this is.
    Session(&'a str),
    /// `N E X T F L O W  ~  version 24.10.0`: the version that writes the log.
    Version(&'a str),
    Submitted {
        hash: &'a str,
        name: &'a str,
    },
    /// Taken from the cache: done as it is counted.
    Cached,
    /// A grid executor submitted a job for the task in this work directory.
    Grid(&'a str),
    /// A task ended: its work directory's hash where the line has it, and its name.
    Completed {
        hash: Option<String>,
        name: Option<&'a str>,
    },
}

/// The message of a log line: what follows `[thread] LEVEL logger - `.
fn message(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("] ")?;
    let mut words = rest.trim_start().splitn(2, ' ');
    let level = words.next()?;
    let rest = words.next()?.trim_start();
    let known = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
    (known.contains(&level)).then_some(())?;
    let (_logger, msg) = rest.split_once(" - ")?;
    Some(msg)
}

/// The log's short hash of a work directory: `ab/123456` of `…/ab/123456789…`.
fn hash_of(work_dir: &str) -> Option<String> {
    let mut parts = work_dir.trim_end_matches('/').rsplit('/');
    let (long, prefix) = (parts.next()?, parts.next()?);
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    (prefix.len() == 2 && long.len() >= 6 && hex(prefix) && hex(long))
        .then(|| format!("{prefix}/{}", &long[..6]))
}

/// `[ab/123456] <what> > NAME`.
fn hashed<'a>(msg: &'a str, what: &str) -> Option<(&'a str, &'a str)> {
    let rest = msg.strip_prefix('[')?;
    let (hash, rest) = rest.split_once("] ")?;
    let name = rest.strip_prefix(what)?.strip_prefix(" > ")?;
    (hash_of(hash).is_some_and(|h| h == hash)).then_some((hash, name))
}

fn parse(line: &str) -> Option<Line<'_>> {
    let msg = message(line)?;
    if let Some(s) = msg.strip_prefix("Session UUID: ") {
        return Some(Line::Session(s.trim()));
    }
    if let Some(v) = msg.strip_prefix("N E X T F L O W") {
        let v = v.split_once("version ")?.1.split_whitespace().next()?;
        return Some(Line::Version(v));
    }
    for what in ["Submitted process", "Re-submitted process"] {
        if let Some((hash, name)) = hashed(msg, what) {
            return Some(Line::Submitted { hash, name });
        }
    }
    if hashed(msg, "Cached process").is_some() {
        return Some(Line::Cached);
    }
    if msg.starts_with('[') && msg.contains("] submitted process ") {
        let (_, dir) = msg.rsplit_once("; workDir: ")?;
        return Some(Line::Grid(dir.trim()));
    }
    let handler = ["Task completed > ", "Task timed-out > "]
        .iter()
        .find_map(|p| msg.strip_prefix(p))?
        .strip_prefix("TaskHandler[")?;
    // `…; workDir: /w/ab/cd…]`, a grid job's `… started: -; exited: -; ]` after it.
    let dir = (handler.rsplit_once("workDir: ")).and_then(|(_, d)| d.split([' ', ']']).next());
    let name = (handler.split_once("name: ")).and_then(|(_, n)| n.split("; ").next());
    Some(Line::Completed {
        hash: dir.and_then(hash_of),
        name,
    })
}

/// A task submitted and not ended yet.
#[derive(Debug)]
struct Open {
    hash: String,
    name: String,
    /// Where a grid executor runs it: queued until `.command.begin` is there.
    work_dir: Option<PathBuf>,
    begun: bool,
}

/// The counts so far.
#[derive(Debug, Default)]
struct Tally {
    submitted: u32,
    done: u32,
    cached: u32,
    version: Option<String>,
    open: Vec<Open>,
    /// Grid jobs' work directories by hash, logged before their task's submission line.
    grid: HashMap<String, PathBuf>,
}

impl Tally {
    fn add(&mut self, line: Line) {
        match line {
            Line::Session(_) | Line::Version(_) => {}
            Line::Submitted { hash, name } => {
                self.submitted += 1;
                self.open.push(Open {
                    hash: hash.to_string(),
                    name: name.to_string(),
                    work_dir: self.grid.remove(hash),
                    begun: false,
                });
            }
            Line::Cached => {
                self.submitted += 1;
                self.done += 1;
                self.cached += 1;
            }
            Line::Grid(dir) => {
                if let Some(h) = hash_of(dir) {
                    self.grid.insert(h, PathBuf::from(dir));
                }
            }
            Line::Completed { hash, name } => {
                self.done += 1;
                let by_hash = hash.and_then(|h| self.open.iter().position(|o| o.hash == h));
                let by_name = || self.open.iter().position(|o| Some(o.name.as_str()) == name);
                if let Some(i) = by_hash.or_else(by_name) {
                    self.open.remove(i);
                }
            }
        }
    }

    /// Marks begun the queued grid jobs whose wrapper has started (at most `CHECKS`).
    fn look_begun(&mut self, begun: &dyn Fn(&Path) -> bool) {
        let waiting = self.open.iter_mut().filter(|o| !o.begun);
        for o in waiting.filter(|o| o.work_dir.is_some()).take(CHECKS) {
            o.begun = o.work_dir.as_deref().is_some_and(begun);
        }
    }

    fn progress(&self) -> Progress {
        let queued = (self.open.iter())
            .filter(|o| o.work_dir.is_some() && !o.begun)
            .count() as u32;
        Progress {
            done: self.done,
            total: self.submitted.max(self.done),
            queued: Some(queued),
            cached: self.cached,
        }
    }
}

/// Follows one run's `.nextflow.log`, once it is the run's own.
pub struct LogProgress {
    host: SharedHost,
    path: PathBuf,
    offset: u64,
    pending: String,
    /// The run's session, once `.nextflow/history` says it.
    session: Option<String>,
    /// The log's `Session UUID:` line named the run's session.
    ours: bool,
    /// The file last found to be an earlier run's (not rotated yet): its length and time.
    stale: Option<(u64, SystemTime)>,
    tally: Tally,
}

impl LogProgress {
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub(crate) fn new(host: SharedHost, path: PathBuf) -> Self {
        Self {
            host,
            path,
            offset: 0,
            pending: String::new(),
            session: None,
            ours: false,
            stale: None,
            tally: Tally::default(),
        }
    }

    /// The run's session id (its history record's): only a log of that session counts.
    pub(crate) fn set_session(&mut self, session: &str) {
        if self.session.as_deref() != Some(session) {
            self.session = Some(session.to_string());
        }
    }

    /// The Nextflow version that wrote the run's own log, once it is found.
    pub(crate) fn version(&self) -> Option<String> {
        self.ours.then(|| self.tally.version.clone()).flatten()
    }

    /// The counts as the log says now; None before the run's own log is found.
    pub(crate) fn progress(&mut self) -> Option<Progress> {
        self.read_new();
        if !self.ours {
            return None;
        }
        let host = &self.host;
        self.tally
            .look_begun(&|dir| host.facts(&dir.join(".command.begin")).is_ok());
        Some(self.tally.progress())
    }

    fn read_new(&mut self) {
        let session = self.session.clone();
        let Some(session) = session else { return };
        let Ok(facts) = self.host.facts(&self.path) else {
            return;
        };
        if self.stale == Some((facts.len, facts.modified)) {
            return;
        }
        // Shorter than what was read: another file by the same name (a new run's).
        if facts.len < self.offset {
            self.restart();
        }
        let Ok(buf) = self.host.read_from(&self.path, self.offset, READ) else {
            return;
        };
        self.offset += buf.len() as u64;
        let mut text = std::mem::take(&mut self.pending);
        text.push_str(&String::from_utf8_lossy(&buf));
        let mut used = 0;
        for line in text.split_inclusive('\n') {
            if !line.ends_with('\n') {
                break;
            }
            used += line.len();
            match parse(line.trim_end()) {
                Some(Line::Session(s)) if !self.ours && s != session => {
                    // An earlier run's log, until this run's takes its name.
                    self.stale = Some((facts.len, facts.modified));
                    self.restart();
                    return;
                }
                Some(Line::Session(_)) => self.ours = true,
                // Its banner comes before the session's line: a later one restarts.
                Some(Line::Version(v)) => self.tally.version = Some(v.to_string()),
                Some(l) if self.ours => self.tally.add(l),
                _ => {}
            }
        }
        text.drain(..used);
        if text.len() <= LONGEST {
            self.pending = text;
        }
    }

    fn restart(&mut self) {
        (self.offset, self.ours, self.tally) = (0, false, Tally::default());
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests;
