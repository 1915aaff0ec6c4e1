//! The per-job table: one row per job, a column only where some job has a value for it.
//! Each numeric cell carries its exact figure (`data-v`) for the page's small script to sort
//! by; without the script it is a plain table.
use std::fmt::Write as _;

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, money, pct, secs},
};
use crate::report::markup::esc;

/// One cell: the figure to sort by (None: sorted by its text) and what is shown.
pub struct Cell {
    pub v: Option<f64>,
    pub text: String,
}

fn num(v: f64, text: String) -> Option<Cell> {
    Some(Cell { v: Some(v), text })
}

fn text(t: impl Into<String>) -> Option<Cell> {
    Some(Cell {
        v: None,
        text: t.into(),
    })
}

/// A figure that is only worth a cell when it is not zero.
fn nonzero(v: f64, show: fn(f64) -> String) -> Option<Cell> {
    (v > 0.0).then(|| Cell {
        v: Some(v),
        text: show(v),
    })
}

pub struct Col {
    /// The key the script's `?sort=` names it by.
    pub key: &'static str,
    pub head: &'static str,
    pub cell: fn(&Job) -> Option<Cell>,
}

/// The columns, in order; [`shown`] drops those no job has a value for. A header wraps
/// where the table needs the room, "%" kept with what it is of.
pub const COLS: [Col; 18] = [
    Col {
        key: "task",
        head: "task",
        cell: |j| text(j.task()),
    },
    Col {
        key: "tag",
        head: "tag",
        cell: |j| j.tag().and_then(text),
    },
    Col {
        key: "status",
        head: "status",
        cell: |j| match j.repeats() {
            1 => text(j.status()),
            n => text(format!("{} ×{n} (folded)", j.status())),
        },
    },
    Col {
        key: "exit",
        head: "exit / signal",
        cell: |j| j.ending().and_then(text),
    },
    Col {
        key: "wall",
        head: "wall",
        cell: |j| num(j.wall(), secs(j.wall())),
    },
    Col {
        key: "cpu",
        head: "CPU",
        cell: |j| num(j.cpu(), secs(j.cpu())),
    },
    Col {
        key: "cpu_asked",
        head: "CPU %\u{a0}asked",
        cell: |j| j.cpu_of_asked().and_then(|v| num(v, pct(v))),
    },
    Col {
        key: "peak",
        head: "peak memory",
        cell: |j| nonzero(j.peak_seen(), bytes),
    },
    Col {
        key: "mem_asked",
        head: "memory %\u{a0}asked",
        cell: |j| j.memory_of_asked().and_then(|v| num(v, pct(v))),
    },
    Col {
        key: "read",
        head: "disk read",
        cell: |j| nonzero(j.span.num(attr::DISK_READ_BYTES), bytes),
    },
    Col {
        key: "write",
        head: "disk write",
        cell: |j| nonzero(j.span.num(attr::DISK_WRITE_BYTES), bytes),
    },
    Col {
        key: "net",
        head: "net in / out",
        cell: net,
    },
    Col {
        key: "runq",
        head: "CPU wait",
        cell: |j| nonzero(j.span.num(attr::CPU_RUN_QUEUE_DELAY), secs),
    },
    Col {
        key: "disk_wait",
        head: "disk wait",
        cell: |j| nonzero(j.span.num(attr::DISK_WAIT_TIME), secs),
    },
    Col {
        key: "mem_wait",
        head: "memory wait",
        cell: |j| nonzero(j.span.num(attr::MEMORY_WAIT_TIME), secs),
    },
    Col {
        key: "gpu",
        head: "GPU time",
        cell: |j| nonzero(j.span.num(attr::GPU_TIME), secs),
    },
    Col {
        key: "cost",
        head: "cost",
        cell: |j| j.cost().and_then(|(c, cur)| num(c, money(c, cur))),
    },
    Col {
        key: "verdict",
        head: "verdict",
        cell: |j| j.verdict().and_then(text),
    },
];

fn net(j: &Job) -> Option<Cell> {
    let (rx, tx) = (
        j.span.num(attr::NETWORK_RECEIVE_BYTES),
        j.span.num(attr::NETWORK_TRANSMIT_BYTES),
    );
    (rx + tx > 0.0).then(|| Cell {
        v: Some(rx + tx),
        text: format!("{} / {}", bytes(rx), bytes(tx)),
    })
}

/// The columns some job has a value for.
pub(crate) fn shown<'c>(cols: &'c [Col], jobs: &[Job]) -> Vec<&'c Col> {
    (cols.iter())
        .filter(|c| jobs.iter().any(|j| (c.cell)(j).is_some()))
        .collect()
}

/// Rows listed at most: past that, the page would be too slow to open and sort.
const MAX_ROWS: usize = 5000;

pub(crate) fn render(jobs: &[Job], out: &mut String) {
    if jobs.is_empty() {
        return;
    }
    let cols = shown(&COLS, jobs);
    out.push_str(
        "<h2 id=\"jobs\">Jobs</h2><p class=\"note\">CPU % asked: CPU time over wall time \
         times the CPUs asked for. Waits: runnable but waiting for a CPU, for block I/O, for \
         memory to be reclaimed. Click a header to sort.</p><div class=\"scroll tall\"><table \
         class=\"jobs\"><thead><tr>",
    );
    for c in &cols {
        // Text columns read from the left, figures from the right.
        let text = (jobs.iter())
            .find_map(|j| (c.cell)(j))
            .is_some_and(|c| c.v.is_none());
        let class = if text { " class=\"l\"" } else { "" };
        let _ = write!(out, "<th data-k=\"{}\"{class}>{}</th>", c.key, esc(c.head));
    }
    out.push_str("</tr></thead><tbody>");
    for j in jobs.iter().take(MAX_ROWS) {
        let class = if j.failed() { " class=\"bad\"" } else { "" };
        let _ = write!(out, "<tr id=\"{}\"{class}>", j.anchor());
        for c in &cols {
            match (c.cell)(j) {
                Some(Cell { v: Some(v), text }) => {
                    let _ = write!(out, "<td data-v=\"{v}\">{}</td>", esc(&text));
                }
                Some(Cell { v: None, text }) => {
                    let _ = write!(out, "<td class=\"l\">{}</td>", esc(&text));
                }
                None => out.push_str("<td></td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    if jobs.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<p>The first {MAX_ROWS} jobs by start are listed; {} more are in the trace.</p>",
            jobs.len() - MAX_ROWS
        );
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};

    #[test]
    fn a_column_shows_only_where_a_job_has_a_value() {
        let quiet = task("a", "sort", None, (0.0, 1.0));
        let waited = with(
            task("b", "sort", Some("n=2"), (1.0, 2.0)),
            &[(attr::DISK_WAIT_TIME, 0.25)],
            &[],
        );
        let spans = [quiet.clone()];
        let one = jobs_of(&spans);
        let keys: Vec<_> = shown(&COLS, &one).iter().map(|c| c.key).collect();
        assert_eq!(keys, ["task", "status", "wall", "cpu"]);
        let spans = [quiet, waited];
        let two = jobs_of(&spans);
        let keys: Vec<_> = shown(&COLS, &two).iter().map(|c| c.key).collect();
        assert_eq!(keys, ["task", "tag", "status", "wall", "cpu", "disk_wait"]);
        let mut out = String::new();
        render(&two, &mut out);
        assert!(out.contains("<td data-v=\"0.25\">250 ms</td>"), "{out}");
        assert!(out.contains("<tr id=\"job-t-1\">"), "{out}");
    }
}
