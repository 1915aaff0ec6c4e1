//! A real single-node Slurm (Debian's slurm-wlm with munge, proctrack/cgroup and task/cgroup
//! on cgroup v1; scripts/slurm-up.sh starts it): the tools of a job step carry the job, step
//! and user the step's cgroup names, under the agent.
use pipetrace_e2e::{
    Agent, host_id, read_jsonl, short_hostname, slurm_up, slurm_wait_gone, spans::RecvSpan,
};
use pipetrace_semconv::attr;

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
    let job = std::fs::read_to_string(&jobid).unwrap().trim().to_string();
    assert!(!job.is_empty());
    pipetrace_e2e::wait_for_job(&out, &job);
    agent.stop();
    let spans = read_jsonl(&out);
    // The node agent sees every job on the node: other tests' jobs run beside this one.
    let sleep: Vec<&RecvSpan> = spans
        .iter()
        .filter(|s| s.is_tool() && s.str(attr::TOOL_NAME) == "sleep")
        .filter(|s| s.str(attr::SLURM_JOB_ID) == job)
        .collect();
    assert_eq!(sleep.len(), 1, "{spans:?}");
    let s = sleep[0];
    assert_eq!(s.str(attr::SLURM_STEP_ID), "0");
    assert_eq!(s.int(attr::SLURM_USER_ID), Some(0));
    let run = spans
        .iter()
        .find(|s| s.is_run() && s.str(attr::SLURM_JOB_ID) == job)
        .expect("the step's run");
    // The run rule names it: a rule the user wrote wins over the job's own run.
    assert_eq!(run.str(attr::CICD_PIPELINE_NAME), "step", "{run:?}");
}

/// A node's agent watching only one step of job `job` (as if the step ran on its node),
/// under a host id of its own.
fn node_agent(
    dir: &std::path::Path,
    node: &str,
    job: &str,
    step: &str,
) -> (Agent, std::path::PathBuf) {
    let host = short_hostname();
    let scope = format!("/slurm_{host}/uid_0/job_{job}/step_{step}");
    pipetrace_e2e::node_agent(dir, node, &scope)
}

#[test]
fn a_batch_job_served_by_two_node_agents_is_one_trace_with_one_root() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ngzip -c /etc/services > /dev/null\n\
         srun -n1 sh -c 'sleep 0.3; cat /etc/services > /dev/null; true'\n",
    )
    .unwrap();
    // Held: both nodes' agents watch before it starts.
    let o = std::process::Command::new("sbatch")
        .args(["--parsable", "--hold", "-o", "/dev/null"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let (batch_node, batch_out) = node_agent(dir.path(), "node-a", &job, "batch");
    let (step_node, step_out) = node_agent(dir.path(), "node-b", &job, "0");
    let st = std::process::Command::new("scontrol")
        .args(["release", &job])
        .status()
        .unwrap();
    assert!(st.success());
    slurm_wait_gone(&["-j", &job]);
    batch_node.stop();
    step_node.stop();
    let (a, b) = (read_jsonl(&batch_out), read_jsonl(&step_out));

    // One trace, one root: the job's run, from the node that ran its batch script.
    let all: Vec<&RecvSpan> = a.iter().chain(&b).collect();
    let trace = &all.first().expect("spans").trace_id;
    assert!(all.iter().all(|s| &s.trace_id == trace), "{all:?}");
    let roots: Vec<_> = all.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let run = roots[0];
    assert!(
        run.is_run() && a.iter().any(|s| s.span_id == run.span_id),
        "{run:?}"
    );
    assert_eq!(run.str(attr::RUN_ENGINE), "slurm");
    assert_eq!(run.str(attr::SLURM_JOB_ID), job);
    assert_eq!(host_id(run), "node-a");
    // The batch script's own command is a task; srun is the job's engine work.
    let tasks_a: Vec<_> = a.iter().filter(|s| s.is_task()).collect();
    assert_eq!(tasks_a.len(), 1, "{tasks_a:?}");
    assert_eq!(tasks_a[0].str(attr::CICD_PIPELINE_TASK_NAME), "gzip");
    // The step is a task of that run, from the node that ran it, with its tools under it.
    assert!(b.iter().all(|s| !s.is_run()), "{b:?}");
    let step = b.iter().find(|s| s.is_task()).expect("the step's task");
    assert_eq!(step.parent.as_deref(), Some(run.span_id.as_str()));
    assert_eq!(step.str(attr::CICD_PIPELINE_TASK_NAME), "step 0: sh");
    assert_eq!(step.str(attr::SLURM_STEP_ID), "0");
    assert_eq!(host_id(step), "node-b");
    for tool in ["sleep", "cat"] {
        let t = b
            .iter()
            .find(|s| s.is_tool() && s.str(attr::TOOL_NAME) == tool);
        let t = t.unwrap_or_else(|| panic!("{tool} on the step's node: {b:?}"));
        assert_eq!(t.parent.as_deref(), Some(step.span_id.as_str()));
        assert!(
            !a.iter().any(|s| s.str(attr::TOOL_NAME) == tool),
            "only the step's node"
        );
    }
}

/// Each job of a job array names the array and its index, as Slurm itself tells the job
/// (`SLURM_ARRAY_JOB_ID`, `SLURM_ARRAY_TASK_ID`), and the user the job runs as.
#[test]
fn a_job_arrays_jobs_carry_the_array_and_their_index() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.otlp.jsonl");
    let agent = Agent::start(&["-o", out.to_str().unwrap()]);
    let record = format!(
        "echo $SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $(id -un) > {}/$SLURM_ARRAY_TASK_ID.txt; sleep 0.5; true",
        dir.path().display()
    );
    let o = std::process::Command::new("sbatch")
        .args([
            "--parsable",
            "--wait",
            "--array=0-1",
            "--output=/dev/null",
            "--wrap",
        ])
        .arg(&record)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for index in ["0", "1"] {
        let text = std::fs::read_to_string(dir.path().join(format!("{index}.txt"))).unwrap();
        pipetrace_e2e::wait_for_job(&out, text.split_whitespace().next().unwrap());
    }
    agent.stop();
    let spans = read_jsonl(&out);
    for index in ["0", "1"] {
        let text = std::fs::read_to_string(dir.path().join(format!("{index}.txt"))).unwrap();
        let f: Vec<&str> = text.split_whitespace().collect();
        let (job, array, user) = (f[0], f[1], f[3]);
        assert_eq!(f[2], index);
        // Slurm is asked once the job's first process starts; the record is on every span
        // built after it answers: the half-second sleep's, the run's.
        let sleep = spans
            .iter()
            .find(|s| s.is_tool() && s.str(attr::SLURM_JOB_ID) == job && s.name == "sleep")
            .unwrap_or_else(|| panic!("{spans:#?}"));
        assert_eq!(sleep.str(attr::SLURM_ARRAY_JOB_ID), array, "{sleep:?}");
        assert_eq!(sleep.int(attr::SLURM_ARRAY_TASK_ID), index.parse().ok());
        assert_eq!(sleep.str(attr::SLURM_USER_NAME), user);
        let shown = format!("{array}_{index}");
        let run = spans
            .iter()
            .find(|s| s.is_run() && s.str(attr::SLURM_JOB_ID) == job)
            .expect("each job of the array is a run");
        assert_eq!(
            run.str(attr::CICD_PIPELINE_NAME),
            format!("slurm job {shown}")
        );
        assert_eq!(run.str(attr::RUN_LABEL), shown);
        assert_eq!(run.str(attr::SLURM_ARRAY_JOB_ID), array);
    }
}

/// Where Slurm keeps a step's processes in no cgroup of its own (proctrack/linuxproc), the
/// step is read from the title slurmstepd gives itself, `slurmstepd: [<job>.<step>]`; but
/// only root's: anyone can title a program so.
#[test]
fn without_a_step_cgroup_the_title_of_roots_slurmstepd_names_the_step() {
    let dir = tempfile::tempdir().unwrap();
    // A slurmstepd stand-in: a shell under that name, titled as slurmstepd titles itself,
    // for a job id no Slurm here has given (its squeue answers nothing).
    let stepd = dir.path().join("slurmstepd");
    std::fs::copy("/bin/bash", &stepd).unwrap();
    let stand_in = |user: &str| {
        format!(
            "exec setpriv --reuid={user} --regid={user} --clear-groups -- \
             bash -c \"exec -a 'slurmstepd: [67000077.0]' {} -c 'sleep 0.3; true'\"",
            stepd.display()
        )
    };
    for (user, believed) in [("0", true), ("65534", false)] {
        let out = dir.path().join(format!("{user}.otlp.jsonl"));
        let o = pipetrace_e2e::pipetrace()
            .args(["run", "--no-summary", "--output"])
            .arg(&out)
            .args(["--", "bash", "-c", &stand_in(user)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", pipetrace_e2e::stderr(&o));
        let spans = read_jsonl(&out);
        let tool = |name: &str| {
            spans
                .iter()
                .find(|s| s.is_tool() && s.str(attr::TOOL_NAME) == name)
                .unwrap_or_else(|| panic!("{name}: {spans:#?}"))
        };
        let sleep = tool("sleep");
        let job = if believed { "67000077" } else { "" };
        assert_eq!(sleep.str(attr::SLURM_JOB_ID), job, "uid {user}: {sleep:?}");
        if believed {
            assert_eq!(sleep.str(attr::SLURM_STEP_ID), "0");
        }
        // The stand-in itself (the run's root here) is no step's process: nothing titled it
        // before it ran.
        let run = spans.iter().find(|s| s.is_run()).expect("the run");
        assert!(run.attr(attr::SLURM_JOB_ID).is_none(), "{run:?}");
    }
}

/// A job started by `srun` alone (no batch script) is one trace with one root: the client,
/// on the node it ran on, once Slurm has named its job; the step is a task of it from the
/// node that ran it. Judged by Slurm's own record of the job (`squeue`).
#[test]
fn an_srun_alone_is_one_trace_rooted_at_its_client() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let head = pipetrace_e2e::cgroup::HeadCgroup::new("srun");
    let (client_node, client_out) = pipetrace_e2e::node_agent(dir.path(), "node-a", &head.path);
    let jobs = format!("/slurm_{}", short_hostname());
    let (step_node, step_out) = pipetrace_e2e::node_agent(dir.path(), "node-b", &jobs);
    let name = format!("pipetrace-srun-{}", std::process::id());
    // In a session of its own, as from a login shell.
    let script = format!(
        "echo $$ > {} && exec setsid -w srun -J {name} -n1 sh -c 'sleep 1; cat /etc/services > /dev/null'",
        head.dir.join("cgroup.procs").display()
    );
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "srun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let q = std::process::Command::new("squeue")
        .args(["-h", "--states=all", "-n", &name, "-o", "%A"])
        .output()
        .unwrap();
    let job = String::from_utf8_lossy(&q.stdout).trim().to_string();
    assert!(
        job.parse::<u64>().is_ok(),
        "Slurm's record of the job: {job:?}"
    );
    slurm_wait_gone(&["-j", &job, "--states=running,completing"]);
    client_node.stop();
    step_node.stop();
    let (a, b) = (read_jsonl(&client_out), read_jsonl(&step_out));
    let b: Vec<RecvSpan> = b
        .into_iter()
        .filter(|s| s.str(attr::SLURM_JOB_ID) == job)
        .collect();

    let run = a.iter().find(|s| s.is_run()).expect("the client's run");
    assert_eq!(run.str(attr::RUN_ENGINE), "slurm");
    assert_eq!(
        run.str(attr::CICD_PIPELINE_NAME),
        format!("slurm job {job}")
    );
    assert_eq!(host_id(run), "node-a");
    assert!(run.parent.is_none());
    let step = b.iter().find(|s| s.is_task()).expect("the step's task");
    assert_eq!(step.trace_id, run.trace_id, "one trace");
    assert_eq!(
        step.parent.as_deref(),
        Some(run.span_id.as_str()),
        "under the client's run"
    );
    assert_eq!(step.str(attr::CICD_PIPELINE_TASK_NAME), "step 0: sh");
    assert_eq!(host_id(step), "node-b");
    let all: Vec<&RecvSpan> = a.iter().chain(&b).collect();
    let roots: Vec<_> = all.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let cat = b
        .iter()
        .find(|s| s.is_tool() && s.str(attr::TOOL_NAME) == "cat");
    assert_eq!(
        cat.expect("the step's tool").parent.as_deref(),
        Some(step.span_id.as_str())
    );
}
