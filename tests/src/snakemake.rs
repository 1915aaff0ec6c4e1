//! Snakemake's own records of a run, read independently of pipetrace's adapter, and the
//! corpus of workflows (tests/workflows/snakemake) the tests run on Snakemake 7, 8 and 9.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use base64::Engine as _;

/// A Snakemake the tests run: Debian's 7.21, or 8.30 and 9 from PyPI in the venvs
/// scripts/setup.sh makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Seven,
    Eight,
    Nine,
}

impl Version {
    pub fn program(self) -> PathBuf {
        match self {
            Version::Seven => "/usr/bin/snakemake".into(),
            Version::Eight => crate::venv_program("snakemake8", "snakemake"),
            Version::Nine => crate::venv_program("snakemake9", "snakemake"),
        }
    }

    /// What `snakemake --version` prints: the engine's own word for its version.
    pub fn says_version(self) -> String {
        static SAID: [std::sync::OnceLock<String>; 3] = [const { std::sync::OnceLock::new() }; 3];
        SAID[self.major() as usize - 7]
            .get_or_init(|| {
                let o = std::process::Command::new(self.program())
                    .arg("--version")
                    .output()
                    .expect("snakemake --version");
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            })
            .clone()
    }

    /// Its major version, as a case's `versions` names it.
    pub fn major(self) -> u64 {
        match self {
            Version::Seven => 7,
            Version::Eight => 8,
            Version::Nine => 9,
        }
    }
}

/// One workflow of the corpus: its folder and how it is run.
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
    /// Snakemake's runs, one after the other in the same directory.
    pub runs: Vec<Invocation>,
    /// The major versions it runs on (`versions`; all when absent): `dynamic()` is 7's only.
    pub versions: Option<Vec<u64>>,
}

/// One run of Snakemake: its arguments and the exit status it returns.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub args: Vec<String>,
    pub exit: i32,
    /// What is removed before it runs (`.snakemake/` always stays).
    pub clean: Clean,
}

/// A case's `clean`: nothing, the paths listed, or (`true`) everything the earlier runs
/// made outside `.snakemake/`, back to the case's own files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Clean {
    #[default]
    Nothing,
    Paths(Vec<String>),
    All,
}

impl Invocation {
    fn of(json: &serde_json::Value) -> Self {
        let args = json["args"].as_array().expect("args").iter();
        let clean = match &json["clean"] {
            serde_json::Value::Bool(true) => Clean::All,
            serde_json::Value::Array(paths) => Clean::Paths(
                (paths.iter())
                    .map(|p| p.as_str().expect("a path").to_string())
                    .collect(),
            ),
            _ => Clean::Nothing,
        };
        Self {
            args: args.map(|a| a.as_str().expect("arg").to_string()).collect(),
            exit: json["exit"].as_i64().expect("exit") as i32,
            clean,
        }
    }
}

impl Case {
    /// A fresh copy of the case's folder, in a directory named after it.
    pub fn copy(&self) -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", self.name))
            .tempdir()
            .unwrap();
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(format!("{}/.", self.dir.display()))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        dir
    }

    /// Whether it runs on version `v`.
    pub fn runs_on(&self, v: Version) -> bool {
        (self.versions.as_ref()).is_none_or(|vs| vs.contains(&v.major()))
    }

    /// Removes, in its copy `workdir`, what `inv` asks removed before it runs: outputs go,
    /// Snakemake's `.snakemake/` (records, logs) stays, as a user rerunning in place has it.
    pub fn clean(&self, workdir: &Path, inv: &Invocation) {
        let remove = |p: &Path| {
            let _ = match p.is_dir() && !p.is_symlink() {
                true => std::fs::remove_dir_all(p),
                false => std::fs::remove_file(p),
            };
        };
        match &inv.clean {
            Clean::Nothing => {}
            Clean::Paths(paths) => paths.iter().for_each(|p| remove(&workdir.join(p))),
            Clean::All => {
                for e in std::fs::read_dir(workdir).unwrap().flatten() {
                    let name = e.file_name();
                    let own = self.dir.join(&name).exists();
                    if name != ".snakemake" && !own && !name.to_string_lossy().starts_with("trace-")
                    {
                        remove(&e.path());
                    }
                }
            }
        }
    }
}

/// Every workflow of the corpus (those named in `CORPUS_ONLY`, comma-separated, if set).
pub fn corpus() -> Vec<Case> {
    let only = std::env::var("CORPUS_ONLY").ok();
    let wanted = |name: &str| (only.as_deref()).is_none_or(|o| o.split(',').any(|n| n == name));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/snakemake");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&root).expect("tests/workflows/snakemake") {
        let dir = e.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(dir.join("case.json")) else {
            continue;
        };
        let case: serde_json::Value = serde_json::from_str(&text).expect("case.json is JSON");
        // `then`: the runs after the first, in the same directory.
        let then = case["then"].as_array().into_iter().flatten();
        let versions = (case["versions"].as_array()).map(|vs| {
            vs.iter()
                .map(|v| v.as_u64().expect("a major version"))
                .collect()
        });
        out.push(Case {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            versions,
            runs: std::iter::once(Invocation::of(&case))
                .chain(then.map(Invocation::of))
                .collect(),
            dir,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(only.is_some() || out.len() >= 5, "the corpus is there");
    out.retain(|c| wanted(&c.name));
    out
}

/// The cases that `v`'s corpus test runs: each case on one of the versions it runs on, in
/// turn by name (7, 8, 9, 7...), so that every case runs once a suite and every version
/// runs a third of them; `CORPUS_ALL=1` runs every case on every version (about three
/// times as long: 10 minutes on two CPUs).
pub fn corpus_for(v: Version) -> Vec<Case> {
    let all = std::env::var("CORPUS_ALL").is_ok_and(|a| a == "1");
    let versions = [Version::Seven, Version::Eight, Version::Nine];
    (corpus().into_iter().enumerate())
        .filter(|(i, c)| {
            let on: Vec<Version> = versions.into_iter().filter(|w| c.runs_on(*w)).collect();
            match all {
                true => on.contains(&v),
                false => !on.is_empty() && on[i % on.len()] == v,
            }
        })
        .map(|(_, c)| c)
        .collect()
}

/// White space folded: Snakemake keeps a command's indentation and trailing space.
pub fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `.snakemake/metadata`: each record with the output it is of (its file name is the output
/// path, URL-safe base64, long ones split into `@` folders; checked to decode).
pub fn metadata(workdir: &Path) -> Vec<(String, serde_json::Value)> {
    let meta = workdir.join(".snakemake/metadata");
    let mut out = Vec::new();
    let mut stack = vec![meta.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let rel = (p.strip_prefix(&meta).unwrap().to_string_lossy()).replace(['/', '@'], "");
            let output = base64::engine::general_purpose::URL_SAFE
                .decode(rel)
                .expect("metadata file names are base64 of the output");
            out.push((String::from_utf8(output).unwrap(), json));
        }
    }
    out
}

/// A job block of the log: the job's rule, wildcards ("" if none) and declared paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    pub rule: String,
    pub wildcards: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

impl Block {
    /// A block's `input: a, b` / `output: ...` field, as paths (flags like `(pipe)` off).
    fn paths(field: &str) -> Vec<String> {
        let path = |p: &str| match p.rsplit_once(" (") {
            Some((p, flag)) if flag.ends_with(')') => p.to_string(),
            _ => p.to_string(),
        };
        field.split(", ").map(|p| path(p.trim())).collect()
    }
}

/// What Snakemake recorded of a run in `workdir`.
#[derive(Debug, Default)]
pub struct Records {
    /// `.snakemake/metadata`: (rule, shell command) of every job that left a record.
    pub metadata: Vec<(String, Option<String>)>,
    /// The log's job blocks, one per attempt: (rule, wildcards or "").
    pub started: Vec<(String, String)>,
    /// The log's job blocks with the paths they list, one per attempt.
    pub blocks: Vec<Block>,
    /// Rules of every metadata record in the directory, of this run or another (a job
    /// of an interrupted run leaves its record only when a later run reruns it).
    pub recorded_rules: std::collections::BTreeSet<String>,
    /// The log's `Error in rule X:` blocks: rules.
    pub failed: Vec<String>,
    /// Jobs of rules with a `message:`: the log has `Job N: <message>` for each, no block;
    /// their metadata records (no block lists their outputs) give the rule, no wildcards.
    pub message_jobs: Vec<(String, String)>,
    /// Rules whose jobs the log says ran in Snakemake's own process tree (`localrule X:`),
    /// not submitted elsewhere.
    pub local_rules: std::collections::BTreeSet<String>,
}

/// Where a run's jobs ran and its metadata is: the launch directory, or the folder a
/// Snakefile's `workdir:` names (the one folder within holding `.snakemake/metadata`).
pub fn jobs_dir(workdir: &Path) -> PathBuf {
    if workdir.join(".snakemake/metadata").is_dir() {
        return workdir.to_path_buf();
    }
    let mut within = std::fs::read_dir(workdir).into_iter().flatten().flatten();
    (within.find(|e| e.path().join(".snakemake/metadata").is_dir()))
        .map_or_else(|| workdir.to_path_buf(), |e| e.path())
}

/// The log of the latest run in `workdir` (the launch directory).
/// 7 and 9 keep it there whatever a `workdir:` says; 8.30 keeps it where the jobs run.
pub fn newest_log(workdir: &Path) -> PathBuf {
    latest_log(workdir).expect("the run's log")
}

/// As [`newest_log`], None while Snakemake has written none yet (a run starting).
pub fn latest_log(workdir: &Path) -> Option<PathBuf> {
    let dirs = [workdir.to_path_buf(), jobs_dir(workdir)];
    let logs = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d.join(".snakemake/log")).into_iter());
    // Named by their start time: the greatest name is the latest.
    (logs.flatten().flatten().map(|e| e.path()))
        .max_by_key(|p| p.file_name().map(|n| n.to_os_string()))
}

impl Records {
    /// The records of the latest run in `workdir`.
    pub fn read(workdir: &Path) -> Self {
        Self::read_run(workdir, &newest_log(workdir), 0.0)
    }

    /// The records of one run of several in `workdir`: its log, and the metadata records
    /// of jobs that ended since `since` (Unix seconds, Snakemake's `endtime`; 9 keeps an
    /// older `starttime` for a `run:` job run again).
    pub fn read_run(workdir: &Path, log: &Path, since: f64) -> Self {
        let mut r = Records::default();
        let jobs = jobs_dir(workdir);
        for (_output, json) in metadata(&jobs) {
            let rule = json["rule"].as_str().unwrap().to_string();
            r.recorded_rules.insert(rule.clone());
            if json["endtime"].as_f64().unwrap_or(0.0) < since {
                continue;
            }
            let cmd = json["shellcmd"].as_str().map(normalize);
            r.metadata.push((rule, cmd));
        }
        let text = std::fs::read_to_string(log).unwrap();
        let benchmarks = r.read_log(&text);
        r.message_jobs = message_jobs(&text, &r.blocks, &jobs, since);
        // A job benchmarked with `repeat(..., n)` runs its command n times in one attempt:
        // its benchmark file has a row per run.
        for (i, file) in benchmarks {
            let text = std::fs::read_to_string(jobs.join(file)).unwrap_or_default();
            let rows = text.lines().count().saturating_sub(1);
            let job = r.started[i].clone();
            r.started
                .extend(std::iter::repeat_n(job, rows.saturating_sub(1)));
        }
        r
    }

    /// Reads the log's blocks; returns the benchmark file of each job that has one, by its
    /// index in `started`.
    fn read_log(&mut self, text: &str) -> Vec<(usize, String)> {
        let mut benchmarks = Vec::new();
        // A group job's jobs are blocks indented once more.
        let mut open: Option<(String, String)> = None;
        let mut indent = 0;
        for line in text.lines() {
            let depth = line.len() - line.trim_start().len();
            let rule = ["localrule ", "rule ", "localcheckpoint ", "checkpoint "]
                .iter()
                .find_map(|p| Some((*p, line.trim_start().strip_prefix(p)?)))
                .and_then(|(p, r)| Some((p, r.strip_suffix(':')?)))
                .filter(|_| depth <= 4);
            if let Some((kind, rule)) = rule {
                self.started.extend(open.take());
                if kind.starts_with("local") {
                    self.local_rules.insert(rule.to_string());
                }
                open = Some((rule.to_string(), String::new()));
                self.blocks.push(Block {
                    rule: rule.to_string(),
                    ..Default::default()
                });
                indent = depth;
                continue;
            }
            if depth > indent && open.is_some() {
                if let (Some(w), Some(o)) =
                    (line.trim_start().strip_prefix("wildcards: "), open.as_mut())
                {
                    o.1 = w.to_string();
                }
                let block = self.blocks.last_mut();
                if let (Some(b), Some(o)) = (block, open.as_ref()) {
                    let field = line.trim_start();
                    if let Some(i) = field.strip_prefix("input: ") {
                        b.inputs = Block::paths(i);
                    }
                    if let Some(out) = field.strip_prefix("output: ") {
                        b.outputs = Block::paths(out);
                    }
                    b.wildcards.clone_from(&o.1);
                }
                if let Some(b) = line.trim_start().strip_prefix("benchmark: ") {
                    benchmarks.push((self.started.len(), b.trim().to_string()));
                }
                continue;
            }
            self.started.extend(open.take());
            if let Some(rule) = line
                .strip_prefix("Error in rule ")
                .and_then(|r| r.strip_suffix(':'))
            {
                self.failed.push(rule.to_string());
            }
        }
        self.started.extend(open);
        benchmarks
    }

    /// Rules that ran a job process: those with a record (of any run) or a failure. (The
    /// target rule has neither.)
    pub fn job_rules(&self) -> std::collections::BTreeSet<&str> {
        let recorded = self.recorded_rules.iter().map(String::as_str);
        recorded
            .chain(self.failed.iter().map(String::as_str))
            .collect()
    }

    /// The log's job attempts of rules that ran a process, as (rule, wildcards), sorted.
    pub fn attempts(&self) -> Vec<(String, String)> {
        let rules = self.job_rules();
        let mut v: Vec<_> = self
            .started
            .iter()
            .filter(|(r, _)| rules.contains(r.as_str()))
            .cloned()
            .chain(self.message_jobs.iter().cloned())
            .collect();
        v.sort();
        v
    }
}

/// The jobs a log shows only by their message (`Job N: ...`, a rule with `message:`), as
/// (rule, "") from the records of jobs that ended since `since` that no block lists an
/// output of: one per job (a job writes the same record for each of its outputs).
fn message_jobs(log: &str, blocks: &[Block], jobs: &Path, since: f64) -> Vec<(String, String)> {
    let is_message = |l: &str| {
        l.strip_prefix("Job ")
            .and_then(|r| r.split_once(": "))
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if !log.lines().any(is_message) {
        return Vec::new();
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (output, json) in metadata(jobs) {
        let rule = json["rule"].as_str().unwrap().to_string();
        let blocked = (blocks.iter()).any(|b| b.rule == rule && b.outputs.contains(&output));
        if json["endtime"].as_f64().unwrap_or(0.0) < since || blocked {
            continue;
        }
        let start = json["starttime"].to_string();
        if seen.insert((rule.clone(), start)) {
            out.push((rule, String::new()));
        }
    }
    out
}

/// How many of each item, to print a difference readably.
pub fn counts<T: Ord + Clone>(v: &[T]) -> BTreeMap<T, usize> {
    let mut m = BTreeMap::new();
    for x in v {
        *m.entry(x.clone()).or_insert(0) += 1;
    }
    m
}
