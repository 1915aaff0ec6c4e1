//! `pipetrace provenance`: a Workflow Run RO-Crate (Provenance Run Crate 0.5) of one traced
//! run, written into the run's directory beside the files it names: the workflow and its
//! steps, the engine's records of what each job declared, the files each tool opened as the
//! kernel saw them (declared or not), their sizes and, when asked, SHA-256 digests computed
//! here at the end, and each program with its package's version. Paths and figures only:
//! nothing of a file's contents is exported.
mod cwl;
mod facts;
mod jsonld;
mod model;
mod records;
#[cfg(test)]
mod tests;
mod vocab;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use jsonld::Crate;
use pipetrace_core::judgement::ReportSpan;
use vocab::{Language, file_id, iso};

pub struct Ask<'a> {
    /// One run's spans.
    pub spans: &'a [ReportSpan],
    /// The run's directory: the crate's root.
    pub dir: &'a Path,
    pub options: Options<'a>,
}

/// What the user says of the crate beside the run (`pipetrace provenance`'s flags).
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// The workflow file, when not the one the run's command line names.
    pub workflow: Option<&'a Path>,
    pub hash: bool,
    /// cwltool's JSON of the run's outputs, as it printed it.
    pub cwl_outputs: Option<&'a Path>,
    pub license: &'a str,
    pub publisher: Option<&'a str>,
    pub publisher_url: Option<&'a str>,
}

/// What was written, for the line that says so.
#[derive(Debug)]
pub struct Written {
    pub metadata: PathBuf,
    pub tasks: usize,
    pub files: usize,
    pub undeclared_reads: usize,
    pub declared_by_engine: bool,
}

pub(crate) fn write(ask: &Ask) -> Result<Written, String> {
    let dir = std::fs::canonicalize(ask.dir)
        .map_err(|e| format!("cannot open the run's directory {}: {e}", ask.dir.display()))?;
    let run = model::run_of(ask.spans, &dir).ok_or(
        "no run in these spans: give the trace file `pipetrace run` wrote of a pipeline run",
    )?;
    let language = match run.engine.as_str() {
        e if e.contains("snakemake") => Language::Snakemake,
        e if e.contains("cwl") => Language::Cwl,
        other => {
            return Err(format!(
                "provenance knows Snakemake and CWL runs; this run's engine is `{other}`"
            ));
        }
    };
    let workflow = workflow_file(ask.options.workflow, &run.command_line, language, &dir)?;
    let job_file = cwl_job_file(&run.command_line);
    let (jobs, parameters) = match language {
        Language::Snakemake => (records::snakemake(&dir), Vec::new()),
        Language::Cwl => (
            cwl::jobs(
                &dir,
                &workflow,
                job_file.as_deref(),
                ask.options.cwl_outputs,
            )?,
            (job_file.iter())
                .flat_map(|j| cwl::parameters(&dir, j))
                .collect(),
        ),
    };
    let by_task: BTreeMap<String, &records::Job> = (run.tasks.iter())
        .filter_map(|t| Some((t.id.clone(), records::job_of(t, &jobs)?)))
        .collect();

    let mut paths: BTreeSet<String> = BTreeSet::from([workflow.clone()]);
    for t in &run.tasks {
        paths.extend(t.reads.iter().chain(&t.writes).cloned());
        if let Some(j) = by_task.get(&t.id) {
            paths.extend(j.inputs.iter().chain(&j.outputs).cloned());
        }
    }
    let files: BTreeMap<String, facts::FileFacts> = (paths.iter())
        .filter_map(|p| Some((file_id(p), facts::file(&dir, p, ask.options.hash)?)))
        .collect();
    let programs: BTreeMap<String, facts::Software> = (run.tasks.iter())
        .flat_map(|t| t.programs.iter())
        .map(|p| (p.clone(), facts::software(p)))
        .collect();
    let engine = facts::software(&engine_program(&run.command_line, &run.engine));
    let modified = std::fs::metadata(dir.join(&workflow)).and_then(|m| m.modified());
    let nanos = |t: std::time::SystemTime| {
        (t.duration_since(std::time::UNIX_EPOCH)).map_or(0, |d| d.as_nanos() as u64)
    };
    let krate = Crate {
        run: &run,
        workflow: &workflow,
        workflow_version: modified.map_or_else(|_| "unknown".into(), |t| iso(nanos(t))),
        language,
        engine,
        jobs: by_task.clone(),
        parameters,
        files,
        programs,
        license: ask.options.license,
        publisher: ask.options.publisher,
        publisher_url: ask.options.publisher_url,
        published: iso(nanos(std::time::SystemTime::now())),
    };
    let json = krate.json();
    let undeclared_reads = (run.tasks.iter())
        .map(|t| jsonld::task_files(t, by_task.get(&t.id).copied()))
        .flat_map(|f| f.undeclared_inputs)
        .filter(|p| krate.files.contains_key(&file_id(p)))
        .count();
    let metadata = dir.join("ro-crate-metadata.json");
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&metadata, text)
        .map_err(|e| format!("cannot write {}: {e}", metadata.display()))?;
    // The crate's README (Workflow RO-Crate wants one); the run's own is kept as it is.
    let readme = dir.join("README.md");
    if !readme.exists() {
        std::fs::write(&readme, readme_text(&workflow, &run.engine))
            .map_err(|e| format!("cannot write {}: {e}", readme.display()))?;
    }
    Ok(Written {
        metadata,
        tasks: run.tasks.len(),
        files: krate.files.len(),
        undeclared_reads,
        declared_by_engine: !by_task.is_empty(),
    })
}

fn readme_text(workflow: &str, engine: &str) -> String {
    format!(
        "# Provenance of a run of {workflow}\n\nThis directory is a Workflow Run RO-Crate \
         (Provenance Run Crate 0.5): `ro-crate-metadata.json` describes one run of \
         `{workflow}` by {engine} as `pipetrace provenance` found it in the run's trace, the \
         engine's records and the files at the end of the run.\n"
    )
}

/// The workflow file, relative to the run's directory: the one given, else the one the
/// engine's command line names, else the engine's default.
fn workflow_file(
    given: Option<&Path>,
    command_line: &str,
    language: Language,
    dir: &Path,
) -> Result<String, String> {
    // One given that is not there is a mistake to say, not a reason to take another.
    if let Some(g) = given.filter(|g| !dir.join(g).is_file()) {
        return Err(format!(
            "--workflow {}: no such file in the run's directory {} (a relative path is taken \
             from there)",
            g.display(),
            dir.display()
        ));
    }
    let args: Vec<&str> = command_line.split_whitespace().collect();
    let named = match language {
        Language::Snakemake => (args.windows(2))
            .find(|w| matches!(w[0], "-s" | "--snakefile"))
            .map(|w| w[1].to_string()),
        Language::Cwl => (args.iter().find(|a| a.ends_with(".cwl"))).map(|a| a.to_string()),
    };
    let defaults = match language {
        Language::Snakemake => &["Snakefile", "workflow/Snakefile", "snakefile"][..],
        Language::Cwl => &[][..],
    };
    let candidates: Vec<PathBuf> = (given.map(Path::to_path_buf).into_iter())
        .chain(named.map(PathBuf::from))
        .chain(defaults.iter().map(PathBuf::from))
        .collect();
    let found = candidates.iter().map(|c| dir.join(c)).find(|p| p.is_file());
    let Some(found) = found.and_then(|p| std::fs::canonicalize(p).ok()) else {
        return Err(format!(
            "no workflow file found in {} (looked for {}): give it with --workflow FILE",
            dir.display(),
            (candidates.iter().map(|c| c.display().to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    match found.strip_prefix(dir) {
        Ok(rel) => Ok(rel.to_string_lossy().into_owned()),
        Err(_) => Err(format!(
            "the workflow {} is outside the run's directory {}: the crate's main entity must \
             be inside it (give --dir)",
            found.display(),
            dir.display()
        )),
    }
}

/// The engine's program from the run's command line: the argument named after it (the
/// script an interpreter runs), else the first.
fn engine_program(command_line: &str, engine: &str) -> String {
    let args: Vec<&str> = command_line.split_whitespace().collect();
    let named = |a: &&&str| a.rsplit('/').next().is_some_and(|n| n.contains(engine));
    (args.iter().find(named).or(args.first())).map_or_else(String::new, |a| a.to_string())
}

/// The job file after the workflow on cwltool's command line, relative to the run's
/// directory.
fn cwl_job_file(command_line: &str) -> Option<String> {
    let args: Vec<&str> = command_line.split_whitespace().collect();
    let at = args.iter().position(|a| a.ends_with(".cwl"))?;
    let job = args.get(at + 1)?;
    [".yml", ".yaml", ".json"]
        .iter()
        .any(|x| job.ends_with(x))
        .then(|| job.to_string())
}
