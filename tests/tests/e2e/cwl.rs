//! Debian's cwltool under the real probes: a two-step workflow (sort, then wc), and one whose
//! steps share tools (and a ShellCommandRequirement step), steps that run node among
//! JavaScript expressions, judged against cwltool's own log:
//! each step is a task named by its step id, read from the workflow the run was given.
use pipetrace_e2e::{
    pipetrace, read_jsonl,
    spans::{RecvSpan, Trace},
    stderr,
};

#[test]
fn cwltool_workflow_steps_are_tasks() {
    let dir = pipetrace_e2e::cwl_workflow();
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
    // `cwltool --version` says `/usr/bin/cwltool 3.1.20230209161050`.
    let said = std::process::Command::new("cwltool")
        .arg("--version")
        .output();
    let said = String::from_utf8_lossy(&said.unwrap().stdout)
        .trim()
        .to_string();
    let version = run.str("pipetrace.run.engine_version");
    assert!(
        !version.is_empty() && said.ends_with(&format!(" {version}")),
        "{said}"
    );
    assert_eq!(run.str("cicd.pipeline.name"), "wf.cwl");
    // A task per step, named by the step id the workflow gives it.
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.path().join("wf.cwl")).unwrap()).unwrap();
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

/// A copy of `data/cwl/<fixture>` to run in.
fn fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/cwl")
        .join(name);
    for f in std::fs::read_dir(&data).unwrap().flatten() {
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    dir
}

/// Runs `cwltool --no-container --outdir results ARGS` in `cwd` under pipetrace, which must
/// succeed: cwltool's log, and each task's (name, command as one line).
fn traced(cwd: &std::path::Path, args: &[&str]) -> (String, Vec<(String, String)>) {
    let (log, spans) = traced_spans(cwd, args);
    let t = Trace::new(&spans);
    let tasks = t
        .tasks()
        .iter()
        .map(|s| {
            let name = s.str("cicd.pipeline.task.name").to_string();
            (name, same_line(s.str("process.command_line")))
        })
        .collect();
    (log, tasks)
}

/// Runs `cwltool --no-container --outdir results ARGS` in `cwd` under pipetrace, which must
/// succeed: cwltool's log, and the spans.
fn traced_spans(cwd: &std::path::Path, args: &[&str]) -> (String, Vec<RecvSpan>) {
    let (ok, log, spans) = traced_ending(cwd, args);
    assert!(ok, "{log}");
    (log, spans)
}

/// Runs `cwltool --no-container --outdir results ARGS` in `cwd` under pipetrace: whether it
/// succeeded, cwltool's log, and the spans.
fn traced_ending(cwd: &std::path::Path, args: &[&str]) -> (bool, String, Vec<RecvSpan>) {
    let out = cwd.join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .args(["cwltool", "--no-container", "--outdir", "results"])
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run pipetrace");
    let spans = read_jsonl(&out);
    Trace::new(&spans).assert_well_formed();
    (o.status.success(), stderr(&o), spans)
}

/// Runs `data/cwl/<fixture>`'s `doc` on `job.yml` under pipetrace with cwltool's `extra`
/// options and judges each task's (step, command) against the job cwltool logged for that
/// command: its step id (cwltool logs a sub-workflow's step by its own id, pipetrace as
/// `parent/step`) and its `_N` among a scatter's jobs. Jobs that ran the very same command
/// are compared as a group.
fn judged_against_cwltool(fixture_name: &str, doc: &str, extra: &[&str]) {
    let dir = fixture(fixture_name);
    let args: Vec<&str> = extra.iter().copied().chain([doc, "job.yml"]).collect();
    let (log, tasks) = traced(dir.path(), &args);
    let mut jobs = logged_commands(&log);
    assert!(jobs.len() >= 5, "cwltool logged its jobs: {log}");
    let mut tasks: Vec<(String, String)> = tasks
        .into_iter()
        .map(|(name, line)| (name.rsplit('/').next().unwrap_or(&name).to_string(), line))
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

/// Samples as records of a SchemaDefRequirement type: a step scatters over them, another
/// step of the same tool takes one picked by an expression, beside a reference whose index
/// comes as a secondary file; sequential, and with `--parallel` starting the scatter's jobs
/// in any order.
#[test]
fn steps_over_records_are_named_by_the_job_cwltool_ran() {
    judged_against_cwltool("records", "records.cwl", &[]);
    for _ in 0..2 {
        judged_against_cwltool("records", "records.cwl", &["--parallel"]);
    }
}

/// A command line with each path as its file name: what tells a job's command apart once the
/// directories cwltool stages its inputs in are left out.
fn staged_as_names(line: &str) -> String {
    let words = line.split(' ').map(|w| w.rsplit('/').next().unwrap_or(w));
    words.collect::<Vec<_>>().join(" ")
}

/// A step that scatters over files and one that takes one of them by an expression run the
/// very same command for that file (cwltool stages it afresh for each): which of the two
/// processes is which cannot be told from outside, but each job's name goes once, on a
/// process that ran its command; sequential, and with `--parallel`.
#[test]
fn a_step_that_picks_a_scattered_element_and_its_scatter_job_take_their_names_once() {
    for extra in [&[][..], &["--parallel"]] {
        let dir = fixture("picked");
        let args: Vec<&str> = extra
            .iter()
            .copied()
            .chain(["picked.cwl", "job.yml"])
            .collect();
        let (log, tasks) = traced(dir.path(), &args);
        let pairs = |named: Vec<(String, String)>| {
            let mut pairs: Vec<(String, String)> = (named.into_iter())
                .map(|(name, line)| (staged_as_names(&line), name))
                .collect();
            pairs.sort();
            pairs
        };
        let jobs = logged_commands(&log);
        assert_eq!(jobs.len(), 4, "{log}");
        assert_eq!(
            pairs(tasks),
            pairs(jobs),
            "{args:?}: (command, name) against cwltool's"
        );
    }
}

/// The step each logged job ran, by the path of steps open when cwltool logged it (a
/// sequential run opens a step, runs its jobs or sub-workflow, and completes it): the
/// steps' ids joined by `/`, each without the `_N` cwltool adds to a name seen before, and
/// `_N` for the Nth of a scatter's jobs (in cwltool's own order, its job names' numbers),
/// with the command each job ran.
fn logged_paths(log: &str) -> Vec<(String, String)> {
    let number = |name: &str| match name.rsplit_once('_') {
        Some((_, n)) => n.parse::<u32>().unwrap_or(1),
        None => 1,
    };
    let bare = |name: &str| match name.rsplit_once('_') {
        Some((b, n)) if n.parse::<u32>().is_ok() => b.to_string(),
        _ => name.to_string(),
    };
    let mut open: Vec<String> = Vec::new();
    let mut paths: Vec<(String, u32)> = Vec::new();
    for line in log.lines() {
        let Some(at) = line.find("[step ").or(line.find("[job ")) else {
            continue;
        };
        let Some((tag, after)) = line[at + 1..].split_once("] ") else {
            continue;
        };
        match tag.split_once(' ') {
            // A scatter's step starts again for each job: it is open once.
            Some(("step", step))
                if after.starts_with("start") && !open.iter().any(|s| s == step) =>
            {
                open.push(step.to_string());
            }
            Some(("step", step)) if after.starts_with("completed") => {
                let from = open.iter().position(|s| s == step).unwrap_or(open.len());
                open.truncate(from);
            }
            Some(("job", job)) if after.starts_with('/') && after.contains("$ ") => {
                let path: Vec<String> = open.iter().map(|s| bare(s)).collect();
                paths.push((path.join("/"), number(job)));
            }
            _ => {}
        }
    }
    // The Nth job of a step (by cwltool's numbers) is its `_N`.
    let mut numbered = Vec::new();
    for (path, n) in &paths {
        let nth = 1 + paths.iter().filter(|(p, m)| p == path && m < n).count();
        numbered.push(match nth {
            1 => path.clone(),
            nth => format!("{path}_{nth}"),
        });
    }
    let commands = logged_commands(log);
    assert_eq!(commands.len(), numbered.len(), "every job's path: {log}");
    numbered
        .into_iter()
        .zip(commands)
        .map(|(path, (_, command))| (path, command))
        .collect()
}

/// Runs `args` in `cwd` under pipetrace and judges every task by its full name and command
/// against the job cwltool logged, placed by `logged_paths`.
fn judged_by_path(cwd: &std::path::Path, args: &[&str]) {
    let (log, mut tasks) = traced(cwd, args);
    let mut jobs = logged_paths(&log);
    assert!(jobs.len() >= 3, "cwltool logged its jobs: {log}");
    tasks.sort();
    jobs.sort();
    assert_eq!(tasks, jobs, "{args:?}: tasks against cwltool's jobs");
}

/// A sub-workflow two levels deep, run three times by one workflow: the later steps of each
/// instance see upstream files of the same names; cwltool runs the instances in any order.
#[test]
fn steps_of_a_sub_workflow_run_again_are_named_by_their_instance() {
    for _ in 0..3 {
        let dir = fixture("nested");
        judged_by_path(dir.path(), &["top.cwl", "job.yml"]);
    }
}

/// The same workflow packed into one `$graph` document (`cwltool --pack`), run as `#main`,
/// and given as a relative path from another directory.
#[test]
fn packed_and_relative_documents_name_their_steps_alike() {
    let dir = fixture("nested");
    let packed = std::process::Command::new("cwltool")
        .args(["--pack", "top.cwl"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(packed.status.success(), "{}", stderr(&packed));
    std::fs::write(dir.path().join("packed.cwl"), &packed.stdout).unwrap();
    judged_by_path(dir.path(), &["packed.cwl#main", "job.yml"]);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    judged_by_path(&elsewhere, &["../top.cwl", "../job.yml"]);
}

/// dotproduct, flat_crossproduct and nested_crossproduct of the same two arrays: each job
/// numbered as cwltool numbers it, also when `--parallel` starts them in any order.
#[test]
fn scatter_methods_number_jobs_as_cwltool_does() {
    let dir = fixture("crossed");
    judged_by_path(dir.path(), &["crossed.cwl", "job.yml"]);
    judged_against_cwltool("crossed", "crossed.cwl", &["--parallel"]);
}

/// A CommandLineTool run alone is one task, named as cwltool names its job.
#[test]
fn a_tool_run_alone_is_named_as_cwltool_names_its_job() {
    let dir = fixture("tool");
    let (log, tasks) = traced(dir.path(), &["rev.cwl", "job.yml"]);
    let jobs = logged_commands(&log);
    assert_eq!(jobs.len(), 1, "{log}");
    assert_eq!(tasks, jobs);
}

/// A step whose command is `node` (a script its document stages) is a task of its step,
/// among steps whose JavaScript expressions cwltool evaluates with node itself (its engine's
/// helpers, no task); so is a tool that runs node alone.
#[test]
fn a_step_that_runs_node_is_its_step_not_the_javascript_engine() {
    for doc in ["node.cwl", "greet.cwl"] {
        let jobs = judged_by_job("node", doc);
        assert!(
            jobs.iter().any(|(_, command)| command.starts_with("node ")),
            "cwltool ran node as a job: {jobs:?}"
        );
    }
}

/// Runs `data/cwl/<fixture>`'s `doc` on `job.yml` under pipetrace and judges each task's
/// (name, command) against the job cwltool logged: its jobs.
fn judged_by_job(fixture_name: &str, doc: &str) -> Vec<(String, String)> {
    let dir = fixture(fixture_name);
    let (log, mut tasks) = traced(dir.path(), &[doc, "job.yml"]);
    let mut jobs = logged_commands(&log);
    tasks.sort();
    jobs.sort();
    assert_eq!(tasks, jobs, "{doc}: tasks against cwltool's jobs");
    jobs
}

/// Three tools of one `baseCommand` (`bash -c`) whose whole command lines are expressions
/// of the same input (a JavaScript string, a parameter reference inside text, a template
/// literal), two tools of `sort` that differ by their inputs' prefixes, and two steps of one
/// `uniq` tool that set different flags, run in cwltool's shuffled order: each named by the
/// step whose expression or options made its line.
#[test]
fn tools_of_one_base_command_are_told_apart_by_their_expressions_and_options() {
    for _ in 0..2 {
        let jobs = judged_by_job("bashc", "bashc.cwl");
        assert_eq!(jobs.len(), 7, "{jobs:?}");
    }
}

/// cwltool's verdict on each job that ran a command, by name: `[job NAME] completed success`
/// (or `permanentFail`, ...), whatever its exit code.
fn logged_verdicts(log: &str) -> Vec<(String, bool)> {
    log.lines()
        .filter_map(|line| {
            let rest = &line[line.find("[job ")? + 5..];
            let (name, after) = rest.split_once("] completed ")?;
            Some((name.to_string(), after.starts_with("success")))
        })
        .collect()
}

/// Each task's verdict (no error status) and that of its own process's tool span (the
/// tool under it of the same pid, else, where a shell only wraps the command, the tool the
/// shell ran) against cwltool's verdict on the job of that name.
fn assert_verdicts_as_cwltools(log: &str, spans: &[RecvSpan]) {
    let t = Trace::new(spans);
    let mut verdicts: Vec<(String, bool, bool)> = (t.tasks().into_iter())
        .map(|task| {
            let under: Vec<&RecvSpan> = (t.tools().into_iter())
                .filter(|s| s.parent.as_deref() == Some(&task.span_id))
                .collect();
            let pid = task.int("process.pid");
            let same = under.iter().find(|s| s.int("process.pid") == pid);
            let wrapped = (under.iter()).find(|s| s.int("process.parent_pid") == pid);
            let own = same.or(wrapped);
            let own = own.unwrap_or_else(|| panic!("{}'s own tool", task.name));
            let name = task.str("cicd.pipeline.task.name").to_string();
            (name, task.status != 2, own.status != 2)
        })
        .collect();
    let mut jobs: Vec<(String, bool, bool)> = (logged_verdicts(log).into_iter())
        .map(|(name, ok)| (name, ok, ok))
        .collect();
    verdicts.sort();
    jobs.sort();
    assert_eq!(
        verdicts, jobs,
        "(task, its verdict, its own process's) against cwltool's jobs: {log}"
    );
}

/// A step whose grep finds nothing exits 1, which its tool's `successCodes` counts as
/// success: cwltool says the job completed successfully, and so must its task and the span
/// of grep's own process, also where `sh -c` runs grep (ShellCommandRequirement).
#[test]
fn a_step_that_exits_with_one_of_its_success_codes_is_no_failed_task() {
    let dir = fixture("codes");
    let (log, spans) = traced_spans(dir.path(), &["codes.cwl", "job.yml"]);
    let t = Trace::new(&spans);
    assert!(
        (t.tasks().iter()).any(|s| s.int("process.exit.code") == Some(1)),
        "a step exited 1: {log}"
    );
    assert_verdicts_as_cwltools(&log, &spans);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.int("pipetrace.run.tasks_failed"), Some(0));
}

/// Steps whose tools list exit codes in `permanentFailCodes` (0 among them) and
/// `temporaryFailCodes`, and one whose code both `successCodes` and `permanentFailCodes`
/// list: each task, and its process's span, fails where cwltool says its job did; the run
/// counts as many failed tasks as cwltool's jobs that did not succeed, and fails as
/// cwltool's final status says.
#[test]
fn steps_whose_exit_codes_their_tools_list_as_failures_fail_as_cwltool_says() {
    let dir = fixture("failcodes");
    let args = ["--on-error", "continue", "failcodes.cwl", "job.yml"];
    let (ok, log, spans) = traced_ending(dir.path(), &args);
    let jobs = logged_verdicts(&log);
    assert_eq!(jobs.len(), 4, "every step ran: {log}");
    let t = Trace::new(&spans);
    assert!(
        (t.tasks().iter()).any(|s| s.int("process.exit.code") == Some(0) && s.status == 2),
        "a step that exited 0 failed: {log}"
    );
    assert_verdicts_as_cwltools(&log, &spans);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    let failed = jobs.iter().filter(|(_, ok)| !ok).count();
    assert_eq!(run.int("pipetrace.run.tasks_failed"), Some(failed as i64));
    let success = log.contains("Final process status is success");
    assert_eq!((run.status != 2, ok), (success, success), "{log}");
}
