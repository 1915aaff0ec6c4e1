//! docs/architecture.md's tables that describe code, held to the code they describe: the
//! workspace's crates (Cargo.toml's members), the engine entry's fields (`Engine` in
//! core/src/attribution/engines/mod.rs) and the questions an engine's run is asked
//! (`EngineRun` in core/src/attribution/engines/run.rs, with how many are required). A
//! crate, a field or a question added or gone fails here until the page says so.
use std::{collections::BTreeSet, fs, path::Path};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The rows of the page's table whose header row starts `| {first} |`: each row's cells.
fn table(page: &str, first: &str) -> Vec<Vec<String>> {
    let header = format!("| {first} |");
    let mut lines = page.lines().skip_while(|l| !l.starts_with(&header)).skip(2);
    let mut rows = Vec::new();
    for l in lines.by_ref().take_while(|l| l.starts_with('|')) {
        rows.push(l.split('|').skip(1).map(|c| c.trim().to_string()).collect());
    }
    assert!(
        !rows.is_empty(),
        "docs/architecture.md has no table `{header}`"
    );
    rows
}

/// The `code` names of a cell, each up to its first `(`.
fn names(cell: &str) -> BTreeSet<String> {
    (cell.split('`').skip(1).step_by(2))
        .map(|n| n.split('(').next().unwrap_or(n).trim().to_string())
        .collect()
}

/// A block of `source` from the line starting `start` to the first line that is `}`.
fn block<'a>(source: &'a str, start: &str) -> Vec<&'a str> {
    (source.lines())
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| *l != "}")
        .collect()
}

#[test]
fn the_workspace_table_lists_every_member_crate() {
    let manifest = read("Cargo.toml");
    let members: BTreeSet<String> = (block(&manifest, "members = [").iter().skip(1))
        .take_while(|l| !l.starts_with(']'))
        .map(|l| l.trim().trim_matches(|c| c == '"' || c == ',').to_string())
        .collect();
    let page = read("docs/architecture.md");
    let dirs: BTreeSet<String> = (table(&page, "crate").iter())
        .flat_map(|row| names(&row[1]))
        .collect();
    assert_eq!(dirs, members, "docs/architecture.md's workspace table");
}

#[test]
fn the_engine_table_lists_every_field_of_an_engine_entry() {
    let source = read("core/src/attribution/engines/mod.rs");
    let fields: BTreeSet<String> = (block(&source, "pub struct Engine {").iter())
        .filter_map(|l| l.strip_prefix("    pub "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect();
    assert!(fields.len() >= 9, "{fields:?}");
    let page = read("docs/architecture.md");
    let documented: BTreeSet<String> = (table(&page, "field").iter())
        .flat_map(|row| names(&row[0]))
        .collect();
    assert_eq!(documented, fields, "docs/architecture.md's engine fields");
}

#[test]
fn the_engine_run_tables_list_every_question_and_say_how_many_are_required() {
    let source = read("core/src/attribution/engines/run.rs");
    let trait_ = block(&source, "pub trait EngineRun");
    let methods: Vec<(String, bool)> = (trait_.iter())
        .filter_map(|l| l.strip_prefix("    fn "))
        .map(|l| {
            let name = l.split('(').next().unwrap_or(l).to_string();
            // A question with no default ends its signature with `;`.
            (name, l.trim_end().ends_with(';'))
        })
        .collect();
    let page = read("docs/architecture.md");
    let asked: BTreeSet<String> = (table(&page, "asked").iter())
        .flat_map(|row| names(&row[0]))
        .collect();
    let accessors: BTreeSet<String> = (table(&page, "capability (accessor)").iter())
        .flat_map(|row| names(&row[0]))
        .collect();
    let all: BTreeSet<String> = methods.iter().map(|(m, _)| m.clone()).collect();
    let shown: BTreeSet<String> = asked.union(&accessors).cloned().collect();
    // The capability column names the trait beside its accessor: only the accessors count.
    let shown: BTreeSet<String> = shown.intersection(&all).cloned().collect();
    assert_eq!(shown, all, "docs/architecture.md's questions");
    assert_eq!(
        asked.intersection(&all).count(),
        asked.len(),
        "every question the page names is asked: {asked:?}"
    );
    let required = methods.iter().filter(|(_, r)| *r).count();
    let defaults = asked.len() - required;
    let words = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    let said = format!(
        "{} questions are required",
        words.get(required).copied().unwrap_or("many")
    );
    let flat = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&said), "the page should say `{said}`");
    let said = format!(
        "{} have defaults",
        words.get(defaults).copied().unwrap_or("many")
    );
    assert!(flat.contains(&said), "the page should say `{said}`");
}
