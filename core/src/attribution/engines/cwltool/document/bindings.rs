//! The values bound to a step's inputs, as far as the documents and the job order tell them
//! without running anything: the run's job file and `--input value` options, `default:`s,
//! literal `valueFrom`s, and the file names upstream tools write (`stdout: made.txt`, a
//! literal `glob`). Steps that run the same tool differ only by these, and cwltool puts
//! them on the command line (a staged file keeps its name), so they tell such steps apart.
use std::{collections::HashMap, path::Path};

use serde_yaml::Value;

use super::{entries, is_literal, words};
use crate::port::Host;

/// Input id to the values it may hold (a scattered input: each element).
pub type Env = HashMap<String, Vec<String>>;

/// Output files of a workflow's command steps: `(step, output)` to its file name.
pub type Outputs = HashMap<(String, String), String>;

/// The inputs a run was given after its document: a job file, or `--name value` options.
pub(crate) fn job_order(host: &dyn Host, cwd: &Path, after_document: &[String]) -> Env {
    let mut env = Env::new();
    let mut args = after_document.iter();
    while let Some(a) = args.next() {
        if let Some(name) = a.strip_prefix("--") {
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (name.to_string(), args.next().cloned()),
            };
            env.extend(value.map(|v| (name, vec![v])));
        } else if let Some(job) = read_job(host, &cwd.join(a)) {
            for (k, v) in entries_of(&job) {
                env.insert(k, values(&v));
            }
        }
    }
    env
}

fn read_job(host: &dyn Host, path: &Path) -> Option<Value> {
    serde_yaml::from_str(&host.read_to_string(path).ok()?).ok()
}

fn entries_of(v: &Value) -> Vec<(String, Value)> {
    v.as_mapping()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.clone())))
                .collect()
        })
        .unwrap_or_default()
}

/// What of a value can show on a command line: scalars as written (a set flag as `true`), a
/// File or Directory by its name (cwltool stages it under a directory of its own, keeping the
/// name), a record by its fields' values, an array by its elements (a record one value each).
pub(crate) fn values(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Number(n) => vec![n.to_string()],
        // A flag set: its prefix goes on the line (`false` puts nothing there).
        Value::Bool(true) => vec!["true".to_string()],
        // An array's values are its elements, in order (what a scatter numbers its jobs by).
        Value::Sequence(s) => (s.iter())
            .flat_map(|e| match is_record(e) {
                true => record_element(e).into_iter().collect(),
                false => values(e),
            })
            .collect(),
        Value::Mapping(m) if is_record(v) => m.values().flat_map(values).collect(),
        Value::Mapping(_) => {
            let place = v.get("basename").or(v.get("path")).or(v.get("location"));
            place
                .and_then(Value::as_str)
                .and_then(|p| p.rsplit('/').next())
                .filter(|n| !n.is_empty())
                .map(|n| vec![n.to_string()])
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// A record (a SchemaDefRequirement type's value): a map that is no File or Directory,
/// which have a `class`.
fn is_record(v: &Value) -> bool {
    v.as_mapping().is_some_and(|m| !m.contains_key("class"))
}

/// A record as one element of an array, which tells its job of a scatter: by its first
/// file (staged under its own name), else by its first field's value.
fn record_element(v: &Value) -> Option<String> {
    let fields: Vec<&Value> = v.as_mapping()?.values().collect();
    let file = fields.iter().find(|f| f.is_mapping() && !is_record(f));
    let first = file.or(fields.first())?;
    values(first).into_iter().next()
}

/// A workflow's inputs: those it was given, else their `default:`.
pub(crate) fn workflow_env(wf: &Value, given: &Env) -> Env {
    let mut env = given.clone();
    for (id, input) in entries(wf.get("inputs")) {
        let id = short(&id).to_string();
        if env.get(&id).is_none_or(Vec::is_empty)
            && let Some(d) = input.get("default")
        {
            env.insert(id, values(d));
        }
    }
    env
}

/// A step's inputs (its `in:`), each from its sources, `default:` or literal `valueFrom`.
pub(crate) fn step_env(step: &Value, env: &Env, outputs: &Outputs) -> Env {
    let mut out = Env::new();
    for (id, binding) in step_inputs(step.get("in")) {
        let mut vals: Vec<String> = words(binding.get("source"))
            .iter()
            .flat_map(|s| source_values(s, env, outputs))
            .collect();
        if vals.is_empty()
            && let Some(d) = binding.get("default")
        {
            vals = values(d);
        }
        match binding.get("valueFrom").and_then(Value::as_str) {
            Some(v) if is_literal(v) => vals = vec![v.to_string()],
            // An expression makes its own value from the sources: they are not on the line.
            Some(_) => vals.clear(),
            None => {}
        }
        out.insert(short(&id).to_string(), vals);
    }
    out
}

/// The sibling steps a step's inputs come from (`step/out`, `#main/step/out`).
pub(crate) fn upstream(step: &Value, siblings: &[&str]) -> Vec<String> {
    let mut from: Vec<String> = step_inputs(step.get("in"))
        .iter()
        .flat_map(|(_, binding)| words(binding.get("source")))
        .filter_map(|source| {
            let parts: Vec<&str> = source.trim_start_matches('#').split('/').collect();
            match parts.as_slice() {
                [.., step, _] if siblings.contains(step) => Some(step.to_string()),
                _ => None,
            }
        })
        .collect();
    from.sort();
    from.dedup();
    from
}

/// `in:` as a map (`word: w1`, `word: {source: w1}`) or a list of `{id, source}`.
fn step_inputs(v: Option<&Value>) -> Vec<(String, Value)> {
    match v {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, b)| {
                let b = match b {
                    Value::Mapping(_) => b.clone(),
                    source => {
                        let mut m = serde_yaml::Mapping::new();
                        m.insert("source".into(), source.clone());
                        Value::Mapping(m)
                    }
                };
                Some((k.as_str()?.to_string(), b))
            })
            .collect(),
        other => entries(other),
    }
}

/// A source is an upstream step's output (`step/out`, `#main/step/out`) or an input.
fn source_values(source: &str, env: &Env, outputs: &Outputs) -> Vec<String> {
    let parts: Vec<&str> = source.trim_start_matches('#').split('/').collect();
    if let [.., step, out] = parts.as_slice()
        && let Some(file) = outputs.get(&(step.to_string(), out.to_string()))
    {
        return vec![file.clone()];
    }
    env.get(short(source)).cloned().unwrap_or_default()
}

/// The file names a CommandLineTool's outputs are written to, where the document fixes them.
pub(crate) fn tool_outputs(tool: &Value) -> Vec<(String, String)> {
    let stream = |key: &str| {
        tool.get(key)
            .and_then(Value::as_str)
            .filter(|s| is_literal(s))
    };
    entries_typed(tool.get("outputs"))
        .into_iter()
        .filter_map(|(id, out)| {
            let file = match out.get("type").and_then(Value::as_str).or(out.as_str()) {
                Some("stdout") => stream("stdout"),
                Some("stderr") => stream("stderr"),
                _ => out
                    .get("outputBinding")
                    .and_then(|b| b.get("glob"))
                    .and_then(Value::as_str)
                    .filter(|g| is_literal(g) && !g.contains('*')),
            };
            Some((short(&id).to_string(), file?.to_string()))
        })
        .collect()
}

/// Outputs as a map (whose values may be a bare type: `out: stdout`) or a list with ids.
fn entries_typed(v: Option<&Value>) -> Vec<(String, Value)> {
    match v {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, o)| Some((k.as_str()?.to_string(), o.clone())))
            .collect(),
        other => entries(other),
    }
}

/// The prefixes of a tool's inputs that have a value in the step (`env`; one it reads from a
/// source or an expression whose value is not known is taken to have one), or, not bound by
/// the step, a default that puts them on the line (not `false` or null): cwltool writes each
/// as a word before the value, or alone for a flag.
pub(crate) fn prefixes(tool: &Value, step: Option<&Value>, env: &Env) -> Vec<String> {
    let inputs = step_inputs(step.and_then(|s| s.get("in")));
    let computed = |id: &str| {
        (inputs.iter()).any(|(i, b)| {
            short(i) == id && (b.get("source").is_some() || b.get("valueFrom").is_some())
        })
    };
    let present = |id: &str, input: &Value| match env.get(id) {
        Some(values) => !values.is_empty() || computed(id),
        None => input
            .get("default")
            .is_some_and(|d| !matches!(d, Value::Bool(false) | Value::Null)),
    };
    entries_typed(tool.get("inputs"))
        .into_iter()
        .filter(|(id, input)| present(short(id), input))
        .filter_map(|(_, input)| {
            let prefix = input.get("inputBinding")?.get("prefix")?.as_str()?;
            Some(prefix.to_string())
        })
        .collect()
}

/// An id's last part: `#main/w1` and `w1` are the input `w1`.
pub(crate) fn short(id: &str) -> &str {
    id.rsplit(['#', '/']).next().unwrap_or(id)
}
