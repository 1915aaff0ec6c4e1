//! `pipetrace compare A B` and `pipetrace compare A --usual`: reads each side (a trace file,
//! one run of it, or a run kept in the state directory), judges by the history where there
//! is one, and prints the table or JSON, and writes the page if asked.
use std::path::{Path, PathBuf};

use crate::compare::{self, Run, store};

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Compare(#[from] compare::CompareError),
    #[error(
        "`{0}` is neither a file nor a kept run id: give a trace file pipetrace wrote \
         (`*.otlp.jsonl`, `FILE#N` for its Nth run) or a trace id `pipetrace run` printed"
    )]
    Neither(String),
    #[error(
        "no file `{0}`, nor a kept run of that id: give a trace file pipetrace wrote \
         (`*.otlp.jsonl`) or a trace id `pipetrace run` printed"
    )]
    Missing(String),
    #[error(transparent)]
    Runs(#[from] super::trace_file::RunsError),
    #[error(
        "no task history of the pipeline of {0} in {1}: run the pipeline under pipetrace a few \
         times (with diagnosis.state_dir set) or compare two runs"
    )]
    NoHistory(String, String),
    #[error("the history of {0} has no run other than {1}: run the pipeline again first")]
    NoEarlierRun(String, String),
    #[error("give two runs (A B), or one with --usual")]
    OneSide,
    #[error(transparent)]
    Write(#[from] pipetrace_export::export::paths::WriteError),
}

pub struct Args<'a> {
    pub a: &'a str,
    pub b: Option<&'a str>,
    pub usual: bool,
    pub json: bool,
    pub html: Option<&'a Path>,
    pub state_dir: Option<PathBuf>,
    /// The machines table and headroom, where sizing is on.
    pub machines: Option<(crate::sizing::Catalog, f64)>,
    /// Each side's machines in the table too (`--machines`; JSON and the page have them).
    pub print_machines: bool,
}

pub(crate) fn run(args: &Args) -> i32 {
    match compare_runs(args) {
        Ok(out) => {
            out!("{out}");
            0
        }
        Err(e) => {
            errln!("pipetrace: {e}");
            // A page that cannot be written is a failure, not bad input (as `report`'s).
            match e {
                InputError::Write(..) => 1,
                _ => super::EXIT_USAGE,
            }
        }
    }
}

fn compare_runs(args: &Args) -> Result<String, InputError> {
    let state = args.state_dir.as_deref();
    let a = side(args.a, state)?;
    let history = pipetrace_host::store::DirStore::under(state, "history");
    let kept = (history.as_deref())
        .map(pipetrace_core::diagnosis::read_history)
        .unwrap_or_default();
    let c = match (args.b, args.usual) {
        (Some(b), _) => {
            let b = side(b, state)?;
            let h = compare::find_history(&kept, &[&a, &b]);
            let spreads = h.map(|h| compare::spreads(h, &[&a.trace, &b.trace]));
            let name = h.map(|h| h.pipeline.clone());
            let mut c = compare::compare(&a, &b, false, &spreads.unwrap_or_default(), name)?;
            c.machines = (args.machines.as_ref())
                .map(|(table, headroom)| compare::Machines::of(&a, &b, table, *headroom));
            c
        }
        (None, true) => {
            let dir = state.map_or("(no diagnosis.state_dir)".into(), |d| {
                d.join("history").display().to_string()
            });
            let h = compare::find_history(&kept, &[&a])
                .ok_or_else(|| InputError::NoHistory(a.label.clone(), dir))?;
            let usual = compare::usual_of(h, &a.trace)
                .ok_or_else(|| InputError::NoEarlierRun(h.pipeline.clone(), a.label.clone()))?;
            let spreads = compare::spreads(h, &[&a.trace]);
            let name = Some(h.pipeline.clone());
            let mut c = compare::compare(&usual.run, &a, true, &spreads, name)?;
            c.machines = (args.machines.as_ref())
                .map(|(table, headroom)| compare::Machines::of(&usual.run, &a, table, *headroom));
            c
        }
        (None, false) => return Err(InputError::OneSide),
    };
    if let Some(path) = args.html {
        pipetrace_export::export::paths::write_creating(path, compare::html(&c))?;
        errln!("pipetrace: comparison written to {}", path.display());
    }
    let mut out = String::new();
    match args.json {
        true => out = serde_json::to_string_pretty(&c).expect("plain data") + "\n",
        false => {
            let mut c = c;
            c.machines = c.machines.filter(|_| args.print_machines);
            compare::table(&c, &mut out)
        }
    }
    Ok(out)
}

/// One side: `FILE`, `FILE#N`, or a kept run id.
fn side(input: &str, state: Option<&Path>) -> Result<Run, InputError> {
    let (file, _) = super::trace_file::split(input);
    if Path::new(file).is_file() {
        let (_, spans) = super::trace_file::runs_in(input)?.one()?;
        return Ok(Run::of_spans(input, &spans));
    }
    match state {
        Some(dir) if store::looks_like_id(input) => Ok(store::load(dir, input)?),
        _ if Path::new(file).exists() => Err(InputError::Neither(input.into())),
        _ => Err(InputError::Missing(input.into())),
    }
}
