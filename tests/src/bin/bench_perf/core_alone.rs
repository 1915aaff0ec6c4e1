//! The agent's core alone (`cargo bench -p pipetrace --features fake-host --bench core`):
//! its CPU per process over a synthetic storm, without the kernel or the wall clock, beside
//! what the whole agent takes in a real one.
use std::{path::Path, process::Command};

use super::Doc;

pub fn row(doc: &mut Doc, n: usize) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["bench", "-q", "-p", "pipetrace", "--features", "fake-host"])
        .args(["--bench", "core", "--", &n.to_string(), "5"])
        .current_dir(workspace)
        .output();
    let figure = "agent core CPU per process, synthetic storm";
    let how = format!(
        "the core alone (tree, attribution, span building, trace file) fed a {n}-process \
         storm's records on a fake host in batches of what the agent reads at a time (a drain \
         tick of a storm of about 1,000 a second), 5 rounds (`cargo bench -p \
         pipetrace --features fake-host --bench core`): the rest of the agent's CPU per \
         process is reading the ring buffer, the wake-ups and the kernel's side of the writes"
    );
    let text = match &out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("no output");
            return doc.row(figure, &format!("not measured: {last}"), &how);
        }
        Err(e) => return doc.row(figure, &format!("not measured: cargo: {e}"), &how),
    };
    // "min X us, median Y us (...)"
    let line = text.lines().find(|l| l.starts_with("min ")).unwrap_or("");
    let value = line.split(" (").next().unwrap_or("").replace(" us", " µs");
    doc.row(figure, &value, &how);
}
