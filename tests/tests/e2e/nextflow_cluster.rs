//! A Nextflow run whose tasks its Slurm executor submits (`sbatch .command.run` in each work
//! directory), served by two node agents with host ids of their own: one watching the head
//! (in a cgroup of its own), one watching the Slurm jobs. The head is the real Nextflow
//! (24.10.0 from Maven Central, task metrics on); the jobs run on the real single-node
//! Slurm. Judged by
//! what the run left on disk: the `.command.run` headers, the commands of each `.command.sh`
//! and the `.nextflow/history` record: one trace with one root, the head's run; every task
//! one task span from the jobs' node, named by its header, with its script's commands as its
//! tools and nothing of the wrapper; the submissions the head's engine work.
use std::{collections::BTreeMap, path::Path};

use pipetrace_e2e::{
    cgroup::HeadCgroup,
    host_id, nextflow, node_agent, read_jsonl, short_hostname, slurm_up, slurm_wait_gone,
    spans::{RecvSpan, Trace},
};
use pipetrace_semconv::attr;

/// Slurm's queue and the jobs' `.exitcode` polled every second (Nextflow's defaults wait
/// up to a minute); what the tasks ask for, which its Slurm executor writes as `#SBATCH`
/// directives (`-c` only above one CPU).
const CONFIG: &str = "executor {\n    pollInterval = '1 sec'\n    queueStatInterval = '1 sec'\n}\n\
                      process {\n    memory = '300 MB'\n    withName: COUNT {\n        cpus = 2\n    }\n}\n";

/// The commands of a task's `.command.sh` (after its shebang, split at `;` and `|`): what
/// its tools must be.
fn script_commands(work: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(work.join(".command.sh")).unwrap();
    let body = text.lines().filter(|l| !l.starts_with("#!"));
    let mut out: Vec<String> = body
        .flat_map(|l| l.split([';', '|']).collect::<Vec<_>>())
        .filter_map(|c| c.split_whitespace().next().map(str::to_string))
        .collect();
    out.sort();
    out
}

/// Each work directory's task as its `.command.run` header names it: hash -> (process, tag).
fn headers(work: &Path) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for prefix in std::fs::read_dir(work).unwrap().flatten() {
        for task in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(task.path().join(".command.run")).unwrap();
            let full = text.lines().find_map(|l| {
                l.strip_prefix("### name: ")
                    .map(|n| n.trim_matches('\''))
                    .or_else(|| l.strip_prefix("# NEXTFLOW TASK: "))
            });
            let full = full.expect("a header").to_string();
            let (process, tag) = match full.strip_suffix(')').and_then(|f| f.split_once(" (")) {
                Some((p, t)) => (p.to_string(), t.to_string()),
                None => (full, String::new()),
            };
            let hash = format!(
                "{}/{}",
                prefix.file_name().to_string_lossy(),
                task.file_name().to_string_lossy()
            );
            out.insert(hash, (process, tag));
        }
    }
    out
}

#[test]
fn a_nextflow_run_on_slurm_is_one_trace_across_the_head_and_the_jobs_nodes() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let launch = dir.path().join("launch");
    std::fs::create_dir_all(&launch).unwrap();
    std::fs::write(launch.join("main.nf"), nextflow::QC_PIPELINE).unwrap();
    std::fs::write(launch.join("nextflow.config"), CONFIG).unwrap();
    std::fs::write(launch.join("in.txt"), "pear\napple\nfig\n").unwrap();
    let head = HeadCgroup::new("nextflow");
    let (head_node, head_out) = node_agent(dir.path(), "node-a", &head.path);
    let jobs_scope = format!("/slurm_{}", short_hostname());
    let (jobs_node, jobs_out) = node_agent(dir.path(), "node-b", &jobs_scope);
    let script = format!(
        "echo $$ > {} && exec {} run main.nf -process.executor=slurm -with-trace",
        head.dir.join("cgroup.procs").display(),
        nextflow::launcher().display()
    );
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(&launch)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A job's last processes end a moment after its `.exitcode` told the head it ended.
    // Named as Nextflow's grid executors name jobs.
    let names = "nf-NFCORE_QC_SORT_LINES_(sample_a),nf-COUNT_(sample_b),nf-MULTIQC";
    slurm_wait_gone(&["-n", names]);
    head_node.stop();
    jobs_node.stop();
    let (a, b) = (read_jsonl(&head_out), read_jsonl(&jobs_out));

    // The head's run: its trace is the run's, and nothing of this run is outside it.
    let run = (a.iter())
        .find(|s| s.is_run() && s.str(attr::RUN_ENGINE) == "nextflow")
        .expect("the head's run");
    let trace = &run.trace_id;
    let here = launch.to_string_lossy();
    let mine = |s: &&RecvSpan| s.str("process.command_line").contains(&*here);
    let stray: Vec<&RecvSpan> = b
        .iter()
        .filter(mine)
        .filter(|s| &s.trace_id != trace)
        .collect();
    assert!(stray.is_empty(), "outside the run's trace: {stray:?}");
    // Tasks of the jobs' node in another trace (a part that joined no run) or none at all
    // (nothing seen) are told apart when the comparison below fails.
    let elsewhere: Vec<(String, String)> = (b.iter())
        .filter(|s| s.is_task() && &s.trace_id != trace)
        .map(|s| {
            (
                s.trace_id.clone(),
                s.str(attr::CICD_PIPELINE_TASK_NAME).to_string(),
            )
        })
        .collect();
    let seen_on_b = (b.len(), b.iter().filter(|s| s.is_task()).count());
    let b: Vec<RecvSpan> = b.into_iter().filter(|s| &s.trace_id == trace).collect();
    let all: Vec<RecvSpan> = a
        .iter()
        .filter(|s| &s.trace_id == trace)
        .chain(&b)
        .cloned()
        .collect();
    let t = Trace::new(&all);
    t.assert_well_formed();
    let roots: Vec<&RecvSpan> = all.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1, "one root: {roots:?}");
    assert_eq!(roots[0].span_id, run.span_id);
    assert_eq!(host_id(run), "node-a");

    // Every task the work directories hold is one task span from the jobs' node, named by its
    // header, under the head's run, with the script it ran among its tools.
    let want = headers(&launch.join("work"));
    let tasks = t.tasks();
    let mut got = BTreeMap::new();
    for task in &tasks {
        assert_eq!(host_id(task), "node-b", "{task:?}");
        assert_eq!(task.parent.as_deref(), Some(run.span_id.as_str()));
        assert!(
            task.str(attr::SLURM_JOB_ID).parse::<u64>().is_ok(),
            "{task:?}"
        );
        let hash = task.str(attr::CICD_PIPELINE_TASK_RUN_ID).to_string();
        let name = task.str(attr::CICD_PIPELINE_TASK_NAME).to_string();
        // What it asked for, in Nextflow's units (MB of 2^20 bytes) through Slurm's.
        assert_eq!(task.int(attr::MEMORY_LIMIT), Some(300 << 20), "{task:?}");
        let threads = (name == "COUNT").then_some(2);
        assert_eq!(task.int(attr::TASK_THREADS), threads, "{task:?}");
        got.insert(hash.clone(), (name, task.str(attr::TASK_TAG).to_string()));
        let mut tools: Vec<String> = (t.tools().into_iter())
            .filter(|s| t.task_of(s).is_some_and(|k| k.span_id == task.span_id))
            .map(|s| s.str(attr::TOOL_NAME).to_string())
            .collect();
        tools.sort();
        let commands = script_commands(&launch.join("work").join(&hash));
        assert_eq!(
            tools, commands,
            "{hash}: its script's commands, none of the wrapper's"
        );
    }
    assert_eq!(
        got, want,
        "tasks (left) against the .command.run headers on disk (right); node-b exported \
         {} spans, {} of them tasks; tasks in other traces: {elsewhere:?}",
        seen_on_b.0, seen_on_b.1
    );

    // The run is the one the history recorded, and its submissions are its engine work.
    let history = std::fs::read_to_string(launch.join(".nextflow/history")).unwrap();
    let cols: Vec<&str> = history.lines().last().unwrap().split('\t').collect();
    assert_eq!(cols[3], "OK", "the run ended well: {history}");
    assert!(all.iter().all(|s| s.str(attr::TOOL_NAME) != "sbatch"));
    let engine = a
        .iter()
        .find(|s| s.int(attr::ENGINE_HELPERS).is_some())
        .expect("engine span");
    assert!(
        engine.int(attr::ENGINE_HELPERS).unwrap() >= want.len() as i64,
        "{engine:?}"
    );
    assert!(b.iter().all(|s| !s.is_run()), "the jobs' node roots no run");
}
