//! The end of a run as the terminal shows it, held to reviewed snapshots
//! (tests/tests/e2e/snapshots; `cargo insta review` after a change that is meant): the demo,
//! a failed run and, in who.rs, a file of two users' runs. Figures, ids and paths are
//! masked and concurrent jobs put in order (`pipetrace_e2e::snapshot`): a snapshot holds
//! which sections show, in which order, with which rows and words.
use std::path::Path;

use pipetrace_e2e::{pipetrace, snapshot::normalize, stderr};

/// From the summary's first line (its findings', else the run's `run NAME ...`) to the
/// end: what pipetrace printed after the command's own output.
fn end_of(text: &str, run: &str) -> String {
    let head = format!("run {run} ");
    let line_starts = || (text.match_indices('\n')).map(|(i, _)| i + 1);
    let at = line_starts()
        .rfind(|&i| text[i..].starts_with(&head))
        .unwrap_or_else(|| panic!("no line `{head}...` in:\n{text}"));
    let findings = line_starts()
        .filter(|&i| i < at)
        .rfind(|&i| text[i..].starts_with("pipetrace: findings"));
    text[findings.unwrap_or(at)..].to_string()
}

/// pipetrace ARGS in `dir`, its history kept apart from other tests' (no "slower than
/// usual" from runs of theirs).
fn traced(dir: &Path, args: &[&str]) -> std::process::Output {
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    pipetrace()
        .args(args)
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
        .env_remove("PIPETRACE_LOG")
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_demos_end_fits_one_screen_and_holds_its_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    // The demo's jobs are shorter than diagnosis.min_wall on an idle machine, so they get
    // no bottleneck; on a loaded one they may not be: held to what an idle machine shows.
    let o = pipetrace()
        .args(["demo", "--dir", dir.to_str().unwrap()])
        .env("PIPETRACE_DIAGNOSIS__MIN_WALL", "1h")
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", tmp.path())
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let end = end_of(&stderr(&o), "demo");
    // One screen: the tree of 13 jobs, the table and the last lines, nothing else.
    assert!(
        end.lines().count() <= 60,
        "{} lines:\n{end}",
        end.lines().count()
    );
    insta::assert_snapshot!("demo", normalize(&end, &[tmp.path()]));
}

const FAILING: &str = "rule all:
    input: \"out/c.txt\"

rule a:
    output: \"out/a.txt\"
    shell: \"echo a > {output}\"

rule b:
    input: \"out/a.txt\"
    output: \"out/b.txt\"
    shell: \"cat {input} > {output}\"

rule c:
    input: \"out/b.txt\"
    output: \"out/c.txt\"
    shell: \"echo failing >&2; exit 3\"
";

#[test]
fn a_failed_runs_end_names_the_failure_and_holds_its_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("failing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Snakefile"), FAILING).unwrap();
    let o = traced(&dir, &["run", "--", "snakemake", "--cores", "1"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "Snakemake's own exit code: {}",
        stderr(&o)
    );
    let end = end_of(&stderr(&o), "failing");
    assert!(end.contains("task c exited with code 3"), "{end}");
    insta::assert_snapshot!("failed_run", normalize(&end, &[tmp.path()]));
}
