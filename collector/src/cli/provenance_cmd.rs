//! `pipetrace provenance FILE[#N]`: the run's Workflow Run RO-Crate (see `crate::provenance`).
use std::path::{Path, PathBuf};

use crate::{provenance, report::ReportSpan};

pub struct Ask<'a> {
    pub input: &'a str,
    pub dir: Option<&'a Path>,
    pub workflow: Option<&'a Path>,
    pub hash: bool,
    pub cwl_outputs: Option<&'a Path>,
    pub license: &'a str,
    pub publisher: Option<&'a str>,
    pub publisher_url: Option<&'a str>,
}

pub fn run(ask: &Ask) -> i32 {
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
        workflow: ask.workflow,
        hash: ask.hash,
        cwl_outputs: ask.cwl_outputs,
        license: ask.license,
        publisher: ask.publisher,
        publisher_url: ask.publisher_url,
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
    let mut r = super::trace_file::runs_in(input)?;
    let file = r.file.display().to_string();
    let i = match r.picked {
        Some(i) => i,
        None if r.runs.len() == 1 => 0,
        None => {
            let n = r.runs.len();
            return Err(format!("{file} holds {n} runs: give one as {file}#N"));
        }
    };
    Ok((r.file, r.runs.swap_remove(i)))
}
