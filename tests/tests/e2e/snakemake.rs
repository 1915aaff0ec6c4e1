//! Debian's snakemake running the demo pipeline (bwa, samtools, coreutils, python scripts)
//! under the real probes, exported to a real OTLP receiver.
use std::{collections::BTreeSet, time::Duration};

use pipetrace_e2e::{
    Agent, demo_pipeline, pipetrace,
    receiver::{Receiver, free_ports},
    spans::{RecvSpan, Trace, Val},
    stderr,
};

/// Rules of the demo pipeline that run a process, and how many jobs each has.
const JOBS: [(&str, usize); 8] = [
    ("reference", 1),
    ("reads", 2),
    ("index", 1),
    ("align", 2),
    ("index_bam", 2),
    ("stats", 2),
    ("checksum", 2),
    ("report", 1),
];

/// Runs the demo pipeline in a fresh directory as
/// `pipetrace GLOBAL... run -- snakemake --cores 2 EXTRA...` with `env` set.
fn run_demo(
    global: &[&str],
    env: &[(&str, &str)],
    extra: &[&str],
) -> (tempfile::TempDir, std::process::Output) {
    let dir = demo_pipeline();
    let out = pipetrace()
        .envs(env.iter().copied())
        .args(global)
        .args(["run", "--", "snakemake", "--cores", "2"])
        .args(extra)
        .current_dir(dir.path())
        .output()
        .expect("run pipetrace");
    (dir, out)
}

/// The rule a tool of the demo must be under, from what it ran.
fn expected_rule(tool: &RecvSpan) -> Option<&'static str> {
    let cmd = tool.str("process.command_line");
    Some(match tool.str("pipetrace.tool.name") {
        "make_reference.py" => "reference",
        "simulate_reads.py" => "reads",
        "bwa" if cmd.starts_with("bwa index") => "index",
        "bwa" => "align",
        "samtools" if cmd.starts_with("samtools sort") => "align",
        "samtools" if cmd.starts_with("samtools index") => "index_bam",
        "samtools" if cmd.starts_with("samtools flagstat") => "stats",
        "sha256sum" | "cut" => "checksum",
        "summarize.py" => "report",
        _ => return None,
    })
}

fn cpu(s: &RecvSpan) -> f64 {
    s.num("pipetrace.cpu.user_time").unwrap_or(f64::NAN)
        + s.num("pipetrace.cpu.system_time").unwrap_or(f64::NAN)
}

/// Every tool has the kernel's usage; each task holds at least the sum of its tools' CPU
/// and I/O and at least its largest tool's peak; the run holds at least its tasks'.
fn check_rollups(t: &Trace, run: &RecvSpan) {
    // Snakemake's own helpers (the cbc solver pulp starts) may be left to init to reap: their
    // usage can be missing, and is then marked. Every job's tool is reaped by its shell; under
    // heavy parallel load the kernel now and then skips the free probe for a burst of
    // processes (docs/accounting.md, known limit): at most two job tools, marked, and counted
    // on their task.
    let mut jobs_missing = 0;
    for tool in t.tools() {
        if tool.attr("pipetrace.usage.missing").is_some() {
            assert!(tool.attr("pipetrace.cpu.user_time").is_none());
            if let Some(task) = t.task_of(tool) {
                jobs_missing += 1;
                assert!(
                    task.int("pipetrace.usage.missing").unwrap_or(0) >= 1,
                    "{} lacks usage, uncounted on {}",
                    tool.name,
                    task.name
                );
            }
            continue;
        }
        assert!(cpu(tool) >= 0.0, "{} has CPU time", tool.name);
        assert!(
            tool.num("pipetrace.memory.peak").unwrap() > 0.0,
            "{}",
            tool.name
        );
    }
    assert!(jobs_missing <= 2, "{jobs_missing} job tools lack usage");
    let tasks = t.tasks();
    for task in &tasks {
        let all: Vec<_> = t
            .tools()
            .into_iter()
            .filter(|tool| t.task_of(tool).map(|x| &x.span_id) == Some(&task.span_id))
            .collect();
        let mine: Vec<_> = all
            .iter()
            .copied()
            .filter(|x| x.attr("pipetrace.usage.missing").is_none())
            .collect();
        let sum: f64 = mine.iter().map(|x| cpu(x)).sum();
        assert!(
            cpu(task) + 1e-6 >= sum,
            "{}: task CPU below its tools'",
            task.name
        );
        let top = mine
            .iter()
            .map(|x| x.num("pipetrace.memory.peak").unwrap())
            .fold(0.0, f64::max);
        assert!(
            task.num("pipetrace.memory.peak").unwrap() >= top,
            "{}",
            task.name
        );
        let writes: f64 = mine
            .iter()
            .map(|x| x.num("pipetrace.io.write_bytes").unwrap())
            .sum();
        assert!(task.num("pipetrace.io.write_bytes").unwrap() >= writes);
        let counted = task.int("pipetrace.usage.processes").unwrap() as usize
            + task.int("pipetrace.usage.missing").unwrap_or(0) as usize;
        assert!(counted >= all.len().max(1));
        assert!(task.num("pipetrace.cpu.utilization").unwrap() >= 0.0);
        // bwa is told to use {threads}: the job block says 2, and so does the span.
        if task.str("cicd.pipeline.task.name") == "align" {
            assert_eq!(
                task.str("pipetrace.cpu.allocation_source"),
                "engine.threads"
            );
            assert_eq!(task.num("pipetrace.cpu.allocated"), Some(2.0));
        }
    }
    let tasks_cpu: f64 = tasks.iter().map(|x| cpu(x)).sum();
    assert!(cpu(run) + 1e-6 >= tasks_cpu, "run CPU below its tasks'");
    assert!(run.num("pipetrace.cpu.utilization").is_some());
}

fn check_demo_trace(spans: &[RecvSpan], failed_sample: Option<&str>) {
    let t = Trace::new(spans);
    t.assert_well_formed();
    // deployment.environment is the user's own (OTEL_RESOURCE_ATTRIBUTES), not ours.
    t.assert_names_registered(&["deployment.environment"]);

    let tasks = t.tasks();
    let mut per_rule = std::collections::BTreeMap::new();
    for task in &tasks {
        *per_rule
            .entry(task.str("cicd.pipeline.task.name"))
            .or_insert(0) += 1;
    }
    let want: std::collections::BTreeMap<_, _> = JOBS.into_iter().collect();
    if failed_sample.is_none() {
        assert_eq!(per_rule, want, "one task span per job, named by rule");
    }
    let align: BTreeSet<_> = tasks
        .iter()
        .filter(|t| t.str("cicd.pipeline.task.name") == "align")
        .map(|t| t.str("pipetrace.task.wildcards"))
        .collect();
    match failed_sample {
        None => assert_eq!(
            align,
            BTreeSet::from(["sample=A", "sample=B"]),
            "wildcards on tasks"
        ),
        // After a failure Snakemake starts nothing new: only A's chain must have run.
        Some(_) => assert!(
            align.contains("sample=A")
                && align.is_subset(&BTreeSet::from(["sample=A", "sample=B"])),
            "{align:?}"
        ),
    }

    let tools = t.tools();
    // After a failure Snakemake starts nothing new: at least A's chain ran (reference,
    // reads, index, align's two tools, stats).
    let least = if failed_sample.is_some() { 6 } else { 17 };
    assert!(tools.len() >= least, "tools: {}", tools.len());
    for tool in &tools {
        let Some(rule) = expected_rule(tool) else {
            continue;
        };
        let task = t
            .task_of(tool)
            .unwrap_or_else(|| panic!("{} has no task", tool.name));
        assert_eq!(
            task.str("cicd.pipeline.task.name"),
            rule,
            "{} under the wrong task",
            tool.str("process.command_line")
        );
        // A tool that names one sample's files is under that sample's job.
        let cmd = tool.str("process.command_line");
        let named: Vec<_> = ["A", "B"]
            .into_iter()
            .filter(|s| cmd.contains(&format!("/{s}.")))
            .collect();
        if let [sample] = named.as_slice() {
            assert_eq!(
                task.str("pipetrace.task.wildcards"),
                format!("sample={sample}"),
                "{cmd}"
            );
        }
        assert!(tool.int("process.pid").is_some_and(|p| p > 0));
        assert!(tool.int("process.parent_pid").is_some_and(|p| p > 0));
        assert!(
            tool.str("process.executable.path").starts_with('/'),
            "{}",
            tool.str("process.executable.path")
        );
        assert_eq!(tool.int("process.exit.code"), Some(0), "{cmd}");
        if cmd.starts_with("samtools index") {
            // The job's bash exec'd samtools: one process, two images.
            let images = tool.attr("pipetrace.process.images");
            assert_eq!(
                images,
                Some(&Val::List(vec![Val::Str("bash".into())])),
                "{cmd}"
            );
        }
        assert_eq!(tool.status, 1, "{cmd}: status OK");
    }
    let run = spans.iter().find(|s| s.is_run()).expect("run span");
    check_rollups(&t, run);
    assert_eq!(run.str("pipetrace.run.engine"), "snakemake");
    let said = pipetrace_e2e::snakemake::Version::Seven.says_version();
    assert_eq!(run.str("pipetrace.run.engine_version"), said);
    // The kernel's own figure, read here apart from the agent.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: i64 = (meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(run.int("pipetrace.host.memory"), Some(kib * 1024));
    assert!(!run.str("cicd.pipeline.run.id").is_empty());
    assert!(run.resource.contains_key("host.name") && run.resource.contains_key("host.id"));
    // The HTTP test names its service through OTEL_SERVICE_NAME.
    let service = if failed_sample.is_some() {
        "lab-pipelines"
    } else {
        "pipetrace"
    };
    assert_eq!(
        run.resource.get("service.name").map(|v| v.str()),
        Some(service)
    );
    // Tool and task spans carry the run's id where the spec puts it.
    for task in &tasks {
        assert_eq!(
            task.str("cicd.pipeline.run.id"),
            run.str("cicd.pipeline.run.id")
        );
    }
    match failed_sample {
        None => {
            assert_eq!(run.status, 1, "run OK: {}", run.status_message);
            assert!(tasks.iter().all(|t| t.status == 1));
        }
        Some(sample) => {
            let failed: Vec<_> = tasks.iter().filter(|t| t.status == 2).collect();
            assert_eq!(failed.len(), 1, "exactly the planted failure");
            assert_eq!(failed[0].str("cicd.pipeline.task.name"), "stats");
            assert_eq!(
                failed[0].str("pipetrace.task.wildcards"),
                format!("sample={sample}")
            );
            assert_eq!(failed[0].int("process.exit.code"), Some(3));
            assert!(
                failed[0].status_message.contains("code 3"),
                "{}",
                failed[0].status_message
            );
            assert_eq!(run.status, 2, "run ERROR when a task failed");
            assert!(
                run.status_message.contains("failed"),
                "{}",
                run.status_message
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snakemake_pipeline_over_grpc() {
    let rx = Receiver::start().await;
    let env = [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-tenant=lab%20one,x-token=s3cret",
        ),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
    ];
    let (dir, out) = run_demo(&["--endpoint", &rx.grpc_url()], &env, &[]);
    assert!(out.status.success(), "pipetrace failed: {}", stderr(&out));
    assert!(
        dir.path().join("report.txt").exists(),
        "the pipeline really ran"
    );
    // pipetrace flushed before exiting: everything is already here.
    let spans = rx.spans();
    check_demo_trace(&spans, None);
    let headers = rx.headers();
    assert!(
        headers.contains("x-tenant=lab one"),
        "OTEL_EXPORTER_OTLP_HEADERS sent: {headers:?}"
    );
    assert!(headers.contains("x-token=s3cret"), "{headers:?}");
    let summary = stderr(&out);
    assert!(summary.contains("13 tasks (0 failed)"), "{summary}");
    assert!(
        summary.contains(&format!("sent over OTLP to {}", rx.grpc_url())),
        "{summary}"
    );
    assert!(
        summary.contains("align (sample=A)"),
        "the terminal tree: {summary}"
    );
    // The scheduler's solver is the engine's: one engine line, no cbc anywhere.
    assert!(summary.contains("─ snakemake (engine)"), "{summary}");
    // As a word: a trace id's hex may hold the letters (one run in some 150 did).
    let words = summary.split(|c: char| !c.is_ascii_alphanumeric());
    assert!(!words.into_iter().any(|w| w == "cbc"), "{summary}");
    // One screen: no machines unless asked (`--machines`), no tables of one user or one
    // cost centre.
    for noise in ["machines that would have run", "by user", "by cost centre"] {
        assert!(!summary.contains(noise), "{noise}: {summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snakemake_failure_over_http_configured_by_env() {
    let rx = Receiver::start().await;
    let url = rx.http_url();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_SERVICE_NAME", "lab-pipelines"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci"),
    ];
    let (_dir, out) = run_demo(&[], &env, &["--config", "fail=A"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "snakemake's exit code passes through: {}",
        stderr(&out)
    );
    let spans = rx.spans();
    assert!(
        !spans.is_empty(),
        "nothing arrived over HTTP: {}",
        stderr(&out)
    );
    assert!(
        rx.headers().is_empty(),
        "no headers were configured: {:?}",
        rx.headers()
    );
    let env = spans[0]
        .resource
        .get("deployment.environment")
        .map(|v| v.str());
    assert_eq!(
        env,
        Some("ci"),
        "OTEL_RESOURCE_ATTRIBUTES reach the resource"
    );
    check_demo_trace(&spans, Some("A"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_traces_a_snakemake_run_it_did_not_start() {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let dir = demo_pipeline();
    let status = std::process::Command::new("snakemake")
        .args(["--cores", "2"])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("snakemake");
    assert!(status.success());
    let spans = run_trace(&rx, dir.path()).await;
    agent.stop();
    check_demo_trace(&spans, None);
}

/// The trace of the run in `dir`: a Snakemake run is named by its directory.
async fn run_trace(rx: &Receiver, dir: &std::path::Path) -> Vec<RecvSpan> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    rx.run_trace(&name, Duration::from_secs(20)).await
}

/// The independent `rotel` collector (PyPI) between pipetrace and the receiver: a third
/// party accepts pipetrace's OTLP and passes it on intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_party_collector_accepts_our_otlp() {
    let rotel = pipetrace_e2e::rotel_agent();
    let rx = Receiver::start().await;
    let [port, http_port] = free_ports();
    let mut collector = std::process::Command::new(&rotel)
        .args([
            "start",
            "--otlp-grpc-endpoint",
            &format!("127.0.0.1:{port}"),
            "--otlp-http-endpoint",
            &format!("127.0.0.1:{http_port}"),
            "--exporter",
            "otlp",
            "--otlp-exporter-endpoint",
            &rx.grpc_url(),
            "--otlp-exporter-protocol",
            "grpc",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start rotel");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "rotel never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_dir, out) = run_demo(
        &["--endpoint", &format!("http://127.0.0.1:{port}")],
        &[],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("(0 failed)"),
        "rotel took every span: {}",
        stderr(&out)
    );
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| {
            s.iter().any(|s| s.is_run()) && s.iter().filter(|s| s.is_task()).count() >= 13
        })
        .await;
    let _ = collector.kill();
    let _ = collector.wait();
    check_demo_trace(&spans, None);
}

/// An agent started while a pipeline is already running finds it in /proc and still
/// exports it as one trace: the run, its running job, and the jobs after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_started_mid_run_picks_it_up_from_proc() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Snakefile"),
        "rule all:\n    input: \"done.txt\"\n\n\
         rule slow:\n    output: \"slow.txt\"\n    shell: \"sleep 8 && echo slow > {output}\"\n\n\
         rule after:\n    input: \"slow.txt\"\n    output: \"done.txt\"\n    shell: \"sort {input} > {output}\"\n",
    )
    .unwrap();
    let mut snakemake = std::process::Command::new("snakemake")
        .args(["--cores", "1"])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("snakemake");
    // Wait until the slow job's sleep runs (in this pipeline's directory: other tests run
    // their own sleeps), then start the agent: the sleep outlasts an agent's start on a
    // loaded machine (seconds, with a debug build beside two busy CPUs).
    pipetrace_e2e::wait_for_process(dir.path(), "sleep");
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    assert!(snakemake.wait().unwrap().success());
    let spans = run_trace(&rx, dir.path()).await;
    agent.stop();
    let run = spans
        .iter()
        .find(|s| s.is_run())
        .expect("the run was found in /proc");
    let t = Trace::new(&spans);
    t.assert_well_formed();
    assert_eq!(run.str("pipetrace.run.engine"), "snakemake");
    assert_eq!(
        run.str("pipetrace.collection.mode"),
        "procfs",
        "the root was seeded from /proc"
    );
    let tasks: BTreeSet<_> = t
        .tasks()
        .iter()
        .map(|t| t.str("cicd.pipeline.task.name"))
        .collect();
    let names: Vec<(&str, bool, bool)> = spans
        .iter()
        .map(|s| (s.name.as_str(), s.is_task(), s.is_tool()))
        .collect();
    assert_eq!(
        tasks,
        BTreeSet::from(["slow", "after"]),
        "every span (name, task?, tool?): {names:?}"
    );
    let sleep = t
        .tools()
        .into_iter()
        .find(|s| s.str("pipetrace.tool.name") == "sleep")
        .expect("sleep tool");
    assert_eq!(
        t.task_of(sleep).map(|t| t.str("cicd.pipeline.task.name")),
        Some("slow")
    );
}

/// `snakemake --quiet` logs no job blocks; Snakemake's own metadata still names each
/// finished job's rule (wildcards are not kept there).
#[test]
fn quiet_snakemake_jobs_are_still_named_by_rule() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let (_dir, out) = run_demo(&["-o", path], &[], &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let spans = pipetrace_e2e::read_jsonl(file.path());
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let mut per_rule = std::collections::BTreeMap::new();
    for task in t.tasks() {
        *per_rule
            .entry(task.str("cicd.pipeline.task.name"))
            .or_insert(0) += 1;
    }
    assert_eq!(
        per_rule,
        JOBS.into_iter().collect(),
        "rule names without the log's job blocks"
    );
}

/// Ids come from identities, not from who observed: a node agent and `pipetrace run`,
/// watching the same Snakemake run independently, name every span the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_observers_name_the_same_run_the_same_way() {
    let by_agent = Receiver::start().await;
    let by_run = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &by_agent.grpc_url()]);
    let (dir, out) = run_demo(&["--endpoint", &by_run.grpc_url()], &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen_by_agent = run_trace(&by_agent, dir.path()).await;
    agent.stop();
    let seen_by_run = by_run.spans();
    let ids = |spans: &[RecvSpan]| -> BTreeSet<(String, String, Option<String>)> {
        spans
            .iter()
            .map(|s| (s.trace_id.clone(), s.span_id.clone(), s.parent.clone()))
            .collect()
    };
    assert!(seen_by_run.len() >= 14 + 13, "{}", seen_by_run.len());
    assert_eq!(
        ids(&seen_by_agent),
        ids(&seen_by_run),
        "same trace, same spans, same parents"
    );
}
