//! Where the agent's CPU goes over a storm: `perf record` of the agent (its own threads
//! only), then the functions holding the most of it, callees included.
use std::{path::Path, process::Command};

use pipetrace_e2e::{
    Agent,
    bench::{sink::Sink, storm, time},
};

use super::Doc;

pub const INSTALL: &str = "apt-get install -y linux-perf";

/// Frames every sample passes through (the runtime, the event loop), and the standard
/// library's generic iterators inside others: no answer.
const TOO_WIDE: [&str; 9] = [
    "pipetrace::cli::",
    "pipetrace::main",
    "tokio::runtime::",
    "std::",
    "core::ops::",
    "{{closure}}",
    "<alloc::",
    "<core::",
    "start_thread",
];

/// perf report's rows: (callees included %, own %, in the kernel, function).
fn rows(report: &str) -> Vec<(f64, f64, bool, String)> {
    report
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let children = w.next()?.strip_suffix('%')?.parse::<f64>().ok()?;
            let own = w.next()?.strip_suffix('%')?.parse::<f64>().ok()?;
            let kernel = match w.next()? {
                "[k]" => true,
                "[.]" => false,
                _ => return None,
            };
            // perf pads the row with `-` for the columns it leaves empty.
            let name: Vec<&str> = w.take_while(|t| *t != "-").collect();
            Some((children, own, kernel, name.join(" ")))
        })
        .collect()
}

/// The agent's own functions (Rust paths), widest first, callees included.
fn functions(rows: &[(f64, f64, bool, String)]) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = (rows.iter())
        .filter(|(_, _, kernel, name)| !kernel && name.contains("::"))
        .filter(|(_, _, _, name)| !TOO_WIDE.iter().any(|t| name.contains(t)))
        .map(|(children, _, _, name)| (*children, name.clone()))
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out
}

/// Own shares: in the kernel (syscalls, wake-ups, page faults) and in the allocator.
fn shares(rows: &[(f64, f64, bool, String)]) -> (f64, f64) {
    let kernel = rows.iter().filter(|r| r.2).map(|r| r.1).sum();
    let alloc = (rows.iter())
        .filter(|r| {
            !r.2 && ["malloc", "free", "realloc", "_int_", "unlink_chunk"]
                .iter()
                .any(|a| r.3.contains(a))
        })
        .map(|r| r.1)
        .sum();
    (kernel, alloc)
}

pub fn agent(doc: &mut Doc, n: usize, cfg: &Path, dir: &Path) {
    let have_perf = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_perf {
        doc.row(
            "agent CPU by function",
            "not measured",
            &format!("needs perf ({INSTALL})"),
        );
        return;
    }
    let sink = Sink::start();
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "--endpoint", sink.url()]);
    let data = dir.join("perf.data");
    let mut rec = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "--call-graph",
            "dwarf,16384",
        ])
        .args(["-p", &agent.pid().to_string(), "-o", data.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("perf record");
    std::thread::sleep(std::time::Duration::from_secs(1));
    time(storm(n));
    sink.wait_for(2 * n as u64, std::time::Duration::from_secs(60));
    // SAFETY: signalling our own child, as Ctrl-C would.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let _ = rec.wait();
    agent.stop();
    let report = Command::new("perf")
        .args([
            "report",
            "-i",
            data.to_str().unwrap(),
            "--children",
            "--sort",
            "symbol",
        ])
        .args(["--stdio", "-g", "none"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&data);
    let rows = rows(&report);
    let top: Vec<String> = functions(&rows)
        .into_iter()
        .take(16)
        .map(|(pct, name)| format!("{pct:.1}% `{name}`"))
        .collect();
    let (kernel, alloc) = shares(&rows);
    doc.row(
        "agent CPU by function (perf, callees included)",
        &top.join("; "),
        &format!(
            "`perf record` of the agent over a {n}-process storm, spans over OTLP/gRPC; of \
             its samples, {kernel:.1}% in the kernel (syscalls, wake-ups, page faults) and \
             {alloc:.1}% in the allocator (malloc, free)"
        ),
    );
}
