//! Snakemake's log, `.snakemake/log/<time>.snakemake.log`, as Snakemake 7 and 8/9 write it:
//! a block per job as it starts (`rule X:` / `localrule` / `checkpoint`, then indented
//! `jobid`, `output`, `wildcards`, `threads`, `resources`), `Finished job N.` (7) or
//! `Finished jobid: N (Rule: X)` (8/9) as it ends, and for a failed job an `Error in rule X:`
//! block with its jobid and, for shell jobs, its `shell:` command. 8/9 also log the failed
//! command exactly (`Command '...' returned non-zero exit status N.`, or `... died with
//! <Signals.SIGKILL: 9>.` for a job killed by a signal) and, with `-p`, `Shell command: ...`
//! after a job's block. A job of a rule with a `message:` is logged as `Job N: <message>`
//! instead of a block (7 to 9): no rule, paths or wildcards.
use std::{
    path::PathBuf,
    time::{Duration, SystemTime},
};

use super::metadata::normalize;
use crate::port::SharedHost;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Job {
    pub rule: String,
    pub jobid: Option<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub wildcards: Option<String>,
    pub threads: Option<u32>,
    /// The memory among the job's resources, if declared, in bytes: its `mem_mib` (2^20
    /// bytes, which Snakemake derives from `mem_mb` and prints beside it), else its
    /// `mem_mb` (10^6 bytes, as Snakemake counts it).
    pub memory_bytes: Option<u64>,
    /// Its `runtime` resource (minutes, as Snakemake counts it), in seconds.
    pub time_limit_s: Option<u64>,
    /// The job's shell command (normalized) where the log says it (`-p`).
    pub shell: Option<String>,
    /// Its `log:` files, as the log lists them (relative to the working directory).
    pub logs: Vec<String>,
}

/// A failed job: its `Error in rule` block, with the command it ran where the log says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failure {
    pub rule: String,
    pub jobid: Option<String>,
    /// Normalized, without Snakemake's strict-mode prefix.
    pub shell: Option<String>,
}

/// What the log says: a job started, ended, or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Job(Job),
    Ended(String),
    Failed(Failure),
    /// A job logged by its rule's message: its jobid.
    Message(String),
    /// How far the run is: jobs done of all it will run (`N of M steps (P%) done`, or the
    /// `total` of the `Job stats:` table before any finished).
    Progress {
        done: u32,
        total: u32,
    },
}

/// The block being read.
enum Open {
    Job(Job),
    Failure(Failure, bool),
}

/// Parses log text. Returns the entries and how many bytes were consumed: a block still
/// being written (no line after it yet) is left for the next call.
pub(crate) fn parse_blocks(text: &str) -> (Vec<Entry>, usize) {
    let mut p = Parser::default();
    let mut consumed = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        pos += line.len();
        if !line.ends_with('\n') {
            break;
        }
        p.line(line.trim_end_matches(['\n', '\r']));
        if p.open.is_none() && p.command.is_none() {
            consumed = pos;
        }
    }
    (p.out, consumed)
}

#[derive(Default)]
struct Parser {
    out: Vec<Entry>,
    open: Option<Open>,
    /// The text of a `Command '...' returned non-zero` message being read (8/9).
    command: Option<String>,
    /// The last failed command read, for the error block that follows it.
    failed_command: Option<String>,
    /// How far the open block is indented (4 inside a group job).
    indent: usize,
    /// Inside a `Job stats:` table.
    stats: bool,
}

/// `N of M steps (P%) done`.
fn steps_done(l: &str) -> Option<(u32, u32)> {
    let rest = l.strip_suffix(" done")?;
    let (counts, _) = rest.split_once(" steps (")?;
    let (done, total) = counts.split_once(" of ")?;
    Some((done.trim().parse().ok()?, total.trim().parse().ok()?))
}

fn header(l: &str) -> Option<&str> {
    ["localrule ", "rule ", "localcheckpoint ", "checkpoint "]
        .iter()
        .find_map(|p| l.strip_prefix(p))
        .and_then(|r| r.strip_suffix(':'))
        .filter(|r| !r.is_empty() && !r.contains(' '))
}

/// How Python's `CalledProcessError` ends the command it quotes: an exit status, or the
/// signal that killed it (`died with <Signals.SIGKILL: 9>.`, `died with unknown signal N.`).
const COMMAND_ENDS: [&str; 2] = ["' returned non-zero exit status", "' died with "];

/// Where the quoted command of a failure message ends in `text`, if it does.
fn command_end(text: &str) -> Option<usize> {
    COMMAND_ENDS.iter().filter_map(|e| text.rfind(e)).max()
}

/// A failed command as Python prints it, without the strict-mode prefix.
fn failed_command(text: &str) -> Option<String> {
    let cmd = &text[..command_end(text)?];
    Some(normalize(crate::attribution::naming::strip_shell_prefix(
        cmd,
    )))
}

impl Parser {
    fn close(&mut self) {
        match self.open.take() {
            Some(Open::Job(j)) => self.out.push(Entry::Job(j)),
            Some(Open::Failure(mut f, _)) => {
                f.shell = f.shell.or_else(|| self.failed_command.take());
                self.failed_command = None;
                self.out.push(Entry::Failed(f));
            }
            None => {}
        }
    }

    fn line(&mut self, l: &str) {
        // Snakemake follows the message with the job's error block: a message of some
        // other ending is dropped there rather than swallowing the rest of the log.
        if self.command.is_some() && l.starts_with("Error in rule ") {
            self.command = None;
        }
        if let Some(text) = self.command.as_mut() {
            text.push('\n');
            text.push_str(l);
            // A command the message never ends would swallow the rest of the log.
            if command_end(l).is_some() {
                self.failed_command = self.command.take().as_deref().and_then(failed_command);
            }
            return;
        }
        if let Some(rest) = l.strip_prefix("Command '") {
            self.close();
            match command_end(rest).is_some() {
                true => self.failed_command = failed_command(rest),
                false => self.command = Some(rest.to_string()),
            }
            return;
        }
        if let Some((done, total)) = steps_done(l) {
            self.close();
            self.out.push(Entry::Progress { done, total });
            return;
        }
        if l == "Job stats:" || l == "Job counts:" {
            self.close();
            self.stats = true;
            return;
        }
        if self.stats {
            // The table's last row counts every job the run will run.
            let mut w = l.split_whitespace();
            match (w.next(), w.next().and_then(|n| n.parse().ok())) {
                (Some("total"), Some(total)) => {
                    self.out.push(Entry::Progress { done: 0, total });
                    self.stats = false;
                }
                (None, _) => self.stats = false,
                _ => {}
            }
            return;
        }
        if let Some(id) = message_job(l) {
            self.close();
            self.out.push(Entry::Message(id.to_string()));
            return;
        }
        if let Some(id) = ended(l) {
            self.close();
            self.out.push(Entry::Ended(id.to_string()));
            return;
        }
        if let Some(cmd) = l.strip_prefix("Shell command: ") {
            self.close();
            if let Some(Entry::Job(j)) = self.out.last_mut()
                && cmd != "None"
            {
                j.shell = Some(normalize(cmd));
            }
            return;
        }
        let error = l
            .strip_prefix("Error in rule ")
            .and_then(|r| r.strip_suffix(':'));
        // The jobs of a group job (a pipe group) are logged as blocks indented once more.
        let (indent, rest) = match l.strip_prefix("    ") {
            Some(r) if header(r).is_some() => (4, r),
            _ => (0, l),
        };
        if let Some(rule) = header(rest).or(error) {
            self.close();
            let rule = rule.to_string();
            self.indent = indent;
            self.open = Some(match error {
                Some(_) => Open::Failure(
                    Failure {
                        rule,
                        ..Default::default()
                    },
                    false,
                ),
                None => Open::Job(Job {
                    rule,
                    ..Default::default()
                }),
            });
            return;
        }
        let inside = l.get(..self.indent).is_some_and(|i| i.trim().is_empty());
        let field = l.get(self.indent..).and_then(|f| f.strip_prefix("    "));
        match field {
            Some(field) if inside && self.open.is_some() => self.field(field),
            _ => self.close(),
        }
    }

    fn field(&mut self, field: &str) {
        match self.open.as_mut() {
            Some(Open::Failure(f, in_shell)) => {
                if *in_shell && let Some(cmd) = field.strip_prefix("    ") {
                    // The note Snakemake adds after the command is not part of it.
                    let note = cmd.starts_with('(') && cmd.contains("exit code");
                    if !note {
                        let sh = f.shell.get_or_insert_with(String::new);
                        sh.push(' ');
                        sh.push_str(cmd);
                        *sh = normalize(sh);
                    }
                    return;
                }
                let (key, value) = split_field(field);
                *in_shell = key == "shell";
                if key == "jobid" {
                    f.jobid = Some(value.to_string());
                }
            }
            Some(Open::Job(job)) => {
                let (key, value) = split_field(field);
                // Paths may carry a flag: `stream/a.fq (pipe)`.
                let path = |s: &str| match s.rsplit_once(" (") {
                    Some((p, flag)) if flag.ends_with(')') => p.to_string(),
                    _ => s.to_string(),
                };
                let list = || value.split(", ").map(path).filter(|s| !s.is_empty());
                match key {
                    "jobid" => job.jobid = Some(value.to_string()),
                    "input" => job.inputs = list().collect(),
                    "output" => job.outputs = list().collect(),
                    "log" => job.logs = list().collect(),
                    "wildcards" => job.wildcards = Some(value.to_string()),
                    "threads" => job.threads = value.parse().ok(),
                    "resources" => {
                        job.memory_bytes = memory_bytes(list());
                        job.time_limit_s = runtime_s(list());
                    }
                    _ => {}
                }
            }
            None => {}
        }
    }
}

/// A job's memory from its resources (`mem_mb=4000, mem_mib=3815`), in bytes.
fn memory_bytes(resources: impl Iterator<Item = String>) -> Option<u64> {
    let (mut mib, mut mb) = (None, None);
    for r in resources {
        let num = |p: &str| r.strip_prefix(p).and_then(|v| v.parse::<u64>().ok());
        mib = mib.or(num("mem_mib="));
        mb = mb.or(num("mem_mb="));
    }
    mib.map(|m| m << 20).or(mb.map(|m| m * 1_000_000))
}

/// A job's `runtime` resource (minutes) in seconds.
fn runtime_s(mut resources: impl Iterator<Item = String>) -> Option<u64> {
    resources.find_map(|r| {
        r.strip_prefix("runtime=")?
            .parse::<u64>()
            .ok()
            .map(|m| m * 60)
    })
}

fn split_field(field: &str) -> (&str, &str) {
    let f = field.trim();
    f.split_once(": ").unwrap_or((f.trim_end_matches(':'), ""))
}

/// `Job N: <message>`: a job of a rule with a `message:`.
fn message_job(l: &str) -> Option<&str> {
    let (id, _) = l.strip_prefix("Job ")?.split_once(": ")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// `Finished job N.` (7) or `Finished jobid: N (Rule: X)` (8/9).
fn ended(l: &str) -> Option<&str> {
    l.strip_prefix("Finished job ")
        .and_then(|r| r.strip_suffix('.'))
        .or_else(|| {
            l.strip_prefix("Finished jobid: ")
                .and_then(|r| r.split(' ').next())
        })
}

/// Follows one Snakemake run's log file.
pub struct LogFile {
    host: SharedHost,
    /// Where it may be: the launch directory, and where a `workdir:` directive moved the
    /// jobs (8.30 keeps its log there; 7 and 9 in the launch directory).
    workdirs: Vec<PathBuf>,
    not_before: SystemTime,
    /// When the run started: a log last written before then is the previous run's unless
    /// no other comes (a rerun in place starts its own log a moment after it starts).
    run_started: SystemTime,
    file: Option<PathBuf>,
    offset: u64,
    pending: String,
}

impl LogFile {
    pub(crate) fn new(workdir: PathBuf, run_started: SystemTime, host: SharedHost) -> Self {
        Self {
            host,
            workdirs: vec![workdir],
            // mtimes and our clock may differ by a little; a run's log is never older.
            not_before: run_started - Duration::from_secs(2),
            run_started,
            file: None,
            offset: 0,
            pending: String::new(),
        }
    }

    pub(crate) fn path(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// The jobs run in `workdir` too (a `workdir:` directive): the log may be there.
    pub(crate) fn also_in(&mut self, workdir: &std::path::Path) {
        if !self.workdirs.iter().any(|d| d == workdir) {
            self.workdirs.push(workdir.to_path_buf());
        }
    }

    fn find_file(&self) -> Option<PathBuf> {
        let dirs = self.workdirs.iter().map(|d| d.join(".snakemake/log"));
        let files = dirs.flat_map(|d| self.host.list(&d).unwrap_or_default());
        let newest = files.filter_map(|p| {
            let modified = self.host.facts(&p).ok()?.modified;
            let name = p.file_name()?.to_str()?;
            (name.ends_with(".snakemake.log") && modified >= self.not_before)
                .then_some((modified, p))
        });
        let (modified, path) = newest.max_by_key(|(m, _)| *m)?;
        // Older than the run itself: the previous run's, while this run may not have begun
        // its own yet. Taken only once the run is a few seconds old (clocks may differ).
        let young = self.host.now() < self.run_started + Duration::from_secs(5);
        (modified >= self.run_started || !young).then_some(path)
    }

    /// The entries written since the last call.
    pub(crate) fn read_new(&mut self) -> Vec<Entry> {
        if self.file.is_none() {
            self.file = self.find_file();
        }
        let Some(path) = &self.file else {
            return Vec::new();
        };
        // A log grows by lines: a read takes what is new, up to a bound per look.
        if let Ok(buf) = self.host.read_from(path, self.offset, 64 << 20) {
            self.offset += buf.len() as u64;
            self.pending.push_str(&String::from_utf8_lossy(&buf));
        }
        let (entries, consumed) = parse_blocks(&self.pending);
        self.pending.drain(..consumed);
        entries
    }
}

#[cfg(test)]
mod tests;
