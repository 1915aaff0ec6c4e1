//! The CWL document a cwltool run was given, read for what each step runs: step ids
//! (sub-workflow steps as `parent/step`), and for each step's CommandLineTool the words its
//! command line starts with (`baseCommand`, then literal `arguments`). Steps are lists or
//! maps; `run` is a file (relative to the document), an inline process, or a `#id` in a
//! packed `$graph` (whose `#main`, or the fragment given, is the workflow).
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::host::Host;

/// One step that runs a command: its id as cwltool reports it and what its command holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub id: String,
    /// `baseCommand`'s words (the first is matched by file name).
    pub base: Vec<String>,
    /// Literal `arguments` (no expressions, no parameter references).
    pub literals: Vec<String>,
}

/// What a document is: a workflow's steps, or a single tool.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Document {
    pub steps: Vec<Step>,
    /// The tool's name when the document is one CommandLineTool, not a workflow.
    pub tool: Option<String>,
}

/// How deep sub-workflows are followed (a cycle of `run:` files ends here).
const MAX_DEPTH: usize = 8;

/// Reads `target` (`wf.cwl` or `wf.cwl#main`, relative to `cwd`).
pub fn load(host: &dyn Host, target: &str, cwd: &Path) -> Option<Document> {
    let (file, fragment) = match target.split_once('#') {
        Some((f, frag)) => (f, Some(frag)),
        None => (target, None),
    };
    let path = cwd.join(file.strip_prefix("file://").unwrap_or(file));
    let root = read(host, &path)?;
    let graph = root.get("$graph").and_then(Value::as_sequence).cloned();
    let top = match &graph {
        Some(g) => by_id(g, fragment.unwrap_or("main"))
            .or_else(|| g.iter().find(|p| class(p) == "Workflow"))?
            .clone(),
        None => root,
    };
    let mut doc = Document::default();
    let ctx = Ctx {
        host,
        dir: path.parent()?.to_path_buf(),
        graph,
    };
    match class(&top) {
        "Workflow" => ctx.steps(&top, "", 0, &mut doc.steps),
        "CommandLineTool" => {
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            let id = top
                .get("id")
                .and_then(Value::as_str)
                .map(|i| i.trim_start_matches('#'));
            doc.tool = Some(id.map_or(stem, str::to_string));
        }
        _ => return None,
    }
    Some(doc)
}

fn read(host: &dyn Host, path: &Path) -> Option<Value> {
    serde_yaml::from_str(&host.read_to_string(path).ok()?).ok()
}

fn class(v: &Value) -> &str {
    v.get("class").and_then(Value::as_str).unwrap_or("")
}

fn by_id<'a>(graph: &'a [Value], id: &str) -> Option<&'a Value> {
    let id = id.trim_start_matches('#');
    graph.iter().find(|p| {
        p.get("id")
            .and_then(Value::as_str)
            .map(|i| i.trim_start_matches('#'))
            == Some(id)
    })
}

struct Ctx<'h> {
    host: &'h dyn Host,
    dir: PathBuf,
    graph: Option<Vec<Value>>,
}

impl Ctx<'_> {
    fn steps(&self, wf: &Value, prefix: &str, depth: usize, out: &mut Vec<Step>) {
        if depth > MAX_DEPTH {
            return;
        }
        for (id, step) in entries(wf.get("steps")) {
            let id = format!("{prefix}{}", id.rsplit(['#', '/']).next().unwrap_or(&id));
            let Some((process, dir)) = self.resolve(step.get("run")) else {
                continue;
            };
            match class(&process) {
                "Workflow" => {
                    let sub = Ctx {
                        host: self.host,
                        dir,
                        graph: self.graph.clone(),
                    };
                    sub.steps(&process, &format!("{id}/"), depth + 1, out);
                }
                "CommandLineTool" => out.push(Step {
                    id,
                    base: words(process.get("baseCommand")),
                    literals: literal_arguments(process.get("arguments")),
                }),
                _ => {}
            }
        }
    }

    /// A step's `run`: inline, a `#id` of the packed graph, or a file beside the document.
    fn resolve(&self, run: Option<&Value>) -> Option<(Value, PathBuf)> {
        match run? {
            Value::String(s) if s.starts_with('#') => {
                let p = by_id(self.graph.as_deref()?, s)?;
                Some((p.clone(), self.dir.clone()))
            }
            Value::String(s) => {
                let path = self.dir.join(s.strip_prefix("file://").unwrap_or(s));
                Some((read(self.host, &path)?, path.parent()?.to_path_buf()))
            }
            inline => Some((inline.clone(), self.dir.clone())),
        }
    }
}

/// `steps` as a list of objects with `id`, or a map from id to step.
fn entries(v: Option<&Value>) -> Vec<(String, Value)> {
    match v {
        Some(Value::Sequence(s)) => s
            .iter()
            .filter_map(|st| Some((st.get("id")?.as_str()?.to_string(), st.clone())))
            .collect(),
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, st)| Some((k.as_str()?.to_string(), st.clone())))
            .collect(),
        _ => Vec::new(),
    }
}

fn words(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Sequence(s)) => s
            .iter()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

fn literal_arguments(v: Option<&Value>) -> Vec<String> {
    let literal = |s: &str| !s.contains("$(") && !s.contains("${");
    let arg = |a: &Value| match a {
        Value::String(s) => Some(s.clone()),
        other => other.get("valueFrom")?.as_str().map(str::to_string),
    };
    match v {
        Some(Value::Sequence(s)) => s.iter().filter_map(arg).filter(|s| literal(s)).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
