//! The CWL document a cwltool run was given, read for what each step runs: step ids
//! (sub-workflow steps as `parent/step`), and for each step's CommandLineTool the words its
//! command line starts with (`baseCommand`, then literal `arguments`). Steps are lists or
//! maps; `run` is a file (relative to the document), an inline process, or a `#id` in a
//! packed `$graph` (whose `#main`, or the fragment given, is the workflow).
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::{attribution::ExitCodes, port::Host};

mod bindings;
use bindings::{Env, Outputs};

/// One step that runs a command: its id as cwltool reports it and what its command holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub id: String,
    /// `baseCommand`'s words (the first is matched by file name).
    pub base: Vec<String>,
    /// Literal `arguments` (no expressions, no parameter references).
    pub literals: Vec<String>,
    /// Under ShellCommandRequirement cwltool runs `/bin/sh -c 'LINE'`: the literal pieces of
    /// the arguments around their expressions (`cat `, ` | wc -c`), in order.
    pub shell: Option<Vec<String>>,
    /// Values bound to its inputs that its command line may hold (see `bindings`): what
    /// tells apart steps that run the same tool.
    pub bound: Vec<String>,
    /// It runs once per element (it, or a sub-workflow step around it, scatters).
    pub scatters: bool,
    /// The elements of each input it scatters over, in `scatter:` order, where the job order
    /// tells them (else empty): cwltool numbers a scatter's jobs in their order, whatever
    /// order they start in.
    pub elements: Vec<Vec<String>>,
    /// Its `scatterMethod` is a crossproduct (flat or nested: a job per combination, the
    /// first input's elements slowest), not a dotproduct (a job per position).
    pub cross: bool,
    /// The steps it reads from (a sub-workflow step stands for every step inside it): it
    /// cannot start before they have.
    pub after: Vec<String>,
    /// Its tool's `successCodes`, `temporaryFailCodes` and `permanentFailCodes`.
    pub codes: ExitCodes,
    /// Its `ResourceRequirement`'s `coresMin` (whole cores) and `ramMin` in bytes (CWL
    /// counts mebibytes), where they are numbers: what the step asked for.
    pub cores: Option<u32>,
    pub ram_bytes: Option<u64>,
    /// Its `ToolTimeLimit`'s `timelimit`, seconds, where it is a number above 0 (0 is none).
    pub time_limit_s: Option<u64>,
    /// Text its expression arguments' values likely hold: the literal text around them
    /// (`wc -l < $(inputs.f.path)` holds `wc -l <`) and their string literals
    /// (`$("sort " + inputs.f.path)` holds `sort`). What tells apart tools of one
    /// `baseCommand` (`bash -c`) whose whole command is an expression.
    pub hints: Vec<String>,
    /// The `inputBinding` prefixes of its tool's inputs that have a value (`-n` of a
    /// `default: true` flag): words its command line holds.
    pub prefixes: Vec<String>,
    /// Its tool's `stderr` file name where it is literal: cwltool sends the command's
    /// stderr there, in the job's output directory (its working directory).
    pub stderr: Option<String>,
}

/// What a document is: a workflow's steps, or a single tool.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Document {
    /// The steps that run a command; for a lone tool, its own command.
    pub steps: Vec<Step>,
    /// The tool's name when the document is one CommandLineTool, not a workflow.
    pub tool: Option<String>,
}

/// How deep sub-workflows are followed (a cycle of `run:` files ends here).
const MAX_DEPTH: usize = 8;

/// Reads `target` (`wf.cwl` or `wf.cwl#main`, relative to `cwd`), given the run's arguments
/// after it (its job file or `--input value`s).
pub(crate) fn load(
    host: &dyn Host,
    target: &str,
    cwd: &Path,
    inputs: &[String],
) -> Option<Document> {
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
        "Workflow" => {
            let env = bindings::workflow_env(&top, &bindings::job_order(host, cwd, inputs));
            let at = Level::top(&top);
            ctx.steps(&top, &env, &at, &mut doc.steps);
        }
        "CommandLineTool" => {
            // cwltool names the job by the tool's id, else by its file's name (`rev.cwl`).
            let file = path.file_name()?.to_string_lossy().into_owned();
            let id = top.get("id").and_then(Value::as_str).map(bindings::short);
            let name = id.map_or(file, str::to_string);
            // Its command, to tell it from the engine's helpers (a tool that runs `node`).
            let at = Level::top(&top);
            doc.steps = vec![command_step(name.clone(), &top, None, &Env::new(), &at)];
            doc.tool = Some(name);
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

/// Where in the workflow tree steps are read.
struct Level {
    /// Sub-workflow steps' ids before the step's own (`inner/`).
    prefix: String,
    depth: usize,
    /// A step around this workflow scatters: every step here repeats.
    scatters: bool,
    /// ShellCommandRequirement holds here (it is inherited by steps and their tools).
    shell: bool,
    /// The steps around this workflow read from: every step here comes after them.
    after: Vec<String>,
}

impl Level {
    /// The document's own level.
    fn top(doc: &Value) -> Self {
        Self {
            prefix: String::new(),
            depth: 0,
            scatters: false,
            shell: has_shell(doc),
            after: Vec::new(),
        }
    }
}

impl Ctx<'_> {
    fn steps(&self, wf: &Value, env: &Env, at: &Level, out: &mut Vec<Step>) {
        if at.depth > MAX_DEPTH {
            return;
        }
        let resolved: Vec<_> = entries(wf.get("steps"))
            .into_iter()
            .filter_map(|(id, step)| {
                let (process, dir) = self.resolve(step.get("run"))?;
                Some((bindings::short(&id).to_string(), step, process, dir))
            })
            .collect();
        // The files each command step writes, for the steps that read them.
        let outputs: Outputs = resolved
            .iter()
            .filter(|(.., p, _)| class(p) == "CommandLineTool")
            .flat_map(|(id, _, p, _)| {
                let outs = bindings::tool_outputs(p);
                outs.into_iter().map(move |(o, f)| ((id.clone(), o), f))
            })
            .collect();
        let siblings: Vec<&str> = resolved.iter().map(|(id, ..)| id.as_str()).collect();
        for (id, step, process, dir) in &resolved {
            let upstream = bindings::upstream(step, &siblings);
            let inner = Level {
                prefix: format!("{}{id}/", at.prefix),
                depth: at.depth + 1,
                scatters: at.scatters || step.get("scatter").is_some(),
                shell: at.shell || has_shell(step) || has_shell(process),
                after: (at.after.iter().cloned())
                    .chain(upstream.iter().map(|u| format!("{}{u}", at.prefix)))
                    .collect(),
            };
            let env = bindings::step_env(step, env, &outputs);
            match class(process) {
                "Workflow" => {
                    let sub = Ctx {
                        host: self.host,
                        dir: dir.clone(),
                        graph: self.graph.clone(),
                    };
                    let env = bindings::workflow_env(process, &env);
                    sub.steps(process, &env, &inner, out);
                }
                "CommandLineTool" => out.push(Step {
                    elements: (scattered(step).iter())
                        .map(|input| env.get(input).cloned().unwrap_or_default())
                        .collect(),
                    cross: step
                        .get("scatterMethod")
                        .and_then(Value::as_str)
                        .is_some_and(|m| m.ends_with("crossproduct")),
                    ..command_step(
                        format!("{}{id}", at.prefix),
                        process,
                        Some(step),
                        &env,
                        &inner,
                    )
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

/// The step (`step`: its `in:`, None for a lone tool) that runs `tool` on inputs `env`.
fn command_step(id: String, tool: &Value, step: Option<&Value>, env: &Env, at: &Level) -> Step {
    let args = arguments(tool.get("arguments"));
    Step {
        id,
        base: words(tool.get("baseCommand")),
        literals: args.iter().filter(|a| is_literal(a)).cloned().collect(),
        shell: at
            .shell
            .then(|| args.iter().flat_map(|a| pieces(a)).collect()),
        bound: env.values().flatten().cloned().collect(),
        scatters: at.scatters,
        after: at.after.clone(),
        hints: (args.iter().filter(|a| !is_literal(a)))
            .flat_map(|a| pieces(a).into_iter().chain(expression_strings(a)))
            .filter(|h| h.chars().filter(|c| !c.is_whitespace()).count() >= 2)
            .collect(),
        prefixes: bindings::prefixes(tool, step, env),
        codes: ExitCodes {
            success: codes(tool, "successCodes"),
            temporary_fail: codes(tool, "temporaryFailCodes"),
            permanent_fail: codes(tool, "permanentFailCodes"),
        },
        cores: resource(tool, step, "coresMin").map(|c| c.ceil().max(1.0) as u32),
        ram_bytes: resource(tool, step, "ramMin").map(|m| (m * 1048576.0).ceil() as u64),
        time_limit_s: requirement(tool, step, ("ToolTimeLimit", "timelimit")).map(|t| t as u64),
        stderr: (tool.get("stderr").and_then(Value::as_str))
            .filter(|f| !f.contains("$(") && !f.contains("${") && !f.contains('/'))
            .map(str::to_string),
        ..Default::default()
    }
}

/// A `ResourceRequirement` field of the step's (which overrides its tool's) or its tool's,
/// in `requirements` or `hints`, in a list (`- class: ResourceRequirement`) or a map
/// (`ResourceRequirement: {…}`); None where it is absent or an expression.
fn resource(tool: &Value, step: Option<&Value>, field: &str) -> Option<f64> {
    requirement(tool, step, ("ResourceRequirement", field))
}

/// A numeric field of a requirement of `class`, as [`resource`] finds it.
fn requirement(tool: &Value, step: Option<&Value>, (class, field): (&str, &str)) -> Option<f64> {
    let of = |doc: &Value| {
        ["requirements", "hints"].iter().find_map(|key| {
            let found = match doc.get(*key)? {
                Value::Sequence(list) => list
                    .iter()
                    .find(|r| r.get("class").and_then(Value::as_str) == Some(class)),
                map => map.get(class),
            };
            found?.get(field)?.as_f64().filter(|v| *v > 0.0)
        })
    };
    step.and_then(of).or_else(|| of(tool))
}

/// A tool's list of exit codes under `key`.
fn codes(tool: &Value, key: &str) -> Vec<i64> {
    (tool.get(key).and_then(Value::as_sequence))
        .map(|codes| codes.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// The inputs a step scatters over, in order (the first's elements lead the numbering).
fn scattered(step: &Value) -> Vec<String> {
    let inputs = words(step.get("scatter"));
    inputs
        .iter()
        .map(|i| bindings::short(i).to_string())
        .collect()
}

/// Whether a process or step declares ShellCommandRequirement (as a requirement or hint).
fn has_shell(v: &Value) -> bool {
    ["requirements", "hints"]
        .iter()
        .any(|key| match v.get(key) {
            Some(Value::Mapping(m)) => m.contains_key("ShellCommandRequirement"),
            Some(Value::Sequence(s)) => s.iter().any(|r| class(r) == "ShellCommandRequirement"),
            _ => false,
        })
}

/// `arguments` as written: strings, or the `valueFrom` of a binding.
fn arguments(v: Option<&Value>) -> Vec<String> {
    let arg = |a: &Value| match a {
        Value::String(s) => Some(s.clone()),
        other => other.get("valueFrom")?.as_str().map(str::to_string),
    };
    match v {
        Some(Value::Sequence(s)) => s.iter().filter_map(arg).collect(),
        _ => Vec::new(),
    }
}

/// Text with no parameter reference or expression: it reaches the command line as written.
fn is_literal(s: &str) -> bool {
    !s.contains("$(") && !s.contains("${")
}

/// The literal text around an argument's expressions (`cat $(inputs.x.path) | wc -c` holds
/// `cat` and `| wc -c`), trimmed: what the shell line holds whatever the values.
fn pieces(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(at) = rest.find('$') {
        let Some(end) = expression_end(&rest[at + 1..]) else {
            // A lone `$` (a shell variable) is literal text.
            out.push(rest[..at + 1].to_string());
            rest = &rest[at + 1..];
            continue;
        };
        out.push(rest[..at].to_string());
        rest = &rest[at + 1 + end..];
    }
    out.push(rest.to_string());
    out.iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The string literals in an argument's expressions, trimmed (`$("sort " + inputs.f.path)`
/// holds `sort`; a template literal, its text around `${...}`).
fn expression_strings(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        if let Some(end) = expression_end(rest) {
            out.extend(string_literals(&rest[..end]));
            rest = &rest[end..];
        }
    }
    out
}

/// The quoted strings of a piece of JavaScript, unescaped, a template's text around its
/// `${...}`.
fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(quote) = chars.next() {
        if !matches!(quote, '"' | '\'' | '`') {
            continue;
        }
        let mut text = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => text.push(match chars.next() {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    other => other.unwrap_or('\\'),
                }),
                c if c == quote => break,
                c => text.push(c),
            }
        }
        match quote {
            '`' => out.extend(pieces(&text)),
            _ => out.push(text.trim().to_string()),
        }
    }
    out
}

/// Where an expression that starts `text` (`(...)` or `{...}`, nested) ends; None when
/// `text` starts no expression.
fn expression_end(text: &str) -> Option<usize> {
    let (open, close) = match text.chars().next()? {
        '(' => ('(', ')'),
        '{' => ('{', '}'),
        _ => return None,
    };
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        depth += i32::from(c == open) - i32::from(c == close);
        if depth == 0 {
            return Some(i + 1);
        }
    }
    Some(text.len())
}

#[cfg(test)]
mod tests;
