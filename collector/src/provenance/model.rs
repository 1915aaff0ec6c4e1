//! What a crate says of a run, taken from its spans: the run, its tasks, the programs each
//! task ran and the files they opened (paths only, as the kernel saw them opened).
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use pipetrace_semconv::attr;

use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

#[derive(Clone, Debug, Default)]
pub struct Run {
    pub name: String,
    pub engine: String,
    pub command_line: String,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    pub user: Option<String>,
    pub tasks: Vec<Task>,
}

#[derive(Clone, Debug, Default)]
pub struct Task {
    /// The span's id: a task's actions are named after it.
    pub id: String,
    /// The engine's name for the step (Snakemake's rule, CWL's step).
    pub step: String,
    /// The span's name (`align (sample=A)`).
    pub label: String,
    pub command_line: String,
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    /// The engine's parameters of this job (Snakemake's wildcards), in order.
    pub parameters: Vec<(String, String)>,
    /// Paths its processes read (and none of them wrote), relative to the run's directory
    /// when inside it.
    pub reads: BTreeSet<String>,
    pub writes: BTreeSet<String>,
    /// The executables its tools ran, by path.
    pub programs: BTreeSet<String>,
}

/// The run of `spans` (one trace), or None when they hold no run span.
pub fn run_of(spans: &[ReportSpan], dir: &Path) -> Option<Run> {
    let root = spans.iter().find(|s| s.kind == Kind::Run)?;
    let text = |s: &ReportSpan, k: &str| s.text(k).unwrap_or_default().to_string();
    let mut tasks: Vec<Task> = (spans.iter())
        .filter(|s| s.kind == Kind::Task)
        .map(|s| Task {
            id: s.id.clone(),
            step: text(s, attr::CICD_PIPELINE_TASK_NAME),
            label: s.name.clone(),
            command_line: text(s, attr::PROCESS_COMMAND_LINE),
            start: s.start,
            end: s.end,
            error: s.error.clone(),
            parameters: parameters(s.text(attr::TASK_WILDCARDS).unwrap_or_default()),
            ..Task::default()
        })
        .collect();
    let at: BTreeMap<String, usize> = (tasks.iter().enumerate())
        .map(|(i, t)| (t.id.clone(), i))
        .collect();
    let parent: BTreeMap<&str, &str> = (spans.iter())
        .filter_map(|s| Some((s.id.as_str(), s.parent.as_deref()?)))
        .collect();
    // A task's own span holds what its own process opened (a shell's redirections); its
    // tools, at any depth under it, the rest.
    for s in spans
        .iter()
        .filter(|s| matches!(s.kind, Kind::Task | Kind::Tool))
    {
        let mut id = s.id.as_str();
        let task = loop {
            if let Some(i) = at.get(id) {
                break Some(*i);
            }
            match parent.get(id) {
                Some(p) => id = p,
                None => break None,
            }
        };
        let Some(task) = task.map(|i| &mut tasks[i]) else {
            continue;
        };
        for key in [attr::FILES_READ, attr::TASK_INPUTS] {
            task.reads.extend(paths(s, key, dir));
        }
        for key in [attr::FILES_WRITTEN, attr::TASK_OUTPUTS] {
            task.writes.extend(paths(s, key, dir));
        }
        if s.kind == Kind::Tool
            && let Some(p) = s.text(attr::PROCESS_EXECUTABLE_PATH)
        {
            task.programs.insert(p.to_string());
        }
    }
    for t in &mut tasks {
        // Read then written (a file updated in place) is an output.
        let written = t.writes.clone();
        t.reads.retain(|p| !written.contains(p));
    }
    tasks.sort_by(|a, b| (a.start, &a.label).cmp(&(b.start, &b.label)));
    Some(Run {
        name: text(root, attr::CICD_PIPELINE_NAME),
        engine: text(root, attr::RUN_ENGINE),
        command_line: text(root, attr::PROCESS_COMMAND_LINE),
        start: root.start,
        end: root.end,
        error: root.error.clone(),
        user: root.text(attr::USER_NAME).map(String::from),
        tasks,
    })
}

/// `sample=A,lane=1` as pairs.
fn parameters(wildcards: &str) -> Vec<(String, String)> {
    (wildcards.split(',').filter_map(|p| p.split_once('=')))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn paths<'a>(s: &'a ReportSpan, key: &str, dir: &'a Path) -> impl Iterator<Item = String> + 'a {
    (s.lists.get(key).into_iter().flatten()).map(move |p| relative(p, dir))
}

/// A path inside the run's directory relative to it (as the engine names it); any other
/// as it is.
pub(crate) fn relative(path: &str, dir: &Path) -> String {
    let p = Path::new(path);
    match p.strip_prefix(dir) {
        Ok(rel) if p.is_absolute() => rel.to_string_lossy().into_owned(),
        _ => path.strip_prefix("./").unwrap_or(path).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_become_parameters_in_order() {
        assert_eq!(
            parameters("sample=A, lane=2"),
            [("sample".into(), "A".into()), ("lane".into(), "2".into())]
        );
        assert!(parameters("").is_empty());
    }

    #[test]
    fn paths_inside_the_run_are_relative_and_others_absolute() {
        let dir = Path::new("/w/run");
        assert_eq!(relative("/w/run/aligned/A.bam", dir), "aligned/A.bam");
        assert_eq!(relative("./reads/A.fq", dir), "reads/A.fq");
        assert_eq!(relative("/data/ref.fa", dir), "/data/ref.fa");
    }
}
