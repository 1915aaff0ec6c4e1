//! The whole core (tree, attribution, span building, diagnosis, export to a file) driven by
//! synthetic kernel events on a fake host: no root, no kernel, no /proc. What the core reads
//! (a process's directory, Snakemake's records, a cgroup's limit) the fake host holds.
use std::time::Duration;

use base64::Engine as _;
use pipetrace_semconv::attr;

use super::Pipeline;
use pipetrace_core::accounting::Usage;
use pipetrace_core::attribution::{Attributor, Mode};
use pipetrace_core::event::{Event, ProcKey};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;
use pipetrace_core::port::ProcSnapshot;
use pipetrace_core::port::fake::{self, FakeHost};
use pipetrace_core::redact::Redactor;
use pipetrace_export::signals::SpanBuilder;

const S: u64 = 1_000_000_000;
/// Unix time at boot.
const BOOT_UNIX_NS: u64 = 1_800_000_000 * S;
const WORKDIR: &str = "/data/variants";

/// A core of `pipetrace run` for root `root_pid`, writing its spans to `file`.
fn core(fake: &FakeHost, root_pid: u32, file: &std::path::Path) -> Pipeline {
    let mut cfg = pipetrace_config::Config::default();
    cfg.export.file = Some(file.to_path_buf());
    // No history: each test judges its run alone.
    cfg.diagnosis.state_dir = None;
    let info = pipetrace_core::machine::fake_info(fake);
    let builder = SpanBuilder::new(info.clone(), Redactor::new(true, &[]).unwrap());
    let exporter = pipetrace_export::export::Sink::start(&cfg, &info, file.to_path_buf()).unwrap();
    let mode = Mode::Run { root_pid };
    let attr = Attributor::new(mode, &cfg.attribution, BOOT_UNIX_NS as i128, fake.shared());
    let outputs = pipetrace_export::outputs::Outputs::of_sink(exporter);
    crate::assembly::pipeline(
        &cfg,
        &info,
        (attr.unwrap(), builder),
        outputs,
        (false, false),
    )
    .unwrap()
}

fn key(pid: u32, start_ns: u64) -> ProcKey {
    ProcKey::from_ns(pid, start_ns)
}

/// A process forked by `parent` at `at` that execs `argv` at once.
fn start(pid: u32, parent: ProcKey, at: u64, argv: &[&str]) -> (ProcKey, [Event; 2]) {
    let k = key(pid, at);
    (k, fake::fork_exec(k, parent, at, argv))
}

/// Its end at `at`, then the kernel's usage report as its parent reaps it.
fn end(k: ProcKey, at: u64, code: u32) -> [Event; 2] {
    let usage = Usage {
        cpu_user_ns: 300_000_000,
        maxrss_bytes: 50 << 20,
        ..Default::default()
    };
    let exit = Event::Exit {
        key: k,
        time_ns: at,
        status: code << 8,
        image_peak_bytes: 0,
        at_exit: None,
    };
    [exit, Event::Usage { key: k, usage }]
}

/// Snakemake's record of a finished job, as it writes one per output.
fn record(fake: &FakeHost, output: &str, rule: &str, shellcmd: &str, from: u64, to: u64) {
    let unix = |ns: u64| (BOOT_UNIX_NS + ns) as f64 / 1e9;
    let json = serde_json::json!({
        "rule": rule, "shellcmd": shellcmd, "code": "",
        "starttime": unix(from), "endtime": unix(to), "incomplete": false,
    });
    let name = base64::engine::general_purpose::URL_SAFE.encode(output);
    let path = format!("{WORKDIR}/.snakemake/metadata/{name}");
    fake.write(path, json.to_string());
}

async fn finish(mut pipe: Pipeline, file: &std::path::Path) -> Vec<ReportSpan> {
    pipe.poll(true);
    let (exporter, _) = pipe.end();
    assert!(exporter.shutdown(Duration::from_secs(5)).await);
    crate::report::read_file(file).unwrap()
}

fn named(spans: &[ReportSpan], kind: Kind) -> Vec<&ReportSpan> {
    spans.iter().filter(|s| s.kind == kind).collect()
}

#[tokio::test]
async fn a_snakemake_run_is_named_from_its_records_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.jsonl");
    let fake = FakeHost::new(BOOT_UNIX_NS, 100 * S);
    fake.add_process(ProcSnapshot {
        pid: 100,
        ppid: 1,
        start_ticks: key(100, 100 * S).start_ticks,
        comm: "snakemake".into(),
        exe: None,
        argv: vec!["python3".into()],
        cwd: Some(WORKDIR.into()),
        uid: Some(1000),
    });
    let mut pipe = core(&fake, 100, &file);
    let shell = "sort -k2 calls/A.vcf > sorted/A.vcf";
    let engine = ["/usr/bin/python3", "/usr/bin/snakemake", "--cores", "1"];
    let (root, evs) = start(100, key(1, 0), 100 * S, &engine);
    evs.into_iter().for_each(|e| pipe.handle(e));
    let job = format!("set -euo pipefail;  {shell}");
    let (bash, mut evs) = start(101, root, 101 * S, &["/usr/bin/bash", "-c", &job]);
    // Snakemake starts its jobs from a thread of its executor, not its main thread.
    if let Event::Fork { parent_tid, .. } = &mut evs[0] {
        *parent_tid = 107;
    }
    evs.into_iter().for_each(|e| pipe.handle(e));
    // Snakemake logs the job's block as it starts it.
    fake.set_boottime(101 * S);
    let block = "rule sort_calls:\n    input: calls/A.vcf\n    output: sorted/A.vcf\n    \
                 jobid: 4\n    wildcards: sample=A\n\n";
    fake.write(format!("{WORKDIR}/.snakemake/log/x.snakemake.log"), block);
    let (sort, evs) = start(102, bash, 101 * S + 5_000_000, &["/usr/bin/sort", "-k2"]);
    evs.into_iter().for_each(|e| pipe.handle(e));
    fake.set_boottime(102 * S);
    end(sort, 102 * S - 1_000_000, 0)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    end(bash, 102 * S, 0)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    // The engine writes its record as the job ends; the core reads it through the host.
    record(&fake, "sorted/A.vcf", "sort_calls", shell, 101 * S, 102 * S);
    fake.set_boottime(103 * S);
    end(root, 103 * S, 0)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    fake.advance(Duration::from_secs(10));
    let spans = finish(pipe, &file).await;

    let tasks = named(&spans, Kind::Task);
    assert_eq!(tasks.len(), 1, "{spans:#?}");
    assert_eq!(
        tasks[0].name, "sort_calls (sample=A)",
        "named by the engine's records"
    );
    let run = named(&spans, Kind::Run);
    assert_eq!(run.len(), 1);
    let pipeline = run[0].text(attr::CICD_PIPELINE_NAME);
    assert_eq!(pipeline, Some("variants"), "named by its working directory");
    assert_eq!(tasks[0].parent.as_ref(), Some(&run[0].id));
    let tools = named(&spans, Kind::Tool);
    let sorter = tools
        .iter()
        .find(|t| t.name == "sort")
        .expect("sort is a tool");
    assert_eq!(sorter.parent.as_ref(), Some(&tasks[0].id));
    // Wall-clock times come from the boot clock and the host's boot time.
    assert_eq!(tasks[0].start, BOOT_UNIX_NS + 101 * S);
}

/// A cgroup v2 host where each `(pid, job)` runs in /jobs/`job`, limited to 1 GiB.
fn limited_jobs(fake: &FakeHost, jobs: &[(u32, &str)]) {
    fake.write(
        "/proc/self/mountinfo",
        "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
    );
    fake.write("/sys/fs/cgroup/jobs/memory.max", "max\n");
    for (pid, job) in jobs {
        fake.write(format!("/proc/{pid}/cgroup"), format!("0::/jobs/{job}\n"));
        let limit = format!("/sys/fs/cgroup/jobs/{job}/memory.max");
        fake.write(limit, "1073741824\n");
    }
}

#[tokio::test]
async fn an_oom_kill_reads_its_cgroup_and_limit_through_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.jsonl");
    let fake = FakeHost::new(BOOT_UNIX_NS, 50 * S);
    limited_jobs(&fake, &[(201, "j1")]);
    let mut pipe = core(&fake, 200, &file);
    let (root, evs) = start(200, key(1, 0), 50 * S, &["/bin/sh", "job.sh"]);
    evs.into_iter().for_each(|e| pipe.handle(e));
    let (tool, evs) = start(201, root, 51 * S, &["/usr/bin/python3", "big.py"]);
    evs.into_iter().for_each(|e| pipe.handle(e));
    pipe.handle(Event::Oom {
        pid: 201,
        time_ns: 52 * S,
        anon_rss_bytes: 1 << 30,
        file_rss_bytes: 0,
        shmem_rss_bytes: 0,
        limit_bytes: None,
        trigger: Some((202, "samtools".into())),
    });
    end(tool, 52 * S + 1000, 128 + 9)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    end(root, 53 * S, 1)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    fake.set_boottime(60 * S);
    let spans = finish(pipe, &file).await;

    let killed = (spans.iter())
        .find(|s| s.name == "python3" || s.name == "big.py")
        .expect("the killed tool's span");
    let oom = (killed.events.iter())
        .find(|e| e.name == pipetrace_semconv::event::OOM_KILL)
        .expect("an OOM event");
    assert_eq!(
        oom.texts.get(attr::OOM_CGROUP).map(String::as_str),
        Some("/jobs/j1")
    );
    assert_eq!(
        oom.numbers.get(attr::MEMORY_LIMIT),
        Some(&((1u64 << 30) as f64))
    );
    // Who set it off goes with it, to the span and on to the judgement.
    assert_eq!(oom.numbers.get(attr::OOM_TRIGGER_PID), Some(&202.0));
    assert_eq!(
        oom.texts.get(attr::OOM_TRIGGER).map(String::as_str),
        Some("samtools")
    );
}

/// A task that ended within the batch its exec came in is gone or about to be: it gets the
/// host's allocation without a read of its cgroup; one still running gets its cgroup's.
#[tokio::test]
async fn allocations_are_read_after_the_batch_and_only_for_tasks_still_running() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.jsonl");
    let fake = FakeHost::new(BOOT_UNIX_NS, 50 * S);
    // Both limited: a read of the ended one's would show as its limit.
    limited_jobs(&fake, &[(201, "j201"), (202, "j202")]);
    let mut pipe = core(&fake, 200, &file);
    let (root, evs) = start(200, key(1, 0), 50 * S, &["/bin/sh", "job.sh"]);
    let mut batch: Vec<Event> = evs.into();
    let (short, evs) = start(201, root, 51 * S, &["/bin/true"]);
    batch.extend(evs);
    batch.extend(end(short, 51 * S + 5000, 0));
    let (long, evs) = start(202, root, 51 * S + 6000, &["/bin/sleep", "9"]);
    batch.extend(evs);
    pipe.ingest(&mut batch, 0);
    end(long, 60 * S, 0)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    end(root, 61 * S, 0)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    fake.set_boottime(70 * S);
    let spans = finish(pipe, &file).await;

    let task = |name: &str| {
        (spans.iter())
            .find(|s| s.kind == Kind::Task && s.name.contains(name))
            .unwrap_or_else(|| panic!("task {name}: {spans:#?}"))
    };
    let (short, long) = (task("true"), task("sleep"));
    assert_eq!(
        long.numbers.get(attr::MEMORY_LIMIT),
        Some(&((1u64 << 30) as f64))
    );
    assert_eq!(short.numbers.get(attr::MEMORY_LIMIT), None);
    assert_eq!(
        short
            .texts
            .get(attr::CPU_ALLOCATION_SOURCE)
            .map(String::as_str),
        Some("host")
    );
}

/// A workflow whose `grep_miss` step accepts grep's 1 (no match), whose `timed` step
/// accepts the 1 of the grep it runs under `timeout`, whose `shelled` step runs grep under
/// `sh -c` (ShellCommandRequirement) and accepts its 1, and whose `boom` fails.
const SUCCESS_CODES_WF: &str = "cwlVersion: v1.2\nclass: Workflow\ninputs: {}\noutputs: {}\n\
steps:\n  grep_miss:\n    run:\n      class: CommandLineTool\n      baseCommand: [grep, nomatch]\n      \
successCodes: [0, 1]\n      inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n  \
timed:\n    run:\n      class: CommandLineTool\n      baseCommand: [timeout, '5', grep, x]\n      \
successCodes: [0, 1]\n      inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n  \
shelled:\n    run:\n      class: CommandLineTool\n      \
requirements: {ShellCommandRequirement: {}}\n      baseCommand: [grep, y]\n      \
successCodes: [0, 1]\n      inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n  \
boom:\n    run:\n      class: CommandLineTool\n      baseCommand: [ls, /nowhere]\n      \
inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n";

/// A step: its pid, command, exit code, and the (command, exit code) of a child it runs.
type StepRun<'a> = (u32, &'a [&'a str], u32, Option<(&'a [&'a str], u32)>);

/// `cwltool --on-error continue wf.cwl` (`wf.cwl` holding `wf`) under `pipetrace run`,
/// its steps' processes run one after another: the spans.
async fn cwltool_run(wf: &str, steps: &[StepRun<'_>]) -> Vec<ReportSpan> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.jsonl");
    let fake = FakeHost::new(BOOT_UNIX_NS, 100 * S);
    fake.add_process(ProcSnapshot {
        pid: 200,
        ppid: 1,
        start_ticks: key(200, 100 * S).start_ticks,
        comm: "cwltool".into(),
        exe: None,
        argv: vec!["python3".into()],
        cwd: Some(WORKDIR.into()),
        uid: Some(1000),
    });
    fake.write(format!("{WORKDIR}/wf.cwl"), wf);
    let mut pipe = core(&fake, 200, &file);
    let engine = [
        "/usr/bin/python3",
        "/usr/bin/cwltool",
        "--on-error",
        "continue",
        "wf.cwl",
    ];
    let (root, evs) = start(200, key(1, 0), 100 * S, &engine);
    evs.into_iter().for_each(|e| pipe.handle(e));
    for (n, (pid, argv, code, child)) in (1..).zip(steps) {
        let (k, evs) = start(*pid, root, (100 + n) * S, argv);
        evs.into_iter().for_each(|e| pipe.handle(e));
        if let Some((argv, code)) = child {
            let (c, evs) = start(pid + 50, k, (100 + n) * S + S / 8, argv);
            evs.into_iter().for_each(|e| pipe.handle(e));
            let ended = end(c, (100 + n) * S + S / 4, *code);
            ended.into_iter().for_each(|e| pipe.handle(e));
        }
        let ended = end(k, (100 + n) * S + S / 2, *code);
        ended.into_iter().for_each(|e| pipe.handle(e));
    }
    let last = 101 + steps.len() as u64;
    fake.set_boottime(last * S);
    end(root, last * S, 1)
        .into_iter()
        .for_each(|e| pipe.handle(e));
    finish(pipe, &file).await
}

/// Each task's error, and the error of the tool span of its own process, or where a shell
/// only wraps its command, of that command (the first tool under it), by task name.
fn errors(spans: &[ReportSpan]) -> Vec<(String, Option<String>, Option<String>)> {
    let tools = named(spans, Kind::Tool);
    let mut out: Vec<_> = (named(spans, Kind::Task).into_iter())
        .map(|t| {
            let under = tools.iter().filter(|s| s.parent.as_ref() == Some(&t.id));
            let own = under.min_by_key(|s| s.start);
            let own = own.unwrap_or_else(|| panic!("{}'s own tool: {spans:#?}", t.name));
            (t.name.clone(), t.error.clone(), own.error.clone())
        })
        .collect();
    out.sort();
    out
}

/// cwltool counts an exit code its tool's `successCodes` lists as the job's success: that
/// task did not fail, in its span, its own process's span (or, under a shell that only
/// wraps it, its command's) or the run's count; a step that exits 2 did. A tool the task's
/// process runs is judged by its own exit, as no list speaks of it.
#[tokio::test]
async fn a_cwltool_step_that_exits_with_one_of_its_success_codes_did_not_fail() {
    let steps: [StepRun; 4] = [
        (
            201,
            &["/usr/bin/grep", "nomatch", "/tmp/x/env.out"],
            1,
            None,
        ),
        (
            202,
            &["/usr/bin/timeout", "5", "grep", "x", "/tmp/y/f"],
            1,
            Some((&["/usr/bin/grep", "x", "/tmp/y/f"], 1)),
        ),
        (
            203,
            &["/bin/sh", "-c", "grep y /tmp/w/g"],
            1,
            Some((&["/usr/bin/grep", "y", "/tmp/w/g"], 1)),
        ),
        (204, &["/bin/ls", "/nowhere"], 2, None),
    ];
    let spans = cwltool_run(SUCCESS_CODES_WF, &steps).await;

    let error = |e: &str| Some(e.to_string());
    let expected = [
        (
            "boom",
            error("task boom exited with code 2"),
            error("ls exited with code 2"),
        ),
        ("grep_miss", None, None),
        ("shelled", None, None),
        ("timed", None, None),
    ];
    let expected = expected.map(|(n, t, o)| (n.to_string(), t, o));
    assert_eq!(errors(&spans), expected, "{spans:#?}");
    let helper = (named(&spans, Kind::Tool).into_iter())
        .find(|s| s.name == "grep" && s.start == BOOT_UNIX_NS + 102 * S + S / 8)
        .expect("the grep timeout ran");
    assert_eq!(
        helper.error.as_deref(),
        Some("grep exited with code 1"),
        "a tool inside the task is judged by its own exit"
    );
    let run = named(&spans, Kind::Run);
    assert_eq!(run[0].numbers.get(attr::RUN_TASKS_FAILED), Some(&1.0));
}

/// Steps whose tools list exit codes as failures: `true` whose 0 is a permanent failure,
/// `false` whose 1 is a temporary one, and `false` whose 1 is listed both as a success and
/// as a permanent failure (success codes come first).
const FAIL_CODES_WF: &str = "cwlVersion: v1.2\nclass: Workflow\ninputs: {}\noutputs: {}\n\
steps:\n  zero_fatal:\n    run:\n      class: CommandLineTool\n      baseCommand: ['true', zero]\n      \
permanentFailCodes: [0]\n      inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n  \
retry:\n    run:\n      class: CommandLineTool\n      baseCommand: ['false', retry]\n      \
temporaryFailCodes: [1]\n      inputs: {}\n      outputs: {}\n    in: {}\n    out: []\n  \
twice:\n    run:\n      class: CommandLineTool\n      baseCommand: ['false', twice]\n      \
successCodes: [1]\n      permanentFailCodes: [1]\n      inputs: {}\n      outputs: {}\n    \
in: {}\n    out: []\n";

/// cwltool judges an exit code its tool lists in `temporaryFailCodes` or
/// `permanentFailCodes` a failure, even 0, unless `successCodes` lists it too: so do the
/// task, its own process's span and the run's count.
#[tokio::test]
async fn a_cwltool_step_whose_exit_code_its_tool_lists_as_a_failure_failed() {
    let steps: [StepRun; 3] = [
        (201, &["/usr/bin/true", "zero"], 0, None),
        (202, &["/usr/bin/false", "retry"], 1, None),
        (203, &["/usr/bin/false", "twice"], 1, None),
    ];
    let spans = cwltool_run(FAIL_CODES_WF, &steps).await;

    let judged = |what: &str, end: &str, word: &str| {
        Some(format!("{what} {end}, which its engine counts as {word}"))
    };
    let expected = [
        (
            "retry",
            judged("task retry", "exited with code 1", "temporaryFail"),
            judged("false", "exited with code 1", "temporaryFail"),
        ),
        ("twice", None, None),
        (
            "zero_fatal",
            judged("task zero_fatal", "exited with code 0", "permanentFail"),
            judged("true", "exited with code 0", "permanentFail"),
        ),
    ];
    let expected = expected.map(|(n, t, o)| (n.to_string(), t, o));
    assert_eq!(errors(&spans), expected, "{spans:#?}");
    let run = named(&spans, Kind::Run);
    assert_eq!(run[0].numbers.get(attr::RUN_TASKS_FAILED), Some(&2.0));
}
