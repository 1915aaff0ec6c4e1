//! The command line as a user meets it: exit codes, signals, config errors, privileges,
//! redaction, the default output file.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{pipetrace, pipetrace_bin, read_jsonl, stderr};

mod config;

fn run_to_file(
    dir: &Path,
    argv: &[&str],
) -> (std::process::Output, Vec<pipetrace_e2e::spans::RecvSpan>) {
    let out = dir.join("t.otlp.jsonl");
    let mut args = vec!["-o", out.to_str().unwrap(), "run", "--"];
    args.extend_from_slice(argv);
    let o = pipetrace().args(&args).output().expect("run pipetrace");
    let spans = if out.exists() {
        read_jsonl(&out)
    } else {
        Vec::new()
    };
    (o, spans)
}

#[test]
fn the_commands_exit_code_passes_through() {
    let dir = tempfile::tempdir().unwrap();
    let (o, spans) = run_to_file(dir.path(), &["sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let run = spans.iter().find(|s| s.is_run()).expect("run span");
    assert_eq!(run.int("process.exit.code"), Some(7));
    assert_eq!(run.status, 2, "non-zero exit is an error");
    assert!(
        run.status_message.contains("code 7"),
        "{}",
        run.status_message
    );
}

#[test]
fn a_missing_command_is_127_with_a_message_and_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let (o, _) = run_to_file(dir.path(), &["/nonexistent/tool"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        stderr(&o).contains("cannot start `/nonexistent/tool`"),
        "{}",
        stderr(&o)
    );
    // Nor with the default file's name, claimed for the run.
    let o = pipetrace()
        .args(["run", "--", "/nonexistent/tool"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing ran, nothing written: {left:?}");
    // A file that was there before is left as it was.
    let kept = dir.path().join("t.otlp.jsonl");
    std::fs::write(&kept, "").unwrap();
    let (o, _) = run_to_file(dir.path(), &["/nonexistent/tool"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(kept.exists());
}

/// A command that is there but cannot be executed (no x bit: root too is refused that) is
/// 126, as a shell says it, with what to do; nothing ran, so no file is left, with `-o` or
/// the default name.
#[test]
fn a_command_that_cannot_be_executed_is_126_and_leaves_no_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf");
    std::fs::create_dir(&wf).unwrap();
    let script = wf.join("align.sh");
    std::fs::write(&script, "#!/bin/sh\ntouch ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    for output in [None, Some("t.otlp.jsonl")] {
        let mut args: Vec<&str> = output.map_or(vec![], |o| vec!["-o", o]);
        args.extend(["run", "--", "./align.sh"]);
        let o = pipetrace().args(&args).current_dir(&wf).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(126), "{args:?}: {err}");
        assert!(err.contains("cannot start `./align.sh`"), "{err}");
        assert!(err.contains("chmod +x"), "says what to do: {err}");
        let mut left: Vec<String> = (std::fs::read_dir(&wf).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["align.sh"], "{args:?}: nothing ran, nothing written");
    }
}

#[test]
fn runs_started_together_in_one_folder_each_write_their_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..4)
        .map(|i| {
            pipetrace()
                .args(["run", "--no-summary", "--", "sh", "-c"])
                .arg(format!("echo {i} >/dev/null; sleep 0.3"))
                .current_dir(dir.path())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    let mut names: Vec<String> = (std::fs::read_dir(dir.path()).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let traces: Vec<&String> = (names.iter())
        .filter(|n| n.ends_with(".otlp.jsonl") && !n.ends_with(".metrics.otlp.jsonl"))
        .collect();
    assert_eq!(traces.len(), 4, "{names:?}");
    for t in traces {
        let spans = read_jsonl(&dir.path().join(t));
        let runs = spans.iter().filter(|s| s.is_run()).count();
        assert_eq!(runs, 1, "{t} holds one run: {names:?}");
        // Its companions share its stem.
        let stem = t.trim_end_matches(".otlp.jsonl");
        for other in [".metrics.otlp.jsonl", ".report.html"] {
            assert!(
                names.contains(&format!("{stem}{other}")),
                "{stem}{other}: {names:?}"
            );
        }
    }
    assert_eq!(
        names.len(),
        12,
        "trace, metrics and report per run: {names:?}"
    );
    runs_to_an_endpoint_never_take_an_earlier_runs_stem();
}

/// `pipetrace-<stamp>` of the UTC second `secs` after the epoch, as a default stem is named.
fn stem_of_second(secs: u64) -> String {
    let o = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y%m%dT%H%M%SZ"])
        .output()
        .unwrap();
    format!("pipetrace-{}", String::from_utf8_lossy(&o.stdout).trim())
}

/// With --endpoint the trace file a run claimed is given back at its end, its report (and
/// what the backend did not take) kept: a run of the same second must take another stem.
/// The reports of earlier such runs are planted for every second the runs may start in.
fn runs_to_an_endpoint_never_take_an_earlier_runs_stem() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let now = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .unwrap()
        .as_secs();
    let planted: Vec<String> = (now..now + 30)
        .map(|s| format!("{}.report.html", stem_of_second(s)))
        .collect();
    for p in &planted {
        std::fs::write(dir.path().join(p), "an earlier run's").unwrap();
    }
    // Nobody listens there: each run keeps what it could not send.
    let away = format!("http://127.0.0.1:{}", pipetrace_e2e::receiver::free_port());
    let runs: Vec<_> = (0..4)
        .map(|_| {
            pipetrace()
                .args(["run", "--no-summary", "--endpoint", &away, "--", "true"])
                .env("PIPETRACE_EXPORT__FLUSH_TIMEOUT", "1s")
                .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
                .current_dir(dir.path())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    for p in &planted {
        let text = std::fs::read_to_string(dir.path().join(p)).unwrap();
        assert_eq!(text, "an earlier run's", "{p} overwritten");
    }
    let names = |d: &Path| -> Vec<String> {
        let mut n: Vec<String> = (std::fs::read_dir(d).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let here = names(dir.path());
    let reports: Vec<&String> = (here.iter())
        .filter(|n| n.ends_with(".report.html") && !planted.contains(n))
        .collect();
    assert_eq!(reports.len(), 4, "a report of its own per run: {here:?}");
    assert!(
        !here.iter().any(|n| n.ends_with(".otlp.jsonl")),
        "no trace file left: {here:?}"
    );
    let unsent = names(&state.join("unsent"));
    for r in reports {
        let kept = r.replace(".report.html", ".unsent.pb");
        assert!(unsent.contains(&kept), "{kept} in {unsent:?}");
    }
}

#[test]
fn sigterm_is_passed_on_and_telemetry_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let mut child = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--", "sleep", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the wrapped sleep runs (a child of pipetrace).
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleeping = || {
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
            .is_ok_and(|c| !c.trim().is_empty())
    };
    while !sleeping() {
        assert!(Instant::now() < deadline, "sleep never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "pipetrace did not stop promptly"
    );
    assert_eq!(st.code(), Some(143), "128 + SIGTERM, as a shell reports it");
    let spans = read_jsonl(&out);
    let run = spans
        .iter()
        .find(|s| s.is_run())
        .expect("the run span was flushed");
    assert_eq!(run.str("pipetrace.process.signal"), "SIGTERM");
    assert!(
        run.status_message.contains("killed by SIGTERM"),
        "{}",
        run.status_message
    );
}

/// Runs pipetrace as user `nobody` with no capabilities, from a copy `nobody` can reach
/// wherever the build directory is.
fn as_nobody(args: &[&str]) -> std::process::Output {
    as_nobody_with(args, &[])
}

fn as_nobody_with(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    pipetrace_e2e::as_nobody_with_caps(&[], args, env)
}

#[test]
fn without_privileges_doctor_and_run_say_what_to_do() {
    let o = as_nobody(&["doctor"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("FAIL") && out.contains("CAP_BPF"), "{out}");
    assert!(!stderr(&o).contains("panicked"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let marker = dir.path().join("ran");
    let out_file = dir.path().join("t.jsonl");
    // Strict: no fallback to /proc polling.
    let o = as_nobody_with(
        &[
            "-o",
            out_file.to_str().unwrap(),
            "run",
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
        &[("PIPETRACE_PROBES__STRICT", "true")],
    );
    assert_eq!(
        o.status.code(),
        Some(125),
        "pipetrace's own failure under run"
    );
    let err = stderr(&o);
    assert!(
        (err.contains("run as root") || err.contains("CAP_BPF")) && err.contains("probes.strict"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!marker.exists(), "nothing half-started");
}

#[test]
fn secrets_in_command_lines_never_leave() {
    let dir = tempfile::tempdir().unwrap();
    let script = "/bin/true --password=hunter2 --api-key K123SECRET https://u:pw9@h/x; /bin/true token=abc987";
    let (o, spans) = run_to_file(dir.path(), &["sh", "-c", script]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.path().join("t.otlp.jsonl")).unwrap();
    for secret in ["hunter2", "K123SECRET", "pw9", "abc987"] {
        assert!(!text.contains(secret), "{secret} leaked into the export");
    }
    let cmds: Vec<_> = spans
        .iter()
        .map(|s| s.str("process.command_line"))
        .collect();
    assert!(
        cmds.iter().any(|c| c.contains("--password=[REDACTED]")),
        "{cmds:?}"
    );
    assert!(
        cmds.iter()
            .any(|c| c.contains("--api-key '[REDACTED]'") || c.contains("--api-key [REDACTED]")),
        "{cmds:?}"
    );
}

#[test]
fn without_an_endpoint_telemetry_goes_to_a_file_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let o = pipetrace()
        .args(["run", "--", "true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".otlp.jsonl"))
        .collect();
    assert_eq!(files.len(), 2, "traces and metrics: {files:?}");
    let traces = files.iter().find(|n| !n.contains(".metrics.")).unwrap();
    let metrics = traces.replace(".otlp.jsonl", ".metrics.otlp.jsonl");
    assert!(files.contains(&metrics), "{files:?}");
    // The run's final figures: one OTLP metrics request per line, as the file exporter writes.
    let text = std::fs::read_to_string(dir.path().join(&metrics)).unwrap();
    let last = text.lines().last().expect("metrics written");
    let req: opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest =
        serde_json::from_str(last).expect("an OTLP JSON metrics request");
    let points = pipetrace_e2e::metrics::flatten_metrics(req);
    let spans = read_jsonl(&dir.path().join(traces));
    // `true` is the run's only process: the run span holds its figures.
    let run = spans.iter().find(|s| s.is_run()).expect("the run span");
    // A usage report the kernel skipped (docs/accounting.md, known limit) is counted instead.
    if run.int("pipetrace.usage.missing").unwrap_or(0) > 0 {
        let missing = points
            .iter()
            .find(|p| p.name == "pipetrace.agent.usage.missing")
            .map_or(0.0, |p| p.value);
        assert!(missing >= 1.0, "{points:?}");
    } else {
        assert!(
            points
                .iter()
                .any(|p| p.name == "process.cpu.time" && p.str("pipetrace.tool.name") == "true"),
            "{points:?}"
        );
    }
    let err = stderr(&o);
    assert!(err.contains("written as OTLP JSON to"), "{err}");
    assert!(err.contains("run true"), "the tree: {err}");
}

#[test]
fn doctor_as_root_loads_the_probes_and_reports_what_it_measures() {
    let o = pipetrace().arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("pipetrace can run here"), "{out}");
    assert!(out.contains("ok    probes"), "{out}");
    // This kernel (6.x) has the sock tracepoints; root can turn delay accounting on.
    assert!(
        out.contains("sock_send_length/sock_recv_length attached"),
        "{out}"
    );
    assert!(out.contains("delay accounting on"), "{out}");
    let on = std::fs::read_to_string("/proc/sys/kernel/task_delayacct").unwrap();
    assert_eq!(on.trim(), "1");
}

/// The agent reads every process's /proc entry, but never its environment: traced at the
/// system-call level while it watches a pipeline start and end.
#[test]
fn the_agent_never_opens_a_process_environment() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.txt");
    let mut strace = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=%file", "-o"])
        .arg(&log)
        .arg(pipetrace_e2e::pipetrace_bin())
        .arg("-o")
        .arg(dir.path().join("agent.otlp.jsonl"))
        .arg("agent")
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path())
        .env("PIPETRACE_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("strace (Debian package strace)");
    // Once it has seeded from /proc and watches, give it a pipeline to watch. Its stderr is
    // read to the end, so that it never writes to a closed pipe.
    let said = std::io::BufRead::lines(std::io::BufReader::new(strace.stderr.take().unwrap()));
    let (tx, watching) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in said.map_while(Result::ok) {
            if line.contains("pipetrace agent watching") {
                let _ = tx.send(());
            }
        }
    });
    let limit = std::time::Duration::from_secs(60);
    assert!(
        watching.recv_timeout(limit).is_ok(),
        "the agent under strace never said it was watching"
    );
    let st = std::process::Command::new("sh")
        .args([
            "-c",
            "for i in 1 2 3; do cat /proc/self/status >/dev/null; done",
        ])
        .env("API_TOKEN", "never-read")
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SIGTERM the agent (strace's child), then let strace finish.
    let agent = std::process::Command::new("pgrep")
        .args(["-P", &strace.id().to_string()])
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&agent.stdout).trim().to_string();
    assert!(!pid.is_empty(), "the agent runs under strace");
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let _ = strace.wait();
    let trace = std::fs::read_to_string(&log).unwrap();
    assert!(
        trace.contains("/proc/") && trace.contains("/cmdline"),
        "the agent read /proc (seeding): {}",
        &trace[..trace.len().min(2000)]
    );
    let environ: Vec<_> = trace.lines().filter(|l| l.contains("environ")).collect();
    assert!(environ.is_empty(), "environ opened: {environ:?}");
}

/// pipetrace ignores SIGPIPE for its own sockets; the command it wraps must not inherit
/// that: `yes | head -1` ends `yes` by SIGPIPE as it does without pipetrace.
#[test]
fn the_wrapped_command_keeps_the_default_sigpipe() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, o) = pipetrace_e2e::run_script(dir.path(), "yes | head -1 >/dev/null");
    assert!(o.status.success(), "{}", stderr(&o));
    let yes = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "yes")
        .expect("the yes span");
    assert_eq!(
        yes.str("pipetrace.process.signal"),
        "SIGPIPE",
        "{:?}",
        yes.attrs
    );
    assert!(!stderr(&o).contains("Broken pipe"), "{}", stderr(&o));
}

/// Without eBPF (here: no privileges) pipetrace says why and falls back to polling /proc:
/// the run is still traced, every span says `procfs`, and figures come from samples.
#[test]
fn without_ebpf_it_falls_back_to_polling_proc() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out_file = dir.path().join("t.otlp.jsonl");
    let state = dir.path().join("state");
    let workload = dir.path().join("workload");
    std::fs::copy(env!("CARGO_BIN_EXE_workload"), &workload).unwrap();
    let script = format!("sleep 0.5; {} burn 800; exit 3", workload.display());
    let o = as_nobody_with(
        &[
            "-o",
            out_file.to_str().unwrap(),
            "run",
            "--",
            "sh",
            "-c",
            &script,
        ],
        &[("PIPETRACE_DIAGNOSIS__STATE_DIR", state.to_str().unwrap())],
    );
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the command's own exit code: {err}"
    );
    assert!(
        err.contains("falls back to polling /proc") && err.contains("run as root"),
        "says why: {err}"
    );
    let spans = read_jsonl(&out_file);
    assert!(!spans.is_empty(), "{err}");
    for s in &spans {
        assert_eq!(s.str("pipetrace.collection.mode"), "procfs", "{}", s.name);
    }
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let burner = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload")
        .unwrap_or_else(|| panic!("the burner's span among {names:?}"));
    let cpu = burner.num("pipetrace.cpu.user_time").unwrap();
    assert!((0.4..=0.9).contains(&cpu), "sampled CPU {cpu}");
    assert!(
        burner.int("process.exit.code").is_none(),
        "unknown when polling"
    );
    let run = spans.iter().find(|s| s.is_run()).expect("the run span");
    assert_eq!(
        run.int("process.exit.code"),
        Some(3),
        "the root's, from wait()"
    );
    // Named as eBPF names it: `sh` as run, not the dash it links to.
    assert_eq!(run.name, "run sh", "{names:?}");
    // A command shorter than one look is still the run, named by its command and ended as
    // wait() said: no look saw it, `run` started and reaped it.
    for (command, code) in [("true", 0), ("false", 1)] {
        let short = dir.path().join(format!("{command}.otlp.jsonl"));
        let o = as_nobody_with(&["-o", short.to_str().unwrap(), "run", "--", command], &[]);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        let spans = read_jsonl(&short);
        let runs: Vec<_> = spans.iter().filter(|s| s.is_run()).collect();
        assert_eq!(runs.len(), 1, "{spans:?}");
        assert_eq!(runs[0].name, format!("run {command}"));
        assert_eq!(runs[0].int("process.exit.code"), Some(i64::from(code)));
    }
}

/// `pipetrace doctor` shows a running agent's own figures (loss, drops, failures, retries,
/// processes), and that it stopped once it has.
#[test]
fn doctor_shows_the_running_agents_figures() {
    let agent = pipetrace_e2e::Agent::start(&["-o", "/dev/null"]);
    let pid = agent.pid();
    // The agent writes its status every 2 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let out = loop {
        let o = pipetrace().arg("doctor").output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.contains(&format!("agent: pid {pid}")) || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        out.contains(&format!("agent: pid {pid}, ebpf mode")),
        "{out}"
    );
    assert!(out.contains("lost 0 kernel events"), "{out}");
    assert!(out.contains("spans: 0 dropped, 0 failed"), "{out}");
    assert!(out.contains("processes known"), "{out}");
    agent.stop();
    let o = pipetrace().arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("agent: not running (last status from pid {pid}")),
        "{out}"
    );
}

/// The scheduling policies seen from inside `pipetrace run` (with `prefix` before it): the
/// command's own, and those of pipetrace's threads (the command's parent).
fn policies_inside(dir: &Path, prefix: &[&str], env: &[(&str, &str)]) -> (String, Vec<String>) {
    let script = "chrt -p $$; for t in /proc/$PPID/task/*; do chrt -p ${t##*/}; done";
    let out = dir.join("t.otlp.jsonl");
    let mut c = match prefix.split_first() {
        Some((wrapper, args)) => {
            let mut c = Command::new(wrapper);
            c.args(args).arg(pipetrace_bin());
            c
        }
        None => Command::new(pipetrace_bin()),
    };
    let o = (c.envs(env.iter().copied()))
        .args(["-o", out.to_str().unwrap(), "run", "--no-summary", "--"])
        .args(["sh", "-c", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let policy = |l: &str| l.split("policy: ").nth(1).map(str::to_string);
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines().filter_map(policy);
    let command = lines.next().expect("the command's policy");
    (command, lines.collect())
}

/// pipetrace's own threads run SCHED_BATCH (`cpu_policy`, default batch): woken, they never
/// preempt the pipeline. The command keeps the policy pipetrace started with; one chosen
/// from outside (chrt) is kept, and `normal` leaves the default alone.
#[test]
fn pipetrace_runs_batch_and_its_command_keeps_the_policy_it_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let (command, own) = policies_inside(dir.path(), &[], &[]);
    assert_eq!(command, "SCHED_OTHER");
    assert!(own.len() > 1, "pipetrace's threads: {own:?}");
    assert!(own.iter().all(|p| p == "SCHED_BATCH"), "{own:?}");
    let (command, own) = policies_inside(dir.path(), &[], &[("PIPETRACE_CPU_POLICY", "normal")]);
    assert_eq!(command, "SCHED_OTHER");
    assert!(own.iter().all(|p| p == "SCHED_OTHER"), "{own:?}");
    let (command, own) = policies_inside(dir.path(), &["chrt", "-i", "0"], &[]);
    assert_eq!(command, "SCHED_IDLE");
    assert!(own.iter().all(|p| p == "SCHED_IDLE"), "{own:?}");
}
