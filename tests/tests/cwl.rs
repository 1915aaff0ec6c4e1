//! Debian's cwltool under the real probes: a two-step workflow (sort, then wc), and one whose
//! steps share tools (and a ShellCommandRequirement step), judged against cwltool's own log:
//! each step is a task named by its step id, read from the workflow the run was given.
use pipetrace_e2e::{pipetrace, read_jsonl, spans::Trace, stderr};

#[test]
fn cwltool_workflow_steps_are_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let wf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/cwl/wf.cwl");
    std::fs::copy(&wf, dir.path().join("wf.cwl")).unwrap();
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").unwrap();
    std::fs::write(
        dir.path().join("job.yml"),
        "text: {class: File, path: in.txt}\n",
    )
    .unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .args([
            "cwltool",
            "--no-container",
            "--outdir",
            "results",
            "wf.cwl",
            "job.yml",
        ])
        .current_dir(dir.path())
        .output()
        .expect("run pipetrace");
    assert!(o.status.success(), "{}", stderr(&o));
    let counted = std::fs::read_to_string(dir.path().join("results/count.txt")).unwrap();
    assert!(
        counted.trim().starts_with('3'),
        "the workflow really ran: {counted}"
    );

    let spans = read_jsonl(&out);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    t.assert_names_registered(&[]);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("pipetrace.run.engine"), "cwltool");
    assert_eq!(run.str("cicd.pipeline.name"), "wf.cwl");
    // A task per step, named by the step id the workflow gives it.
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&wf).unwrap()).unwrap();
    let mut steps: Vec<&str> = doc["steps"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    let mut tasks: Vec<_> = t
        .tasks()
        .iter()
        .map(|s| s.str("cicd.pipeline.task.name"))
        .collect();
    steps.sort();
    tasks.sort();
    assert_eq!(tasks, steps);
    let sort = t
        .tools()
        .into_iter()
        .find(|s| s.str("pipetrace.tool.name") == "sort")
        .unwrap();
    assert!(
        sort.str("process.command_line").contains("in.txt"),
        "{}",
        sort.str("process.command_line")
    );
    assert_eq!(
        t.task_of(sort).map(|s| s.str("cicd.pipeline.task.name")),
        Some("sort")
    );
}

/// cwltool's own record of the jobs that ran a command: `[job NAME] DIR$ ARG \` with one
/// argument a line, the last followed by its redirections. (name, command as one line).
fn logged_commands(log: &str) -> Vec<(String, String)> {
    let mut jobs: Vec<(String, Vec<String>)> = Vec::new();
    let mut open = false;
    for line in log.lines() {
        let start = line.find("[job ").and_then(|at| {
            let (name, after) = line[at + 5..].split_once("] ")?;
            let (_, first) = after.split_once("$ ")?;
            after.starts_with('/').then_some((name, first))
        });
        let arg = match start {
            Some((name, first)) => {
                jobs.push((name.to_string(), Vec::new()));
                first
            }
            None if open => line.trim(),
            None => continue,
        };
        open = arg.ends_with('\\');
        let arg = arg.trim_end_matches('\\').trim();
        // The last argument is followed by cwltool's redirections of stdin and stdout.
        let arg = arg.split(" < ").next().unwrap_or(arg);
        let arg = arg.split(" > ").next().unwrap_or(arg);
        jobs.last_mut().unwrap().1.push(arg.to_string());
    }
    jobs.into_iter()
        .map(|(name, args)| (name, same_line(&args.join(" "))))
        .collect()
}

/// A command line as cwltool logs it and as pipetrace quotes it, without the quoting.
fn same_line(line: &str) -> String {
    let unquoted: String = line.chars().filter(|c| !matches!(c, '\'' | '"')).collect();
    unquoted.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs `data/cwl/<fixture>`'s `doc` on `job.yml` under pipetrace with cwltool's `extra`
/// options and judges each task's (step, command) against the job cwltool logged for that
/// command: its step id (cwltool logs a sub-workflow's step by its own id, pipetrace as
/// `parent/step`) and its `_N` among a scatter's jobs. Jobs that ran the very same command
/// are compared as a group.
fn judged_against_cwltool(fixture: &str, doc: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/cwl")
        .join(fixture);
    for f in std::fs::read_dir(&data).unwrap().flatten() {
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .args(["cwltool", "--no-container", "--outdir", "results"])
        .args(extra)
        .args([doc, "job.yml"])
        .current_dir(dir.path())
        .output()
        .expect("run pipetrace");
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    let mut jobs = logged_commands(&log);
    assert!(jobs.len() >= 5, "cwltool logged its jobs: {log}");

    let spans = read_jsonl(&out);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let mut tasks: Vec<(String, String)> = t
        .tasks()
        .iter()
        .map(|s| {
            let name = s.str("cicd.pipeline.task.name");
            let step = name.rsplit('/').next().unwrap_or(name).to_string();
            (step, same_line(s.str("process.command_line")))
        })
        .collect();
    tasks.sort();
    jobs.sort();
    assert_eq!(
        tasks, jobs,
        "{doc}: tasks (step, command) against cwltool's jobs"
    );
}

#[test]
fn steps_that_share_a_tool_are_named_by_the_step_cwltool_ran() {
    judged_against_cwltool("shared", "shared.cwl", &[]);
}

/// With `--parallel` the scatter's jobs start in any order; cwltool numbers them by element.
#[test]
fn parallel_scatter_jobs_are_numbered_as_cwltool_numbers_them() {
    for _ in 0..3 {
        judged_against_cwltool("scatter", "scatter.cwl", &["--parallel"]);
    }
}
