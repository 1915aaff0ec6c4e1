//! Where the time went: for each task, on CPU or waiting (for a CPU, the disk, memory) or
//! else; for the run, the engine's start-up, gaps with no job running, jobs, and the tail.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, pct, secs},
};
use crate::report::markup::esc;
use pipetrace_core::judgement::ReportSpan;

const PARTS: [(&str, &str); 5] = [
    ("on CPU", "#4e79a7"),
    ("waiting for a CPU", "#e15759"),
    ("waiting for the disk", "#f28e2b"),
    ("waiting for memory", "#b07aa1"),
    ("other (sleep, network, children)", "#bab0ac"),
];

/// A task's seconds in each of [`PARTS`], summed over its jobs.
pub(crate) fn task_parts(jobs: &[&Job]) -> [f64; 5] {
    let mut p = [0.0; 5];
    for j in jobs {
        let s = j.span;
        let known = [
            j.cpu(),
            s.num(attr::CPU_RUN_QUEUE_DELAY),
            s.num(attr::DISK_WAIT_TIME),
            s.num(attr::MEMORY_WAIT_TIME),
        ];
        // Several processes at once can spend more than the wall time: then nothing else.
        let other = (j.wall() - known.iter().sum::<f64>()).max(0.0);
        for (i, v) in known.into_iter().chain([other]).enumerate() {
            p[i] += v;
        }
    }
    p
}

/// The run's seconds: before the first job, with jobs running, gaps with none, after the
/// last; from the run's and its jobs' times.
pub(crate) fn run_parts(run: &ReportSpan, jobs: &[Job]) -> [f64; 4] {
    let mut spans: Vec<(u64, u64)> = jobs.iter().map(|j| (j.span.start, j.span.end)).collect();
    spans.sort();
    let (Some(first), Some(last)) = (spans.first().map(|s| s.0), spans.iter().map(|s| s.1).max())
    else {
        return [run.secs(), 0.0, 0.0, 0.0];
    };
    let (mut busy, mut at) = (0u64, first);
    for (a, b) in spans {
        let a = a.max(at);
        if b > a {
            busy += b - a;
            at = b;
        }
    }
    let s = |ns: u64| ns as f64 / 1e9;
    [
        s(first.saturating_sub(run.start)),
        s(busy),
        s(last.saturating_sub(first).saturating_sub(busy)),
        s(run.end.saturating_sub(last)),
    ]
}

/// A bar of parts as shares of their sum, each titled with its seconds.
fn stack(parts: &[(&str, &str, f64)], out: &mut String) {
    let total: f64 = parts.iter().map(|p| p.2).sum::<f64>().max(1e-9);
    out.push_str("<div class=\"stack\">");
    for (name, color, v) in parts.iter().filter(|p| p.2 > 0.0) {
        let _ = write!(
            out,
            "<span style=\"width:{:.2}%;background:{color}\" title=\"{}: {} ({})\"></span>",
            100.0 * v / total,
            esc(name),
            secs(*v),
            pct(v / total)
        );
    }
    out.push_str("</div>");
}

fn run_section(run: &ReportSpan, jobs: &[Job], out: &mut String) {
    let [startup, running, gaps, tail] = run_parts(run, jobs);
    let parts = [
        ("engine start-up", "#bab0ac", startup),
        ("jobs running", "#4e79a7", running),
        ("no job running", "#e15759", gaps),
        ("after the last job", "#9c755f", tail),
    ];
    out.push_str("<h3>The run</h3>");
    stack(&parts, out);
    out.push_str("<p class=\"legend\">");
    for (name, color, v) in parts.iter().filter(|p| p.2 > 0.0) {
        let _ = write!(
            out,
            "<span><i style=\"background:{color}\"></i>{name} {}</span>",
            secs(*v)
        );
    }
    let jobs_cpu: f64 = jobs.iter().map(|j| j.cpu()).sum();
    let largest = jobs.iter().map(|j| j.peak_seen()).fold(0.0, f64::max);
    let _ = write!(
        out,
        "</p><p>The engine itself (the run less its jobs): {} of CPU; the run's memory peaked \
         at {}, its largest job at {}.</p>",
        secs((run.cpu() - jobs_cpu).max(0.0)),
        bytes(run.num(attr::MEMORY_PEAK)),
        bytes(largest)
    );
}

pub(crate) fn render(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    if jobs.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"went\">Where the time went</h2>");
    if let Some(r) = run {
        run_section(r, jobs, out);
    }
    let mut by: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        by.entry(j.task()).or_default().push(j);
    }
    out.push_str("<h3>Each task (its jobs' processes, summed)</h3><p class=\"legend\">");
    for (name, color) in PARTS {
        let _ = write!(
            out,
            "<span><i style=\"background:{color}\"></i>{name}</span>"
        );
    }
    out.push_str("</p><div class=\"scroll\"><table class=\"went\">");
    for (task, js) in &by {
        let p = task_parts(js);
        let parts: Vec<(&str, &str, f64)> = (PARTS.iter().zip(p))
            .map(|((n, c), v)| (*n, *c, v))
            .collect();
        let _ = write!(out, "<tr><td>{}</td><td class=\"bar\">", esc(task));
        stack(&parts, out);
        let _ = write!(
            out,
            "</td><td class=\"l\">{} on CPU, {} waiting</td></tr>",
            pct(p[0] / p.iter().sum::<f64>().max(1e-9)),
            secs(p[1] + p[2] + p[3])
        );
    }
    out.push_str("</table></div>");
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};
    use pipetrace_core::judgement::Kind;

    #[test]
    fn the_runs_time_is_start_up_jobs_gaps_and_tail() {
        let mut run = task("r", "run", None, (0.0, 20.0));
        run.kind = Kind::Run;
        // Jobs 2-5 and 4-8 overlap; none from 8 to 10; one 10-15; the run ends at 20.
        let spans = [
            task("a", "x", None, (2.0, 5.0)),
            task("b", "x", None, (4.0, 8.0)),
            task("c", "y", None, (10.0, 15.0)),
        ];
        let jobs = jobs_of(&spans);
        let p = run_parts(&run, &jobs);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(p[0], 2.0) && close(p[1], 11.0), "{p:?}");
        assert!(close(p[2], 2.0) && close(p[3], 5.0), "{p:?}");
    }

    #[test]
    fn a_tasks_time_is_on_cpu_waits_and_the_rest() {
        let spans = [with(
            task("a", "x", None, (0.0, 10.0)),
            &[
                (attr::CPU_USER_TIME, 4.0),
                (attr::CPU_RUN_QUEUE_DELAY, 1.0),
                (attr::DISK_WAIT_TIME, 2.0),
            ],
            &[],
        )];
        let jobs = jobs_of(&spans);
        let p = task_parts(&jobs.iter().collect::<Vec<_>>());
        assert_eq!(p, [4.0, 1.0, 2.0, 0.0, 3.0]);
    }
}
