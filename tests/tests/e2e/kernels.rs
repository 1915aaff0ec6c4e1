//! Debian's own kernels, not only this machine's: bookworm's 6.1 and bookworm-backports' 6.12
//! booted under qemu's software emulation by scripts/test-kernels.sh, `pipetrace doctor` and
//! a traced command run there, the spans checked as on the host (against wait4's figures in
//! the guest). A boot takes a minute or more on two CPUs: `make test-kernels` runs these.
use std::path::{Path, PathBuf};

use pipetrace_e2e::{pipetrace_bin, read_jsonl, spans::RecvSpan, spans::Trace};
use pipetrace_semconv::attr;
use serde_json::Value;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const RUSAGE_OF: &str = env!("CARGO_BIN_EXE_rusage-of");

/// Boots `series` and returns the folder of what the guest wrote (kept for reading after).
fn boot(series: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kernels")
        .join(series);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-kernels.sh");
    let o = std::process::Command::new(script)
        .arg(series)
        .arg(&out)
        .env("PIPETRACE_BIN", pipetrace_bin())
        .env("WORKLOAD", WORKLOAD)
        .env("RUSAGE_OF", RUSAGE_OF)
        .output()
        .expect("run scripts/test-kernels.sh");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "test-kernels.sh {series}: {err}");
    eprintln!("{err}");
    out
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// doctor passes, and says `lacks` (its check names) work with less: nothing else is short.
fn doctor_passes(dir: &Path, lacks: &[&str]) {
    let text = read(dir, "doctor.txt");
    eprintln!("{text}");
    assert_eq!(read(dir, "doctor.rc").trim(), "0", "{text}");
    assert!(text.contains("pipetrace can run here"), "{text}");
    // Check lines: "  ok    NAME: detail", "  note  NAME: ...", "  FAIL  NAME: ...".
    let checks: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_once("  "))
        .filter_map(|(status, rest)| Some((status.trim(), rest.trim().split_once(':')?.0)))
        .collect();
    assert!(checks.contains(&("ok", "probes")), "{text}");
    for (status, name) in checks {
        let expected = match lacks.contains(&name) {
            true => "note",
            false if name == "agent" => "note", // none runs in the guest
            false => "ok",
        };
        assert_eq!(status, expected, "{name}: {text}");
    }
    for name in lacks {
        assert!(text.contains(&format!("note  {name}: ")), "{name}: {text}");
    }
}

fn within(what: &str, ours: f64, truth: f64, rel: f64, abs: f64) {
    let tol = (truth.abs() * rel).max(abs);
    assert!(
        (ours - truth).abs() <= tol,
        "{what}: pipetrace {ours} vs the guest's wait4 {truth} (tolerance {tol})"
    );
}

/// The tool span of the process whose wait4 figures `ru-NAME.json` holds, and those figures.
fn reaped<'a>(dir: &Path, spans: &'a [RecvSpan], name: &str) -> (&'a RecvSpan, Value) {
    let truth: Value = serde_json::from_str(&read(dir, &format!("ru-{name}.json"))).unwrap();
    let pid = truth["pid"].as_i64().unwrap();
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.int(attr::PROCESS_PID) == Some(pid))
        .unwrap_or_else(|| panic!("no tool span for {name} (pid {pid})"));
    assert!(tool.attr(attr::USAGE_MISSING).is_none(), "{tool:?}");
    assert_eq!(tool.int(attr::PROCESS_EXIT_CODE), Some(0), "{tool:?}");
    (tool, truth)
}

/// The traced command's spans, as the host's accounting tests check them.
fn spans_as_on_the_host(dir: &Path) {
    assert_eq!(read(dir, "run.rc").trim(), "0", "{}", read(dir, "run.log"));
    let spans = read_jsonl(&dir.join("t.otlp.jsonl"));
    let trace = Trace::new(&spans);
    trace.assert_well_formed();
    let run = spans.iter().find(|s| s.is_run()).expect("run span");
    assert_eq!(run.int(attr::PROCESS_EXIT_CODE), Some(0), "{run:?}");
    let n = |s: &RecvSpan, k| s.num(k).unwrap_or_else(|| panic!("{k} missing: {s:?}"));

    let (alloc, truth) = reaped(dir, &spans, "alloc");
    let maxrss = truth["maxrss_kib"].as_f64().unwrap() * 1024.0;
    within("maxrss", n(alloc, attr::MEMORY_MAXRSS), maxrss, 0.02, 0.0);
    // The workload touched 64 MiB; its own peak is at most maxrss, which counts the image.
    let peak = n(alloc, attr::MEMORY_PEAK);
    assert!(
        peak >= 64.0 * 1048576.0 && peak <= maxrss * 1.02,
        "{alloc:?}"
    );
    within(
        "minor faults",
        n(alloc, attr::MEMORY_MINOR_FAULTS),
        truth["minflt"].as_f64().unwrap(),
        0.02,
        2.0,
    );

    let (burn, truth) = reaped(dir, &spans, "burn");
    let cpu = n(burn, attr::CPU_USER_TIME) + n(burn, attr::CPU_SYSTEM_TIME);
    let t = |k: &str| truth[k].as_f64().unwrap();
    within("CPU", cpu, t("user_s") + t("system_s"), 0.02, 0.020);
    assert!(cpu >= 0.3, "burn used 300 ms of CPU: {burn:?}");

    // Every process a span with its exit code and the kernel's figures; the shell that
    // exits 3 is a task of its own (one process: no tool span under it).
    for tool in trace.tools() {
        assert_eq!(tool.int(attr::PROCESS_EXIT_CODE), Some(0), "{tool:?}");
        assert!(n(tool, attr::CPU_USER_TIME) + n(tool, attr::CPU_SYSTEM_TIME) > 0.0);
        assert!(n(tool, attr::MEMORY_MAXRSS) > 0.0, "{tool:?}");
    }
    let exit3 = spans
        .iter()
        .find(|s| s.int(attr::PROCESS_EXIT_CODE) == Some(3))
        .expect("the shell that exits 3");
    assert!(exit3.is_task() && exit3.str(attr::PROCESS_COMMAND_LINE).contains("exit 3"));
    assert!(n(exit3, attr::CPU_USER_TIME) + n(exit3, attr::CPU_SYSTEM_TIME) > 0.0);
    assert!(n(exit3, attr::MEMORY_PEAK) > 0.0, "{exit3:?}");
    assert_eq!(trace.tools().len(), 4, "rusage-of and workload, twice");
}

#[test]
#[ignore = "slow: make test-kernels"]
fn debian_bookworm_6_1() {
    let dir = boot("6.1");
    assert!(read(&dir, "kernel").starts_with("6.1."));
    // No sock:sock_send_length/sock_recv_length before 6.3.
    doctor_passes(&dir, &["network bytes"]);
    spans_as_on_the_host(&dir);
}

#[test]
#[ignore = "slow: make test-kernels"]
fn debian_bookworm_backports_6_12() {
    let dir = boot("6.12");
    assert!(read(&dir, "kernel").starts_with("6.12."));
    doctor_passes(&dir, &[]);
    spans_as_on_the_host(&dir);
}
