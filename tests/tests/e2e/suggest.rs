//! `pipetrace suggest` on a real Snakemake workflow: a rule whose memory request is its
//! limit (its shell puts itself in a memory cgroup of `mem_mb`, as a scheduler enforces a
//! request) is OOM-killed; a rule asks far more than it uses. The suggested profile is then
//! given to Snakemake 7, 8.30 and 9 (`--profile`), and each one's own log says what it
//! applied: the hungry rule's memory doubled and now enough, the lazy rule's threads and
//! memory down.
use std::path::Path;

use pipetrace_e2e::{pipetrace, snakemake::newest_log, stderr, venv_program};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";

/// `hungry` needs 72 MiB and asks 48; `lazy` asks 4 threads and 4 GiB, and uses one CPU
/// for a moment and a few MiB.
fn snakefile(cgroups: &str) -> String {
    format!(
        r#"rule all:
    input: "hungry.done", "lazy.done"

rule hungry:
    output: "hungry.done"
    resources: mem_mb=48
    shell:
        "cg={cgroups}-$$ && mkdir -p $cg && "
        "echo $(({{resources.mem_mb}} * 1048576)) > $cg/memory.limit_in_bytes && "
        "echo $$ > $cg/cgroup.procs && {WORKLOAD} alloc 72 && touch {{output}}"

rule lazy:
    output: "lazy.done"
    threads: 4
    resources: mem_mb=4096
    shell: "{WORKLOAD} burn 300 && touch {{output}}"
"#
    )
}

/// Snakemake's log lines of `rule`'s job: its block from `rule NAME:` to the next blank line.
fn job_block(log: &str, rule: &str) -> String {
    let head = format!("rule {rule}:");
    let at = log
        .rfind(&head)
        .unwrap_or_else(|| panic!("no job of {rule} in:\n{log}"));
    log[at..].split("\n\n").next().unwrap().to_string()
}

fn resource(block: &str, name: &str) -> Option<u64> {
    let line = block
        .lines()
        .find(|l| l.trim_start().starts_with("resources:"))?;
    let value = line
        .split([',', ':'])
        .map(str::trim)
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))?;
    value.parse().ok()
}

/// `threads:` is printed only above one.
fn threads(block: &str) -> u64 {
    (block.lines())
        .find_map(|l| l.trim_start().strip_prefix("threads: "))
        .map_or(1, |t| t.trim().parse().unwrap())
}

fn snakemake_in(dir: &Path, snakemake: &Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(snakemake)
        .args(["--cores", "4", "--keep-going"])
        .args(extra)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn suggested_profile_is_applied_by(snakemake: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let cgroups = format!("{V1_MEMORY}/pipetrace-suggest-{}", std::process::id());
    std::fs::write(dir.path().join("Snakefile"), snakefile(&cgroups)).unwrap();
    let trace = dir.path().join("first.otlp.jsonl");
    let first = pipetrace()
        .args(["run", "--no-summary", "-o", trace.to_str().unwrap(), "--"])
        .arg(snakemake)
        .args(["--cores", "4", "--keep-going"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        first.status.code(),
        Some(1),
        "hungry is OOM-killed: {}",
        stderr(&first)
    );
    let log = std::fs::read_to_string(newest_log(dir.path())).unwrap();
    assert_eq!(threads(&job_block(&log, "lazy")), 4);
    let profile = dir.path().join("profile");
    std::fs::create_dir(&profile).unwrap();
    let o = pipetrace()
        .args(["suggest", trace.to_str().unwrap(), "-o"])
        .arg(profile.join("config.yaml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let profile_arg = ["--forceall", "--profile", profile.to_str().unwrap()];
    let again = snakemake_in(dir.path(), snakemake, &profile_arg);
    let text = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "with the suggested profile: {text}");
    let log = std::fs::read_to_string(newest_log(dir.path())).unwrap();
    let hungry = job_block(&log, "hungry");
    let mem = resource(&hungry, "mem_mb").unwrap_or_else(|| panic!("{hungry}"));
    assert!(
        mem >= 96,
        "the OOM-killed rule asks at least twice its 48: {hungry}"
    );
    let lazy = job_block(&log, "lazy");
    assert_eq!(threads(&lazy), 1, "one CPU used at most: {lazy}");
    let lazy_mem = resource(&lazy, "mem_mb").unwrap_or_else(|| panic!("{lazy}"));
    assert!((64..4096).contains(&lazy_mem), "{lazy}");
    for d in std::fs::read_dir(V1_MEMORY).unwrap().flatten() {
        if d.path().to_string_lossy().starts_with(&cgroups) {
            let _ = std::fs::remove_dir(d.path());
        }
    }
}

#[test]
fn snakemake_7_applies_the_suggested_profile_and_the_oom_is_gone() {
    suggested_profile_is_applied_by(Path::new("/usr/bin/snakemake"));
}

#[test]
fn snakemake_8_applies_the_suggested_profile() {
    suggested_profile_is_applied_by(&venv_program("snakemake8", "snakemake"));
}

#[test]
fn snakemake_9_applies_the_suggested_profile() {
    suggested_profile_is_applied_by(&venv_program("snakemake9", "snakemake"));
}
