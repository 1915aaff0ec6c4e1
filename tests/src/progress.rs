//! What the progress tests read of an agent: its view of a run in `pipetrace status --json`,
//! and the progress metrics it exported for a pipeline.
use std::path::Path;

use pipetrace_semconv::attr;
use serde_json::Value;

use crate::{metrics::flatten_metrics, pipetrace, stderr};

/// This agent's entry in `pipetrace status --json`: its runs, or a note saying why none.
pub fn agent_entry(agent_pid: u32) -> Option<Value> {
    let o = pipetrace().args(["status", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let agents: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine = agents.as_array()?.iter().find(|a| a["pid"] == agent_pid)?;
    Some(mine.clone())
}

/// Run `name` in an agent's entry.
pub fn run_in(entry: &Value, name: &str) -> Option<Value> {
    entry["runs"]
        .as_array()?
        .iter()
        .find(|r| r["run"] == name)
        .cloned()
}

/// This agent's view of run `name` in `pipetrace status --json`.
pub fn status_of(agent_pid: u32, name: &str) -> Option<Value> {
    run_in(&agent_entry(agent_pid)?, name)
}

/// What an entry says in short, for a failing test: the runs it names, or its note.
pub fn entry_summary(entry: Option<&Value>) -> String {
    let Some(e) = entry else {
        return "agent not listed".into();
    };
    let runs: Vec<&str> = (e["runs"].as_array().into_iter().flatten())
        .filter_map(|r| r["run"].as_str())
        .collect();
    format!("runs {runs:?} note {}", e["note"])
}

/// The values metric `metric` took for pipeline `name`, in the order exported, from the
/// metrics file beside the agent's output `out`.
pub fn metric_values(out: &Path, name: &str, metric: &str) -> Vec<f64> {
    let file = out
        .to_string_lossy()
        .replace(".otlp.jsonl", ".metrics.otlp.jsonl");
    let metrics = std::fs::read_to_string(file).unwrap();
    (metrics.lines())
        .flat_map(|l| flatten_metrics(serde_json::from_str(l).unwrap()))
        .filter(|p| p.str(attr::CICD_PIPELINE_NAME) == name && p.name == metric)
        .map(|p| p.value)
        .collect()
}
