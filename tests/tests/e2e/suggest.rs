//! `pipetrace suggest` on a real Snakemake workflow: a rule whose memory request is its
//! limit (its shell puts itself in a memory cgroup of `mem_mb`, as a scheduler enforces a
//! request) is OOM-killed; a rule asks far more than it uses. The suggested profile is then
//! given to Snakemake 7, 8.30 and 9 (`--profile`), and each one's own log says what it
//! applied: the hungry rule's memory doubled and now enough, the lazy rule's threads and
//! memory down.
use std::path::Path;

use pipetrace_e2e::{nextflow, pipetrace, snakemake::newest_log, stderr, venv_program};

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

/// The run as `pipetrace run` kept it, named by its id as compare takes it: the same rules
/// (the kept summary holds no OOM kill, so only the figures speak).
fn by_its_id(trace: &Path, state: &Path) {
    let spans = pipetrace_e2e::read_jsonl(trace);
    let id = &spans
        .iter()
        .find(|s| s.is_run())
        .expect("a run span")
        .trace_id;
    let o = pipetrace()
        .args(["suggest", &id[..12], "--format", "json"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let task = |name: &str| {
        (rows.as_array().unwrap().iter())
            .find(|r| r["task"] == name)
            .unwrap_or_else(|| panic!("no {name} in {rows}"))
            .clone()
    };
    assert_eq!(task("lazy")["cpus"], 1, "{rows}");
    assert!(
        task("hungry")["memory_peak_max"].as_u64().unwrap() > 0,
        "{rows}"
    );
    // And from the pipeline's task history, by the name its history file has.
    let file = (std::fs::read_dir(state.join("history")).unwrap().flatten())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a history file");
    let name = file.file_stem().unwrap().to_str().unwrap();
    let o = pipetrace()
        .args(["suggest", "--pipeline", name, "--format", "json"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let from_history: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tasks: Vec<&str> = (from_history.as_array().unwrap().iter())
        .map(|r| r["task"].as_str().unwrap())
        .collect();
    assert!(
        tasks.contains(&"lazy") && tasks.contains(&"hungry"),
        "{from_history}"
    );
}

fn suggested_profile_is_applied_by(snakemake: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let cgroups = format!("{V1_MEMORY}/pipetrace-suggest-{}", std::process::id());
    std::fs::write(dir.path().join("Snakefile"), snakefile(&cgroups)).unwrap();
    let trace = dir.path().join("first.otlp.jsonl");
    let state = dir.path().join("state");
    let first = pipetrace()
        .args(["run", "--no-summary", "-o", trace.to_str().unwrap(), "--"])
        .arg(snakemake)
        .args(["--cores", "4", "--keep-going"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let why = stderr(&first);
    assert_eq!(first.status.code(), Some(1), "hungry is OOM-killed: {why}");
    by_its_id(&trace, &state);
    let log = std::fs::read_to_string(newest_log(dir.path())).unwrap();
    assert_eq!(threads(&job_block(&log, "lazy")), 4);
    // As the docs say it: the profile's folder need not exist yet.
    let profile = dir.path().join("profile");
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

/// Every process asks 4 CPUs and 2 GB (and every task starts at once).
const GENEROUS: &str =
    "executor {\n    cpus = 8\n}\nprocess {\n    cpus = 4\n    memory = '2 GB'\n}\n";
/// What Nextflow's trace file records of each task: what it was given.
const GIVEN: &str = "trace {\n    fields = 'process,name,status,cpus,memory,time'\n}\n";

/// Nextflow's trace file as rows of its header's fields.
fn nextflow_trace(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    (lines.map(|l| {
        head.iter()
            .map(|h| h.to_string())
            .zip(l.split('\t').map(String::from))
    }))
    .map(|row| row.collect())
    .collect()
}

#[test]
fn nextflow_applies_the_suggested_config_and_asks_less() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.nf"), nextflow::QC_PIPELINE).unwrap();
    std::fs::write(dir.path().join("nextflow.config"), GENEROUS).unwrap();
    std::fs::write(dir.path().join("given.config"), GIVEN).unwrap();
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").unwrap();
    let trace = dir.path().join("first.otlp.jsonl");
    let first = pipetrace()
        .args(["run", "--no-summary", "-o", trace.to_str().unwrap(), "--"])
        .arg(nextflow::launcher())
        .args([
            "run",
            "main.nf",
            "-c",
            "given.config",
            "-with-trace",
            "first.txt",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let asked = nextflow_trace(&dir.path().join("first.txt"));
    assert!(
        asked
            .iter()
            .all(|r| r["cpus"] == "4" && r["memory"] == "2 GB"),
        "{asked:?}"
    );
    let config = dir.path().join("suggested.config");
    let o = pipetrace()
        .args([
            "suggest",
            trace.to_str().unwrap(),
            "-o",
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Nextflow's own parser reads it, and the tasks get what it says.
    let again = std::process::Command::new(nextflow::launcher())
        .args([
            "run",
            "main.nf",
            "-c",
            "given.config",
            "-c",
            "suggested.config",
        ])
        .args(["-with-trace", "again.txt"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    let given = nextflow_trace(&dir.path().join("again.txt"));
    assert_eq!(given.len(), asked.len(), "{given:?}");
    let suggested = std::fs::read_to_string(&config).unwrap();
    for row in &given {
        assert_eq!(
            row["cpus"], "1",
            "a second of sleep and a sort: {row:?}\n{suggested}"
        );
        let mb: f64 = row["memory"]
            .trim_end_matches(" MB")
            .parse()
            .unwrap_or_else(|_| panic!("{row:?}"));
        assert!((64.0..2048.0).contains(&mb), "{row:?}\n{suggested}");
        assert_eq!(row["time"], "1m", "{row:?}");
    }
}

/// A tool that asks 2 CPUs and 2 GiB and says what cwltool gave it.
const TOOL: &str = r#"cwlVersion: v1.2
class: CommandLineTool
requirements:
  ResourceRequirement:
    coresMin: 2
    ramMin: 2048
inputs:
  text: File
baseCommand: [sh, -c]
arguments:
  - "PROGRAM $0 > /dev/null; echo $(runtime.cores) $(runtime.ram)"
  - $(inputs.text.path)
stdout: PROGRAM.txt
outputs:
  given: stdout
"#;

const WORKFLOW: &str = r#"cwlVersion: v1.2
class: Workflow
inputs:
  text: File
outputs:
  first: {type: File, outputSource: first/given}
  second: {type: File, outputSource: second/given}
steps:
  first:
    run: hash.cwl
    in: {text: text}
    out: [given]
  second:
    run: count.cwl
    in: {text: text}
    out: [given]
"#;

/// What each step's tool printed: the cores and RAM cwltool gave it.
fn cwl_given(outdir: &Path) -> Vec<(u64, u64)> {
    let mut given: Vec<(u64, u64)> = (std::fs::read_dir(outdir).unwrap().flatten())
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .map(|t| {
            let f: Vec<u64> = t.split_whitespace().map(|w| w.parse().unwrap()).collect();
            (f[0], f[1])
        })
        .collect();
    given.sort();
    given
}

#[test]
fn cwltool_applies_the_suggested_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("hash.cwl"), TOOL.replace("PROGRAM", "sha256sum")).unwrap();
    let count = TOOL
        .replace("PROGRAM $0", "wc -l $0")
        .replace("PROGRAM", "wc");
    std::fs::write(d.join("count.cwl"), count).unwrap();
    std::fs::write(d.join("wf.cwl"), WORKFLOW).unwrap();
    std::fs::write(d.join("in.txt"), "pear\napple\n").unwrap();
    std::fs::write(d.join("job.yml"), "text: {class: File, path: in.txt}\n").unwrap();
    let trace = d.join("t.otlp.jsonl");
    let first = pipetrace()
        .args(["run", "--no-summary", "-o", trace.to_str().unwrap(), "--"])
        .args([
            "cwltool",
            "--no-container",
            "--outdir",
            "first",
            "wf.cwl",
            "job.yml",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(cwl_given(&d.join("first")), [(2, 2048), (2, 2048)]);
    // What each step asked for (its ResourceRequirement), on its span, as cwltool gave it:
    // 2 cores and 2048 MiB.
    let spans = pipetrace_e2e::read_jsonl(&trace);
    let tasks: Vec<_> = spans.iter().filter(|s| s.is_task()).collect();
    assert_eq!(tasks.len(), 2, "{spans:?}");
    for t in tasks {
        assert_eq!(
            t.str("pipetrace.cpu.allocation_source"),
            "engine.threads",
            "{}",
            t.name
        );
        assert_eq!(t.num("pipetrace.cpu.allocated"), Some(2.0), "{}", t.name);
        assert_eq!(
            t.int("pipetrace.memory.limit"),
            Some(2048 << 20),
            "{}",
            t.name
        );
    }
    let o = pipetrace()
        .args([
            "suggest",
            trace.to_str().unwrap(),
            "--cwl-workflow",
            "wf.cwl",
            "-o",
            "ov.yml",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let overrides = std::fs::read_to_string(d.join("ov.yml")).unwrap();
    let again = std::process::Command::new("cwltool")
        .args([
            "--no-container",
            "--overrides",
            "ov.yml",
            "--outdir",
            "again",
            "wf.cwl",
            "job.yml",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // A hash and a line count of two lines: one CPU and the least memory pipetrace asks.
    assert_eq!(
        cwl_given(&d.join("again")),
        [(1, 64), (1, 64)],
        "{overrides}"
    );
}
