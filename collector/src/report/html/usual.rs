//! This run against the pipeline's usual: each task whose history has a usual duration, its
//! jobs' median wall time beside it, the jobs judged far slower named, and the command that
//! compares CPU and memory too.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::{attr, event};

use super::{job::Job, units::secs};
use crate::report::markup::esc;
use pipetrace_core::judgement::ReportSpan;

/// One task's jobs that have a usual, in start order.
struct Row<'j, 'a> {
    jobs: Vec<&'j Job<'a>>,
    usual: f64,
    runs: f64,
}

impl Row<'_, '_> {
    fn median(&self) -> f64 {
        let mut walls: Vec<f64> = self.jobs.iter().map(|j| j.wall()).collect();
        pipetrace_core::diagnosis::median(&mut walls)
    }

    fn slower(&self) -> impl Iterator<Item = &&Job<'_>> {
        (self.jobs.iter()).filter(|j| j.events(event::SLOWER_THAN_USUAL).next().is_some())
    }
}

/// Tasks by name, each with the usual its last job was judged against.
fn rows<'j, 'a>(jobs: &'j [Job<'a>]) -> BTreeMap<&'a str, Row<'j, 'a>> {
    let mut out: BTreeMap<&str, Row> = BTreeMap::new();
    for j in jobs {
        let usual = j.span.num(attr::HISTORY_USUAL_DURATION);
        // Older traces said the usual only on the slower-than-usual event.
        let usual = match j.events(event::SLOWER_THAN_USUAL).next() {
            Some(e) if usual <= 0.0 => e.numbers.get(attr::HISTORY_USUAL_DURATION).copied(),
            _ => Some(usual),
        };
        let Some(usual) = usual.filter(|u| *u > 0.0) else {
            continue;
        };
        // Likewise the runs it is the median of.
        let slower = j.events(event::SLOWER_THAN_USUAL).next();
        let runs = match slower.and_then(|e| e.numbers.get(attr::HISTORY_RUNS)) {
            Some(r) if j.span.num(attr::HISTORY_RUNS) <= 0.0 => *r,
            _ => j.span.num(attr::HISTORY_RUNS),
        };
        let row = out.entry(j.task()).or_insert(Row {
            jobs: Vec::new(),
            usual,
            runs,
        });
        (row.usual, row.runs) = (usual, runs.max(row.runs));
        row.jobs.push(j);
    }
    out
}

fn row(name: &str, r: &Row, out: &mut String) {
    let median = r.median();
    let slow: Vec<String> = (r.slower())
        .map(|j| format!("<a href=\"#{}\">{}</a>", j.anchor(), esc(&j.label())))
        .collect();
    let class = if slow.is_empty() {
        ""
    } else {
        " class=\"bad\""
    };
    let _ = write!(
        out,
        "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}x</td><td>{:.0}</td>\
         <td>{}</td></tr>",
        esc(name),
        r.jobs.len(),
        secs(median),
        secs(r.usual),
        median / r.usual,
        r.runs,
        if slow.is_empty() {
            "-".to_string()
        } else {
            slow.join(", ")
        }
    );
}

pub fn render(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    let rows = rows(jobs);
    let id = run.and_then(|r| r.text(attr::CICD_PIPELINE_RUN_ID));
    if rows.is_empty() && id.is_none() {
        return;
    }
    out.push_str("<h2 id=\"usual\">Against the usual</h2>");
    if rows.is_empty() {
        out.push_str(
            "<p>No task has a usual yet: a task's history judges it once three earlier runs \
             have it.</p>",
        );
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><tr><th>task</th><th>jobs</th><th>median wall</th>\
             <th>usually</th><th>times the usual</th><th>earlier runs</th>\
             <th>far slower jobs</th></tr>",
        );
        for (name, r) in &rows {
            row(name, r, out);
        }
        out.push_str("</table></div>");
    }
    if let Some(id) = id {
        let _ = write!(
            out,
            "<p>Every task against its usual (wall, CPU and peak memory from the task \
             history): <code>pipetrace compare {} --usual</code></p>",
            esc(id)
        );
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};

    #[test]
    fn every_task_with_a_usual_is_set_against_it_and_far_slower_jobs_are_named() {
        let usual = [
            (attr::HISTORY_USUAL_DURATION, 1.2),
            (attr::HISTORY_RUNS, 3.0),
        ];
        let mut slow = with(task("a", "nap", None, (0.0, 3.6)), &usual, &[]);
        slow.events.push(ev(
            event::SLOWER_THAN_USUAL,
            &[
                (attr::HISTORY_USUAL_DURATION, 1.2),
                (attr::HISTORY_FACTOR, 3.0),
                (attr::HISTORY_RUNS, 3.0),
            ],
            &[],
        ));
        let fine = with(task("b", "nap", None, (0.0, 1.0)), &usual, &[]);
        let sort = with(
            task("c", "sort", None, (0.0, 2.0)),
            &[
                (attr::HISTORY_USUAL_DURATION, 2.0),
                (attr::HISTORY_RUNS, 5.0),
            ],
            &[],
        );
        let new = task("d", "brand_new", None, (0.0, 1.0));
        let spans = [slow, fine, sort, new];
        let mut out = String::new();
        render(None, &jobs_of(&spans), &mut out);
        assert!(
            out.contains(
                "<tr class=\"bad\"><td>nap</td><td>2</td><td>2.30 s</td><td>1.20 s</td>\
                 <td>1.9x</td><td>3</td><td><a href=\"#job-t-0\">nap</a></td></tr>"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "<tr><td>sort</td><td>1</td><td>2.00 s</td><td>2.00 s</td><td>1.0x</td>\
                 <td>5</td><td>-</td></tr>"
            ),
            "{out}"
        );
        assert!(!out.contains("brand_new"), "no usual, no row: {out}");
    }

    #[test]
    fn an_older_trace_with_the_usual_only_on_its_event_still_lists_the_job() {
        let mut slow = task("a", "nap", None, (0.0, 3.6));
        slow.events.push(ev(
            event::SLOWER_THAN_USUAL,
            &[
                (attr::HISTORY_USUAL_DURATION, 1.2),
                (attr::HISTORY_RUNS, 3.0),
            ],
            &[],
        ));
        let mut out = String::new();
        render(None, &jobs_of(&[slow]), &mut out);
        assert!(
            out.contains("<td>nap</td><td>1</td><td>3.60 s</td><td>1.20 s</td>"),
            "{out}"
        );
    }
}
