//! Snakemake in cluster mode (7's `--cluster`, 9's cluster-generic executor) submitting its
//! jobs to a real single-node Slurm, served by two node agents with host ids of their own:
//! one watching the head (in a cgroup of its own), one watching the Slurm jobs. Judged by
//! Snakemake's own records: one trace with one root, the head's run; every job attempt the
//! log records is one task named by its rule and wildcards, a local rule's from the head's
//! node and a submitted job's from the jobs' node, each running its recorded command; the
//! submissions are the head's engine work, never tasks or tools.

use pipetrace_e2e::{
    cgroup::HeadCgroup,
    host_id, node_agent, read_jsonl, short_hostname, slurm_up, slurm_wait_gone,
    snakemake::{Records, Version, counts, normalize},
    spans::{RecvSpan, Trace},
};
use pipetrace_semconv::attr;

const SNAKEFILE: &str = r#"
SAMPLES = ["A", "B", "C"]
localrules: all, reference

rule all:
    input: expand("out/{s}.sum", s=SAMPLES)

rule reference:
    output: "out/ref.txt"
    shell: "seq 1 2000 > {output}"

rule count:
    input: "out/ref.txt"
    output: "out/{s}.cnt"
    shell: "sleep 0.5; grep -c 1 {input} > {output}; echo {wildcards.s} >> {output}"

rule digest:
    input: "out/{s}.cnt"
    output: "out/{s}.sum"
    shell: "sort {input} | md5sum > {output}"
"#;

/// Runs the workflow in cluster mode under two node agents; their spans and the workdir.
fn cluster_run(v: Version) -> (Vec<RecvSpan>, Vec<RecvSpan>, tempfile::TempDir) {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("wf");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("Snakefile"), SNAKEFILE).unwrap();
    let head = HeadCgroup::new(&format!("{v:?}"));
    let (head_node, head_out) = node_agent(dir.path(), "node-a", &head.path);
    let (jobs_node, jobs_out) = node_agent(
        dir.path(),
        "node-b",
        &format!("/slurm_{}", short_hostname()),
    );
    let submit = "sbatch -o /dev/null -J pipetrace-cluster-test";
    let args = match v {
        Version::Seven => format!("--cluster '{submit}'"),
        Version::Eight | Version::Nine => {
            format!("--executor cluster-generic --cluster-generic-submit-cmd '{submit}'")
        }
    };
    let procs = head.dir.join("cgroup.procs");
    let script = format!(
        "echo $$ > {} && {} {args} --jobs 3 --latency-wait 30; exit $?",
        procs.display(),
        v.program().display()
    );
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "snakemake {v:?} in cluster mode: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A job script's last step ends a moment after the head saw the job finish.
    slurm_wait_gone(&["-n", "pipetrace-cluster-test"]);
    head_node.stop();
    jobs_node.stop();
    (read_jsonl(&head_out), read_jsonl(&jobs_out), dir)
}

fn judge(v: Version) {
    let (a, b, dir) = cluster_run(v);
    let work = dir.path().join("wf");
    let records = Records::read(&work);
    // The jobs' node watches every Slurm job (other tests' too): ours are those in the
    // head's trace, and nothing of this workflow is outside it.
    let trace = &a.first().expect("the head's spans").trace_id;
    let wd = work.to_string_lossy();
    let stray: Vec<&RecvSpan> = (b.iter())
        .filter(|s| s.str("process.command_line").contains(&*wd) && &s.trace_id != trace)
        .collect();
    assert!(
        stray.is_empty(),
        "{v:?}: outside the run's trace: {stray:?}"
    );
    let b: Vec<RecvSpan> = b.into_iter().filter(|s| &s.trace_id == trace).collect();
    let all: Vec<RecvSpan> = a.iter().chain(&b).cloned().collect();
    // One trace, one root: the head's run, from the head's node.
    let t = Trace::new(&all);
    t.assert_well_formed();
    let run = all.iter().find(|s| s.parent.is_none()).unwrap();
    assert_eq!(run.str(attr::RUN_ENGINE), "snakemake", "{v:?}");
    assert_eq!(run.str(attr::CICD_PIPELINE_NAME), "wf", "{v:?}");
    assert_eq!(host_id(run), "node-a", "{v:?}");

    // Every job attempt Snakemake's log records is one task, by rule and wildcards.
    let key = |s: &RecvSpan| {
        let w = s.str(attr::TASK_WILDCARDS).to_string();
        (s.str(attr::CICD_PIPELINE_TASK_NAME).to_string(), w)
    };
    let tasks = t.tasks();
    let named: Vec<(String, String)> = tasks.iter().map(|s| key(s)).collect();
    assert_eq!(
        counts(&named),
        counts(&records.attempts()),
        "{v:?}: tasks (left) against the job attempts Snakemake's log records (right)"
    );
    // A local rule's job from the head's node, a submitted one from the node that ran it,
    // as a task of the head's run.
    assert!(
        !records.local_rules.is_empty() && records.local_rules.len() < records.job_rules().len()
    );
    for task in &tasks {
        let local = records
            .local_rules
            .contains(task.str(attr::CICD_PIPELINE_TASK_NAME));
        let node = if local { "node-a" } else { "node-b" };
        assert_eq!(host_id(task), node, "{v:?}: {task:?}");
        assert_eq!(task.parent.as_deref(), Some(run.span_id.as_str()), "{v:?}");
        if !local {
            assert!(
                task.str(attr::SLURM_JOB_ID).parse::<u64>().is_ok(),
                "{task:?}"
            );
        }
    }
    // Each recorded command ran under a task of its rule.
    for (rule, cmd) in &records.metadata {
        let cmd = cmd.as_deref().expect("shell jobs");
        let ran = all
            .iter()
            .filter(|s| normalize(s.str("process.command_line")).contains(cmd))
            .filter_map(|s| if s.is_task() { Some(s) } else { t.task_of(s) });
        let rules: Vec<&str> = ran.map(|s| s.str(attr::CICD_PIPELINE_TASK_NAME)).collect();
        assert!(
            rules.contains(&rule.as_str()),
            "{v:?}: `{cmd}` ran under {rules:?}, not {rule}"
        );
    }
    // The submissions are the head's engine work: no task or tool of them on either node.
    let submitted = records.attempts().len()
        - (records.attempts().iter())
            .filter(|(r, _)| records.local_rules.contains(r))
            .count();
    assert!(
        all.iter().all(|s| s.str(attr::TOOL_NAME) != "sbatch"),
        "{v:?}"
    );
    // Nor is a job's marking of its end for the head (`touch DIR/N.jobfinished`).
    let marks = |s: &RecvSpan| s.str("process.command_line").contains(".jobfinished");
    assert!(!all.iter().any(|s| s.is_tool() && marks(s)), "{v:?}");
    let engine = a
        .iter()
        .find(|s| s.int(attr::ENGINE_HELPERS).is_some())
        .expect("the head's engine span");
    assert!(
        engine.int(attr::ENGINE_HELPERS).unwrap() >= submitted as i64,
        "{v:?}: {engine:?}"
    );
    assert!(
        b.iter().all(|s| !s.is_run()),
        "{v:?}: the jobs' node roots no run"
    );
}

#[test]
fn a_snakemake_7_cluster_run_is_one_trace_across_the_head_and_the_jobs_nodes() {
    judge(Version::Seven);
}

#[test]
fn a_snakemake_9_cluster_run_is_one_trace_across_the_head_and_the_jobs_nodes() {
    judge(Version::Nine);
}
