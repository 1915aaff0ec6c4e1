//! A real single-node Slurm (Debian's slurm-wlm with munge, proctrack/cgroup and task/cgroup
//! on cgroup v1; scripts/slurm-up.sh starts it): the tools of a job step carry the job, step
//! and user the step's cgroup names, under the agent.
use pipetrace_e2e::{Agent, read_jsonl, spans::RecvSpan};
use pipetrace_semconv::attr;

fn slurm_up() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/slurm-up.sh");
    let o = std::process::Command::new("bash")
        .arg(script)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "a single-node Slurm: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_slurm_steps_tools_carry_its_job_step_and_user() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("agent.yaml");
    // The step's script is the run (no engine runs it).
    std::fs::write(
        &cfg,
        "attribution:\n  run_rules:\n    - match: { argv: 'pipetrace-slurm-test' }\n      name: step\n",
    )
    .unwrap();
    let out = dir.path().join("a.otlp.jsonl");
    let jobid = dir.path().join("jobid");
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let script = format!("echo $SLURM_JOB_ID > {}; sleep 0.3; true", jobid.display());
    let st = std::process::Command::new("srun")
        .args(["-N1", "-n1", "sh", "-c", &script, "pipetrace-slurm-test"])
        .status()
        .unwrap();
    assert!(st.success(), "srun");
    std::thread::sleep(std::time::Duration::from_secs(1));
    agent.stop();
    let job = std::fs::read_to_string(&jobid).unwrap().trim().to_string();
    assert!(!job.is_empty());
    let spans = read_jsonl(&out);
    let sleep: Vec<&RecvSpan> = spans
        .iter()
        .filter(|s| s.is_tool() && s.str(attr::TOOL_NAME) == "sleep")
        .collect();
    assert_eq!(sleep.len(), 1, "{spans:?}");
    let s = sleep[0];
    assert_eq!(s.str(attr::SLURM_JOB_ID), job, "{s:?}");
    assert_eq!(s.str(attr::SLURM_STEP_ID), "0");
    assert_eq!(s.int(attr::SLURM_USER_ID), Some(0));
    let run = spans.iter().find(|s| s.is_run()).expect("the step's run");
    assert_eq!(run.str(attr::SLURM_JOB_ID), job, "{run:?}");
}
