//! An agent killed in the middle of a pipeline and started again: the new one rebuilds the
//! tree from /proc, and the spans it sends join the first one's trace with the same ids.
use std::time::Duration;

use pipetrace_e2e::{Agent, receiver::Receiver, spans::Trace, wait_for_process};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_continues_the_same_trace() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Snakefile"),
        "rule all:\n    input: \"done.txt\"\n\n\
         rule first:\n    output: \"first.txt\"\n    shell: \"echo one > {output}\"\n\n\
         rule slow:\n    input: \"first.txt\"\n    output: \"slow.txt\"\n    \
         shell: \"while [ ! -e go ]; do sleep 0.2; done; cat {input} > {output}\"\n\n\
         rule after:\n    input: \"slow.txt\"\n    output: \"done.txt\"\n    \
         shell: \"sort {input} > {output}\"\n",
    )
    .unwrap();
    let first = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let mut snakemake = std::process::Command::new("snakemake")
        .args(["--cores", "1"])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("snakemake");
    // The first job has ended and been exported; the slow one waits: kill the agent.
    wait_for_process(dir.path(), "sleep");
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let first_task = rx
        .wait_for(Duration::from_secs(10), |s| {
            s.iter()
                .any(|s| s.is_task() && s.str("cicd.pipeline.task.name") == "first")
        })
        .await;
    first.kill();
    let second = Agent::start(&["--endpoint", &rx.grpc_url()]);
    // The slow job waits for the second agent to watch (its start takes seconds on a busy
    // machine): a job that ended while no agent ran is seen by none.
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert!(snakemake.wait().unwrap().success());
    let spans = rx
        .wait_for(Duration::from_secs(20), |s| {
            s.iter()
                .any(|s| s.is_run() && s.str("cicd.pipeline.name") == name)
        })
        .await;
    second.stop();
    let run = spans
        .iter()
        .find(|s| s.is_run() && s.str("cicd.pipeline.name") == name)
        .expect("the second agent ended the run");
    let mine: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == run.trace_id)
        .cloned()
        .collect();
    // The first agent's task and the second agent's tasks are one trace under one run.
    let first_task = first_task
        .iter()
        .find(|s| s.is_task() && s.str("cicd.pipeline.task.name") == "first")
        .unwrap();
    assert_eq!(
        first_task.trace_id, run.trace_id,
        "same trace id across the restart"
    );
    assert_eq!(first_task.parent.as_deref(), Some(run.span_id.as_str()));
    let tasks: Vec<_> = mine
        .iter()
        .filter(|s| s.is_task())
        .map(|s| s.str("cicd.pipeline.task.name").to_string())
        .collect();
    for want in ["first", "slow", "after"] {
        assert!(tasks.iter().any(|t| t == want), "{want} in {tasks:?}");
    }
    Trace::new(&mine).assert_well_formed();
}
