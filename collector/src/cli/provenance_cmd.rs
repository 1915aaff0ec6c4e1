//! `pipetrace provenance FILE[#N]`: the run's Workflow Run RO-Crate (see `crate::provenance`).
use std::path::{Path, PathBuf};

use crate::provenance;
use pipetrace_core::judgement::ReportSpan;

pub struct Ask<'a> {
    pub input: &'a str,
    pub dir: Option<&'a Path>,
    pub options: provenance::Options<'a>,
}

/// A path an option names that is not there: bad input, said before anything is read from
/// the run's directory or written into it.
#[derive(Debug, thiserror::Error)]
pub enum MissingInput {
    #[error(
        "--dir {0}: no such directory: give the directory the run ran in (the crate names \
         its files from there and is written there)"
    )]
    Dir(String),
    #[error(
        "--workflow {path}: no such file in the run's directory {dir} (a relative path is \
         taken from there): give the workflow file the run ran"
    )]
    Workflow { path: String, dir: String },
    #[error(
        "--cwl-outputs {0}: no such file: give the JSON of the run's outputs cwltool printed \
         (saved from its stdout)"
    )]
    CwlOutputs(String),
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
    if let Err(e) = inputs_there(ask, dir) {
        errln!("pipetrace: {e}");
        return super::EXIT_USAGE;
    }
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

/// Every path the options name is there: the run's directory, the workflow in it, cwltool's
/// outputs.
fn inputs_there(ask: &Ask, dir: &Path) -> Result<(), MissingInput> {
    let shown = |p: &Path| p.display().to_string();
    if let Some(d) = ask.dir.filter(|d| !d.is_dir()) {
        return Err(MissingInput::Dir(shown(d)));
    }
    if let Some(w) = ask.options.workflow.filter(|w| !dir.join(w).is_file()) {
        return Err(MissingInput::Workflow {
            path: shown(w),
            dir: shown(dir),
        });
    }
    match ask.options.cwl_outputs.filter(|o| !o.is_file()) {
        Some(o) => Err(MissingInput::CwlOutputs(shown(o))),
        None => Ok(()),
    }
}

/// `FILE` (its only run) or `FILE#N` (its Nth): the file and the run's spans.
fn one_run(input: &str) -> Result<(PathBuf, Vec<ReportSpan>), String> {
    let runs = super::trace_file::runs_in(input).map_err(|e| e.to_string())?;
    runs.one().map_err(|e| e.to_string())
}
