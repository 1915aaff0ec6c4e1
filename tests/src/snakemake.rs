//! Snakemake's own records of a run, read independently of pipetrace's adapter, and the
//! corpus of workflows (tests/workflows/snakemake) the tests run on Snakemake 7 and 9.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use base64::Engine as _;

/// A Snakemake the tests run: Debian's 7, or 9 from PyPI in the venv scripts/setup.sh makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Seven,
    Nine,
}

impl Version {
    pub fn program(self) -> PathBuf {
        match self {
            Version::Seven => "/usr/bin/snakemake".into(),
            Version::Nine => crate::venv_program("snakemake9", "snakemake"),
        }
    }
}

/// One workflow of the corpus: its folder and how it is run.
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
    pub args: Vec<String>,
    pub exit: i32,
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
}

/// Every workflow of the corpus.
pub fn corpus() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/snakemake");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&root).expect("tests/workflows/snakemake") {
        let dir = e.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(dir.join("case.json")) else {
            continue;
        };
        let case: serde_json::Value = serde_json::from_str(&text).expect("case.json is JSON");
        let args = case["args"].as_array().expect("args").iter();
        out.push(Case {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            args: args.map(|a| a.as_str().expect("arg").to_string()).collect(),
            exit: case["exit"].as_i64().expect("exit") as i32,
            dir,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(out.len() >= 5, "the corpus is there");
    out
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
    /// A block's `input: a, b` / `output: ...` field, as paths.
    fn paths(field: &str) -> Vec<String> {
        field.split(", ").map(|p| p.trim().to_string()).collect()
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
    /// The log's `Error in rule X:` blocks: rules.
    pub failed: Vec<String>,
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

impl Records {
    pub fn read(workdir: &Path) -> Self {
        let mut r = Records::default();
        let jobs = jobs_dir(workdir);
        for (_output, json) in metadata(&jobs) {
            let rule = json["rule"].as_str().unwrap().to_string();
            let cmd = json["shellcmd"].as_str().map(normalize);
            r.metadata.push((rule, cmd));
        }
        let logs = std::fs::read_dir(workdir.join(".snakemake/log")).expect("the run's log");
        let log = logs.flatten().map(|e| e.path()).max().expect("a log file");
        let benchmarks = r.read_log(&std::fs::read_to_string(log).unwrap());
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

    /// Rules that ran a job process: those with a record or a failure. (The target rule
    /// has neither.)
    pub fn job_rules(&self) -> std::collections::BTreeSet<&str> {
        let recorded = self.metadata.iter().map(|(r, _)| r.as_str());
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
            .collect();
        v.sort();
        v
    }
}

/// How many of each item, to print a difference readably.
pub fn counts<T: Ord + Clone>(v: &[T]) -> BTreeMap<T, usize> {
    let mut m = BTreeMap::new();
    for x in v {
        *m.entry(x.clone()).or_insert(0) += 1;
    }
    m
}
