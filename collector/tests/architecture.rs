//! The import rules of docs/architecture.md that the crate graph cannot enforce, read from
//! the source tree (no build of the crate's code is inspected, only its text): the
//! collector's top-level modules stand in the layers below and import only from layers under
//! their own; no modules under one parent import each other in a circle, in any workspace
//! crate (Cargo.toml's members, and each binary of several files apart); and the modules that
//! reason about processes, the core crate's all (but its port) and the collector's listed
//! below, touch files, processes and the network only through the `Host` port. (That the core
//! crate imports none of the collector is Cargo's rule: it does not depend on it.) Test code (`tests.rs`, `tests/`,
//! `#[cfg(test)]` items and the fake host) may import anything.
// The sources read as docs/architecture.md's tables read them (comments and tests left out).
#[path = "architecture_docs/source.rs"]
#[allow(dead_code)]
mod source;
use source::{TOUCHES, code_of, is_test_file, rs_files};
// No crate re-exports, renames or wholesale imports another: each crossing names its crate.
#[path = "architecture/crossings.rs"]
mod crossings;
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The crate's top-level modules, bottom layer first. A module may import modules of lower
/// layers only. Keep docs/architecture.md's diagram in step with this table.
const LAYERS: &[(&str, &[&str])] = &[
    ("meaning and input", &["awaiting", "scope", "print"]),
    ("live view", &["live_view"]),
    ("views", &["report", "registry"]),
    ("findings on the run span", &["judging"]),
    ("machines", &["sizing"]),
    ("comparison", &["compare"]),
    ("advice", &["suggest"]),
    ("provenance", &["provenance"]),
    ("terminal", &["summary"]),
    ("the loop", &["pipeline"]),
    ("assembly", &["assembly"]),
    ("commands", &["cli"]),
];

/// Circles known and not yet broken: each pair may import each other (and nothing else
/// may join them). Remove a pair once its circle is gone.
// None: attribution's records carry no verdict (diagnosis judges them beside it).
const KNOWN_CIRCLES: &[(&str, &str)] = &[];

/// Modules that decide what processes are and mean: they read the machine only through
/// the `Host` they are handed, so that unit tests drive them on a fake host.
const THROUGH_HOST_ONLY: &[&str] = &["awaiting", "live_view"];

/// Files allowed direct I/O despite THROUGH_HOST_ONLY, each with why. (None: engines'
/// databases are opened by the host, `Host::open_database`.)
const DIRECT_IO_EXCEPTIONS: &[(&str, &str)] = &[];

type Module = Vec<String>;

struct Source {
    module: Module,
    path: PathBuf,
    /// The file's code without comments and without its test-only items.
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The core crate's sources: every module of it but the port itself reads only through it.
fn core_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src")
}

fn module_of(rel: &[String]) -> Module {
    let mut m: Module = rel.to_vec();
    let last = m.pop().unwrap();
    if last != "mod.rs" {
        m.push(last.trim_end_matches(".rs").to_string());
    }
    m
}

fn sources() -> Vec<Source> {
    sources_in(&src_dir())
}

fn sources_in(root: &Path) -> Vec<Source> {
    let files = rs_files(root);
    let mut out = Vec::new();
    for path in files {
        let rel: Vec<String> = path
            .strip_prefix(root)
            .unwrap()
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let test = is_test_file(path.strip_prefix(root).unwrap());
        // `bin/` holds crates of their own: [`crate_trees`] reads each apart.
        let other_crate = rel.len() > 1 && rel[0] == "bin";
        if rel == ["lib.rs"] || rel == ["main.rs"] || test || other_crate {
            continue;
        }
        let code = code_of(&fs::read_to_string(&path).unwrap());
        out.push(Source {
            module: module_of(&rel),
            path,
            code,
        });
    }
    out
}

fn ident_end(s: &str) -> usize {
    s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths a use tree names (`a::{b, c::d}` -> `a::b`, `a::c::d`), each as segments.
fn expand_tree(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[start..]);
    for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty()) {
        let item = item.split(" as ").next().unwrap().trim();
        match item.find('{') {
            Some(b) => {
                let mut p = prefix.to_vec();
                p.extend(segments(&item[..b]));
                let end = item.rfind('}').unwrap_or(item.len()).max(b + 1);
                expand_tree(&p, &item[b + 1..end], out);
            }
            None => {
                let mut p = prefix.to_vec();
                p.extend(segments(item));
                out.push(p);
            }
        }
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Every path the code names that starts at `crate`, `super` or one of the module's own
/// children, made absolute (segments from the crate root).
fn referenced(src: &Source, modules: &BTreeSet<Module>) -> Vec<Vec<String>> {
    let mut raw: Vec<Vec<String>> = Vec::new();
    let code = &src.code;
    // use statements, with their trees.
    let mut rest = code.as_str();
    while let Some(i) = rest.find("use ") {
        let before_ok = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let after = &rest[i + 4..];
        if let (true, Some(end)) = (before_ok, after.find(';')) {
            expand_tree(&[], &after[..end], &mut raw);
        }
        rest = after;
    }
    // paths in code: crate::a::b, super::a.
    for root in ["crate::", "super::"] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(root) {
            let tail = &rest[i..];
            let mut len = 0;
            loop {
                let seg = &tail[len..];
                let n = ident_end(seg);
                len += n;
                if n == 0 || !tail[len..].starts_with("::") {
                    break;
                }
                len += 2;
            }
            raw.push(segments(&tail[..len]));
            rest = &rest[i + root.len()..];
        }
    }
    raw.into_iter()
        .filter_map(|p| {
            let first = p.first()?.as_str();
            let mut abs: Vec<String> = match first {
                "crate" => p[1..].to_vec(),
                "super" => {
                    let ups = p.iter().take_while(|s| *s == "super").count();
                    let base = &src.module[..src.module.len().saturating_sub(ups)];
                    base.iter()
                        .cloned()
                        .chain(p[ups..].iter().cloned())
                        .collect()
                }
                "self" => src
                    .module
                    .iter()
                    .cloned()
                    .chain(p[1..].iter().cloned())
                    .collect(),
                child => {
                    let mut m = src.module.clone();
                    m.push(child.to_string());
                    if !modules.contains(&m) {
                        return None;
                    }
                    src.module
                        .iter()
                        .cloned()
                        .chain(p.iter().cloned())
                        .collect()
                }
            };
            while !abs.is_empty() && !modules.contains(&abs) {
                abs.pop();
            }
            (!abs.is_empty()).then_some(abs)
        })
        .collect()
}

/// Module -> the modules it names.
fn graph() -> (Vec<Source>, BTreeMap<Module, BTreeSet<Module>>) {
    graph_of(sources())
}

/// The export crate's sources.
fn export_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../export/src")
}

fn graph_of(srcs: Vec<Source>) -> (Vec<Source>, BTreeMap<Module, BTreeSet<Module>>) {
    let modules: BTreeSet<Module> = srcs.iter().map(|s| s.module.clone()).collect();
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for s in &srcs {
        let e = g.entry(s.module.clone()).or_default();
        for t in referenced(s, &modules) {
            if t != s.module {
                e.insert(t);
            }
        }
    }
    (srcs, g)
}

fn name(m: &[String]) -> String {
    m.join("::")
}

/// The strongly connected parts with more than one node (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut part = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                part.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if part.len() > 1 {
                t.out.push(part);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn is_known(part: &BTreeSet<String>) -> bool {
    KNOWN_CIRCLES
        .iter()
        .any(|(a, b)| part.len() == 2 && part.contains(*a) && part.contains(*b))
}

/// For each parent module, its children as nodes: an edge when anything under one child
/// names anything under another. Edges between a module and its own ancestors (children
/// using their parent's re-exports) are no circle.
fn sibling_graphs(
    g: &BTreeMap<Module, BTreeSet<Module>>,
) -> BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in g {
        for to in tos {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            let parent = from[..common].to_vec();
            let a = name(&from[..=common]);
            let b = name(&to[..=common]);
            out.entry(parent)
                .or_default()
                .entry(a)
                .or_default()
                .insert(b);
        }
    }
    out
}

/// The source trees of a workspace member, each one crate's modules: its `src/` (the
/// library, or `main.rs` and its modules) and each binary of several files, `src/bin/NAME/`.
fn crate_trees(member: &str) -> Vec<(String, PathBuf)> {
    let src = source::root().join(member).join("src");
    let mut bins: Vec<PathBuf> = (fs::read_dir(src.join("bin")).into_iter().flatten())
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    bins.sort();
    let bins = bins.into_iter().map(|b| {
        let name = b.file_name().unwrap().to_string_lossy().into_owned();
        (format!("{member} (bin {name})"), b)
    });
    std::iter::once((member.to_string(), src))
        .chain(bins)
        .collect()
}

/// The circles under one parent in a crate's tree, each named with the crate.
fn circles_in(krate: &str, root: &Path) -> Vec<String> {
    let (_, g) = graph_of(sources_in(root));
    let mut found = Vec::new();
    for (parent, sg) in sibling_graphs(&g) {
        for part in circles(&sg) {
            if !is_known(&part) {
                found.push(format!("{krate}, under `{}`: {:?}", name(&parent), part));
            }
        }
    }
    found
}

#[test]
fn no_modules_under_one_parent_import_each_other_in_a_circle() {
    let members = source::members();
    let trees: Vec<(String, PathBuf)> = members.iter().flat_map(|m| crate_trees(m)).collect();
    // Every member is read, and each binary of several files as a crate of its own.
    for (_, root) in &trees {
        assert!(root.is_dir(), "{} is no folder", root.display());
    }
    for m in [
        "collector",
        "core",
        "semconv",
        "tests",
        "probes/ebpf",
        "dist",
    ] {
        assert!(members.iter().any(|k| k == m), "{m} not in {members:?}");
    }
    let bench = (trees.iter())
        .find(|(k, _)| k == "tests (bin bench_perf)")
        .unwrap_or_else(|| panic!("no bench_perf in {trees:?}"));
    let modules: Vec<Module> = sources_in(&bench.1).into_iter().map(|s| s.module).collect();
    assert!(modules.contains(&vec!["storm".to_string()]), "{modules:?}");
    let found: Vec<String> = (trees.iter())
        .flat_map(|(krate, root)| circles_in(krate, root))
        .collect();
    assert!(
        found.is_empty(),
        "import circles (see docs/architecture.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn top_level_modules_import_only_from_layers_below_their_own() {
    let (srcs, g) = graph();
    let layer_of = |m: &str| LAYERS.iter().position(|(_, ms)| ms.contains(&m));
    let mut wrong = Vec::new();
    for top in srcs
        .iter()
        .map(|s| s.module[0].as_str())
        .collect::<BTreeSet<_>>()
    {
        if layer_of(top).is_none() {
            wrong.push(format!(
                "`{top}` is in no layer: place it in LAYERS and docs/architecture.md"
            ));
        }
    }
    for (from, tos) in &g {
        for to in tos {
            let (a, b) = (from[0].as_str(), to[0].as_str());
            if a == b || KNOWN_CIRCLES.contains(&(a, b)) || KNOWN_CIRCLES.contains(&(b, a)) {
                continue;
            }
            if let (Some(la), Some(lb)) = (layer_of(a), layer_of(b))
                && lb >= la
            {
                wrong.push(format!(
                    "`{}` ({}) imports `{}` ({}), which is not below it",
                    name(from),
                    LAYERS[la].0,
                    name(to),
                    LAYERS[lb].0
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_core_touches_the_machine_only_through_host() {
    let mut found = Vec::new();
    let core = sources_in(&core_dir())
        .into_iter()
        .filter(|s| s.module[0] != "port");
    let collector = sources().into_iter().filter(|s| {
        let rel = s.path.strip_prefix(src_dir()).unwrap();
        let excepted = DIRECT_IO_EXCEPTIONS
            .iter()
            .any(|(f, _)| rel == Path::new(f));
        THROUGH_HOST_ONLY.contains(&s.module[0].as_str()) && !excepted
    });
    // The export crate's span and metric building, likewise (its export module is the one
    // place that writes files and opens sockets).
    let signals = sources_in(&export_dir())
        .into_iter()
        .filter(|s| s.module[0] == "signals");
    let checked: Vec<Source> = core.chain(collector).chain(signals).collect();
    assert!(
        checked.iter().any(|s| s.module == ["tree"]),
        "the core's sources are read"
    );
    assert!(
        checked.iter().any(|s| s.module == ["signals", "spans"]),
        "the span builder's sources are read"
    );
    for s in checked {
        for (n, line) in s.code.lines().enumerate() {
            let calls = TOUCHES.iter().flat_map(|(_, calls)| calls.iter());
            if let Some(what) = calls.into_iter().find(|w| line.contains(**w)) {
                found.push(format!(
                    "{}:{}: `{what}`: {}",
                    s.path.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "I/O outside `host` (go through the Host trait):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_sees_the_imports_it_must() {
    // The rules above are only as good as the reading of the source: it must see these.
    let (_, g) = graph();
    let has = |a: &str, b: &str| {
        g.get(&segments(a))
            .is_some_and(|t| t.contains(&segments(b)))
    };
    assert!(
        has("summary", "report::who"),
        "the summary draws the who-tables of report"
    );
    assert!(
        has("report::html", "report::markup"),
        "html escapes with markup::esc"
    );
    assert!(
        has("report::table", "report::files"),
        "table lists each task's files"
    );
    assert!(has("cli::run", "live_view"), "run draws the live view");
    let found = circles(&BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]));
    assert_eq!(found.len(), 1, "a circle of two is found");
}

#[test]
fn docs_architecture_md_shows_the_layers_this_test_enforces() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let page = fs::read_to_string(page).unwrap();
    for (layer, modules) in LAYERS {
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| {layer} |")))
            .unwrap_or_else(|| panic!("docs/architecture.md has no row for the layer `{layer}`"));
        let cell = row.split('|').nth(2).unwrap_or_default();
        let shown: BTreeSet<&str> = cell.split('`').skip(1).step_by(2).collect();
        let want: BTreeSet<&str> = modules.iter().copied().collect();
        assert_eq!(shown, want, "docs/architecture.md, layer `{layer}`");
    }
}

/// The normal dependencies a crate's manifest names (`[dependencies]` only), but optional
/// ones: those come with a feature (probes-common's aya, for the host crate's `user`).
fn dependencies_of(manifest: &str) -> Vec<String> {
    (manifest.lines())
        .skip_while(|l| l.trim() != "[dependencies]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.contains("optional = true"))
        .filter_map(|l| l.split(['=', ' ']).next())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Every crate `dir`'s crate reaches through its own and the workspace's manifests.
fn reached_from(dir: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let path_of = |name: &str| {
        let line = workspace
            .lines()
            .find(|l| l.starts_with(&format!("{name} = {{ path")))?;
        Some(line.split('"').nth(1)?.to_string())
    };
    let (mut seen, mut todo) = (BTreeSet::new(), vec![dir.to_string()]);
    while let Some(d) = todo.pop() {
        let manifest = fs::read_to_string(root.join(&d).join("Cargo.toml")).unwrap();
        for dep in dependencies_of(&manifest) {
            if let Some(p) = path_of(&dep).filter(|_| !seen.contains(&dep)) {
                todo.push(p);
            }
            seen.insert(dep);
        }
    }
    seen
}

/// The crates through which code reaches the kernel, /proc, databases or the GPU driver.
const MACHINE_CRATES: &[&str] = &[
    "pipetrace-host",
    "aya",
    "procfs",
    "rusqlite",
    "nvml-wrapper",
    "inotify",
];

#[test]
fn the_core_and_the_export_crate_reach_no_crate_that_touches_the_machine() {
    for krate in ["core", "export"] {
        let reached = reached_from(krate);
        assert!(reached.contains("pipetrace-config"), "{krate}: {reached:?}");
        let machine: Vec<&&str> = MACHINE_CRATES
            .iter()
            .filter(|c| reached.contains(**c))
            .collect();
        assert!(
            machine.is_empty(),
            "{krate} reaches {machine:?}: hand it what it needs of the machine as data"
        );
    }
    // The reading finds them where they are.
    let host = reached_from("host");
    assert!(host.contains("procfs") && host.contains("aya"), "{host:?}");
}
