//! This run against the pipeline's usual: the jobs the task history found far slower, and
//! the command that compares every task with it.
use std::fmt::Write as _;

use pipetrace_semconv::{attr, event};

use super::{job::Job, units::secs};
use crate::report::{ReportSpan, markup::esc};

pub fn render(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    let slower: Vec<(&Job, &crate::report::ReportEvent)> = (jobs.iter())
        .filter_map(|j| {
            Some((
                j,
                j.span
                    .events
                    .iter()
                    .find(|e| e.name == event::SLOWER_THAN_USUAL)?,
            ))
        })
        .collect();
    let id = run.and_then(|r| r.text(attr::CICD_PIPELINE_RUN_ID));
    if slower.is_empty() && id.is_none() {
        return;
    }
    out.push_str("<h2 id=\"usual\">Against the usual</h2>");
    if slower.is_empty() {
        out.push_str("<p>No job took far longer than its task usually does.</p>");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table><tr><th>job</th><th>this run</th><th>usually</th>\
             <th>times the usual</th><th>earlier runs</th></tr>",
        );
        for (j, e) in &slower {
            let n = |k: &str| e.numbers.get(k).copied().unwrap_or(0.0);
            let _ = write!(
                out,
                "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{:.1}x</td>\
                 <td>{:.0}</td></tr>",
                j.anchor(),
                esc(&j.label()),
                secs(j.wall()),
                secs(n(attr::HISTORY_USUAL_DURATION)),
                n(attr::HISTORY_FACTOR),
                n(attr::HISTORY_RUNS)
            );
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
    use super::{
        super::job::{jobs_of, tests::*},
        *,
    };

    #[test]
    fn a_job_slower_than_usual_is_listed_with_the_history_figures() {
        let mut slow = task("a", "nap", None, (0.0, 3.6));
        slow.events.push(ev(
            event::SLOWER_THAN_USUAL,
            &[
                (attr::HISTORY_USUAL_DURATION, 1.2),
                (attr::HISTORY_FACTOR, 3.0),
                (attr::HISTORY_RUNS, 3.0),
            ],
            &[],
        ));
        let spans = [slow, task("b", "sort", None, (0.0, 1.0))];
        let mut out = String::new();
        render(None, &jobs_of(&spans), &mut out);
        assert!(out.contains("<a href=\"#job-t-0\">nap</a></td><td>3.60 s</td><td>1.20 s</td><td>3.0x</td><td>3</td>"), "{out}");
        assert!(!out.contains(">sort<"), "{out}");
    }
}
