//! Nextflow: the run is `nextflow run PIPELINE`; the launcher goes on to exec java, and the
//! engine found at its first exec stays. Until its work directories are modelled, each
//! process the engine starts is a task named by its tool; container queries are helpers.
use std::time::SystemTime;

use super::{Class, Ended, Engine, EngineRun, Place, digest, generic::Generic, is_container_query};
use crate::{
    attribution::{TaskInfo, naming},
    tree::{Image, Proc},
};

pub const ENGINE: Engine = Engine {
    name: "nextflow",
    recognises: |tool, _| tool == "nextflow",
    start,
};

struct Nextflow {
    pipeline: String,
    key: String,
}

fn start(image: &Image, _started: SystemTime) -> Box<dyn EngineRun> {
    let args = image.argv.get(1..).unwrap_or(&[]);
    let pipeline = args
        .iter()
        .position(|a| a == "run")
        .and_then(|i| args.get(i + 1))
        .map(|s| naming::clean_name(s))
        .unwrap_or_else(|| "nextflow".into());
    let cwd = image.cwd.as_ref().map(|c| c.display().to_string());
    let key = digest(&["nextflow", &pipeline, cwd.as_deref().unwrap_or("")]);
    Box::new(Nextflow {
        key: format!("{}-{key}", pipeline.replace('/', "_")),
        pipeline,
    })
}

impl EngineRun for Nextflow {
    fn engine(&self) -> &str {
        "nextflow"
    }

    fn pipeline_name(&self) -> String {
        self.pipeline.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        if is_container_query(image) {
            Class::Helper
        } else if place.under_run {
            Class::Task
        } else {
            Class::Undecided
        }
    }

    fn provisional(&mut self, task: &Proc) -> Option<String> {
        Some(naming::proc_tool_name(task))
    }

    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        ended
            .iter()
            .map(|e| Some(Generic::task_info(e.proc)))
            .collect()
    }
}
