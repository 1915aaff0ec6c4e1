//! The registry and the code agree both ways: every name the collector emits comes from a
//! semconv constant (so it is in registry.yaml, which the semconv crate keeps equal to the
//! constants), and every constant is used by the collector (so the registry lists nothing
//! the code never emits). The received-telemetry side is checked in every end-to-end test.
use std::path::{Path, PathBuf};

use pipetrace_semconv::{attr, event, metric};

fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p, text));
        }
    }
}

/// The agent's sources: the command's crate and the crates it stands on.
fn collector_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["collector", "export", "host", "core"] {
        let before = out.len();
        sources(&root.join(format!("../{krate}/src")), &mut out);
        assert!(out.len() > before + 10, "{krate}'s sources found");
    }
    out
}

/// `attr::X` -> the constant's identifier for its value.
fn ident_of(module: &str, value: &str) -> String {
    let lib = include_str!("../../../semconv/src/lib.rs");
    let needle = format!("&str = \"{value}\";");
    let line = lib
        .lines()
        .find(|l| l.contains(&needle) && l.trim_start().starts_with("pub const"))
        .unwrap_or_else(|| panic!("{module} constant for {value}"));
    line.trim_start()
        .trim_start_matches("pub const ")
        .split(':')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn every_registered_name_is_emitted_by_the_collector() {
    let src = collector_sources();
    let mut unused = Vec::new();
    for (module, names) in [
        ("attr", attr::ALL),
        ("metric", metric::ALL),
        ("event", event::ALL),
    ] {
        for name in names {
            let use_ = format!("{module}::{}", ident_of(module, name));
            let used = src.iter().any(|(_, text)| {
                text.match_indices(&use_).any(|(i, _)| {
                    // `attr::CPU_MODE` must not count as a use of `attr::CPU`.
                    let next = text[i + use_.len()..].chars().next();
                    !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            });
            if !used {
                unused.push(format!("{name} ({use_})"));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "in the registry but never emitted: {unused:?}"
    );
}

#[test]
fn the_collector_spells_no_registered_name_itself() {
    // A name written as a literal would escape the registry's checks.
    let src = collector_sources();
    for name in attr::ALL.iter().chain(metric::ALL).chain(event::ALL) {
        let literal = format!("\"{name}\"");
        for (path, text) in &src {
            assert!(
                !text.contains(&literal),
                "{} writes {literal}: use the semconv constant",
                path.display()
            );
        }
    }
}
