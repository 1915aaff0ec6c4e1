//! Memory at 1k to 1M processes in both modes, and the events a smaller ring buffer would
//! lose at the highest exec rate this machine makes.
use std::{fmt::Write as _, path::Path, process::Command};

use pipetrace_e2e::{
    Agent,
    bench::{STORM_TAG, ladder, time},
};

use super::Doc;

/// `workers` storms at once: the highest exec rate this machine makes.
pub fn parallel_storm(n: usize, workers: usize) -> Command {
    let each = n / workers;
    let one = format!("i=0; while [ $i -lt {each} ]; do /bin/true; i=$((i+1)); done");
    let script = (0..workers)
        .map(|_| format!("( {one} ) &"))
        .collect::<String>()
        + " wait";
    let mut c = Command::new("bash");
    c.args(["-c", &script, STORM_TAG]);
    c
}

/// "... N kernel events lost ..." from the agent's final report.
fn lost_in(report: &str) -> u64 {
    report
        .split(", ")
        .find_map(|p| p.strip_suffix(" kernel events lost"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// Kernel events lost at the highest exec rate, with the configured ring buffer and with
/// smaller ones (`probes.ring_buffer_bytes`).
pub fn lost_at_max_rate(doc: &mut Doc, n: usize, rule: &str, dir: &Path) {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    for mib in [None, Some(4u32), Some(1)] {
        let cfg = dir.join("ring.yaml");
        let ring = mib.map_or(String::new(), |m| {
            format!("probes:\n  ring_buffer_bytes: {}\n", m << 20)
        });
        std::fs::write(&cfg, format!("{rule}{ring}")).expect("write config");
        let out = dir.join("ring.otlp.jsonl");
        let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let t = time(parallel_storm(n, workers));
        let report = agent.stop();
        let _ = std::fs::remove_file(&out);
        let size = mib.map_or("the default ring buffer".into(), |m| {
            format!("a {m} MiB ring buffer")
        });
        doc.row(
            &format!("kernel events lost at the highest exec rate, {size}"),
            &lost_in(&report).to_string(),
            &format!(
                "{n} processes from {workers} parallel storms in {:.1} s ({:.0} exec/s)",
                t.as_secs_f64(),
                n as f64 / t.as_secs_f64()
            ),
        );
    }
}

/// Both modes at each of `counts` processes, as a table of its own, and the agent's final
/// report after it.
pub fn ladder(counts: &[usize], rule: &str, dir: &Path) -> String {
    let cfg = dir.join("memory.yaml");
    let report = dir.join("memory.report.html");
    std::fs::write(
        &cfg,
        format!("{rule}report:\n  path: {}\n", report.display()),
    )
    .expect("write config");
    let mut table = format!("{}\n", ladder::HEADER);
    let (rungs, said) = ladder::agent(counts, &cfg);
    for r in &rungs {
        let line = ladder::row("agent", r);
        println!("{line}");
        table.push_str(&line);
        table.push('\n');
    }
    for &n in counts {
        let (r, _) = ladder::run(n, &cfg, dir);
        let line = ladder::row("`pipetrace run`", &r);
        println!("{line}");
        table.push_str(&line);
        table.push('\n');
    }
    let _ = writeln!(
        table,
        "\nThe agent's final report after the last count: {said}"
    );
    table
}
