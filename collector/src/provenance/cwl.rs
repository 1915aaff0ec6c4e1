//! A CWL run's declared files: the workflow's inputs as its job file gives them and its
//! outputs as cwltool reported them (the JSON it prints), each under the step the workflow
//! connects it to; a step's output another step takes, kept by cwltool only in a temporary
//! directory, by its name in the workflow (`sort/out`).
use std::{collections::BTreeMap, path::Path};

use serde_yaml::Value;

use super::{jsonld::Parameter, records::Job};

/// The jobs of the workflow at `workflow` run with `job_file` (relative to `dir`), its
/// outputs from cwltool's JSON (`outputs`, when kept).
pub(crate) fn jobs(
    dir: &Path,
    workflow: &str,
    job_file: Option<&str>,
    outputs: Option<&Path>,
) -> Result<Vec<Job>, String> {
    let read = |p: &Path| -> Result<Value, String> {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        serde_yaml::from_str(&text).map_err(|e| format!("{} is no YAML or JSON: {e}", p.display()))
    };
    let wf = read(&dir.join(workflow))?;
    let given: BTreeMap<String, String> = match job_file {
        Some(j) => files_of(
            &read(&dir.join(j))?,
            dir.join(j).parent().unwrap_or(dir),
            dir,
        ),
        None => BTreeMap::new(),
    };
    let made: BTreeMap<String, String> = match outputs {
        Some(o) => files_of(&read(o)?, dir, dir),
        None => BTreeMap::new(),
    };
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    for (step, body) in entries(&wf["steps"]) {
        let job = jobs.entry(step.clone()).or_insert_with(|| Job {
            step: step.clone(),
            ..Job::default()
        });
        for (_, source) in entries(&body["in"]) {
            let Some(source) = source.as_str().or_else(|| source["source"].as_str()) else {
                continue;
            };
            let source = source.trim_start_matches('#');
            match given.get(source) {
                Some(path) => job.inputs.insert(path.clone()),
                // Another step's output, kept by cwltool only in its temporary directory:
                // named as the workflow names it.
                None if source.contains('/') => job.inputs.insert(source.to_string()),
                None => false,
            };
        }
        for out in out_ids(&body["out"]) {
            job.outputs.insert(format!("{step}/{out}"));
        }
    }
    for (name, body) in entries(&wf["outputs"]) {
        let source = body["outputSource"].as_str().unwrap_or_default();
        let (Some((step, _)), Some(path)) = (source.split_once('/'), made.get(&name)) else {
            continue;
        };
        if let Some(job) = jobs.get_mut(step.trim_start_matches('#')) {
            // The workflow's output is a file cwltool kept: named by its path instead.
            job.outputs.remove(source.trim_start_matches('#'));
            job.outputs.insert(path.clone());
        }
    }
    Ok(jobs.into_values().collect())
}

/// The job file's inputs that are values (not files nor directories).
pub(crate) fn parameters(dir: &Path, job_file: &str) -> Vec<Parameter> {
    let Some(job) = (std::fs::read_to_string(dir.join(job_file)).ok())
        .and_then(|t| serde_yaml::from_str::<Value>(&t).ok())
    else {
        return Vec::new();
    };
    let param = |name: String, value: String, kind| Parameter { name, value, kind };
    (entries(&job).into_iter())
        .filter_map(|(name, v)| match v {
            Value::String(s) => Some(param(name, s, "Text")),
            Value::Bool(b) => Some(param(name, b.to_string(), "Boolean")),
            Value::Number(n) if n.is_f64() => Some(param(name, n.to_string(), "Float")),
            Value::Number(n) => Some(param(name, n.to_string(), "Integer")),
            _ => None,
        })
        .collect()
}

/// A step's `out`: ids, or `{id: ...}` maps.
fn out_ids(v: &Value) -> Vec<String> {
    (v.as_sequence().into_iter().flatten())
        .filter_map(|o| o.as_str().or_else(|| o["id"].as_str()).map(String::from))
        .collect()
}

/// A CWL map or list of `{id: ...}` as (id, body) pairs.
fn entries(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Mapping(m) => (m.iter())
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.clone())))
            .collect(),
        Value::Sequence(s) => (s.iter())
            .filter_map(|v| Some((v["id"].as_str()?.to_string(), v.clone())))
            .collect(),
        _ => Vec::new(),
    }
}

/// The File values of a job or output object, by name: paths relative to the run's `dir`.
fn files_of(v: &Value, base: &Path, dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in entries(v) {
        if value["class"].as_str() != Some("File") {
            continue;
        }
        let Some(p) = value["path"]
            .as_str()
            .or_else(|| value["location"].as_str())
        else {
            continue;
        };
        let p = p.strip_prefix("file://").unwrap_or(p);
        let full = base.join(p);
        let full = std::fs::canonicalize(&full).unwrap_or(full);
        let rel = super::model::relative(&full.to_string_lossy(), dir);
        out.insert(name, rel);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workflows_files_go_to_the_steps_it_connects_them_to() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let wf = "cwlVersion: v1.2\nclass: Workflow\ninputs:\n  text: File\noutputs:\n  \
                  counted: {type: File, outputSource: count/out}\nsteps:\n  sort:\n    run: \
                  sort.cwl\n    in: {f: text}\n    out: [out]\n  count:\n    run: count.cwl\n    \
                  in: {f: sort/out}\n    out: [out]\n";
        std::fs::write(d.join("wf.cwl"), wf).unwrap();
        std::fs::write(d.join("in.txt"), "b\na\n").unwrap();
        let job = "text: {class: File, path: in.txt}\nlines: 3\nlabel: fruit\n";
        std::fs::write(d.join("job.yml"), job).unwrap();
        std::fs::create_dir(d.join("results")).unwrap();
        let out = d.join("results/count.txt");
        std::fs::write(&out, "2\n").unwrap();
        let json = format!(
            r#"{{"counted": {{"class": "File", "location": "file://{}"}}}}"#,
            out.display()
        );
        std::fs::write(d.join("out.json"), json).unwrap();
        let jobs = jobs(&d, "wf.cwl", Some("job.yml"), Some(&d.join("out.json"))).unwrap();
        let by: BTreeMap<&str, &Job> = jobs.iter().map(|j| (j.step.as_str(), j)).collect();
        assert_eq!(by["sort"].inputs.iter().collect::<Vec<_>>(), ["in.txt"]);
        // Sort's output, kept by cwltool in a temporary directory only, is named as the
        // workflow names it, in both steps.
        assert_eq!(by["sort"].outputs.iter().collect::<Vec<_>>(), ["sort/out"]);
        assert_eq!(by["count"].inputs.iter().collect::<Vec<_>>(), ["sort/out"]);
        assert_eq!(
            by["count"].outputs.iter().collect::<Vec<_>>(),
            ["results/count.txt"]
        );
        // The job's values, the file left out.
        let values: Vec<(String, String, &str)> = (parameters(&d, "job.yml").into_iter())
            .map(|p| (p.name, p.value, p.kind))
            .collect();
        assert_eq!(
            values,
            [
                ("lines".into(), "3".into(), "Integer"),
                ("label".into(), "fruit".into(), "Text")
            ]
        );
    }
}
