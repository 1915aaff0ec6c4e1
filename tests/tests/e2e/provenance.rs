//! `pipetrace provenance`: the demo Snakemake pipeline traced with its files, its crate
//! judged by the RO-Crate community's validator (roc-validator) at the Provenance Run Crate
//! profile, REQUIRED and RECOMMENDED, and its file lists by Snakemake's own records of each
//! job: every declared input and output under its task, every other file a task read marked
//! undeclared, sizes and digests as the files are. Likewise a CWL workflow under cwltool,
//! judged by the workflow's declared inputs and outputs and cwltool's report of them.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use pipetrace_e2e::{cwl_workflow, demo_pipeline, pipetrace, snakemake, stderr, venv_program};
use serde_json::Value;

const FILES_ON: (&str, &str) = ("PIPETRACE_FILES__ENABLED", "true");
const CONTEXT: &str = "https://w3id.org/ro/crate/1.1/context";
/// The pipetrace term the crate marks undeclared reads with (its @context names it).
const UNDECLARED_INPUT: &str = "undeclaredInput";

/// The one check of the profiles a crate of a local run cannot meet whole: every
/// SoftwareSourceCode, ComputationalWorkflow and SoftwareApplication with an `http` id. The
/// main workflow must be a file inside the crate (Workflow RO-Crate's MUST, whose check reads
/// it there), so its id is relative and resolves to `file://./Snakefile`; each step's tool
/// (`#tool-align`) is described inside the crate likewise. Programs meet it: their
/// package's page is their id. The check runs; only those ids may fail it.
const WEB_ID: &str = "process-run-crate-0.5_5.1";

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/rocrate")
        .join(name)
}

/// roc-validator's verdict on the crate in `dir` at `profile`, REQUIRED and RECOMMENDED
/// checks, as its JSON report.
fn validate(dir: &Path, profile: &str) -> Value {
    let python = venv_program("rocrate", "python");
    let validator = venv_program("rocrate", "rocrate-validator");
    let cache = tempfile::tempdir().unwrap();
    let seeded = Command::new(&python)
        .arg(data("seed_cache.py"))
        .arg(cache.path())
        .arg(CONTEXT)
        .arg(data("ro-crate-1.1-context.jsonld"))
        .output()
        .unwrap();
    assert!(seeded.status.success(), "seeding: {}", stderr(&seeded));
    let report = cache.path().join("report.json");
    let o = Command::new(&validator)
        .args(["validate", "--no-paging", "--offline", "--cache-path"])
        .arg(cache.path().join("http_cache"))
        .args(["-p", profile, "-l", "recommended", "-f", "json", "-o"])
        .arg(&report)
        .arg(dir)
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(&o)
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn assert_valid(report: &Value, profile: &str, dir: &Path) {
    // The validator resolves the crate's relative ids against its folder.
    let base = format!("file://{}/", dir.display());
    let in_crate = |i: &Value| {
        let id = i["violatingPropertyValue"].as_str().unwrap_or("");
        i["check"]["identifier"] == WEB_ID && (id.starts_with(&base) || id.starts_with("file://./"))
    };
    let all = report["issues"].as_array().into_iter().flatten();
    let mut web_ids = 0;
    let issues: Vec<String> = all
        .filter(|i| {
            web_ids += usize::from(in_crate(i));
            !in_crate(i)
        })
        .map(|i| {
            format!(
                "{} {} {} {}: {}",
                i["severity"],
                i["check"]["identifier"],
                i["violatingEntity"],
                i["violatingPropertyValue"],
                i["message"]
            )
        })
        .collect();
    assert!(
        issues.is_empty(),
        "{profile}: {} issues:\n{}",
        issues.len(),
        issues.join("\n")
    );
    assert!(web_ids >= 1, "the main workflow's id is the crate's own");
    let stats = &report["statistics"];
    assert!(
        stats["total_passed_checks"].as_u64().unwrap() > 50,
        "the checks ran: {stats}"
    );
    let profiles = stats["profiles"].to_string();
    assert!(profiles.contains(profile), "{profiles}");
}

fn graph(json: &Value) -> BTreeMap<String, Value> {
    (json["@graph"].as_array().unwrap().iter())
        .map(|n| (n["@id"].as_str().unwrap().to_string(), n.clone()))
        .collect()
}

fn ids(node: &Value, key: &str) -> BTreeSet<String> {
    match &node[key] {
        Value::Array(v) => (v.iter())
            .filter_map(|x| x["@id"].as_str().map(String::from))
            .collect(),
        Value::Object(o) => o["@id"].as_str().map(String::from).into_iter().collect(),
        _ => BTreeSet::new(),
    }
}

fn is(node: &Value, ty: &str) -> bool {
    match &node["@type"] {
        Value::Array(v) => v.iter().any(|t| t == ty),
        t => t == ty,
    }
}

fn sha256sum(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    text.split_whitespace().next().unwrap().to_string()
}

/// `command` under `pipetrace run` in `dir`, with files on: its trace file and output.
fn traced(dir: &Path, command: &[&str]) -> (std::path::PathBuf, std::process::Output) {
    let trace = dir.join("t.otlp.jsonl");
    let o = pipetrace()
        .env(FILES_ON.0, FILES_ON.1)
        .current_dir(dir)
        .args(["run", "--no-summary", "-o"])
        .arg(&trace)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    (trace, o)
}

#[test]
fn the_demos_crate_validates_as_a_provenance_run_crate_and_lists_snakemakes_files() {
    let dir = demo_pipeline();
    let (trace, o) = traced(dir.path(), &["snakemake", "--cores", "2"]);
    assert!(o.status.success(), "the demo ran: {}", stderr(&o));
    let o = pipetrace()
        .arg("provenance")
        .arg(&trace)
        .args(["--hash", "--publisher", "Example Lab"])
        .args(["--publisher-url", "https://lab.example"])
        .output()
        .unwrap();
    assert!(o.status.success(), "provenance: {}", stderr(&o));
    let path = dir.path().join("ro-crate-metadata.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let g = graph(&json);

    let report = validate(dir.path(), "provenance-run-crate");
    assert_valid(&report, "provenance-run-crate-0.5", dir.path());

    // Each job Snakemake recorded: its task's action has its inputs and outputs.
    let jobs = snakemake::metadata(dir.path());
    assert!(jobs.len() >= 10, "Snakemake recorded the demo's jobs");
    let tasks: Vec<&Value> = (g.values())
        .filter(|n| is(n, "CreateAction") && n["@id"] != "#run")
        .collect();
    for (output, record) in &jobs {
        let rule = record["rule"].as_str().unwrap();
        let declared: BTreeSet<String> = (record["input"].as_array().into_iter().flatten())
            .filter_map(|i| i.as_str().map(String::from))
            .collect();
        let action = (tasks.iter())
            .find(|t| ids(t, "result").contains(output))
            .unwrap_or_else(|| panic!("no task's result holds {output} ({rule})"));
        let name = action["name"].as_str().unwrap();
        assert!(
            name.starts_with(rule),
            "{output} made by {name}, not {rule}"
        );
        let inputs = ids(action, "object");
        let undeclared = ids(action, UNDECLARED_INPUT);
        for i in &declared {
            assert!(inputs.contains(i), "{name}: declared input {i} missing");
            assert!(!undeclared.contains(i), "{name}: {i} is declared");
        }
        for i in inputs
            .iter()
            .filter(|i| g.get(*i).is_some_and(|n| is(n, "File")))
        {
            assert_eq!(
                undeclared.contains(i),
                !declared.contains(i),
                "{name}: {i} is {}declared",
                if declared.contains(i) { "" } else { "un" }
            );
        }
        // The step the action ran, and its control action.
        let control = (g.values())
            .find(|n| {
                is(n, "ControlAction") && ids(n, "object").contains(action["@id"].as_str().unwrap())
            })
            .unwrap_or_else(|| panic!("no ControlAction over {name}"));
        let step = ids(control, "instrument").into_iter().next().unwrap();
        assert_eq!(g[&step]["name"], rule);
    }
    // The scripts the rules run are no declared input of any job: read, and marked so.
    let reference = (tasks.iter())
        .find(|t| ids(t, "result").contains("ref/genome.fa"))
        .unwrap();
    assert!(
        ids(reference, UNDECLARED_INPUT).contains("scripts/make_reference.py"),
        "{reference}"
    );

    // Sizes and digests are the files' as they are; nothing of their contents is there.
    let mut files = 0;
    for (id, node) in g
        .iter()
        .filter(|(id, n)| is(n, "File") && *id != "README.md")
    {
        let file = dir.path().join(id);
        let size = std::fs::metadata(&file).unwrap().len();
        assert_eq!(node["contentSize"], size.to_string(), "{id}");
        assert_eq!(node["sha256"], sha256sum(&file), "{id}");
        files += 1;
    }
    assert!(files > 20, "{files} files");
    let read = std::fs::read_to_string(dir.path().join("reads/A.fq")).unwrap();
    let first_read = read.lines().nth(1).unwrap();
    assert!(
        !text.contains(first_read),
        "a read's bases are in the crate"
    );

    // The programs, with the versions Debian's packages give.
    let bwa = (g.values())
        .find(|n| is(n, "SoftwareApplication") && n["identifier"] == "/usr/bin/bwa")
        .expect("bwa as a SoftwareApplication");
    let dpkg = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "bwa"])
        .output()
        .unwrap();
    assert_eq!(
        bwa["softwareVersion"],
        String::from_utf8_lossy(&dpkg.stdout).as_ref()
    );
}

#[test]
fn a_cwl_runs_crate_validates_and_puts_the_declared_files_under_their_steps() {
    let dir = cwl_workflow();
    let command = [
        "cwltool",
        "--no-container",
        "--outdir",
        "results",
        "wf.cwl",
        "job.yml",
    ];
    let (trace, o) = traced(dir.path(), &command);
    assert!(o.status.success(), "cwltool ran: {}", stderr(&o));
    // cwltool's report of the workflow's outputs, as it printed it.
    let outputs: Value = serde_json::from_slice(&o.stdout).unwrap();
    let counted = outputs["counted"]["path"].as_str().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let counted = Path::new(counted).strip_prefix(&root).unwrap();
    let counted = counted.to_str().unwrap().to_string();
    std::fs::write(dir.path().join("outputs.json"), &o.stdout).unwrap();
    let o = pipetrace()
        .arg("provenance")
        .arg(&trace)
        .arg("--cwl-outputs")
        .arg(dir.path().join("outputs.json"))
        .args(["--hash", "--publisher", "Example Lab"])
        .args(["--publisher-url", "https://lab.example"])
        .output()
        .unwrap();
    assert!(o.status.success(), "provenance: {}", stderr(&o));
    let text = std::fs::read_to_string(dir.path().join("ro-crate-metadata.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let g = graph(&json);

    let report = validate(dir.path(), "provenance-run-crate");
    assert_valid(&report, "provenance-run-crate-0.5", dir.path());

    let wf = &g["wf.cwl"];
    assert_eq!(ids(wf, "programmingLanguage").len(), 1);
    let lang = ids(wf, "programmingLanguage").into_iter().next().unwrap();
    assert_eq!(g[&lang]["name"], "Common Workflow Language");
    // The workflow's input (the job's `text`) and output (cwltool's `counted`).
    let run = &g["#run"];
    assert!(ids(run, "object").contains("in.txt"), "{run}");
    assert!(ids(run, "result").contains(&counted), "{run}");
    // Under the steps the workflow connects them to: `text` into sort, count's out.
    let action_of = |step: &str| -> &Value {
        let control = (g.values())
            .find(|n| {
                is(n, "ControlAction") && ids(n, "instrument").iter().any(|s| g[s]["name"] == step)
            })
            .unwrap_or_else(|| panic!("no ControlAction of step {step}"));
        &g[ids(control, "object").iter().next().unwrap()]
    };
    let sort = action_of("sort");
    assert!(ids(sort, "object").contains("in.txt"), "{sort}");
    assert!(!ids(sort, UNDECLARED_INPUT).contains("in.txt"), "{sort}");
    let count = action_of("count");
    assert!(ids(count, "result").contains(&counted), "{count}");
    // Sort's output, which count took, kept by cwltool in a temporary directory only.
    let between = "#gone:sort/out";
    assert!(ids(sort, "result").contains(between), "{sort}");
    assert!(ids(count, "object").contains(between), "{count}");
    let size = std::fs::metadata(dir.path().join(&counted)).unwrap().len();
    assert_eq!(g[&counted]["contentSize"], size.to_string());
    assert_eq!(g[&counted]["sha256"], sha256sum(&dir.path().join(&counted)));
    assert!(
        !text.contains("apple"),
        "in.txt's contents are in the crate"
    );
}
