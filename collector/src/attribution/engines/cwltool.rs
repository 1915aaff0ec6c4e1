//! cwltool: the run is `cwltool [options] WORKFLOW.cwl [job]`. Its JavaScript expression
//! engine (`node`/`nodejs --eval`, `-v` probes, code on stdin) and its container-runtime
//! queries are helpers. Until steps are modelled, each other process it starts is a task
//! named by its tool.
use std::time::SystemTime;

use super::{Class, Engine, EngineRun, Place, digest, is_container_query};
use crate::{
    attribution::naming,
    tree::{Image, Proc},
};

pub const ENGINE: Engine = Engine {
    name: "cwltool",
    recognises: |tool, _| tool == "cwltool",
    start,
};

struct Cwltool {
    workflow: String,
    key: String,
}

fn start(image: &Image, _started: SystemTime) -> Box<dyn EngineRun> {
    let args = image.argv.get(1..).unwrap_or(&[]);
    let cwl = args
        .iter()
        .find(|a| a.ends_with(".cwl") || a.contains(".cwl#"));
    let workflow = cwl
        .map(|a| naming::executable_name(a.split('#').next().unwrap_or(a)).to_string())
        .unwrap_or_else(|| "cwltool".into());
    let cwd = image.cwd.as_ref().map(|c| c.display().to_string());
    let key = digest(&[
        "cwltool",
        cwl.map_or("", |s| s.as_str()),
        cwd.as_deref().unwrap_or(""),
    ]);
    Box::new(Cwltool {
        key: format!("{}-{key}", naming::clean_name(&workflow)),
        workflow: naming::clean_name(&workflow),
    })
}

fn is_javascript_engine(image: &Image) -> bool {
    matches!(naming::executable_name(&image.path), "node" | "nodejs")
}

impl EngineRun for Cwltool {
    fn engine(&self) -> &str {
        "cwltool"
    }

    fn pipeline_name(&self) -> String {
        self.workflow.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        if is_javascript_engine(image) || is_container_query(image) {
            Class::Helper
        } else if place.under_run {
            Class::Task
        } else {
            Class::Undecided
        }
    }
}
