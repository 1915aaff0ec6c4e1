//! The suggestions in each engine's own settings: a Snakemake profile, a Nextflow config, a
//! cwltool overrides file, and a table for anything else.
use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use super::{Suggestion, mib};

/// What the figures were drawn from, for the file's first lines.
pub struct Basis<'a> {
    pub runs: usize,
    pub percentile: f64,
    pub margin: f64,
    pub from: &'a str,
}

impl Basis<'_> {
    fn header(&self, comment: &str) -> String {
        format!(
            "{comment} pipetrace suggest: from {} in {}: per task, the {}th percentile of \
             its jobs' figures,\n{comment} memory and time {:.0}% more, memory never below a \
             peak seen (twice the limit a job was OOM-killed at).\n",
            crate::print::count(self.runs as u64, "run", "runs"),
            self.from,
            self.percentile,
            self.margin * 100.0
        )
    }
}

fn minutes(secs: u64) -> u64 {
    secs.div_ceil(60)
}

/// Mebibytes, as Nextflow's `MB` and CWL's `ramMin` count.
fn mb(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

/// Megabytes, as Snakemake's `mem_mb` counts (it derives `mem_mib` from it): rounded up,
/// so that the ask is never below the figure.
fn decimal_mb(bytes: u64) -> u64 {
    bytes.div_ceil(1_000_000)
}

/// A Snakemake profile's `config.yaml`: `set-threads` and `set-resources` as lists of
/// `RULE=N` and `RULE:RESOURCE=VALUE`, as the command line takes them, which Snakemake 7, 8
/// and 9 all read (`--profile DIR`).
pub(crate) fn snakemake(s: &[Suggestion], basis: &Basis) -> String {
    let mut out = basis.header("#");
    out.push_str("set-threads:\n");
    for x in s {
        let _ = writeln!(out, "  - {}={}", x.task, x.cpus);
    }
    out.push_str("set-resources:\n");
    for x in s {
        let _ = writeln!(out, "  - {}:mem_mb={}", x.task, decimal_mb(x.memory_bytes));
        let _ = writeln!(out, "  - {}:runtime={}", x.task, minutes(x.time_seconds));
    }
    out
}

/// A Nextflow config (`-c FILE`): a `withName` selector per process.
pub(crate) fn nextflow(s: &[Suggestion], basis: &Basis) -> String {
    let mut out = basis.header("//");
    out.push_str("process {\n");
    for x in s {
        let _ = writeln!(
            out,
            "    withName: '{}' {{\n        cpus = {}\n        memory = '{} MB'\n        time = '{}m'\n    }}",
            x.task.replace('\'', ""),
            x.cpus,
            mb(x.memory_bytes),
            minutes(x.time_seconds)
        );
    }
    out.push_str("}\n");
    out
}

/// A cwltool overrides file (`--overrides FILE`): a ResourceRequirement per tool, keyed by
/// the tool's file as the workflow's steps name it (`tools`: step name to tool URI). Steps
/// that run one tool file share its override: the largest of their asks.
pub(crate) fn cwl(s: &[Suggestion], basis: &Basis, tools: &BTreeMap<String, String>) -> String {
    let mut out = basis.header("#");
    out.push_str("cwltool:overrides:\n");
    let mut by_tool: BTreeMap<&str, (Vec<&str>, u32, u64)> = BTreeMap::new();
    for x in s {
        let Some(tool) = tools.get(&x.task) else {
            let _ = writeln!(
                out,
                "  # step {}: its tool is not a file of its own",
                x.task
            );
            continue;
        };
        let e = by_tool.entry(tool).or_default();
        e.0.push(&x.task);
        e.1 = e.1.max(x.cpus);
        e.2 = e.2.max(x.memory_bytes);
    }
    for (tool, (steps, cpus, memory)) in by_tool {
        let _ = writeln!(
            out,
            "  # step {}\n  {tool}:\n    requirements:\n      ResourceRequirement:\n        \
             coresMin: {cpus}\n        ramMin: {}",
            steps.join(", "),
            mb(memory)
        );
    }
    out
}

/// The steps of a CWL workflow whose `run` is a file, as absolute `file://` URIs (how
/// cwltool identifies the tool an override is for).
pub(crate) fn cwl_tools(workflow: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(workflow)
        .map_err(|e| format!("cannot read {}: {e}", workflow.display()))?;
    let doc: serde_yaml::Value = serde_yaml::from_str(&text)
        .map_err(|e| format!("{} is not YAML: {e}", workflow.display()))?;
    let dir = (workflow.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| format!("cannot find {}'s folder: {e}", workflow.display()))?;
    let mut out = BTreeMap::new();
    let steps: Vec<(String, &serde_yaml::Value)> = match &doc["steps"] {
        serde_yaml::Value::Mapping(m) => (m.iter())
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v)))
            .collect(),
        serde_yaml::Value::Sequence(v) => (v.iter())
            .filter_map(|s| Some((s["id"].as_str()?.trim_start_matches('#').to_string(), s)))
            .collect(),
        _ => {
            return Err(format!(
                "{} has no steps: give a CWL Workflow",
                workflow.display()
            ));
        }
    };
    for (name, step) in steps {
        if let Some(run) = step["run"].as_str() {
            out.insert(name, format!("file://{}", dir.join(run).display()));
        }
    }
    Ok(out)
}

/// For anything else: a table of what to ask for and why.
pub(crate) fn table(s: &[Suggestion], basis: &Basis) -> String {
    let mut out = basis.header("#");
    let _ = writeln!(
        out,
        "{:<24} {:>5} {:>5} {:>12} {:>8}  {:>9} {:>12} {:>9}  why",
        "task", "jobs", "cpus", "memory", "time", "busy max", "peak max", "asked"
    );
    for x in s {
        let asked = match (x.asked_cpus, x.asked_memory_bytes) {
            (Some(c), Some(m)) => format!("{c} / {}", mib(m)),
            (Some(c), None) => format!("{c} CPU{}", if c == 1.0 { "" } else { "s" }),
            (None, Some(m)) => mib(m),
            (None, None) => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<24} {:>5} {:>5} {:>12} {:>7}m  {:>9.2} {:>12} {:>9}  {}",
            x.task,
            x.jobs,
            x.cpus,
            mib(x.memory_bytes),
            minutes(x.time_seconds),
            x.busy_cpus_max,
            mib(x.memory_peak_max),
            asked,
            x.why.join("; ")
        );
    }
    out
}
