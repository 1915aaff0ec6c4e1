//! Nextflow cannot run on these machines (its launcher downloads its jar), so these tests use
//! a STAND-IN executor (tests/data/nextflow/nextflow, a bash script, clearly not Nextflow)
//! that runs tasks the way Nextflow's documented work-directory layout says: `bash -ue
//! .command.run` in `work/<2 hex>/<30 hex>`, the task named in `.command.run`'s header in
//! both formats (`### name:` after `### ---`, and the older `# NEXTFLOW TASK:`). The tasks
//! are judged by those headers as written on disk, not by names in the test.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Trace},
    stderr,
};

// Real tasks run for seconds; these for a little while too (a task gone before its working
// directory can be read is named by its tool: docs/engines.md).
const TASKS: &str = "new\tNFCORE:QC:SORT_LINES (sample_a)\tsleep 0.3; sort -r ../../../in.txt > out.txt\n\
old\tCOUNT (sample_b)\tsleep 0.3; wc -l ../../../in.txt > out.txt\n\
traced\tMULTIQC\tsleep 0.3; cat ../../../in.txt | tr a-z A-Z > out.txt\n";

fn pipeline() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tasks.tsv"), TASKS).unwrap();
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").unwrap();
    dir
}

fn stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/nextflow/nextflow")
}

/// What each work directory's `.command.run` says: work-dir hash -> the header's name.
fn headers(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for prefix in std::fs::read_dir(dir.join("work")).unwrap().flatten() {
        for task in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(task.path().join(".command.run")).unwrap();
            let name = text.lines().find_map(|l| {
                l.strip_prefix("### name: ")
                    .map(|n| n.trim_matches('\''))
                    .or_else(|| l.strip_prefix("# NEXTFLOW TASK: "))
            });
            let hash = format!(
                "{}/{}",
                prefix.file_name().to_string_lossy(),
                task.file_name().to_string_lossy()
            );
            out.insert(hash, name.expect("a header").to_string());
        }
    }
    out
}

fn judge(dir: &Path, spans: &[RecvSpan]) {
    let t = Trace::new(spans);
    t.assert_well_formed();
    t.assert_names_registered(&[]);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("pipetrace.run.engine"), "nextflow");
    let want = headers(dir);
    assert_eq!(want.len(), 3);
    let got: BTreeMap<String, String> = t
        .tasks()
        .iter()
        .map(|s| {
            (
                s.str("cicd.pipeline.task.run.id").to_string(),
                s.name.clone(),
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "tasks by work directory, named as .command.run names them"
    );
    for task in t.tasks() {
        let tag = task.attr("pipetrace.task.tag").map(|v| v.str().to_string());
        let expected = task
            .name
            .strip_suffix(')')
            .and_then(|n| n.split_once(" ("))
            .map(|x| x.1.to_string());
        assert_eq!(tag, expected, "{}", task.name);
    }
    // Each task's own tool ran under it: its script names its program.
    for (program, task) in [
        ("sort", "NFCORE:QC:SORT_LINES"),
        ("wc", "COUNT"),
        ("tr", "MULTIQC"),
    ] {
        let tool = t
            .tools()
            .into_iter()
            .find(|s| s.str("pipetrace.tool.name") == program);
        let tool = tool.unwrap_or_else(|| panic!("no {program} tool"));
        assert_eq!(
            t.task_of(tool).map(|s| s.str("cicd.pipeline.task.name")),
            Some(task)
        );
    }
    let engine = spans
        .iter()
        .find(|s| s.attr("pipetrace.engine.helpers").is_some());
    assert!(engine.is_some(), "the engine's uname probe is a helper");
    assert!(
        t.tools()
            .iter()
            .all(|s| s.str("pipetrace.tool.name") != "uname")
    );
}

#[test]
fn nextflow_tasks_are_named_by_their_command_run() {
    let dir = pipeline();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(stand_in())
        .args(["run", "nf-core/demo"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&out);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("cicd.pipeline.name"), "nf-core/demo");
    judge(dir.path(), &spans);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_agent_names_nextflow_tasks_and_scheduler_started_ones() {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let dir = pipeline();
    let pipeline_name = format!("nf-demo-{}", std::process::id());
    let st = std::process::Command::new(stand_in())
        .args(["run", &pipeline_name])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let mine = rx.run_trace(&pipeline_name, Duration::from_secs(30)).await;
    let trace = mine[0].trace_id.clone();
    judge(dir.path(), &mine);

    // A batch scheduler on this node runs one task's .command.run itself, no Nextflow here.
    let (hash, name) = headers(dir.path()).into_iter().next().unwrap();
    let work = dir.path().join("work").join(&hash);
    let st = std::process::Command::new("/bin/bash")
        .args(["-ue", ".command.run"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(st.success());
    let task_of_node = |s: &RecvSpan| {
        s.is_task() && s.str("cicd.pipeline.task.run.id") == hash && s.trace_id != trace
    };
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| s.iter().any(task_of_node))
        .await;
    let task = spans.iter().find(|s| task_of_node(s)).unwrap();
    assert_eq!(
        task.name, name,
        "named on the node from the same .command.run"
    );
    agent.stop();
}
