//! The storm four ways (alone, agent, `pipetrace run`, bpftrace), the agent's CPU per
//! process, and the probes' own run counts and times.
use std::path::Path;

use pipetrace_e2e::bench::{bpftrace, compare, kernel, median};

use super::Doc;

pub fn ratios(doc: &mut Doc, n: usize, repeats: usize, cfg: &Path, dir: &Path) {
    let with_bpftrace = bpftrace::version().is_some();
    let s = compare::storms(n, repeats, cfg, dir, with_bpftrace);
    let what = format!("{n}-process fork/exec storm");
    let how = format!(
        "median of {repeats} repeats, each against the mean of the untraced storms just before \
         and just after it"
    );
    doc.row(
        &format!("wall ratio, {what}, `pipetrace agent`"),
        &compare::median_range(&s.agent),
        &how,
    );
    doc.row(
        &format!("wall ratio, {what}, `pipetrace run`"),
        &compare::median_range(&s.run),
        &format!("{how}; includes loading the probes, the end-of-run report and the flush"),
    );
    edges(doc, &s, &what);
    match (&s.bpftrace_mem, bpftrace::version()) {
        (Some(m), Some(v)) => {
            doc.row(
                &format!("wall ratio, {what}, bpftrace printing every exec and exit"),
                &compare::median_range(&s.bpftrace),
                &format!(
                    "{how}; {v}, {} lines printed; its peak RSS {:.1} MiB, real cost (Pss) \
                     {:.1} MiB",
                    s.bpftrace_lines, m.peak, m.pss
                ),
            );
        }
        _ => doc.row(
            "bpftrace on the same storm",
            "not measured",
            &format!(
                "bpftrace is not installed or did not start ({})",
                bpftrace::INSTALL
            ),
        ),
    }
    steal(doc, &s, &what);
    doc.row(
        "agent CPU per process, storm",
        &format!("{:.0} µs", median(s.agent_cpu_us.clone())),
        "all of the agent's work per process (5 kernel records, tree, attribution, span \
         building, file export), median over the repeats",
    );
    doc.row(
        "the storm's own CPU per process",
        &format!(
            "{:.0} µs alone, {:.0} µs under the agent",
            median(s.storm_cpu_alone_us.clone()),
            median(s.storm_cpu_agent_us.clone())
        ),
        "its shell's and processes' CPU (rusage), medians: the difference is what the probes \
         and tracepoints cost in the processes' own context",
    );
    if let Some(r) = s.reports.last() {
        doc.row("agent's final report, last storm", r, "");
    }
}

/// `pipetrace run`'s start and end in its storms, and its ratio without them.
fn edges(doc: &mut Doc, s: &compare::Storms, what: &str) {
    let (start, end) = (median(s.run_start.clone()), median(s.run_end.clone()));
    let storm = median(s.alone.clone());
    doc.row(
        "`pipetrace run`'s start and end, in its storms",
        &format!(
            "start {:.0} ms, end {:.0} ms (medians): {:.1}% of the median untraced storm",
            start * 1e3,
            end * 1e3,
            (start + end) / storm * 100.0
        ),
        "from `pipetrace run`'s start to the storm's first line, and from its last line to \
         `pipetrace run`'s exit (the storm's shell prints the wall clock): loading and \
         verifying the probes; the last usage reports, the flush, the report and the tree",
    );
    doc.row(
        &format!("wall ratio less start and end, {what}, `pipetrace run`"),
        &compare::median_range(&compare::without_edges(s)),
        "the same repeats with `pipetrace run`'s start and end taken out of its storms' wall \
         times: what tracing costs while the command runs, as the agent's ratio measures it",
    );
}

/// How much of the machine the hypervisor took during the untraced storms, how much of
/// their spread goes with it, and each ratio with that part of every storm taken out.
fn steal(doc: &mut Doc, s: &compare::Storms, what: &str) {
    let (steals, walls) = compare::steal_and_wall(&s.untraced);
    let pct: Vec<f64> = steals.iter().map(|x| x * 100.0).collect();
    let Some((slope, r)) = compare::steal_fit(&steals, &walls) else {
        let value = match pct.first() {
            Some(p) => format!("{p:.1}% in every storm"),
            None => "not measured".into(),
        };
        let how = "the hypervisor's steal time (/proc/stat): constant, so the ratios above \
                   need no estimate less steal";
        return doc.row("steal time during the untraced storms", &value, how);
    };
    let (lo, hi) = pct
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    doc.row(
        "steal time during the untraced storms",
        &format!(
            "median {:.1}% (range {lo:.1}%..{hi:.1}%)",
            median(pct.clone())
        ),
        &format!(
            "the hypervisor's steal time (/proc/stat) over each of the {} untraced storms, as a \
             share of the machine's CPU time: this VM ready to run while the host ran others; \
             the storms' wall times go with it at r = {r:.2}, {:.2} s more per 1% (least \
             squares)",
            pct.len(),
            slope / 100.0
        ),
    );
    for (mode, storms) in [
        ("`pipetrace agent`", &s.agent_storms),
        ("`pipetrace run`", &s.run_storms),
        ("bpftrace", &s.bpftrace_storms),
    ] {
        if storms.is_empty() {
            continue;
        }
        doc.row(
            &format!("wall ratio less steal, {what}, {mode}"),
            &compare::median_range(&compare::steal_adjusted(storms, slope)),
            "the same repeats with each storm's wall time less what its steal explains (the \
             fit above): a second estimate, assuming steal slows a traced storm as it slows \
             an untraced one",
        );
    }
}

/// Each probe's runs and time over a storm, from the kernel's BPF statistics.
pub fn probes(doc: &mut Doc, n: usize, cfg: &Path, dir: &Path) {
    let Some(progs) = kernel::under_storm(n, cfg, dir) else {
        doc.row(
            "probes' run counts and times",
            "not measured",
            &format!(
                "needs kernel.bpf_stats_enabled (root) and bpftool ({})",
                kernel::INSTALL
            ),
        );
        return;
    };
    let mut total = 0.0;
    for (name, p) in &progs {
        let per_process = p.ns as f64 / n as f64;
        total += per_process;
        doc.row(
            &format!("probe `{name}`"),
            &format!("{:.0} ns per run", p.ns as f64 / p.runs.max(1) as f64),
            &format!(
                "{} runs over the {n}-process storm: {per_process:.0} ns per storm process",
                p.runs
            ),
        );
    }
    doc.row(
        "all probes, per storm process",
        &format!("{total:.0} ns"),
        "the kernel's bpf_stats (run time inside the programs; runs for other processes on \
         the machine count too)",
    );
}
