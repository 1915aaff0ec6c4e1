//! docs/architecture.md's tables that describe code are made from the code: the workspace's
//! crates (Cargo.toml's members and each crate root's doc), the probes' hooks (their program
//! attributes and file docs), the engine entry's fields and the questions an engine's run is
//! asked (their doc comments), and the files that touch the machine (what their code calls).
//! This test fails when the page is not what the code makes; `make docs` writes it
//! (PIPETRACE_WRITE_DOCS=1 runs this test as the writer).
#[path = "architecture_docs/source.rs"]
mod source;
#[path = "architecture_docs/tables.rs"]
mod tables;

const PAGE: &str = "docs/architecture.md";

/// Each generated part of the page: its name in the markers, and what the code makes of it.
fn parts() -> Vec<(&'static str, String)> {
    vec![
        ("workspace", tables::workspace()),
        ("hooks", tables::hooks()),
        ("engine fields", tables::engine_fields()),
        ("engine questions", tables::engine_questions()),
        ("machine", tables::machine()),
    ]
}

fn begin(name: &str) -> String {
    format!(
        "<!-- made from the code by collector/tests/architecture_docs.rs (make docs): {name} -->"
    )
}

fn end(name: &str) -> String {
    format!("<!-- end of {name} -->")
}

/// `page` with each part between its markers replaced by `parts`.
fn render(page: &str, parts: &[(&str, String)]) -> String {
    let mut out = page.to_string();
    for (name, text) in parts {
        let (b, e) = (begin(name), end(name));
        let from = out
            .find(&b)
            .unwrap_or_else(|| panic!("{PAGE} has no line `{b}`"))
            + b.len();
        let to = from
            + out[from..]
                .find(&e)
                .unwrap_or_else(|| panic!("{PAGE} has no `{e}`"));
        out.replace_range(from..to, &format!("\n{text}"));
    }
    out
}

#[test]
fn docs_architecture_md_tables_are_made_from_the_code() {
    let page = source::read(PAGE);
    let made = render(&page, &parts());
    if std::env::var_os("PIPETRACE_WRITE_DOCS").is_some() {
        std::fs::write(source::root().join(PAGE), &made).unwrap();
        return;
    }
    if made != page {
        let diff: Vec<String> = (made.lines().zip(page.lines()))
            .filter(|(a, b)| a != b)
            .take(3)
            .map(|(a, b)| format!("  code: {a}\n  page: {b}"))
            .collect();
        panic!(
            "{PAGE} is stale: run `make docs`. First lines that differ:\n{}",
            diff.join("\n")
        );
    }
}

#[test]
fn the_tables_read_what_they_must() {
    // The readings above are only as good as what they find.
    let ws = tables::workspace();
    assert!(ws.contains("| `pipetrace-core` | `core` |"), "{ws}");
    let hooks = tables::hooks();
    for h in [
        "tp_btf/sched_process_exec",
        "tracepoint/syscalls/sys_exit_openat",
    ] {
        assert!(hooks.contains(&format!("`{h}`")), "{hooks}");
    }
    let fields = tables::engine_fields();
    assert!(fields.contains("| `recognises(tool, image)` |"), "{fields}");
    assert!(
        fields.contains("| optional: `python_package` |"),
        "{fields}"
    );
    let q = tables::engine_questions();
    assert!(q.contains("| `classify(p, image, place)` |"), "{q}");
    assert!(q.contains("| `MultiNode` (`multi_node`) |"), "{q}");
    assert!(q.contains("`snakemake`"), "{q}");
    let m = tables::machine();
    for f in [
        "host/src/live.rs",
        "export/src/export/otlp/client.rs",
        "collector/src/cli/stop.rs",
    ] {
        assert!(m.contains(&format!("| `{f}` |")), "{m}");
    }
    assert!(
        !m.contains("core/src/tree"),
        "the core touches nothing: {m}"
    );
}
