//! `pipetrace provenance FILE[#N]`: the run's Workflow Run RO-Crate (see `crate::provenance`).
use std::path::{Path, PathBuf};

use crate::provenance;
use pipetrace_core::judgement::ReportSpan;

pub struct Ask<'a> {
    pub input: &'a str,
    pub dir: Option<&'a Path>,
    pub options: provenance::Options<'a>,
}

pub(crate) fn run(ask: &Ask) -> i32 {
    let (file, spans) = match one_run(ask.input) {
        Ok(r) => r,
        Err(e) => {
            errln!("pipetrace: {e}");
            return super::EXIT_USAGE;
        }
    };
    // `pipetrace run` writes its trace in the directory it ran in.
    let beside = file.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = ask.dir.or(beside).unwrap_or(Path::new("."));
    let written = provenance::write(&provenance::Ask {
        spans: &spans,
        dir,
        options: ask.options,
    });
    match written {
        Ok(w) => {
            say!(
                "pipetrace: {} written: {} tasks, {} files, {} undeclared reads",
                w.metadata.display(),
                w.tasks,
                w.files,
                w.undeclared_reads
            );
            if !w.declared_by_engine {
                say!(
                    "pipetrace: the engine kept no records of its jobs here: each task's files \
                     are those its tools opened, none marked undeclared"
                );
            }
            0
        }
        Err(e) => {
            errln!("pipetrace: {e}");
            1
        }
    }
}

/// `FILE` (its only run) or `FILE#N` (its Nth): the file and the run's spans.
fn one_run(input: &str) -> Result<(PathBuf, Vec<ReportSpan>), String> {
    let runs = super::trace_file::runs_in(input).map_err(|e| e.to_string())?;
    runs.one().map_err(|e| e.to_string())
}
