//! Runs without an engine model: the command given to `pipetrace run`, or a process a
//! `run_rules` entry matched. Each process whose nearest spanned ancestor is the run starts
//! a task, named by its tool (or by a `task_rules` match, which the core applies first).
use super::{Class, EngineRun, Place, digest};
use crate::{
    attribution::naming,
    port::Host,
    tree::{Image, Proc},
};

pub struct Generic {
    engine: super::EngineKind,
    name: String,
    key: String,
    /// The program the run's root runs (an interpreter probing itself is no task).
    program: String,
}

impl Generic {
    /// The wrapped command: named by its program (or script), keyed by its whole command
    /// line and directory, so different commands never share a history.
    pub(crate) fn command(host: &dyn Host, image: &Image) -> Self {
        let name =
            naming::tool_name_of(naming::program_name(&image.path, &image.argv), &image.argv);
        Self::new(host, super::EngineKind::COMMAND, name, image)
    }

    /// A process a run rule matched, named by the rule's template.
    pub(crate) fn rule(host: &dyn Host, name: String, image: &Image) -> Self {
        Self::new(host, super::EngineKind::RULE, name, image)
    }

    fn new(host: &dyn Host, engine: super::EngineKind, name: String, image: &Image) -> Self {
        let cwd = image.cwd.as_ref().map(|c| c.display().to_string());
        let argv = image.argv.join("\u{1f}");
        let key = digest(&[engine.as_str(), &argv, cwd.as_deref().unwrap_or("")]);
        Self {
            engine,
            name: naming::clean_name(&name),
            key: format!("{}-{key}", naming::clean_name(&name)),
            // What it resolves to: a venv's `python` is a link to the interpreter.
            program: (host.canonicalize(std::path::Path::new(&image.path)))
                .map_or_else(|_| image.path.clone(), |p| p.display().to_string()),
        }
    }
}

impl EngineRun for Generic {
    fn engine(&self) -> super::EngineKind {
        self.engine
    }

    fn pipeline_name(&self) -> String {
        self.name.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn folds_helpers(&self) -> bool {
        false
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        // Python's `platform.architecture()` runs `file -b` on its own interpreter: the
        // program probing itself, not a step of it.
        let probe = naming::executable_name(&image.path) == "file"
            && image
                .argv
                .last()
                .is_some_and(|a| *a == self.program && !a.is_empty());
        match (probe, place.under_run) {
            (true, _) => Class::Helper,
            (false, true) => Class::Task,
            (false, false) => Class::Undecided,
        }
    }
}
