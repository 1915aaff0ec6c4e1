//! Each crossing into another product crate names that crate: no crate re-exports or
//! renames another's items, nor imports another's modules whole at its root, so that no path
//! of one crate leads into another unseen.
use std::{fs, path::Path};

use super::rs_files;

/// The product crates, by their folders and the names code calls them by.
const PRODUCT_CRATES: &[(&str, &str)] = &[
    ("core", "pipetrace_core"),
    ("host", "pipetrace_host"),
    ("export", "pipetrace_export"),
    ("collector", "pipetrace"),
    ("config", "pipetrace_config"),
];

/// Whether a line of code re-exports (or renames) another product crate or its items:
/// then a path of this crate would lead into that one unseen.
fn aliases_a_crate(line: &str, own: &str) -> bool {
    let line = line.trim();
    let crossing = |rest: &str| {
        (PRODUCT_CRATES.iter()).any(|(_, name)| {
            *name != own && (rest.starts_with(&format!("{name}::")) || rest == *name)
        })
    };
    let reexport = ["pub use ", "pub(crate) use "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .is_some_and(|rest| crossing(rest.trim_end_matches(';').split(" as ").next().unwrap()));
    let renamed = line.strip_prefix("use ").is_some_and(|rest| {
        let (path, alias) = rest
            .trim_end_matches(';')
            .split_once(" as ")
            .unwrap_or((rest, ""));
        !alias.is_empty() && crossing(path)
    });
    reexport || renamed
}

/// Modules of other crates a crate root imports whole (`use pipetrace_core::{event, tree};`):
/// every path `crate::event::…` below it then leads into that crate unseen.
fn modules_imported_at_the_root(lib_rs: &str, own: &str) -> Vec<String> {
    let code: String = (lib_rs.lines())
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for stmt in code.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("use ") else {
            continue;
        };
        let Some((krate, tree)) = rest.split_once("::") else {
            continue;
        };
        let other = (PRODUCT_CRATES.iter()).any(|(_, name)| *name == krate && *name != own);
        let tree = tree.trim().trim_start_matches('{').trim_end_matches('}');
        let whole = |item: &str| {
            let item = item.trim();
            !item.contains("::") && item.starts_with(|c: char| c.is_ascii_lowercase())
        };
        if other && !tree.contains('{') {
            found.extend(
                tree.split(',')
                    .filter(|i| whole(i))
                    .map(|i| i.trim().to_string()),
            );
        }
    }
    found
}

#[test]
fn each_crossing_into_another_crate_names_that_crate() {
    assert_eq!(
        modules_imported_at_the_root(
            "use pipetrace_core::{\n    event, facts::page_size,\n};",
            "pipetrace_host"
        ),
        ["event"]
    );
    assert!(aliases_a_crate(
        "pub use pipetrace_host as host;",
        "pipetrace"
    ));
    assert!(aliases_a_crate(
        "    pub use pipetrace_core::port::fake;",
        "pipetrace_host"
    ));
    assert!(!aliases_a_crate(
        "use pipetrace_core::port::Host;",
        "pipetrace"
    ));
    assert!(!aliases_a_crate("pub use model::Decode;", "pipetrace"));
    let mut found = Vec::new();
    for (dir, own) in PRODUCT_CRATES {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir)
            .join("src");
        let lib = fs::read_to_string(root.join("lib.rs")).unwrap();
        for module in modules_imported_at_the_root(&lib, own) {
            found.push(format!("{dir}/src/lib.rs imports {module} whole"));
        }
        for file in rs_files(&root) {
            let text = fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if aliases_a_crate(line, own) {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "name the crate where the code crosses into it, not an alias:\n{}",
        found.join("\n")
    );
}
