//! Snakemake (7, and 8/9): every job is named by its rule and wildcards from the engine's
//! own records, never from the Snakefile or the command line.
//!
//! The model, as both versions run jobs locally: the Snakemake process starts each shell,
//! `script:` and `wrapper:` job as `bash -c 'set -euo pipefail; CMD'`, and each `run:` job as
//! `sh -c 'cd DIR && python -m snakemake --target-jobs RULE:WILDCARDS ...'`; every other
//! process it starts (the scheduler's `cbc`/`glpsol`, probes) is a helper, and so is any
//! shell its main thread starts (jobs start from executor threads; the main thread runs the
//! Snakefile's own `shell()`, `onstart`/`onsuccess` and params functions). A job is named
//! from the metadata record of its output (rule and exact `shellcmd`), the log's failure
//! block (exact command), or, for `script:` jobs, the record whose outputs the job's own
//! temporary script names (`script.rs`); the log's job block for that record adds jobid,
//! wildcards, threads and memory, and names no other process.
//!
//! In cluster mode the head submits jobs instead (its submissions are its own work), and
//! each job's `snakemake --target-jobs`, on whichever node, is a part of the head's run: a
//! task of it (see [`cluster`]).
mod cluster;
mod log;
mod long;
mod metadata;
mod records;
mod script;

use std::{collections::HashMap, path::PathBuf, time::SystemTime};

use records::{Ran, Records};

use super::{
    Class, Ended, Engine, EngineRun, MultiNode, Place, Shared, Wrapper, digest, is_container_query,
};
use crate::{
    attribution::{
        TaskInfo,
        naming::{self, shell_command, shell_words, strip_shell_prefix},
    },
    event::ProcKey,
    port::SharedHost,
    tree::{Image, Proc},
};

/// As `pipetrace.run.engine` and `attribution.engines` name it.
pub const KIND: super::EngineKind = super::EngineKind::engine("snakemake");

pub const ENGINE: Engine = Engine {
    kind: KIND,
    recognises: |tool, _| tool == "snakemake",
    start,
    // Its metadata, log, locks and conda and script caches.
    bookkeeping: crate::files::Bookkeeping {
        parts: &["/.snakemake/"],
        names: &[],
    },
    started_by_parent: None,
    starts_in: None,
    watches: None,
    allocates: None,
    python_package: Some("snakemake"),
};

struct Snakemake {
    name: String,
    key: String,
    /// The job a `--target-jobs` run was started for (a `run:` job, or a cluster job).
    target: Option<Target>,
    /// A cluster job's run directory: it is a part of the head's run.
    remote: Option<String>,
    /// As a head, what it runs to submit jobs, and its run's directory once known.
    head: cluster::Head,
    records: Records,
    host: SharedHost,
    workdir: PathBuf,
    /// The jobs' working directory is known: the first job's, which a Snakefile's
    /// `workdir:` moves away from the launch directory (with its metadata, not its log).
    jobs_dir_known: bool,
    /// Of each running `script:` job, its script's outputs (read as it started: the
    /// script is gone once the job ends).
    script_outputs: HashMap<ProcKey, String>,
    /// Of each running job whose command was too long for a command line, that command as
    /// its script file holds it (read as it started: the file goes when the job ends).
    long_commands: HashMap<ProcKey, String>,
}

/// A job as `--target-jobs` names it: `RULE:KEY=VALUE,KEY=VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    rule: String,
    wildcards: Option<String>,
}

impl Target {
    fn parse(spec: &str) -> Option<Self> {
        let (rule, wc) = spec.split_once(':')?;
        let wildcards = (!wc.is_empty()).then(|| wc.split(',').collect::<Vec<_>>().join(", "));
        (!rule.is_empty()).then(|| Self {
            rule: rule.to_string(),
            wildcards,
        })
    }

    /// The single job of a command line's `--target-jobs`, if it names one.
    fn of(words: &[String]) -> Option<Self> {
        let i = words.iter().position(|w| w == "--target-jobs")?;
        let specs: Vec<&String> = words[i + 1..]
            .iter()
            .take_while(|w| !w.starts_with('-'))
            .collect();
        match specs.as_slice() {
            [one] => Self::parse(one),
            _ => None,
        }
    }

    fn info(&self) -> TaskInfo {
        TaskInfo {
            name: self.rule.clone(),
            wildcards: self.wildcards.clone(),
            in_engine: true,
            ..Default::default()
        }
    }
}

/// The value of `-d DIR` / `--directory DIR` / `--directory=DIR`.
fn option_value<'a>(args: &'a [String], short: &str, long: &str) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == short || a == long {
            return it.next().map(String::as_str);
        }
        if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

/// Whether the log leaves out job blocks: `--quiet` alone (7, and 8 on, where it means
/// `progress rules`), or with `rules` or `all` among its words (8 on). `--quiet progress`,
/// `host` or `reason` keep them.
fn quiet_hides_jobs(argv: &[String]) -> bool {
    const WORDS: [&str; 5] = ["all", "host", "progress", "rules", "reason"];
    let hides = |w: &str| w == "rules" || w == "all";
    let Some(at) = argv.iter().position(|a| a == "--quiet" || a == "-q") else {
        return (argv.iter()).any(|a| a.strip_prefix("--quiet=").is_some_and(hides));
    };
    let words: Vec<&str> = (argv[at + 1..].iter())
        .map(String::as_str)
        .take_while(|w| WORDS.contains(w))
        .collect();
    words.is_empty() || words.into_iter().any(hides)
}

fn start(image: &Image, started: SystemTime, host: crate::port::SharedHost) -> Box<dyn EngineRun> {
    let target = Target::of(&image.argv);
    let remote = target.as_ref().and(cluster::remote_dir(&image.argv));
    let cwd = image.cwd.clone().unwrap_or_default();
    let workdir = match (option_value(&image.argv, "-d", "--directory"), &remote) {
        // A cluster job's working directory is the head's, whichever node it runs on.
        (_, Some(dir)) => std::path::PathBuf::from(cluster::workdir(dir)),
        (Some(d), None) => cwd.join(d),
        (None, None) => cwd,
    };
    let snakefile = option_value(&image.argv, "-s", "--snakefile").unwrap_or("Snakefile");
    // A cluster job is given the head's Snakefile by its absolute path.
    let within = format!("{}/", workdir.to_string_lossy());
    let snakefile = snakefile.strip_prefix(within.as_str()).unwrap_or(snakefile);
    let name = workdir
        .file_name()
        .map(|n| naming::clean_name(&n.to_string_lossy()))
        .unwrap_or_else(|| "snakemake".into());
    let key = digest(&["snakemake", &workdir.to_string_lossy(), snakefile]);
    let records = Records::new(
        &workdir,
        started,
        host.clone(),
        !quiet_hides_jobs(&image.argv),
    );
    // A rerun in place: the scripts folder is there from the start. Kept from now, a run of
    // script jobs alone keeps its first jobs' scripts too, however short they are.
    let scripts = workdir.join(SCRIPTS_DIR);
    if target.is_none() && host.list(&scripts).is_ok() {
        host.keep_written(&scripts);
    }
    Box::new(Snakemake {
        // A `--target-jobs` run (a `run:` job, a cluster job) was told its directory.
        jobs_dir_known: target.is_some(),
        key: format!("{name}-{key}"),
        name,
        head: match target {
            None => cluster::Head::of(&image.argv),
            Some(_) => cluster::Head::default(),
        },
        target,
        remote,
        records,
        host,
        workdir,
        script_outputs: HashMap::new(),
        long_commands: HashMap::new(),
    })
}

/// A job process's command, as the records spell it: the `-c` script of its shell, without
/// the strict-mode prefix, white space normalized.
fn job_command(p: &Proc) -> Option<String> {
    let img = p.first_image.as_ref()?;
    let script = job_script(&img.argv)?;
    Some(metadata::normalize(strip_shell_prefix(script)))
}

/// A job shell's script: its `-c` argument, or the file of a command too long for one that
/// it runs (a job seen only once its shell ran `bash .../shell_tmp.X/script.sh`).
fn job_script(argv: &[String]) -> Option<&str> {
    shell_command(argv).or_else(|| argv.iter().skip(1).find_map(|a| long::script_in(a)))
}

/// Where Snakemake writes each `script:` job's script, in the working directory.
const SCRIPTS_DIR: &str = ".snakemake/scripts";

/// The script a `script:` job runs: `.snakemake/scripts/tmpXXXXXXXX.NAME` -> `NAME`.
fn script_name(command: &str) -> Option<&str> {
    let at = command.find(".snakemake/scripts/tmp")? + ".snakemake/scripts/".len();
    let file = command[at..].split([' ', '\'', '"']).next()?;
    file.get(12..).filter(|n| !n.is_empty())
}

impl Snakemake {
    /// Snakemake starts every job in the workflow's working directory: where the first job
    /// starts is where the records are (a `workdir:` directive moves it; 7 and 9 keep
    /// the log where Snakemake was started, 8.30 moves it too).
    fn follow_jobs_dir(&mut self, image: &Image) {
        if self.jobs_dir_known {
            return;
        }
        let Some(cwd) = image.cwd.as_ref() else {
            return;
        };
        self.jobs_dir_known = true;
        if *cwd != self.workdir && self.host.facts(&cwd.join(".snakemake/metadata")).is_ok() {
            self.records.move_to(cwd);
            self.workdir = cwd.clone();
        }
    }

    fn name_one(&mut self, e: &Ended, force: bool) -> Option<TaskInfo> {
        if let Some(t) = &self.target {
            return Some(TaskInfo {
                in_engine: false,
                ..t.info()
            });
        }
        let long = self.long_commands.remove(&e.proc.key);
        let command = match &long {
            Some(c) => c.clone(),
            None => job_command(e.proc)?,
        };
        let truncated = e
            .proc
            .first_image
            .as_ref()
            .is_some_and(|i| i.argv_truncated);
        let script_outputs = self.script_outputs.remove(&e.proc.key);
        let ran = Ran {
            script_outputs: script_outputs.as_deref(),
            truncated,
            command: &command,
            start: e.start,
            end: e.end,
            failed: e.proc.exit.as_ref().is_some_and(|x| x.code() != 0),
            script: script_name(&command),
            last_look: e.overdue || force,
        };
        if let Some(t) = Target::of(&shell_words(&command)) {
            self.records.claim_target(&t.rule, &ran);
            return Some(t.info());
        }
        let found = (self.records.exact(&ran))
            .or_else(|| self.records.script(&ran))
            .or_else(|| long::script_in(&command).and_then(|_| self.records.long(&ran)));
        if found.is_some() || !(e.overdue || force) {
            // Asked again later: what its scripts said is kept for then.
            if found.is_none() {
                if let Some(text) = script_outputs {
                    self.script_outputs.insert(e.proc.key, text);
                }
                if let Some(text) = long {
                    self.long_commands.insert(e.proc.key, text);
                }
            }
            return found;
        }
        self.records.best_guess(&ran)
    }
}

/// An ended job no record names: called by the first program its command runs.
fn unnamed(p: &Proc) -> TaskInfo {
    let command = p.first_image.as_ref().and_then(|i| shell_command(&i.argv));
    let first = command
        .map(strip_shell_prefix)
        .and_then(|c| shell_words(c).into_iter().next())
        .map(|w| naming::executable_name(&w).to_string());
    TaskInfo::fallback(p, first.unwrap_or_else(|| naming::proc_tool_name(p)))
}

impl MultiNode for Snakemake {
    /// A cluster job is a task of the head's run; the head's run is named by its directory
    /// once its first submission made it.
    fn shared(&self) -> Option<Shared> {
        let (dir, part) = match (&self.remote, &self.target) {
            (Some(dir), Some(t)) => (
                dir,
                Some(TaskInfo {
                    in_engine: false,
                    ..t.info()
                }),
            ),
            _ => (self.head.dir.as_ref()?, None),
        };
        let identity = cluster::identity(dir);
        Some(Shared { identity, part })
    }

    fn awaits_identity(&self) -> bool {
        self.head.submits && self.head.dir.is_none()
    }
}

impl Wrapper for Snakemake {
    fn helper_in_task(&self, image: &Image, parent: &Image) -> bool {
        let parent_tool = naming::tool_name_of(
            naming::program_name(&parent.path, &parent.argv),
            &parent.argv,
        );
        is_container_query(image)
            || (parent_tool == "snakemake" && shell_command(&image.argv).is_none())
    }

    fn plumbing(&self, _image: &Image, _runner: &Image, _runner_is_root: bool) -> bool {
        false
    }

    fn task_script(&self, _image: &Image) -> bool {
        false
    }
}

impl EngineRun for Snakemake {
    fn wrapper(&self) -> Option<&dyn Wrapper> {
        Some(self)
    }

    /// Relative to the launch directory where it is under it, as its jobs' logs are given.
    fn run_log(&self) -> Option<String> {
        let p = self.records.log_path()?;
        let shown = p.strip_prefix(&self.workdir).unwrap_or(p);
        Some(shown.display().to_string())
    }

    fn multi_node(&self) -> Option<&dyn MultiNode> {
        Some(self)
    }

    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        self.name.clone()
    }

    /// As the log was last read for naming: reading it here, at the run's very start, could
    /// take the previous run's log of a rerun in place before Snakemake has begun its own.
    fn progress(&mut self) -> Option<super::Progress> {
        let (done, total) = self.records.progress?;
        Some(super::Progress {
            done,
            total,
            queued: None,
            cached: 0,
        })
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    /// In a cluster job, what runs is the job's own work (tools of its task).
    fn folds_helpers(&self) -> bool {
        self.remote.is_none()
    }

    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class {
        // A cluster job's marking of its end (`touch DIR/N.jobfinished`) is the engine's.
        if self.remote.is_some() {
            return match cluster::names_run_dir(image) {
                true => Class::Helper,
                false => Class::Undecided,
            };
        }
        if place.parent_is_root && self.head.is_submission(image) {
            return Class::Helper;
        }
        // Snakemake starts each job from a thread of its executor; its main thread runs the
        // Snakefile itself: `shell()` at parse time, `onstart`/`onsuccess`/`onerror`, and
        // subprocesses of input and params functions (measured on 7 and 9, one core or
        // more). Those are the engine's own work, never jobs.
        if p.forked_by != 0 && p.parent.is_some_and(|k| k.pid == p.forked_by) {
            return Class::Helper;
        }
        let Some(command) = (place.parent_is_root)
            .then(|| job_script(&image.argv))
            .flatten()
        else {
            return Class::Helper;
        };
        self.follow_jobs_dir(image);
        // From the first job on (`.snakemake` exists, and a `workdir:` is known), every
        // script is kept as written: a job that ends before it is seen still has it.
        self.host.keep_written(&self.workdir.join(SCRIPTS_DIR));
        if script_name(command).is_some() {
            let text = script::outputs_text(&self.host, &self.workdir, command);
            ::log::debug!(
                "snakemake: job {} runs {command:?}: its script {}",
                p.key.pid,
                if text.is_some() {
                    "read"
                } else {
                    "gone, no copy kept"
                }
            );
            if let Some(text) = text {
                self.script_outputs.insert(p.key, text);
            }
        }
        if let Some(path) = long::script_in(command)
            && let Some(text) = long::read(&self.host, &self.workdir, path)
        {
            self.long_commands.insert(p.key, text);
        }
        Class::Task
    }

    /// A job shell's directory, until the first job's told where the jobs run.
    fn needs_cwd(&self, argv: &[String]) -> bool {
        !self.jobs_dir_known && shell_command(argv).is_some()
    }

    fn provisional(&mut self, task: &Proc) -> Option<String> {
        if let Some(t) = &self.target {
            return Some(t.rule.clone());
        }
        let command = match self.long_commands.get(&task.key) {
            Some(c) => c.clone(),
            None => job_command(task)?,
        };
        if let Some(t) = Target::of(&shell_words(&command)) {
            return Some(t.rule);
        }
        self.records.refresh();
        self.records.likely_rule(&command)
    }

    fn resolve(&mut self, ended: &[Ended], force: bool) -> Vec<Option<TaskInfo>> {
        self.records.refresh();
        ended
            .iter()
            .map(|e| {
                let named = self.name_one(e, force);
                let named = match named {
                    None if e.overdue || force => {
                        ::log::debug!(
                            "snakemake: job {} named by its command: no record fits; {}",
                            e.proc.key.pid,
                            self.records.describe()
                        );
                        Some(unnamed(e.proc))
                    }
                    other => other,
                };
                named.map(|mut info| {
                    if info.run_id.is_empty() {
                        info.run_id = format!("{}-{}", e.proc.key.pid, e.proc.key.start_ticks);
                    }
                    info
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
