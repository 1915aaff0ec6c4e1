//! Files touched (`files.enabled`): a real variant-calling pipeline (the corpus's varcall:
//! FASTQ -> BAM -> calls) on Snakemake 7 and 9 under `pipetrace run`, judged by Snakemake's
//! own metadata, which records each job's rule, inputs, output and command; and the bounds,
//! the default and the filters on commands of our own.
use std::{collections::BTreeSet, path::Path};

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl,
    receiver::Receiver,
    snakemake::{self, Version, corpus},
    spans::{RecvSpan, Trace, Val},
    stderr,
};
use pipetrace_semconv::attr;

const ON: (&str, &str) = ("PIPETRACE_FILES__ENABLED", "true");

/// One job as Snakemake's metadata records it: rule, an output, its inputs.
struct Job {
    rule: String,
    output: String,
    inputs: Vec<String>,
}

fn metadata(workdir: &Path) -> Vec<Job> {
    let jobs: Vec<Job> = (snakemake::metadata(workdir).into_iter())
        .map(|(output, json)| Job {
            rule: json["rule"].as_str().unwrap().to_string(),
            output,
            inputs: (json["input"].as_array().into_iter().flatten())
                .filter_map(|i| i.as_str().map(String::from))
                .collect(),
        })
        .collect();
    assert!(!jobs.is_empty(), "Snakemake recorded its jobs");
    jobs
}

fn list(s: &RecvSpan, key: &str) -> Vec<String> {
    match s.attr(key) {
        Some(Val::List(v)) => v.iter().map(|x| x.str().to_string()).collect(),
        _ => Vec::new(),
    }
}

/// A path as the span names it, relative to the workflow's directory.
fn relative(path: &str, workdir: &Path) -> String {
    let root = format!("{}/", workdir.display());
    path.strip_prefix(&root).unwrap_or(path).to_string()
}

/// Every output of every job is among its task's outputs and was written by a tool under
/// that task; its inputs show the lineage Snakemake records and no other; nothing of the
/// system or of Snakemake's bookkeeping is listed.
fn judge(workdir: &Path, spans: &[RecvSpan]) {
    let trace = Trace::new(spans);
    let jobs = metadata(workdir);
    for job in &jobs {
        let tasks: Vec<&RecvSpan> = (trace.tasks().into_iter())
            .filter(|t| t.str(attr::CICD_PIPELINE_TASK_NAME) == job.rule)
            .filter(|t| {
                let outs = list(t, attr::TASK_OUTPUTS);
                outs.iter().any(|o| relative(o, workdir) == job.output)
            })
            .collect();
        assert_eq!(tasks.len(), 1, "one {} task wrote {}", job.rule, job.output);
        let task = tasks[0];
        let tools: Vec<&RecvSpan> = (trace.tools().into_iter())
            .filter(|t| trace.task_of(t).is_some_and(|k| k.span_id == task.span_id))
            .collect();
        // Each input on the tool that read it (the FASTQ on bwa, the BAM on samtools).
        for input in list(task, attr::TASK_INPUTS) {
            let on_tool = (tools.iter()).any(|t| list(t, attr::FILES_READ).contains(&input));
            assert!(on_tool, "{}: which tool read {input}?", task.name);
        }
        let writer = (tools.iter()).find(|t| {
            list(t, attr::FILES_WRITTEN)
                .iter()
                .any(|w| relative(w, workdir) == job.output)
        });
        // A shell builtin's redirection (`printf ... > out`) is the task's own process.
        let own = task.str(attr::PROCESS_COMMAND_LINE).contains(&job.output);
        assert!(
            writer.is_some() || own,
            "a tool of {} wrote {}",
            task.name,
            job.output
        );
        let inputs: BTreeSet<String> = (list(task, attr::TASK_INPUTS).iter())
            .map(|p| relative(p, workdir))
            .collect();
        // What the tools opened is the truth of what was read (`samtools stats --reference`
        // never opens a reference its reads do not need): at least one of the job's inputs
        // was read (or, for a reference named by its index's prefix as `bwa mem ref.fa`
        // names it, files named after it), and no file another job made is an input unless
        // Snakemake says this job takes it.
        let named = |i: &String| {
            inputs
                .iter()
                .any(|p| p == i || p.starts_with(&format!("{i}.")))
        };
        if !job.inputs.is_empty() {
            assert!(
                job.inputs.iter().any(named),
                "{}: none of {:?} in {inputs:?}",
                task.name,
                job.inputs
            );
        }
        for made in jobs
            .iter()
            .map(|j| &j.output)
            .filter(|o| inputs.contains(*o))
        {
            assert!(
                job.inputs.contains(made),
                "{}: reads {made}, not its input",
                task.name
            );
        }
    }
    for s in spans {
        for key in [
            attr::TASK_INPUTS,
            attr::TASK_OUTPUTS,
            attr::FILES_READ,
            attr::FILES_WRITTEN,
        ] {
            for p in list(s, key) {
                let system = p.starts_with("/usr/")
                    || p.starts_with("/proc/")
                    || (p.ends_with(".so") || p.contains(".so."));
                assert!(
                    !system && !p.contains(".snakemake/"),
                    "{}: {key} lists {p}",
                    s.name
                );
            }
        }
    }
}

/// A fresh copy of the corpus's variant-calling workflow, and how it is run.
fn varcall() -> (tempfile::TempDir, Vec<String>) {
    let case = (corpus().into_iter())
        .find(|c| c.name == "varcall")
        .expect("the corpus has the variant-calling workflow");
    (case.copy(), case.runs[0].args.clone())
}

fn varcall_under_run(v: Version) {
    let (dir, args) = varcall();
    let file = dir.path().join("trace.otlp.jsonl");
    let out = pipetrace()
        .env(ON.0, ON.1)
        .args(["run", "--output"])
        .arg(&file)
        .arg("--")
        .arg(v.program())
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    judge(dir.path(), &read_jsonl(&file));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_agent_names_each_tasks_files_alike() {
    let rx = Receiver::start().await;
    let agent = Agent::start_with(&["--endpoint", &rx.grpc_url()], &[ON]);
    let (dir, args) = varcall();
    let status = std::process::Command::new(Version::Nine.program())
        .args(&args)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // The run is named by its directory.
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let spans = rx
        .run_trace(&name, std::time::Duration::from_secs(30))
        .await;
    agent.stop();
    judge(dir.path(), &spans);
}

#[test]
fn a_variant_calling_pipelines_tasks_name_their_inputs_and_outputs_on_snakemake_7() {
    varcall_under_run(Version::Seven);
}

#[test]
fn a_variant_calling_pipelines_tasks_name_their_inputs_and_outputs_on_snakemake_9() {
    varcall_under_run(Version::Nine);
}

/// `pipetrace run -- bash -c SCRIPT` in `dir` with extra settings: its spans.
fn run_in(dir: &Path, script: &str, env: &[(&str, &str)]) -> Vec<RecvSpan> {
    let file = dir.join("t.otlp.jsonl");
    let out = pipetrace()
        .envs(env.iter().copied())
        .args(["run", "--output"])
        .arg(&file)
        .args(["--", "bash", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    read_jsonl(&file)
}

const SCRIPT: &str = "printf 'a\\nb\\n' > in.txt; sort in.txt > sorted.txt; \
    python3 -c 'import sys\nfor i in range(40): open(f\"part{i}.tmp\", \"w\").close()'; true";

#[test]
fn files_are_off_by_default_and_bounded_when_on() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let off = run_in(a.path(), SCRIPT, &[]);
    assert!(off.iter().any(|s| s.is_tool()));
    assert!(off.iter().all(|s| s.attr(attr::FILES_WRITTEN).is_none()));
    let on = run_in(
        b.path(),
        SCRIPT,
        &[ON, ("PIPETRACE_FILES__MAX_PER_TOOL", "5")],
    );
    let tool = |name: &str| {
        (on.iter())
            .find(|s| s.is_tool() && s.str(attr::TOOL_NAME) == name)
            .unwrap_or_else(|| panic!("a {name} tool"))
    };
    let sort = tool("sort");
    assert_eq!(list(sort, attr::FILES_READ), ["in.txt"]);
    assert_eq!(list(sort, attr::FILES_WRITTEN), ["sorted.txt"]);
    let py = (on.iter())
        .find(|s| s.is_tool() && s.str(attr::TOOL_NAME).starts_with("python3"))
        .expect("the python tool");
    assert_eq!(
        list(py, attr::FILES_WRITTEN).len(),
        5,
        "listed up to the bound"
    );
    assert_eq!(
        py.int(attr::FILES_WRITTEN_COUNT),
        Some(40),
        "every file counted"
    );
    for s in &on {
        for p in list(s, attr::FILES_READ) {
            assert!(
                !(p.starts_with("/usr/") || p.ends_with(".so") || p.contains(".so.")),
                "{}: {p}",
                s.name
            );
        }
    }
}

#[test]
fn user_globs_leave_files_out() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("pipetrace.yaml");
    std::fs::write(&cfg, "files:\n  enabled: true\n  exclude: ['**/*.tmp']\n").unwrap();
    let spans = run_in(
        dir.path(),
        SCRIPT,
        &[("PIPETRACE_CONFIG", cfg.to_str().unwrap())],
    );
    let written: Vec<String> = spans
        .iter()
        .flat_map(|s| list(s, attr::FILES_WRITTEN))
        .collect();
    assert!(written.iter().any(|w| w == "sorted.txt"), "{written:?}");
    assert!(written.iter().all(|w| !w.ends_with(".tmp")), "{written:?}");
}
