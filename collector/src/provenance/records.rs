//! The engine's own records of what each job declared: Snakemake keeps, per output file,
//! the rule, inputs and shell command of the job that made it (`.snakemake/metadata`).
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use base64::Engine as _;

use super::model::Task;

/// One job as the engine declared it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Job {
    pub step: String,
    /// The command as the engine ran it (empty for `run:` and `script:` rules).
    pub command: String,
    pub inputs: BTreeSet<String>,
    pub outputs: BTreeSet<String>,
}

/// Snakemake's jobs from `DIR/.snakemake/metadata` (none when it kept no records): one per
/// rule and command, with all the outputs it recorded.
pub(crate) fn snakemake(dir: &Path) -> Vec<Job> {
    let Ok(entries) = std::fs::read_dir(dir.join(".snakemake/metadata")) else {
        return Vec::new();
    };
    let mut jobs: BTreeMap<(String, String), Job> = BTreeMap::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Each file is named by its output path, base64-encoded.
        let Some(output) = (base64::engine::general_purpose::STANDARD.decode(&name).ok())
            .and_then(|b| String::from_utf8(b).ok())
        else {
            continue;
        };
        let Some(json) = (std::fs::read_to_string(e.path()).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let text = |k: &str| json[k].as_str().unwrap_or_default().to_string();
        let (step, command) = (text("rule"), text("shellcmd"));
        let job = jobs.entry((step.clone(), command.clone())).or_insert(Job {
            step,
            command,
            ..Job::default()
        });
        let inputs = json["input"].as_array().into_iter().flatten();
        job.inputs
            .extend(inputs.filter_map(|i| i.as_str().map(String::from)));
        job.outputs.insert(output);
    }
    jobs.into_values().collect()
}

/// The job of `task`: of its step, with its command (inside the shell's) or, failing that,
/// an output the task wrote, or the step's only job when the engine records no commands
/// (CWL's steps, whose files the tools open in temporary directories).
pub(crate) fn job_of<'a>(task: &Task, jobs: &'a [Job]) -> Option<&'a Job> {
    let of_step = || jobs.iter().filter(|j| j.step == task.step);
    (of_step().find(|j| !j.command.is_empty() && task.command_line.contains(&j.command)))
        .or_else(|| of_step().find(|j| j.outputs.iter().any(|o| task.writes.contains(o))))
        .or_else(|| match of_step().collect::<Vec<_>>()[..] {
            [only] if only.command.is_empty() => Some(only),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(dir: &Path, output: &str, json: serde_json::Value) {
        let name = base64::engine::general_purpose::STANDARD.encode(output);
        let meta = dir.join(".snakemake/metadata");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join(name), json.to_string()).unwrap();
    }

    #[test]
    fn snakemakes_records_give_each_job_its_inputs_and_all_its_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = "bwa index ref.fa";
        for out in ["ref.fa.bwt", "ref.fa.sa"] {
            let json = serde_json::json!({"rule": "index", "input": ["ref.fa"], "shellcmd": cmd});
            record(dir.path(), out, json);
        }
        let jobs = snakemake(dir.path());
        assert_eq!(jobs.len(), 1, "{jobs:?}");
        assert_eq!(jobs[0].inputs, BTreeSet::from(["ref.fa".to_string()]));
        let outs = BTreeSet::from(["ref.fa.bwt".to_string(), "ref.fa.sa".to_string()]);
        assert_eq!(jobs[0].outputs, outs);
        let task = Task {
            step: "index".into(),
            command_line: format!("bash -c 'set -euo pipefail;  {cmd}'"),
            ..Task::default()
        };
        assert_eq!(job_of(&task, &jobs), Some(&jobs[0]));
        let other = Task {
            step: "align".into(),
            ..task
        };
        assert_eq!(job_of(&other, &jobs), None);
    }

    #[test]
    fn a_job_whose_command_is_quoted_otherwise_is_found_by_what_it_wrote() {
        let jobs = [Job {
            step: "stats".into(),
            command: "if [ 'A' = '' ]; then exit 3; fi".into(),
            outputs: BTreeSet::from(["stats/A.txt".to_string()]),
            ..Job::default()
        }];
        let task = Task {
            step: "stats".into(),
            command_line: r"bash -c 'if [ '\''A'\'' = ...".into(),
            writes: BTreeSet::from(["stats/A.txt".to_string()]),
            ..Task::default()
        };
        assert_eq!(job_of(&task, &jobs), Some(&jobs[0]));
    }

    #[test]
    fn no_records_no_jobs() {
        assert!(snakemake(Path::new("/nonexistent")).is_empty());
    }
}
