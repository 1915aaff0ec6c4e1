//! Reading the workspace's sources for the page: files, their doc comments, and blocks.
use std::{
    fs,
    path::{Path, PathBuf},
};

pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

pub fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The workspace's member crates, as Cargo.toml's `members` lists their directories.
pub fn members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    (block(&manifest, "members = [").iter().skip(1))
        .take_while(|l| !l.starts_with(']'))
        .map(|l| l.trim().trim_matches(|c| c == '"' || c == ',').to_string())
        .collect()
}

/// Every `.rs` file under `dir`, sorted.
pub fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Test code: unit-test files and folders, fixtures, the fake host and the disk host (test
/// doubles behind `cfg(any(test, feature = "fake-host"))`).
pub fn is_test_file(rel: &Path) -> bool {
    let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into()).collect();
    parts.iter().any(|c| c == "tests" || c == "tests.rs")
        || parts
            .last()
            .is_some_and(|f| f == "fixtures.rs" || f == "disk_host.rs")
        || parts.ends_with(&["port".into(), "fake.rs".into()])
}

/// The code without `//` comments and without the items under a `#[cfg(test)]`.
pub fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            let Some(item) = lines.next() else { break };
            if item.trim_end().ends_with('{') {
                let indent = item.len() - item.trim_start().len();
                for l in lines.by_ref() {
                    if l.len() - l.trim_start().len() == indent && l.trim() == "}" {
                        break;
                    }
                }
            }
            continue;
        }
        out.push_str(line.find("//").map_or(line, |i| &line[..i]));
        out.push('\n');
    }
    out
}

/// The first paragraph of the doc comment lines starting `marker` (`//!` or `///`), as one line.
pub fn first_paragraph<'a>(lines: impl IntoIterator<Item = &'a str>, marker: &str) -> String {
    let words: Vec<&str> = (lines.into_iter())
        .map(str::trim_start)
        .skip_while(|l| !l.starts_with(marker))
        .map_while(|l| l.strip_prefix(marker))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    words.join(" ")
}

/// The first sentence of `text` (up to a `.` that ends a word before a space).
pub fn first_sentence(text: &str) -> &str {
    let b = text.as_bytes();
    for (i, _) in text.match_indices(". ") {
        // "e.g. " and "i.e. " end no sentence.
        let abbrev = i >= 3 && b[i - 2] == b'.';
        if !abbrev {
            return &text[..=i];
        }
    }
    text
}

/// The lines of `source` from the one starting `start` to the first that is `}`.
pub fn block<'a>(source: &'a str, start: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = (source.lines())
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| *l != "}")
        .collect();
    assert!(!lines.is_empty(), "no `{start}` in the source");
    lines
}

/// An item of a block (a field, a method) at four spaces: its docs and its code, joined
/// over the lines rustfmt wraps it into.
pub struct Item {
    pub doc: String,
    pub code: String,
}

/// The items of a struct's or trait's block, each with its `///` docs.
pub fn items(block: &[&str]) -> Vec<Item> {
    let mut out = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut i = 1;
    while i < block.len() {
        let line = block[i];
        if let Some(d) = line.strip_prefix("    ///") {
            doc.push(d.trim());
        } else if line.trim_start().starts_with('}') || line.trim().is_empty() {
            // A body's end, or a blank line between items.
        } else if line.starts_with("    ") && !line.starts_with("     ") {
            let mut code = line.trim().to_string();
            while !(code.ends_with(',') || code.ends_with(';') || code.ends_with('{'))
                && i + 1 < block.len()
            {
                i += 1;
                code.push_str(block[i].trim());
            }
            if !code.starts_with("#[") {
                out.push(Item {
                    doc: doc.join(" "),
                    code,
                });
            }
            doc.clear();
        }
        i += 1;
    }
    out
}

/// The doc comment just above the line starting `start`, as one line.
pub fn doc_above(source: &str, start: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let at = (lines.iter().position(|l| l.starts_with(start)))
        .unwrap_or_else(|| panic!("no `{start}` in the source"));
    let above: Vec<&str> = (lines[..at].iter().rev())
        .take_while(|l| l.starts_with("///") || l.starts_with("#["))
        .filter_map(|l| l.strip_prefix("///"))
        .map(str::trim)
        .collect();
    above.into_iter().rev().collect::<Vec<_>>().join(" ")
}

/// The parameter names of a signature's first parenthesis (`self` and `_` prefixes left out).
pub fn params(sig: &str) -> Vec<String> {
    let Some(open) = sig.find('(') else {
        return Vec::new();
    };
    let (mut depth, mut inner) = (0, String::new());
    for c in sig[open + 1..].chars() {
        match c {
            '(' | '<' => depth += 1,
            ')' if depth == 0 => break,
            ')' | '>' => depth -= 1,
            _ => {}
        }
        inner.push(c);
    }
    (inner.split(','))
        .filter_map(|p| p.split(':').next())
        .map(|p| p.trim().trim_start_matches("mut ").trim_start_matches('_'))
        .filter(|p| !p.is_empty() && !p.contains("self"))
        .map(str::to_string)
        .collect()
}

/// What touches the machine, by what the code calls (comments and tests left out).
pub const TOUCHES: &[(&str, &[&str])] = &[
    ("the kernel's eBPF", &["aya::"]),
    ("/proc", &["procfs::"]),
    (
        "files",
        &[
            "std::fs",
            "fs::",
            "File::open",
            "File::create",
            "OpenOptions",
            "read_dir(",
        ],
    ),
    ("inotify", &["inotify"]),
    ("SQLite databases", &["Connection::open"]),
    ("processes", &["Command::new", "process::Command"]),
    ("signals", &["libc::kill"]),
    ("scheduling", &["sched_setscheduler"]),
    ("the GPU driver", &["Nvml::"]),
    (
        "the network",
        &[
            "TcpStream",
            "TcpListener",
            "UdpSocket",
            "UnixStream",
            "tonic::transport",
            "reqwest::",
        ],
    ),
];
