//! cwltool: the run is `cwltool [options] WORKFLOW.cwl[#main] [job]`, named by the `.cwl`
//! file. cwltool starts each step's command itself (or `docker run ...` it); pipetrace reads
//! the document the run was given to know each step's command, and names each process by the
//! step whose `baseCommand` and literal `arguments` its command line starts with (under
//! ShellCommandRequirement: whose pieces its `sh -c` line holds; then whose expressions'
//! text, such as `bash -c $("sort " + ...)`'s `sort`, it holds): the step id, sub-workflow
//! steps as `parent/step`, scatter instances numbered as cwltool numbers its jobs (`step`,
//! `step_2`, `step_3`...: by the elements on the line, by position for a dotproduct and by
//! combination for a crossproduct, else, where the elements do not show, such as upstream
//! files, in the order the jobs start). Steps that run the same tool are told apart by the
//! values bound to their inputs (job file, defaults, upstream file names) that the line
//! holds, then by whether the steps they read from have started (so the two instances of
//! a sub-workflow run twice keep apart); a step that does not scatter is named once. Steps
//! that run the very same command line on the same values cannot be told apart from outside
//! cwltool: they take their names in document order, each once. A CommandLineTool run alone
//! is one task named as cwltool names its job: by the tool's id, else its file name. The
//! JavaScript expression engine (`node`/`nodejs`: `--eval`, `-v`, code on stdin) and
//! container-runtime queries are helpers; a step whose own command is node is that step.
//! The step's tool's `successCodes`, `temporaryFailCodes` and `permanentFailCodes` judge
//! the task's exit as cwltool does (a code listed as success first, then as a failure, even 0).
mod document;

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    time::SystemTime,
};

use document::{Document, Step};

use super::{Class, Ended, Engine, EngineRun, Place, by_tool, digest, is_container_query};
use crate::{
    attribution::{TaskInfo, naming},
    event::ProcKey,
    tree::{Image, Proc},
};

/// As `pipetrace.run.engine` and `attribution.engines` name it.
pub const KIND: super::EngineKind = super::EngineKind::engine("cwltool");

pub const ENGINE: Engine = Engine {
    kind: KIND,
    // `cwl-runner` is the standard's generic name; Debian links it to cwltool.
    recognises: |tool, _| tool == "cwltool" || tool == "cwl-runner",
    start,
    // Its jobs run in temporary directories it names; nothing there is its own record.
    bookkeeping: crate::files::Bookkeeping {
        parts: &[],
        names: &[],
    },
    started_by_parent: None,
    starts_in: None,
    watches: None,
    allocates: None,
    python_package: Some("cwltool"),
};

struct Cwltool {
    workflow: String,
    key: String,
    document: Option<Document>,
    /// Instances started per step id, for cwltool's scatter numbering.
    instances: HashMap<String, u32>,
    /// Task names given (cwltool gives each job name once).
    given: HashSet<String>,
    /// When each step last started, counted in tasks named.
    last: HashMap<String, u64>,
    /// Tasks named when they started.
    named: HashMap<ProcKey, TaskInfo>,
}

/// Options of cwltool that take a value (so the document is not mistaken for one).
const VALUED: &[&str] = &[
    "--outdir",
    "--basedir",
    "--tmpdir-prefix",
    "--tmp-outdir-prefix",
    "--cachedir",
    "--log-dir",
    "--provenance",
    "--user-space-docker-cmd",
    "--beta-dependency-resolvers-configuration",
    "--default-container",
    "--parallel-jobs",
    "--compute-checksum",
    "--timestamps",
    "--overrides",
];

/// The `.cwl` document argument (`wf.cwl`, `wf.cwl#main`, `packed.cwl#main`).
fn document_arg(argv: &[String]) -> Option<&str> {
    document_at(argv).map(|i| argv[i].as_str())
}

/// Where in argv the document is; its job file or `--input value`s follow it.
fn document_at(argv: &[String]) -> Option<usize> {
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if VALUED.contains(&a.as_str()) {
            i += 1;
        } else if a.split('#').next().is_some_and(|f| f.ends_with(".cwl")) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn start(image: &Image, _started: SystemTime, host: crate::port::SharedHost) -> Box<dyn EngineRun> {
    let cwl = document_arg(&image.argv);
    let workflow = cwl
        .map(|a| naming::executable_name(a.split('#').next().unwrap_or(a)).to_string())
        .unwrap_or_else(|| "cwltool".into());
    let cwd = image.cwd.clone().unwrap_or_default();
    let inputs = document_at(&image.argv).map_or(&[][..], |i| &image.argv[i + 1..]);
    let document = cwl.and_then(|c| document::load(&*host, c, &cwd, inputs));
    let key = digest(&["cwltool", cwl.unwrap_or(""), &cwd.to_string_lossy()]);
    Box::new(Cwltool {
        key: format!("{}-{key}", naming::clean_name(&workflow)),
        workflow: naming::clean_name(&workflow),
        document,
        instances: HashMap::new(),
        given: HashSet::new(),
        last: HashMap::new(),
        named: HashMap::new(),
    })
}

/// cwltool's JavaScript engine: `node`/`nodejs` that runs no step of the document. cwltool
/// starts it as `--eval CODE` (its probe and its expression server) or `-v`; a step's own
/// `node script.js` fits that step, and takes cwltool's shapes only where it spells them.
fn is_javascript_engine(image: &Image, steps: &[Step]) -> bool {
    if !matches!(naming::executable_name(&image.path), "node" | "nodejs") {
        return false;
    }
    let argv = &image.argv;
    let engine_flag = match argv.get(1..) {
        Some([flag, _]) if flag == "--eval" => Some(flag),
        Some([flag]) if flag == "-v" => Some(flag),
        _ => None,
    };
    let spells = |s: &Step, w: &String| s.base.iter().chain(&s.literals).any(|l| l == w);
    !steps
        .iter()
        .any(|s| fit(s, argv).is_some() && engine_flag.is_none_or(|f| spells(s, f)))
}

/// How well a command line fits a step: its `baseCommand` where the command starts (or,
/// under a container runtime, where it appears), then how many of its literal arguments
/// it holds. None when it is not that step's command.
fn fit(step: &Step, argv: &[String]) -> Option<usize> {
    if let Some(pieces) = &step.shell {
        return shell_fit(step, pieces, argv);
    }
    let first = step.base.first().or(step.literals.first())?;
    let name = naming::executable_name(first);
    let at = argv
        .iter()
        .position(|a| naming::executable_name(a) == name || a == first)?;
    let rest = &argv[at + 1..];
    let base_rest = step.base.get(1..).unwrap_or(&[]);
    if rest.len() < base_rest.len() || rest[..base_rest.len()] != *base_rest {
        return None;
    }
    let literals = step.literals.iter().filter(|l| argv.contains(l)).count();
    Some(100 * step.base.len() + 10 * literals + usize::from(at == 0))
}

/// A ShellCommandRequirement step runs as `sh -c LINE`, its whole command joined into LINE:
/// it fits when LINE holds its `baseCommand` and the literal pieces of its arguments, in order.
fn shell_fit(step: &Step, pieces: &[String], argv: &[String]) -> Option<usize> {
    let at = argv
        .iter()
        .position(|a| naming::executable_name(a) == "sh")?;
    let line = match &argv[at + 1..] {
        [c, line, ..] if c == "-c" => line,
        _ => return None,
    };
    let wanted: Vec<&String> = step.base.iter().chain(pieces).collect();
    if wanted.is_empty() {
        return None;
    }
    let mut rest = line.as_str();
    for w in &wanted {
        rest = &rest[rest.find(w.as_str())? + w.len()..];
    }
    Some(100 * step.base.len() + 10 * wanted.len() + usize::from(at == 0))
}

/// How many of the values bound to a step's inputs its command line holds, as a word, a
/// staged file's name (`/tmp/x/made.txt`), an option's value (`--n=3`) or, on a shell
/// line, anywhere.
fn bound_in(step: &Step, argv: &[String]) -> usize {
    let mut values: Vec<&String> = step.bound.iter().filter(|v| !v.is_empty()).collect();
    values.sort();
    values.dedup();
    values.iter().filter(|v| holds(step, argv, v)).count()
}

/// How well a command line bears out a step's hints (text its expressions likely make, its
/// inputs' prefixes): those it holds less those it lacks, so that a step whose every hint
/// is there beats one that wants more.
fn hinted(step: &Step, argv: &[String]) -> i64 {
    let texts = (step.hints.iter()).filter(|h| argv.iter().any(|a| a.contains(h.as_str())));
    // A prefix is a word, or the start of one where it ends in `=` (`--out=x`).
    let words = (step.prefixes.iter()).filter(|p| {
        (argv.iter()).any(|a| a == *p || (p.ends_with('=') && a.starts_with(p.as_str())))
    });
    let held = texts.count() + words.count();
    let all = step.hints.len() + step.prefixes.len();
    i64::try_from(2 * held).unwrap_or(i64::MAX) - i64::try_from(all).unwrap_or(0)
}

/// Whether a command line holds a value, as a word, a staged file's name (`/tmp/x/made.txt`),
/// an option's value (`--n=3`) or, on a shell line, anywhere.
fn holds(step: &Step, argv: &[String], v: &str) -> bool {
    argv.iter().any(|a| {
        a == v
            || a.strip_suffix(v)
                .is_some_and(|head| head.ends_with(['/', '=']))
            || (step.shell.is_some() && a.contains(v))
    })
}

/// Which of a scatter's jobs a command line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// Its number, from 1, as cwltool numbers them (in the order it makes them).
    Number(u32),
    /// The elements do not tell (upstream files, expressions, a value shown twice).
    Untold,
    /// The line holds elements of different positions of a dotproduct: no job of this step.
    Foreign,
}

/// Which job of a scatter a command line is, by the elements it holds: a dotproduct's jobs
/// go by position, a crossproduct's by combination (the first input's elements slowest),
/// which is the order cwltool makes them in.
fn job_of(step: &Step, argv: &[String]) -> Job {
    let at: Vec<Option<usize>> = step
        .elements
        .iter()
        .map(|elements| position_of(step, elements, argv))
        .collect();
    if step.cross {
        let Some(at) = at.iter().copied().collect::<Option<Vec<usize>>>() else {
            return Job::Untold;
        };
        let n = (step.elements.iter().zip(at)).fold(0, |n, (els, i)| n * els.len() + i);
        return u32::try_from(n + 1).map_or(Job::Untold, Job::Number);
    }
    let mut told = at.into_iter().flatten();
    match told.next() {
        None => Job::Untold,
        Some(i) if told.all(|j| j == i) => u32::try_from(i + 1).map_or(Job::Untold, Job::Number),
        Some(_) => Job::Foreign,
    }
}

/// Where among one input's elements the line's is: when exactly one of them, all distinct,
/// is on it.
fn position_of(step: &Step, elements: &[String], argv: &[String]) -> Option<usize> {
    let mut distinct = elements.to_vec();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != elements.len() || distinct.iter().any(String::is_empty) {
        return None;
    }
    let mut found = elements
        .iter()
        .enumerate()
        .filter(|(_, v)| holds(step, argv, v));
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

impl Cwltool {
    /// The step a command line run in `cwd` runs, numbered as cwltool numbers a scatter's
    /// jobs.
    fn step_of(&mut self, argv: &[String], cwd: Option<&Path>) -> Option<TaskInfo> {
        let doc = self.document.as_ref()?;
        if let Some(tool) = &doc.tool {
            let first = doc.steps.first();
            return Some(TaskInfo {
                name: tool.clone(),
                codes: first.map_or_else(Default::default, |s| s.codes.clone()),
                threads: first.and_then(|s| s.cores),
                memory_bytes: first.and_then(|s| s.ram_bytes),
                time_limit_s: first.and_then(|s| s.time_limit_s),
                logs: first.map_or_else(Vec::new, |s| stderr_of(s, cwd)),
                ..Default::default()
            });
        }
        let (step, job) = self.pick(&doc.steps, argv)?;
        let id = step.id.clone();
        let name = self.name_of(step, job);
        let codes = step.codes.clone();
        let (threads, memory_bytes, time_limit_s) = (step.cores, step.ram_bytes, step.time_limit_s);
        let logs = stderr_of(step, cwd);
        *self.instances.entry(id.clone()).or_default() += 1;
        let at = self.last.values().max().map_or(1, |n| n + 1);
        self.last.insert(id, at);
        self.given.insert(name.clone());
        Some(TaskInfo {
            name,
            codes,
            threads,
            memory_bytes,
            time_limit_s,
            logs,
            ..Default::default()
        })
    }

    /// A step's name for a job: `_N` by its element where the line tells it, else (upstream
    /// files, expressions) by the order its jobs start in.
    fn name_of(&self, step: &Step, job: Job) -> String {
        let n = match job {
            Job::Number(n) => n,
            _ => self.instances.get(&step.id).copied().unwrap_or(0) + 1,
        };
        match n {
            1 => step.id.clone(),
            n => format!("{}_{n}", step.id),
        }
    }

    /// When a step (or, for a sub-workflow step, a step inside it) last started, counted
    /// in tasks named; None before it has.
    fn started(&self, id: &str) -> Option<u64> {
        let within = |s: &str| s == id || s.strip_prefix(id).is_some_and(|r| r.starts_with('/'));
        (self.last.iter())
            .filter(|(s, _)| within(s))
            .map(|(_, at)| *at)
            .max()
    }

    /// When the latest of the steps a step reads from started (0 when it reads from none).
    fn upstream_at(&self, step: &Step) -> u64 {
        let at = step.after.iter().filter_map(|a| self.started(a));
        at.max().unwrap_or(0)
    }

    /// Whether a step's name for a job is still to give: a step that does not scatter runs
    /// once; a scatter makes each job once.
    fn open(&self, (step, job): &(&Step, Job)) -> bool {
        match step.scatters {
            true => !self.given.contains(&self.name_of(step, *job)),
            false => !self.instances.contains_key(&step.id),
        }
    }

    /// The step whose command fits best, then whose bound inputs the line holds most, then
    /// whose expressions' text it bears out best, and whose scatter elements it may be a job
    /// of. Steps still tied run the same tool on the same values: each name is given once
    /// (where all theirs are spent, a step of the same command whose input no known value
    /// tells, such as one an expression picks, takes the line); then a step whose upstream
    /// steps have started, the one whose upstream started last (a
    /// sequential cwltool goes on with a sub-workflow once its step has run), a scatter under
    /// way (cwltool makes a step's jobs together), else the first step in the document not
    /// yet started. Which of identical processes
    /// gets which step cannot be told from outside cwltool; readiness is weighed only among
    /// names still free, since such a guess may have spent an upstream step's name.
    fn pick<'s>(&self, steps: &'s [Step], argv: &[String]) -> Option<(&'s Step, Job)> {
        let scored: Vec<_> = steps
            .iter()
            .filter_map(|s| {
                let job = job_of(s, argv);
                let held = (bound_in(s, argv), hinted(s, argv));
                let score = (fit(s, argv)?, held, job != Job::Foreign);
                Some((score, s, job))
            })
            .collect();
        let best = scored.iter().map(|(score, ..)| *score).max()?;
        let tied: Vec<(&Step, Job)> = (scored.iter())
            .filter(|(score, ..)| *score == best)
            .map(|(_, s, job)| (*s, *job))
            .collect();
        let begun = |s: &Step| self.instances.contains_key(&s.id);
        let mut open: Vec<(&Step, Job)> = tied.iter().copied().filter(|j| self.open(j)).collect();
        if open.is_empty() {
            // Those names are spent: a step of the same command whose name is free, whose
            // input no value tells (an expression makes it), runs this line.
            let next = (scored.iter())
                .filter(|(score, s, job)| score.0 == best.0 && self.open(&(s, *job)))
                .map(|(score, ..)| *score)
                .max();
            open = (scored.iter())
                .filter(|(score, ..)| Some(*score) == next)
                .map(|(_, s, job)| (*s, *job))
                .collect();
        }
        if open.is_empty() {
            open = tied;
        }
        let ready = |s: &Step| s.after.iter().all(|a| self.started(a).is_some());
        if open.iter().any(|(s, _)| ready(s)) {
            open.retain(|(s, _)| ready(s));
        }
        let latest = open.iter().map(|(s, _)| self.upstream_at(s)).max();
        open.retain(|(s, _)| Some(self.upstream_at(s)) == latest);
        let going = open.iter().find(|(s, _)| s.scatters && begun(s));
        let fresh = open.iter().find(|(s, _)| !begun(s));
        going.or(fresh).or(open.first()).copied()
    }
}

/// Where a step's stderr goes: its `stderr` file in the job's output directory, which
/// cwltool deletes at the run's end unless told `--leave-tmpdir`.
fn stderr_of(step: &Step, cwd: Option<&Path>) -> Vec<String> {
    let (Some(file), Some(cwd)) = (&step.stderr, cwd) else {
        return Vec::new();
    };
    vec![cwd.join(file).to_string_lossy().into_owned()]
}

impl EngineRun for Cwltool {
    fn engine(&self) -> super::EngineKind {
        KIND
    }

    /// A step's stderr file is in its working directory.
    fn needs_cwd(&self, _argv: &[String]) -> bool {
        (self.document.as_ref()).is_some_and(|d| d.steps.iter().any(|s| s.stderr.is_some()))
    }

    fn pipeline_name(&self) -> String {
        self.workflow.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class {
        let steps = self.document.as_ref().map_or(&[][..], |d| &d.steps[..]);
        if is_javascript_engine(image, steps) || is_container_query(image) {
            return Class::Helper;
        }
        if !place.under_run {
            return Class::Undecided;
        }
        if let Some(info) = self.step_of(&image.argv, image.cwd.as_deref()) {
            self.named.insert(p.key, info);
        }
        Class::Task
    }

    fn provisional(&mut self, task: &Proc) -> Option<String> {
        let named = self.named.get(&task.key).map(|t| t.name.clone());
        named.or_else(|| Some(naming::proc_tool_name(task)))
    }

    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        let named = |e: &Ended| {
            let info = self.named.remove(&e.proc.key);
            let run_id = format!("{}-{}", e.proc.key.pid, e.proc.key.start_ticks);
            Some(info.map_or_else(|| by_tool(e.proc), |i| TaskInfo { run_id, ..i }))
        };
        ended.iter().map(named).collect()
    }
}

#[cfg(test)]
mod tests;
