//! `pipetrace suggest FILE...`: what each task should ask for next time, in the engine's own
//! settings (see `crate::suggest`).
use std::path::Path;

use pipetrace_semconv::attr;

use crate::{
    compare::store,
    suggest::{self, formats},
};
use pipetrace_core::judgement::{Kind, ReportSpan};
use pipetrace_core::sizing::Policy;

/// The settings' format: the engine's (`auto`: the runs' engine), or a table, or JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Auto,
    Snakemake,
    Nextflow,
    Cwl,
    Table,
    Json,
}

pub struct Ask<'a> {
    pub inputs: &'a [String],
    /// Where `pipetrace run` keeps runs for compare: inputs may be their ids.
    pub state_dir: Option<&'a Path>,
    /// A pipeline whose task history (in the state directory) to add.
    pub pipeline: Option<&'a str>,
    pub format: Format,
    pub policy: Policy,
    pub cwl_workflow: Option<&'a Path>,
    pub output: Option<&'a Path>,
}

pub(crate) fn run(ask: &Ask) -> i32 {
    match settings(ask) {
        Ok((text, written)) => {
            match ask.output {
                Some(path) => match pipetrace_export::export::paths::write_creating(path, &text) {
                    Ok(()) => say!("pipetrace: {written} written to {}", path.display()),
                    Err(e) => {
                        errln!("pipetrace: {e}");
                        return 1;
                    }
                },
                None => out!("{text}"),
            }
            0
        }
        Err(e) => {
            errln!("pipetrace: {e}");
            super::EXIT_USAGE
        }
    }
}

/// The settings' text, and what they are (for the line saying where they went).
fn settings(ask: &Ask) -> Result<(String, &'static str), String> {
    // Refused whatever the format: a missing file given is a mistake, not a file unused.
    if let Some(wf) = ask.cwl_workflow.filter(|w| !w.is_file()) {
        return Err(format!(
            "--cwl-workflow {}: no such file: give the CWL workflow the runs ran",
            wf.display()
        ));
    }
    let mut spans = Vec::new();
    let mut jobs = suggest::Jobs::default();
    let mut runs = 0;
    for input in ask.inputs {
        if !Path::new(input.rsplit_once('#').map_or(input.as_str(), |(f, _)| f)).exists()
            && let (Some(dir), true) = (ask.state_dir, store::looks_like_id(input))
        {
            jobs.add_kept(&store::load(dir, input).map_err(|e| e.to_string())?);
            runs += 1;
            continue;
        }
        let picked = read(input)?;
        runs += picked.len();
        spans.extend(picked.into_iter().flatten());
    }
    jobs.add_spans(&spans);
    if let Some(name) = ask.pipeline {
        runs += history(ask.state_dir, name, &mut jobs)?;
    }
    let s = jobs.suggest(ask.policy);
    if s.is_empty() {
        return Err(format!(
            "no tasks in {}: suggest needs the trace of a pipeline run (its task spans)",
            ask.inputs.join(", ")
        ));
    }
    let mut from = ask.inputs.to_vec();
    from.extend(ask.pipeline.map(|p| format!("pipeline {p}'s history")));
    let from = from.join(", ");
    let basis = formats::Basis {
        runs,
        percentile: ask.policy.percentile,
        margin: ask.policy.margin,
        from: &from,
    };
    let format = match ask.format {
        Format::Auto if ask.cwl_workflow.is_some() => Format::Cwl,
        Format::Auto => engine_format(&spans),
        f => f,
    };
    Ok(match format {
        Format::Snakemake => (formats::snakemake(&s, &basis), "a Snakemake profile"),
        Format::Nextflow => (formats::nextflow(&s, &basis), "a Nextflow config"),
        Format::Cwl => {
            let Some(wf) = ask.cwl_workflow else {
                return Err(
                    "--format cwl needs --cwl-workflow WORKFLOW.cwl: the overrides \
                            name each step's tool file"
                        .into(),
                );
            };
            let tools = formats::cwl_tools(wf)?;
            (formats::cwl(&s, &basis, &tools), "a cwltool overrides file")
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?;
            (json + "\n", "JSON")
        }
        Format::Table | Format::Auto => (formats::table(&s, &basis), "a table"),
    })
}

/// Adds the task history of `name` (its history file's key, or the pipeline's name where one
/// pipeline has it): how many runs it holds.
fn history(state: Option<&Path>, name: &str, jobs: &mut suggest::Jobs) -> Result<usize, String> {
    let store = pipetrace_host::store::DirStore::under(state, "history");
    let kept = (store.as_deref())
        .map(pipetrace_core::diagnosis::read_history)
        .unwrap_or_default();
    // Its key (`rnaseq-c5977152`: the name and a digest of where it ran), or its name where
    // one pipeline has it.
    let named = |key: &str| {
        key.strip_prefix(name)
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|d| d.len() == 8 && d.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let exact = kept.iter().find(|h| h.pipeline == name);
    let by_name: Vec<_> = kept.iter().filter(|h| named(&h.pipeline)).collect();
    if exact.is_none() && by_name.len() > 1 {
        let keys: Vec<&str> = by_name.iter().map(|h| h.pipeline.as_str()).collect();
        return Err(format!(
            "{} pipelines are named `{name}` ({}): give one of these as --pipeline",
            keys.len(),
            keys.join(", ")
        ));
    }
    let Some(h) = exact.or(by_name.first().copied()) else {
        let known: Vec<&str> = kept.iter().map(|h| h.pipeline.as_str()).collect();
        return Err(format!(
            "no task history of a pipeline named `{name}` in diagnosis.state_dir (known: {}): \
             run it under pipetrace first",
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        ));
    };
    jobs.add_history(h);
    let mut runs: Vec<&str> = (h.tasks.values().flatten())
        .map(|r| r.run.as_str())
        .collect();
    runs.sort_unstable();
    runs.dedup();
    Ok(runs.len())
}

/// `FILE` (every run in it) or `FILE#N` (its Nth run): each run's spans.
fn read(input: &str) -> Result<Vec<Vec<ReportSpan>>, String> {
    let runs = super::trace_file::runs_in(input).map_err(|e| e.to_string())?;
    Ok(runs.picked_or_all())
}

/// The engine of the runs given, when they agree on one whose settings pipetrace writes.
fn engine_format(spans: &[ReportSpan]) -> Format {
    let mut engines = (spans.iter())
        .filter(|s| s.kind == Kind::Run)
        .filter_map(|s| s.text(attr::RUN_ENGINE));
    let Some(first) = engines.next() else {
        return Format::Table;
    };
    if engines.any(|e| e != first) {
        return Format::Table;
    }
    match first {
        e if e.contains("snakemake") => Format::Snakemake,
        e if e.contains("nextflow") => Format::Nextflow,
        _ => Format::Table,
    }
}
