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
    /// `mem_mb` among the job's resources, if declared.
    pub mem_mb: Option<u64>,
}

/// What the log says: a job's block, or that a job ended (`Finished job N.`, or an
/// `Error in rule X:` block with its jobid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Job(Job),
    Ended(String),
}

/// Parses log text. Returns the entries and how many bytes were consumed: a block still
/// being written (no line after it yet) is left for the next call.
pub fn parse_blocks(text: &str) -> (Vec<Entry>, usize) {
    let mut jobs = Vec::new();
    let mut current: Option<Job> = None;
    // An error block is a job block whose jobid says which job ended.
    let mut in_error = false;
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
        if let Some(id) = l
            .strip_prefix("Finished job ")
            .and_then(|r| r.strip_suffix('.'))
        {
            jobs.extend(current.take().map(|j| close(j, in_error)));
            jobs.push(Entry::Ended(id.to_string()));
            consumed = pos;
            continue;
        }
        let error = l
            .strip_prefix("Error in rule ")
            .and_then(|r| r.strip_suffix(':'));
        if let Some(rule) = header.or(error) {
            jobs.extend(current.take().map(|j| close(j, in_error)));
            in_error = error.is_some();
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
                    "resources" => {
                        job.mem_mb = list()
                            .find_map(|r| r.strip_prefix("mem_mb=").map(str::to_string))
                            .and_then(|v| v.parse().ok());
                    }
                    _ => {}
                }
            }
            (Some(_), None) => jobs.extend(current.take().map(|j| close(j, in_error))),
            (None, _) => {}
        }
        if current.is_none() {
            consumed = pos;
        }
    }
    (jobs, consumed)
}

fn close(job: Job, error: bool) -> Entry {
    match (error, job.jobid) {
        (true, Some(id)) => Entry::Ended(id),
        (_, jobid) => Entry::Job(Job { jobid, ..job }),
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

/// Follows one Snakemake run's log.
pub struct SnakemakeLog {
    workdir: PathBuf,
    not_before: SystemTime,
    file: Option<PathBuf>,
    offset: u64,
    pending: String,
    /// Job blocks, and whether a process has claimed each.
    jobs: Vec<(Job, bool)>,
    ended: std::collections::HashSet<String>,
    /// Snakemake metadata records read so far, and their commands' rules (quiet runs).
    indexed: std::collections::HashSet<std::ffi::OsString>,
    by_command: std::collections::HashMap<String, String>,
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
            ended: Default::default(),
            indexed: Default::default(),
            by_command: Default::default(),
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

    pub fn refresh(&mut self) {
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
        let (entries, consumed) = parse_blocks(&self.pending);
        self.pending.drain(..consumed);
        for e in entries {
            match e {
                Entry::Job(j) => self.jobs.push((j, false)),
                Entry::Ended(id) => {
                    self.ended.insert(id);
                }
            }
        }
    }

    fn ended(&self, job: &Job) -> bool {
        job.jobid.as_ref().is_some_and(|id| self.ended.contains(id))
    }

    /// Assigns ended processes (their job commands) to jobs the log says ended, best
    /// matches first. With `force`, unmatched commands take the best unclaimed job even if
    /// the log has not said it ended. Returns, per command, its job if assigned.
    pub fn assign(&mut self, commands: &[&str], force: bool) -> Vec<Option<Job>> {
        self.refresh();
        let mut out = vec![None; commands.len()];
        for only_ended in [true, false] {
            if !only_ended && !force {
                break;
            }
            loop {
                let mut best: Option<(usize, usize, usize)> = None;
                for (c, cmd) in commands
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| out[*c].is_none())
                {
                    // A process takes an ended job only if no job, ended or not, fits it
                    // better: its own job may simply not be logged as ended yet.
                    let top = self
                        .jobs
                        .iter()
                        .filter(|(_, t)| !t)
                        .map(|(j, _)| score(j, cmd))
                        .max();
                    for (j, (job, taken)) in self.jobs.iter().enumerate() {
                        if *taken || (only_ended && !self.ended(job)) {
                            continue;
                        }
                        let sc = score(job, cmd);
                        if only_ended && Some(sc) != top {
                            continue;
                        }
                        // Highest score; among equals the earliest block.
                        if sc > 0 && best.is_none_or(|(bs, bj, _)| sc > bs || (sc == bs && j < bj))
                        {
                            best = Some((sc, j, c));
                        }
                    }
                }
                let Some((_, j, c)) = best else { break };
                self.jobs[j].1 = true;
                out[c] = Some(self.jobs[j].0.clone());
            }
        }
        // One ended process and one ended job left: they are each other's, whatever the
        // command names (a rule whose command mentions none of its paths).
        let open: Vec<usize> = (0..commands.len()).filter(|c| out[*c].is_none()).collect();
        let free: Vec<usize> = (0..self.jobs.len())
            .filter(|j| !self.jobs[*j].1 && self.ended(&self.jobs[*j].0))
            .collect();
        if let ([c], [j]) = (open.as_slice(), free.as_slice()) {
            self.jobs[*j].1 = true;
            out[*c] = Some(self.jobs[*j].0.clone());
        }
        out
    }

    /// The rule of a running job's command: the rule every best-matching job block of the
    /// log shares, if they agree (jobs of one rule differ only in their wildcards).
    pub fn likely_rule(&mut self, command: &str) -> Option<String> {
        self.refresh();
        let best = self.jobs.iter().map(|(j, _)| score(j, command)).max()?;
        if best == 0 {
            return None;
        }
        let mut rules = self
            .jobs
            .iter()
            .filter(|(j, _)| score(j, command) == best)
            .map(|(j, _)| j.rule.as_str());
        let first = rules.next()?;
        rules.all(|r| r == first).then(|| first.to_string())
    }

    pub fn log_path(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// True when the log names no jobs at all: `snakemake --quiet` writes no job blocks.
    pub fn is_quiet(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The rule of a finished job from Snakemake's own metadata, for runs whose log names no
    /// jobs. Snakemake keeps a JSON record per output file with the rule and the exact shell
    /// command; each record of this run is read once, into an index by command.
    pub fn rule_from_metadata(&mut self, command: &str) -> Option<String> {
        let command = command.trim();
        if !self.by_command.contains_key(command) {
            self.index_metadata();
        }
        self.by_command.get(command).cloned()
    }

    fn index_metadata(&mut self) {
        let Ok(dir) = fs::read_dir(self.workdir.join(".snakemake/metadata")) else {
            return;
        };
        for e in dir.filter_map(|e| e.ok()) {
            let fresh = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= self.not_before);
            if !fresh || !self.indexed.insert(e.file_name()) {
                continue;
            }
            let Ok(text) = fs::read_to_string(e.path()) else {
                continue;
            };
            let Ok(record) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let field = |k: &str| record.get(k).and_then(|v| v.as_str()).map(str::trim);
            if let (Some(cmd), Some(rule)) = (field("shellcmd"), field("rule")) {
                self.by_command.insert(cmd.to_string(), rule.to_string());
            }
        }
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

    const LOG: &str = "Building DAG of jobs...\n\n[Sun Nov 22 04:32:56 2026]\nrule reads:\n    input: ref/genome.fa\n    output: reads/A.fq\n    jobid: 2\n    reason: Missing output files\n    wildcards: sample=A\n    resources: tmpdir=/tmp\n\n[Sun Nov 22 04:32:56 2026]\nrule reads:\n    input: ref/genome.fa\n    output: reads/B.fq\n    jobid: 3\n    wildcards: sample=B\n    threads: 2\n\nrule index:\n    input: ref/genome.fa\n    output: ref/genome.fa.amb, ref/genome.fa.bwt\n    jobid: 5\n\nFinished job 5.\nFinished job 4.\nlocalrule all:\n    input: report.txt\n    jobid: 0\n";

    fn jobs(entries: Vec<Entry>) -> Vec<Job> {
        let job = |e| if let Entry::Job(j) = e { Some(j) } else { None };
        entries.into_iter().filter_map(job).collect()
    }

    #[test]
    fn blocks_are_parsed_and_an_open_block_waits() {
        let (entries, consumed) = parse_blocks(LOG);
        assert!(entries.contains(&Entry::Ended("5".into())));
        let jobs = jobs(entries);
        assert_eq!(jobs.len(), 3, "the last block has no line after it yet");
        assert_eq!(jobs[0].rule, "reads");
        assert_eq!(jobs[0].outputs, ["reads/A.fq"]);
        assert_eq!(jobs[1].wildcards.as_deref(), Some("sample=B"));
        assert_eq!(jobs[1].threads, Some(2));
        assert_eq!(jobs[0].mem_mb, None);
        let (entries, _) = parse_blocks(
            "rule a:
    jobid: 1
    resources: mem_mb=1500, tmpdir=/tmp

",
        );
        let Entry::Job(j) = &entries[0] else {
            panic!("{entries:?}")
        };
        assert_eq!(j.mem_mb, Some(1500));
        assert_eq!(jobs[2].outputs, ["ref/genome.fa.amb", "ref/genome.fa.bwt"]);
        let (rest, _) = parse_blocks(&format!("{}\n", &LOG[consumed..]));
        let all = Job {
            rule: "all".into(),
            jobid: Some("0".into()),
            inputs: vec!["report.txt".into()],
            ..Default::default()
        };
        assert_eq!(rest, [Entry::Job(all)]);
    }

    fn log_with(text: &str) -> (tempfile::TempDir, SnakemakeLog) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".snakemake/log")).unwrap();
        fs::write(dir.path().join(".snakemake/log/x.snakemake.log"), text).unwrap();
        let log = SnakemakeLog::new(dir.path().into(), SystemTime::now());
        (dir, log)
    }

    #[test]
    fn only_jobs_the_log_says_ended_are_matched() {
        // `bwa index` names only its input, which the reads jobs share.
        let (_d, mut log) = log_with(&LOG[..LOG.find("Finished").unwrap()]);
        assert_eq!(
            log.assign(&["bwa index ref/genome.fa"], false),
            [None],
            "nothing ended yet"
        );
        let (_d, mut log) = log_with(LOG);
        let reads_b = "python3 sim.py ref/genome.fa B > reads/B.fq";
        let got = log.assign(&["bwa index ref/genome.fa", reads_b], false);
        assert_eq!(got[0].as_ref().map(|j| j.rule.as_str()), Some("index"));
        assert_eq!(got[1], None, "job 3 (reads B) has not ended");
        let forced = log.assign(&[reads_b], true);
        assert_eq!(
            forced[0].as_ref().and_then(|j| j.wildcards.as_deref()),
            Some("sample=B")
        );
    }

    #[test]
    fn an_ended_job_is_not_taken_by_a_process_whose_own_job_fits_better() {
        let text = "rule index_bam:\n    input: aligned/A.bam\n    output: aligned/A.bam.bai\n    jobid: 7\n\nrule checksum:\n    input: aligned/A.bam\n    output: stats/A.sha256\n    jobid: 8\n\nFinished job 7.\n";
        let (_d, mut log) = log_with(text);
        let checksum = "sha256sum aligned/A.bam | cut -d ' ' -f 1 > stats/A.sha256";
        let got = log.assign(&[checksum, "samtools index aligned/A.bam"], false);
        assert_eq!(got[0], None, "the checksum job has not ended yet");
        assert_eq!(got[1].as_ref().map(|j| j.rule.as_str()), Some("index_bam"));
    }

    #[test]
    fn quiet_runs_are_named_from_snakemake_metadata() {
        let (dir, mut log) = log_with("Building DAG of jobs...\nSelect jobs to execute...\n");
        log.refresh();
        assert!(log.is_quiet());
        let meta = dir.path().join(".snakemake/metadata");
        fs::create_dir_all(&meta).unwrap();
        // `samtools index` names no output of its own: records are found by their command.
        let cmd = "samtools index aligned/A.bam";
        let record = format!(r#"{{"rule": "index_bam", "shellcmd": "{cmd}"}}"#);
        fs::write(meta.join("YWxpZ25lZC9BLmJhbS5iYWk="), record).unwrap();
        assert_eq!(log.rule_from_metadata(cmd).as_deref(), Some("index_bam"));
        assert_eq!(log.rule_from_metadata("samtools index aligned/B.bam"), None);
    }

    #[test]
    fn error_blocks_end_their_job() {
        let text = "rule stats:\n    output: s/A.txt\n    jobid: 9\n\nError in rule stats:\n    jobid: 9\n    output: s/A.txt\n\n";
        let (_d, mut log) = log_with(text);
        let got = log.assign(&["samtools flagstat a.bam > s/A.txt; exit 3"], false);
        assert_eq!(got[0].as_ref().and_then(|j| j.jobid.as_deref()), Some("9"));
    }
}
