//! cwltool: the run is `cwltool [options] WORKFLOW.cwl[#main] [job]`, named by the `.cwl`
//! file. cwltool starts each step's command itself (or `docker run ...` it); pipetrace reads
//! the document the run was given to know each step's command, and names each process by the
//! step whose `baseCommand` and literal `arguments` its command line starts with: the step
//! id, sub-workflow steps as `parent/step`, scatter instances numbered as cwltool numbers its
//! jobs (`step`, `step_2`, `step_3`...). A CommandLineTool run alone is one task named by the
//! tool. The JavaScript expression engine (`node`/`nodejs`: `--eval`, `-v`, code on stdin)
//! and container-runtime queries are helpers.
mod document;

use std::{collections::HashMap, time::SystemTime};

use document::{Document, Step};

use super::{Class, Ended, Engine, EngineRun, Place, by_tool, digest, is_container_query};
use crate::{
    attribution::{TaskInfo, naming},
    event::ProcKey,
    tree::{Image, Proc},
};

pub const ENGINE: Engine = Engine {
    name: "cwltool",
    kind: super::EngineKind::Cwltool,
    // `cwl-runner` is the standard's generic name; Debian links it to cwltool.
    recognises: |tool, _| tool == "cwltool" || tool == "cwl-runner",
    start,
};

struct Cwltool {
    workflow: String,
    key: String,
    document: Option<Document>,
    /// Instances started per step id, for cwltool's scatter numbering.
    instances: HashMap<String, u32>,
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
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        if VALUED.contains(&a.as_str()) {
            args.next();
        } else if a.split('#').next().is_some_and(|f| f.ends_with(".cwl")) {
            return Some(a);
        }
    }
    None
}

fn start(image: &Image, _started: SystemTime, host: crate::host::SharedHost) -> Box<dyn EngineRun> {
    let cwl = document_arg(&image.argv);
    let workflow = cwl
        .map(|a| naming::executable_name(a.split('#').next().unwrap_or(a)).to_string())
        .unwrap_or_else(|| "cwltool".into());
    let cwd = image.cwd.clone().unwrap_or_default();
    let document = cwl.and_then(|c| document::load(&*host, c, &cwd));
    let key = digest(&["cwltool", cwl.unwrap_or(""), &cwd.to_string_lossy()]);
    Box::new(Cwltool {
        key: format!("{}-{key}", naming::clean_name(&workflow)),
        workflow: naming::clean_name(&workflow),
        document,
        instances: HashMap::new(),
        named: HashMap::new(),
    })
}

fn is_javascript_engine(image: &Image) -> bool {
    matches!(naming::executable_name(&image.path), "node" | "nodejs")
}

/// How well a command line fits a step: its `baseCommand` where the command starts (or,
/// under a container runtime, where it appears), then how many of its literal arguments
/// it holds. None when it is not that step's command.
fn fit(step: &Step, argv: &[String]) -> Option<usize> {
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

impl Cwltool {
    /// The step a command line runs, numbered as cwltool numbers repeated jobs of a step.
    fn step_of(&mut self, argv: &[String]) -> Option<TaskInfo> {
        let doc = self.document.as_ref()?;
        if let Some(tool) = &doc.tool {
            return Some(TaskInfo {
                name: tool.clone(),
                ..Default::default()
            });
        }
        let mut best: Option<(usize, &Step)> = None;
        for step in &doc.steps {
            if let Some(f) = fit(step, argv)
                && best.is_none_or(|(b, _)| f > b)
            {
                best = Some((f, step));
            }
        }
        let id = best?.1.id.clone();
        let n = self.instances.entry(id.clone()).or_default();
        *n += 1;
        let name = match *n {
            1 => id,
            n => format!("{id}_{n}"),
        };
        Some(TaskInfo {
            name,
            ..Default::default()
        })
    }
}

impl EngineRun for Cwltool {
    fn engine(&self) -> super::EngineKind {
        super::EngineKind::Cwltool
    }

    fn pipeline_name(&self) -> String {
        self.workflow.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class {
        if is_javascript_engine(image) || is_container_query(image) {
            return Class::Helper;
        }
        if !place.under_run {
            return Class::Undecided;
        }
        if let Some(info) = self.step_of(&image.argv) {
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
