//! Planted faults in real Snakemake pipelines under `pipetrace run`: each is detected and
//! attributed to the right task and tool; a clean control pipeline raises no flag at all.
use std::path::Path;

use pipetrace_e2e::{
    cgroup::{MemoryCgroup, ThrottledIo},
    pipetrace, read_jsonl,
    spans::RecvSpan,
    stderr,
};
use pipetrace_semconv::{attr, event};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

/// Runs `snakefile` with `snakemake --cores 2 --keep-going`; returns the spans and stderr.
fn run(dir: &Path, snakefile: &str) -> (Vec<RecvSpan>, String) {
    std::fs::write(dir.join("Snakefile"), snakefile).unwrap();
    let out = dir.join("t.otlp.jsonl");
    // A fresh file per run: the file sink appends.
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(dir.join("t.metrics.otlp.jsonl"));
    // Stalls are judged at each metrics interval: a short window and a quick interval.
    let o = pipetrace()
        .env("PIPETRACE_DIAGNOSIS__STALL_AFTER", "1s")
        .env("PIPETRACE_METRICS__INTERVAL", "250ms")
        .arg("run")
        .arg("--output")
        .arg(&out)
        .args(["--", "snakemake", "--cores", "2", "--keep-going"])
        .current_dir(dir)
        .output()
        .unwrap();
    (read_jsonl(&out), stderr(&o))
}

fn task<'a>(spans: &'a [RecvSpan], name: &str) -> &'a RecvSpan {
    spans
        .iter()
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == name)
        .unwrap_or_else(|| panic!("task {name}"))
}

/// The durations of a span's stall events, in seconds.
fn stalled_secs(s: &RecvSpan) -> Vec<f64> {
    s.events
        .iter()
        .filter(|e| e.name == event::STALL)
        .map(|e| match e.attrs.get(attr::STALL_DURATION) {
            Some(pipetrace_e2e::spans::Val::Double(d)) => *d,
            other => panic!("{}: stall duration {other:?}", s.name),
        })
        .collect()
}

fn tools_of<'a>(spans: &'a [RecvSpan], t: &RecvSpan) -> Vec<&'a RecvSpan> {
    spans
        .iter()
        .filter(|s| s.is_tool() && s.parent.as_deref() == Some(t.span_id.as_str()))
        .collect()
}

/// A loop device over a file: storage whose every request goes through a kernel worker, so
/// a synchronous writer waits on each one (this VM's own disk answers too fast to tell).
struct LoopDevice {
    dev: String,
    _file: tempfile::NamedTempFile,
}

impl LoopDevice {
    fn new() -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        // Written out here, outside the measured task: the writer then only waits on I/O.
        let mut f = file.as_file();
        std::io::Write::write_all(&mut f, &vec![3u8; 64 << 20]).unwrap();
        f.sync_all().unwrap();
        let o = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file.path())
            .output()
            .expect("losetup (util-linux)");
        assert!(
            o.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        Self { dev, _file: file }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.dev])
            .status();
    }
}

#[test]
fn planted_faults_are_found_on_the_right_task_and_tool() {
    let cg = MemoryCgroup::new(64 << 20);
    let disk = LoopDevice::new();
    let slow = ThrottledIo::new(Path::new(&disk.dev), 100);
    let dir = tempfile::tempdir().unwrap();
    let snakefile = format!(
        r#"rule all:
    input: "io.done", "cpu.done", "ask.done", "pulse.done", "oom.done", "stuck.done", "half.done", "nap.done"

# One after another (each needs the one before), so that no fault blurs another.

# Only sleeps, 20 s, beside the others: idle, never io-bound. On a machine booted minutes
# before, a `sleep 25` once showed 543 s of block-I/O wait the kernel counted from boot.
rule nap:
    output: "nap.done"
    shell: "sleep 20 && touch {{output}}"

# An O_DIRECT writer on storage that takes 10 ms a write: waits for the device on every
# write and spends next to no CPU (a writer that spends much, on a busy machine, is where
# this kernel miscounts block-I/O waits). Three runs of it: the kernel now and then reports
# a process's block-I/O wait from boot, which pipetrace drops.
rule io:
    output: "io.done"
    shell: "echo $$ > {io}/cgroup.procs && for i in 1 2 3; do {w} direct {disk} 700; done; touch {{output}}"

# A CPU burner with many short helpers.
rule cpu:
    input: "io.done"
    output: "cpu.done"
    shell: "for i in $(seq 100); do {w} short; done; {w} burn 1200; touch {{output}}"

# Asks for 2 CPUs, uses none.
rule ask:
    input: "cpu.done"
    output: "ask.done"
    threads: 2
    shell: "{w} sleep 1500 && touch {{output}}"

# Half busy, in tools younger than a second one after another: never idle.
rule pulse:
    input: "ask.done"
    output: "pulse.done"
    shell: "for i in 1 2 3; do {w} pulse 800; done; touch {{output}}"

# Sleeps: no CPU, no I/O, nothing starts or ends.
rule stuck:
    input: "pulse.done"
    output: "stuck.done"
    shell: "{w} sleep 3000 && touch {{output}}"

# One tool sleeps while the other burns: the tool stalls, its task does not.
rule half:
    input: "stuck.done"
    output: "half.done"
    shell: "{w} sleep 3000 & {w} burn 3000; wait; touch {{output}}"

# More memory than its cgroup allows.
rule oom:
    input: "half.done"
    output: "oom.done"
    shell: "echo $$ > {cg}/cgroup.procs && {w} alloc 256 && touch {{output}}"
"#,
        w = WORKLOAD,
        cg = cg.0.display(),
        io = slow.0.display(),
        disk = disk.dev
    );
    let (spans, err) = run(dir.path(), &snakefile);

    let io = task(&spans, "io");
    let figures = |s: &RecvSpan| {
        format!(
            "{}: CPU {:?}+{:?} s, I/O wait {:?} s, CPU wait {:?} s, impossible {:?}",
            s.name,
            s.num(attr::CPU_USER_TIME),
            s.num(attr::CPU_SYSTEM_TIME),
            s.num(attr::DISK_WAIT_TIME),
            s.num(attr::CPU_RUN_QUEUE_DELAY),
            s.attrs.get(attr::USAGE_IMPOSSIBLE),
        )
    };
    let io_tools: Vec<String> = tools_of(&spans, io).into_iter().map(figures).collect();
    assert_eq!(
        io.str(attr::BOTTLENECK),
        "io-bound",
        "{}; {}; tools {io_tools:#?} {err}",
        io.str(attr::BOTTLENECK_REASON),
        figures(io),
    );
    // Sub-second tools' work is progress though none is old enough for a series of its own.
    let pulse = task(&spans, "pulse");
    assert_ne!(
        pulse.str(attr::BOTTLENECK),
        "idle",
        "{}",
        pulse.str(attr::BOTTLENECK_REASON)
    );
    let writers: Vec<_> = tools_of(&spans, io)
        .into_iter()
        .filter(|t| t.name == "workload")
        .collect();
    assert_eq!(writers.len(), 3);
    // Each writer's own wait is on its span (each too short alone for a verdict), measured
    // beside the CPU burners: most of a life spent waiting on a throttled disk, never an
    // impossible figure (delay accounting loses such waits under contention on 6.12+).
    for t in &writers {
        let life = (t.end - t.start) as f64 / 1e9;
        let wait = t.num(attr::DISK_WAIT_TIME).unwrap_or(0.0);
        assert!(
            wait >= 0.5 * life && wait <= life && !t.attrs.contains_key(attr::USAGE_IMPOSSIBLE),
            "{} over {life:.2} s",
            figures(t)
        );
    }

    let cpu = task(&spans, "cpu");
    assert_eq!(
        cpu.str(attr::BOTTLENECK),
        "cpu-bound",
        "{}",
        cpu.str(attr::BOTTLENECK_REASON)
    );
    assert!(
        cpu.int(attr::USAGE_PROCESSES).unwrap() >= 102,
        "the helpers count too"
    );
    let workloads = tools_of(&spans, cpu)
        .iter()
        .filter(|t| t.name == "workload")
        .count();
    assert_eq!(workloads, 101, "100 helpers and the burner");

    let nap = task(&spans, "nap");
    assert_eq!(
        nap.str(attr::BOTTLENECK),
        "idle",
        "{}",
        nap.str(attr::BOTTLENECK_REASON)
    );
    let wall = (nap.end - nap.start) as f64 / 1e9;
    assert!(wall >= 20.0, "{wall}");
    for s in std::iter::once(nap).chain(tools_of(&spans, nap)) {
        let life = (s.end - s.start) as f64 / 1e9;
        let waited = s.num(attr::DISK_WAIT_TIME).unwrap_or(0.0);
        assert!(
            waited <= life,
            "{}: {waited} s of I/O wait in {life} s",
            s.name
        );
        assert_ne!(s.str(attr::BOTTLENECK), "io-bound", "{}", s.name);
    }

    let ask = task(&spans, "ask");
    assert_eq!(ask.str(attr::CPU_ALLOCATION_SOURCE), "engine.threads");
    assert_eq!(ask.str(attr::RIGHTSIZING), "over-allocated");
    assert_eq!(ask.int(attr::RECOMMENDATION_CPUS), Some(1));
    // Under load a sleeper may also have waited for a CPU ("0.1 wanted"): said between.
    let said = ask.str(attr::RECOMMENDATION);
    assert!(
        said.starts_with("ask: 0.0 of 2 CPUs used") && said.ends_with(": ask for 1 CPU"),
        "{said}"
    );
    assert_eq!(ask.str(attr::BOTTLENECK), "idle");

    let oom = task(&spans, "oom");
    assert_eq!(oom.status, 2);
    assert!(
        oom.status_message.contains("OOM killer"),
        "{}",
        oom.status_message
    );
    let victim = tools_of(&spans, oom)
        .into_iter()
        .find(|t| t.name == "workload")
        .expect("the OOM victim's span");
    assert!(victim.events.iter().any(|e| e.name == event::OOM_KILL));

    // The sleeping task and its sleeping tool each stalled once, for most of the 3 s.
    let stuck = task(&spans, "stuck");
    let sleeper = tools_of(&spans, stuck)
        .into_iter()
        .find(|t| t.name == "workload")
        .expect("the stuck task's tool");
    for s in [stuck, sleeper] {
        let secs = stalled_secs(s);
        assert_eq!(secs.len(), 1, "{}: {:?}", s.name, s.events);
        assert!(
            (1.5..=3.5).contains(&secs[0]),
            "{} stalled {} s of its 3 s sleep",
            s.name,
            secs[0]
        );
    }
    // A tool that sleeps beside a busy one: the tool stalled, its task kept making progress.
    let half = task(&spans, "half");
    assert!(stalled_secs(half).is_empty(), "{:?}", half.events);
    let (sleeping, busy): (Vec<_>, Vec<_>) = tools_of(&spans, half)
        .into_iter()
        .filter(|t| t.name == "workload")
        .partition(|t| t.str(attr::PROCESS_COMMAND_LINE).contains(" sleep "));
    assert_eq!((sleeping.len(), busy.len()), (1, 1));
    assert_eq!(
        stalled_secs(sleeping[0]).len(),
        1,
        "{:?}",
        sleeping[0].events
    );
    assert!(stalled_secs(busy[0]).is_empty(), "{:?}", busy[0].events);
    // Busy tasks and their tools never stall, however long they run.
    for name in ["io", "cpu", "oom"] {
        let t = task(&spans, name);
        for s in std::iter::once(t).chain(tools_of(&spans, t)) {
            assert!(
                stalled_secs(s).is_empty(),
                "{name}: {}: {:?}",
                s.name,
                s.events
            );
        }
    }
    // The gauge to alert on saw it.
    let metrics = std::fs::read_to_string(dir.path().join("t.metrics.otlp.jsonl")).unwrap();
    let stalled_seen = metrics.lines().any(|l| {
        let req = serde_json::from_str(l).unwrap();
        pipetrace_e2e::metrics::flatten_metrics(req)
            .iter()
            .any(|p| {
                p.name == pipetrace_semconv::metric::TASKS_STALLED
                    && p.str(attr::CICD_PIPELINE_TASK_NAME) == "stuck"
                    && p.value >= 1.0
            })
    });
    assert!(
        stalled_seen,
        "pipetrace.tasks.stalled counted the stuck task"
    );

    // Only the planted faults: nothing else failed or asked for too much.
    for s in spans.iter().filter(|s| s.is_task()) {
        let name = s.str(attr::CICD_PIPELINE_TASK_NAME);
        assert_eq!(s.status == 2, name == "oom", "{name}: {}", s.status_message);
        assert_eq!(
            s.str(attr::RIGHTSIZING) == "over-allocated",
            name == "ask",
            "{name}"
        );
    }
    // The tree names what happened, on the tool and task it happened to.
    for want in [
        "no CPU, no I/O and no process started or ended for",
        "killed by the OOM killer at",
    ] {
        assert!(err.contains(want), "the tree lacks {want}: {err}");
    }
    // The end-of-run table names the judgement's ask for next time, in Snakemake's words,
    // as the page's "ask next time" and `suggest` do.
    let row = (err.lines())
        .find(|l| l.starts_with("ask ") && l.contains(" MiB "))
        .unwrap_or_else(|| panic!("no table row of ask: {err}"));
    assert!(row.ends_with("  threads: 1"), "{row}");

    // The HTML report beside the trace, and the same from the trace file afterwards.
    let html = std::fs::read_to_string(dir.path().join("t.report.html")).unwrap();
    for want in [
        "<svg",
        "io-bound",
        "Ask next time: threads: 1",
        // Events and failures in words, placed on their task and tool.
        "killed by the OOM killer at",
        "limit 64 MiB",
        "no CPU, no I/O and no process started or ended for",
        "oom › workload",
        "stuck",
    ] {
        assert!(html.contains(want), "report lacks {want}");
    }
    // The findings, most serious first: the OOM kill, the stall, the over-ask; each links to
    // its job's row.
    let findings = html
        .split("<ol class=\"findings\">")
        .nth(1)
        .expect("findings");
    let findings = &findings[..findings.find("</ol>").unwrap()];
    // Where the item of `class` naming `job` is (the sleeping nap stalls too).
    let at = |class: &str, job: &str| {
        let item = format!("<li class=\"{class}\"><a href=\"#job-");
        let named = format!("\">{job}</a>");
        (findings.match_indices(&item).map(|(i, _)| i))
            .find(|i| {
                findings[*i..]
                    .split("</li>")
                    .next()
                    .unwrap()
                    .contains(&named)
            })
            .unwrap_or_else(|| panic!("no {class} finding of {job}: {findings}"))
    };
    let (oom, stall, ask) = (at("oom", "oom"), at("stall", "stuck"), at("overask", "ask"));
    assert!(oom < stall && stall < ask, "{findings}");
    // Self-contained: nothing fetched from elsewhere (its one script is inline).
    assert!(!html.contains("<script src") && !html.contains("<link"));
    let again = dir.path().join("again.html");
    let o = pipetrace()
        .arg("report")
        .arg(dir.path().join("t.otlp.jsonl"))
        .arg("--html")
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    let again_row = (table.lines()).find(|l| l.starts_with("ask ") && l.contains(" MiB "));
    assert_eq!(
        again_row,
        Some(row),
        "the same advice from the file: {table}"
    );
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        html,
        "same report either way"
    );
    // The metrics file is not a trace file: a clear refusal.
    let o = pipetrace()
        .arg("report")
        .arg(dir.path().join("t.metrics.otlp.jsonl"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not an OTLP JSON trace request"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_clean_control_pipeline_raises_no_flag() {
    let dir = tempfile::tempdir().unwrap();
    let snakefile = format!(
        r#"rule all:
    input: "burn.done", "write.done", "alloc.done", "pair.done"

rule burn:
    output: "burn.done"
    shell: "{w} burn 1200 && touch {{output}}"

rule write:
    output: "write.done"
    shell: "{w} write out.bin 20971520 && touch {{output}}"

rule alloc:
    output: "alloc.done"
    shell: "{w} alloc 64 && {w} burn 1100 && touch {{output}}"

# Asks for 2 CPUs and uses them.
rule pair:
    output: "pair.done"
    threads: 2
    shell: "{w} threads 2 1200 && touch {{output}}"
"#,
        w = WORKLOAD
    );
    // On a machine that never ran Snakemake, its solver (cbc) and Python's modules are read
    // from disk on first use: a real wait that is rightly judged io-bound. The control is
    // about the pipeline, so it runs warm: the same pipeline once before, untraced.
    let warm = tempfile::tempdir().unwrap();
    std::fs::write(warm.path().join("Snakefile"), &snakefile).unwrap();
    let o = std::process::Command::new("snakemake")
        .args(["--cores", "2", "--keep-going", "--quiet"])
        .current_dir(warm.path())
        .output()
        .expect("snakemake");
    assert!(o.status.success(), "warm-up: {}", stderr(&o));
    // Someone else keeps a core busy: no verdict may change for it.
    let load = pipetrace_e2e::CpuLoad::start();
    let (spans, err) = run(dir.path(), &snakefile);
    drop(load);
    assert!(spans.len() >= 9, "{err}");
    for s in &spans {
        assert_ne!(s.status, 2, "{}: {}", s.name, s.status_message);
        assert!(s.flags().is_empty(), "{}: {:?}", s.name, s.flags());
        assert_ne!(s.str(attr::RIGHTSIZING), "over-allocated", "{}", s.name);
        let why = s.str(attr::BOTTLENECK_REASON);
        assert_ne!(s.str(attr::BOTTLENECK), "io-bound", "{}: {why}", s.name);
        assert_ne!(s.str(attr::BOTTLENECK), "memory-bound", "{}: {why}", s.name);
        assert_ne!(s.str(attr::BOTTLENECK), "idle", "{}: {why}", s.name);
    }
    assert_eq!(task(&spans, "burn").str(attr::BOTTLENECK), "cpu-bound");
    assert_eq!(task(&spans, "pair").str(attr::RIGHTSIZING), "fits");
    let row = (err.lines())
        .find(|l| l.starts_with("pair ") && l.contains(" MiB "))
        .unwrap_or_else(|| panic!("no table row of pair: {err}"));
    assert!(row.ends_with("  as now"), "{row}");
}

#[test]
fn a_task_far_slower_than_its_history_says_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |ms: u64| {
        format!(
            "rule all:\n    input: \"nap.done\"\n\nrule nap:\n    output: \"nap.done\"\n    \
             shell: \"{WORKLOAD} sleep {ms} && touch {{output}}\"\n"
        )
    };
    // Three usual runs, then one three times as long.
    let mut walls = Vec::new();
    for (i, ms) in [1200, 1100, 1200, 3600].into_iter().enumerate() {
        let _ = std::fs::remove_file(dir.path().join("nap.done"));
        let (spans, err) = run(dir.path(), &rule(ms));
        let nap = task(&spans, "nap");
        let slower: Vec<_> = nap
            .events
            .iter()
            .filter(|e| e.name == event::SLOWER_THAN_USUAL)
            .collect();
        if i < 3 {
            assert!(slower.is_empty(), "run {i}: {:?} {err}", nap.events);
            assert_eq!(
                nap.num(attr::HISTORY_USUAL_DURATION),
                None,
                "run {i}: no usual yet"
            );
            walls.push((nap.end - nap.start) as f64 / 1e9);
            continue;
        }
        // The usual is the median of the earlier runs' naps, as their own spans timed them,
        // and every task with one says it, slower or not.
        walls.sort_by(f64::total_cmp);
        let usual = nap.num(attr::HISTORY_USUAL_DURATION).unwrap();
        assert!((usual - walls[1]).abs() < 1e-3, "{usual} against {walls:?}");
        assert_eq!(nap.int(attr::HISTORY_RUNS), Some(3));
        // The report page sets the task against it and names the job.
        let page = std::fs::read_to_string(dir.path().join("t.report.html")).unwrap();
        let row = page
            .split("<tr class=\"bad\"><td>nap</td><td>1</td>")
            .nth(1);
        let row = row.unwrap_or_else(|| panic!("no row for nap: {page}"));
        let usual_cell = format!("<td>{usual:.2} s</td>");
        assert!(
            row.split("</tr>").next().unwrap().contains(&usual_cell),
            "{row}"
        );
        let history = pipetrace_e2e::state_dir().join("history");
        let saved: Vec<String> = std::fs::read_dir(&history)
            .map(|d| {
                d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(slower.len(), 1, "{:?}; history {saved:?}", nap.events);
        let a = &slower[0].attrs;
        assert_eq!(
            a.get(attr::HISTORY_RUNS),
            Some(&pipetrace_e2e::spans::Val::Int(3))
        );
        let factor = match a.get(attr::HISTORY_FACTOR) {
            Some(pipetrace_e2e::spans::Val::Double(f)) => *f,
            other => panic!("{other:?}"),
        };
        assert!(factor > 2.0, "{factor}");
    }
    // The history is a bounded file under the state directory.
    let history = pipetrace_e2e::state_dir().join("history");
    let files: Vec<_> = std::fs::read_dir(&history).unwrap().collect();
    assert_eq!(files.len(), 1);
}
