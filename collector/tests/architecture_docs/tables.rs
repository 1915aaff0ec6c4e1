//! The page's tables, made from the code they describe.
use std::{collections::BTreeSet, path::Path};

use super::source::{
    TOUCHES, block, code_of, doc_above, first_paragraph, first_sentence, is_test_file, items,
    members, params, read, root, rs_files,
};

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        head.join(" | "),
        " --- |".repeat(head.len())
    );
    for r in rows {
        out += &format!(
            "| {} |\n",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    out
}

/// Each member crate: its name, its directory, and its root's first doc paragraph.
pub fn workspace() -> String {
    let rows = members().into_iter().map(|dir| {
        let manifest = read(&format!("{dir}/Cargo.toml"));
        let name = (manifest.lines())
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("{dir}/Cargo.toml has no name"));
        // The library's doc, or the binary's where there is none or it is a build aid only
        // (probes/ebpf's, "Empty on purpose").
        let doc = |file: &str| match root().join(file).exists() {
            true => first_paragraph(read(file).lines(), "//!"),
            false => String::new(),
        };
        let (lib, main) = (format!("{dir}/src/lib.rs"), format!("{dir}/src/main.rs"));
        let (rootfile, mut what) = (&lib, doc(&lib));
        let (rootfile, what) = match what.is_empty() || what.starts_with("Empty on purpose") {
            true => {
                what = doc(&main);
                (&main, what)
            }
            false => (rootfile, what),
        };
        assert!(!what.is_empty(), "{rootfile} opens with no `//!` doc");
        vec![format!("`{name}`"), format!("`{dir}`"), what]
    });
    table(&["crate", "directory", "what it is"], rows.collect())
}

/// The probes' programs, file by file: each hook and what its file's doc says first.
pub fn hooks() -> String {
    let dir = root().join("probes/ebpf/src");
    let mut rows = Vec::new();
    for path in rs_files(&dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let hooks: Vec<String> = text.lines().filter_map(hook_of).collect();
        if hooks.is_empty() {
            continue;
        }
        let doc = first_paragraph(text.lines(), "//!");
        let sentence = first_sentence(&doc);
        // "tp_btf/sched_process_fork: a new process": the hook is in its own column.
        let names_hook = |head: &str| {
            hooks
                .iter()
                .any(|h| head.contains(h.rsplit('/').next().unwrap()))
        };
        let what = match sentence.split_once(": ") {
            Some((head, rest)) if !head.contains(' ') || names_hook(head) => rest,
            _ => sentence,
        };
        let file = path.strip_prefix(root()).unwrap().display().to_string();
        let hooks = hooks.iter().map(|h| format!("`{h}`")).collect::<Vec<_>>();
        rows.push(vec![
            hooks.join(", "),
            format!("`{file}`"),
            what.to_string(),
        ]);
    }
    table(&["hook", "file", "what it reads"], rows)
}

/// `tp_btf/NAME` of `#[btf_tracepoint(function = "NAME")]`, and the other program kinds.
fn hook_of(line: &str) -> Option<String> {
    let attr = line.trim().strip_prefix("#[")?.strip_suffix(")]")?;
    let (kind, args) = attr.split_once('(')?;
    let values: Vec<&str> = args.split('"').skip(1).step_by(2).collect();
    let prefix = match kind {
        "btf_tracepoint" => "tp_btf",
        "tracepoint" => "tracepoint",
        "raw_tracepoint" => "raw_tp",
        "perf_event" | "uprobe" | "uretprobe" | "kprobe" | "fentry" | "lsm" => kind,
        _ => return None,
    };
    Some(
        std::iter::once(prefix)
            .chain(values)
            .collect::<Vec<_>>()
            .join("/"),
    )
}

const ENGINES: &str = "core/src/attribution/engines";

/// `Engine`'s fields: each with its parameters where it is a function, and its docs.
pub fn engine_fields() -> String {
    let source = read(&format!("{ENGINES}/mod.rs"));
    let rows = items(&block(&source, "pub struct Engine {"))
        .into_iter()
        .map(|f| {
            let code = f.code.trim_start_matches("pub ");
            let (name, ty) = code.split_once(':').expect("a field");
            let ty = ty.trim();
            let args = params(ty);
            let mut shown = match ty.contains("fn(") {
                true => format!("`{name}({})`", args.join(", ")),
                false => format!("`{name}`"),
            };
            if ty.starts_with("Option<") {
                shown = format!("optional: {shown}");
            }
            assert!(!f.doc.is_empty(), "Engine::{name} has no doc comment");
            vec![shown, f.doc]
        });
    table(&["field", "what it says"], rows.collect())
}

/// A question of a trait: its name, its parameters, its docs, and whether it has a default.
struct Question {
    name: String,
    shown: String,
    doc: String,
    required: bool,
    /// The capability trait an accessor returns.
    capability: Option<String>,
}

fn questions(source: &str, start: &str) -> Vec<Question> {
    let found = items(&block(source, start)).into_iter().filter_map(|m| {
        let sig = m.code.strip_prefix("fn ")?.to_string();
        let name = sig.split('(').next()?.to_string();
        let capability = (sig.split("-> ").nth(1))
            .and_then(|ret| ret.split("dyn ").nth(1))
            .map(|t| t.split(['>', ' ']).next().unwrap_or(t).to_string());
        Some(Question {
            shown: format!("`{name}({})`", params(&sig).join(", ")).replace("()`", "`"),
            name,
            doc: m.doc,
            required: sig.ends_with(';'),
            capability,
        })
    });
    found.collect()
}

const WORDS: [&str; 13] = [
    "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve",
];

/// `EngineRun`'s questions (the sentence counting them, then the table), and its
/// capabilities with their questions and the engines that have each.
pub fn engine_questions() -> String {
    let source = read(&format!("{ENGINES}/run.rs"));
    let all = questions(&source, "pub trait EngineRun");
    let (caps, asked): (Vec<_>, Vec<_>) = all.into_iter().partition(|q| q.capability.is_some());
    let required: Vec<String> = (asked.iter().filter(|q| q.required))
        .map(|q| format!("`{}`", q.name))
        .collect();
    let defaults = asked.len() - required.len();
    let mut out = format!(
        "The interface is small: {} questions are required ({}), {} have defaults for an \
         engine without records of its own:\n\n",
        WORDS[required.len()],
        required.join(", "),
        WORDS[defaults]
    );
    let rows = asked.iter().map(|q| {
        let required = if q.required { "yes" } else { "no: a default" };
        vec![q.shown.clone(), q.doc.clone(), required.to_string()]
    });
    out += &table(&["asked", "answer", "required"], rows.collect());
    out += "\nBeyond it, an engine opts into a capability by returning itself from its accessor \
            (`None` by default). A capability is a trait with no defaults: an engine that has \
            it answers all of its questions, so none is missed silently.\n\n";
    let rows = caps.iter().map(|acc| {
        let cap = acc.capability.clone().unwrap();
        let start = format!("pub trait {cap}");
        let qs = questions(&source, &start);
        assert!(qs.iter().all(|q| q.required), "{cap} has a default");
        let said = (qs.iter())
            .map(|q| format!("{}: {}", q.shown, q.doc))
            .collect::<Vec<_>>();
        vec![
            format!("`{cap}` (`{}`)", acc.name),
            format!("{} {}", doc_above(&source, &start), said.join(" ")),
            engines_with(&cap).join(", "),
        ]
    });
    out += &table(
        &["capability (accessor)", "questions", "engines"],
        rows.collect(),
    );
    out
}

/// The engines (their module under engines/) that implement `cap`.
fn engines_with(cap: &str) -> Vec<String> {
    let dir = root().join(ENGINES);
    let mut found = BTreeSet::new();
    for path in rs_files(&dir) {
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        if code.contains(&format!("impl {cap} for ")) {
            let rel = path.strip_prefix(&dir).unwrap();
            let first = rel.iter().next().unwrap().to_string_lossy();
            found.insert(format!("`{}`", first.trim_end_matches(".rs")));
        }
    }
    found.into_iter().collect()
}

/// The product crates, whose code is what runs on a user's machine.
const PRODUCT: &[&str] = &["core", "host", "export", "collector", "config", "semconv"];

/// Every file of the product crates whose code touches the machine: what, and what it is.
pub fn machine() -> String {
    let mut rows = Vec::new();
    for krate in PRODUCT {
        let src = root().join(krate).join("src");
        for path in rs_files(&src) {
            let rel = path.strip_prefix(&src).unwrap();
            if is_test_file(rel) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = code_of(&text);
            let what: Vec<&str> = (TOUCHES.iter())
                .filter(|(_, calls)| calls.iter().any(|c| code.contains(c)))
                .map(|(what, _)| *what)
                .collect();
            if what.is_empty() {
                continue;
            }
            let file = Path::new(krate).join("src").join(rel).display().to_string();
            let doc = first_paragraph(text.lines(), "//!");
            rows.push(vec![
                format!("`{file}`"),
                what.join(", "),
                first_sentence(&doc).into(),
            ]);
        }
    }
    table(&["file", "touches", "what it is"], rows)
}
