//! Snakemake jobs, named without touching the Snakefile or the command line: Snakemake logs a
//! block per job (rule, jobid, wildcards, input, output, threads) to
//! `.snakemake/log/*.snakemake.log` before it starts the job's shell. A job's shell command
//! names its output (and usually input) paths, which ties the process to its block.
use std::{
    fs,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Job {
    pub rule: String,
    pub jobid: Option<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub wildcards: Option<String>,
    pub threads: Option<u32>,
}

/// Parses job blocks out of log text. Returns the blocks and how many bytes were consumed:
/// a block still being written (no line after it yet) is left for the next call.
pub fn parse_blocks(text: &str) -> (Vec<Job>, usize) {
    let mut jobs = Vec::new();
    let mut current: Option<Job> = None;
    let mut consumed = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        pos += line.len();
        if !line.ends_with('\n') {
            break;
        }
        let l = line.trim_end();
        let header = l
            .strip_prefix("localrule ")
            .or_else(|| l.strip_prefix("rule "))
            .or_else(|| l.strip_prefix("localcheckpoint "))
            .or_else(|| l.strip_prefix("checkpoint "))
            .and_then(|r| r.strip_suffix(':'))
            .filter(|r| !r.contains(' '));
        if let Some(rule) = header {
            jobs.extend(current.take());
            current = Some(Job {
                rule: rule.to_string(),
                ..Default::default()
            });
            continue;
        }
        match (&mut current, l.strip_prefix("    ")) {
            (Some(job), Some(field)) => {
                let (key, value) = field.trim().split_once(": ").unwrap_or((field.trim(), ""));
                let list = || {
                    value
                        .split(", ")
                        .map(str::to_string)
                        .filter(|s| !s.is_empty())
                };
                match key {
                    "jobid" => job.jobid = Some(value.to_string()),
                    "input" => job.inputs = list().collect(),
                    "output" => job.outputs = list().collect(),
                    "wildcards" => job.wildcards = Some(value.to_string()),
                    "threads" => job.threads = value.parse().ok(),
                    _ => {}
                }
            }
            (Some(_), None) => jobs.extend(current.take()),
            (None, _) => {}
        }
        if current.is_none() {
            consumed = pos;
        }
    }
    (jobs, consumed)
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

/// Follows one Snakemake run's log.
pub struct SnakemakeLog {
    workdir: PathBuf,
    not_before: SystemTime,
    file: Option<PathBuf>,
    offset: u64,
    pending: String,
    jobs: Vec<(Job, bool)>,
}

impl SnakemakeLog {
    pub fn new(workdir: PathBuf, run_started: SystemTime) -> Self {
        Self {
            workdir,
            // mtimes and our clock may differ by a little; a run's log is never older.
            not_before: run_started - Duration::from_secs(2),
            file: None,
            offset: 0,
            pending: String::new(),
            jobs: Vec::new(),
        }
    }

    pub fn set_workdir(&mut self, dir: PathBuf) {
        if self.file.is_none() {
            self.workdir = dir;
        }
    }

    fn find_file(&self) -> Option<PathBuf> {
        let dir = self.workdir.join(".snakemake/log");
        let newest = fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let p = e.path();
                let modified = e.metadata().ok()?.modified().ok()?;
                let name = p.file_name()?.to_str()?;
                (name.ends_with(".snakemake.log") && modified >= self.not_before)
                    .then_some((modified, p))
            });
        newest.max_by_key(|(m, _)| *m).map(|(_, p)| p)
    }

    fn refresh(&mut self) {
        if self.file.is_none() {
            self.file = self.find_file();
        }
        let Some(path) = &self.file else { return };
        let Ok(mut f) = fs::File::open(path) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if let Ok(n) = f.read_to_end(&mut buf) {
            self.offset += n as u64;
            self.pending.push_str(&String::from_utf8_lossy(&buf));
        }
        let (jobs, consumed) = parse_blocks(&self.pending);
        self.pending.drain(..consumed);
        self.jobs.extend(jobs.into_iter().map(|j| (j, false)));
    }

    /// The job whose block best matches `command`, claimed so no other process gets it.
    pub fn claim(&mut self, command: &str) -> Option<Job> {
        self.refresh();
        let best = self
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, (_, taken))| !taken)
            .map(|(i, (job, _))| (score(job, command), i))
            .filter(|(s, _)| *s > 0)
            // Highest score; among equals the earliest block.
            .max_by_key(|(s, i)| (*s, std::cmp::Reverse(*i)))?;
        let slot = &mut self.jobs[best.1];
        slot.1 = true;
        Some(slot.0.clone())
    }

    pub fn log_path(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

/// The Snakemake shell prefix, which says nothing about the job.
pub fn strip_prefix(command: &str) -> &str {
    command
        .trim_start()
        .strip_prefix("set -euo pipefail;")
        .unwrap_or(command)
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "Building DAG of jobs...\n\n[Sun Nov 22 04:32:56 2026]\nrule reads:\n    input: ref/genome.fa\n    output: reads/A.fq\n    jobid: 2\n    reason: Missing output files\n    wildcards: sample=A\n    resources: tmpdir=/tmp\n\n[Sun Nov 22 04:32:56 2026]\nrule reads:\n    input: ref/genome.fa\n    output: reads/B.fq\n    jobid: 3\n    wildcards: sample=B\n    threads: 2\n\nlocalrule all:\n    input: report.txt\n    jobid: 0\n";

    #[test]
    fn blocks_are_parsed_and_an_open_block_waits() {
        let (jobs, consumed) = parse_blocks(LOG);
        assert_eq!(jobs.len(), 2, "the last block has no line after it yet");
        assert_eq!(jobs[0].rule, "reads");
        assert_eq!(jobs[0].outputs, ["reads/A.fq"]);
        assert_eq!(jobs[1].wildcards.as_deref(), Some("sample=B"));
        assert_eq!(jobs[1].threads, Some(2));
        let (rest, _) = parse_blocks(&format!("{}\n", &LOG[consumed..]));
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].rule, "all");
    }

    #[test]
    fn commands_claim_their_own_job() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".snakemake/log")).unwrap();
        fs::write(dir.path().join(".snakemake/log/x.snakemake.log"), LOG).unwrap();
        let mut log = SnakemakeLog::new(dir.path().into(), SystemTime::now());
        let b = log
            .claim("python3 sim.py ref/genome.fa B > reads/B.fq")
            .unwrap();
        assert_eq!(b.wildcards.as_deref(), Some("sample=B"));
        let a = log
            .claim("python3 sim.py ref/genome.fa A > reads/A.fq")
            .unwrap();
        assert_eq!(a.jobid.as_deref(), Some("2"));
        assert_eq!(
            log.claim("python3 sim.py ref/genome.fa A > reads/A.fq"),
            None
        );
    }
}
