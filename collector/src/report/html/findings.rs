//! The page's findings: the judgement's, most serious first, each linked to its job's row.
use std::fmt::Write as _;

use pipetrace_core::judgement::{Finding, Rank, What};

use crate::report::markup::esc;

/// Findings listed at most of one kind; the rest are counted, the table has them.
const PER_RANK: usize = 5;

/// Failures and OOM kills listed at most: every one, up to a bound a page still reads.
const PER_FAILURE_RANK: usize = 50;

pub(crate) fn render(all: &[Finding], out: &mut String) {
    out.push_str("<h2 id=\"findings\">Findings</h2>");
    if all.is_empty() {
        out.push_str(
            "<p class=\"good\">Nothing to flag: no job was killed, failed, stalled, ran slower \
             than usual, asked for too little or for far more than it used.</p>",
        );
        return;
    }
    out.push_str("<ol class=\"findings\">");
    let mut i = 0;
    while i < all.len() {
        let rank = all[i].rank;
        let same = all[i..].iter().take_while(|f| f.rank == rank).count();
        let bound = match rank {
            Rank::Oom | Rank::Failure => PER_FAILURE_RANK,
            _ => PER_RANK,
        };
        for f in &all[i..i + same.min(bound)] {
            let class = format!("{rank:?}").to_lowercase();
            let _ = write!(out, "<li class=\"{class}\">");
            if let Some(job) = &f.job {
                let _ = write!(out, "<a href=\"#{}\">{}</a> ", job.anchor, esc(&job.label));
            }
            let _ = write!(out, "{}", esc(&f.text));
            if let What::Failed { log_tail, .. } = &f.what
                && !log_tail.is_empty()
            {
                let _ = write!(
                    out,
                    "<pre class=\"log\">{}</pre>",
                    esc(&log_tail.join("\n"))
                );
            }
            out.push_str("</li>");
        }
        if same > bound {
            let _ = write!(
                out,
                "<li>… and {} more like these: the jobs table has them.</li>",
                same - bound
            );
        }
        i += same;
    }
    out.push_str("</ol>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_core::judgement::{asks::by_task, findings, job::jobs_of, testing::*};

    fn page(
        run: Option<&pipetrace_core::judgement::ReportSpan>,
        spans: &[pipetrace_core::judgement::ReportSpan],
    ) -> String {
        let mut out = String::new();
        let jobs = jobs_of(spans);
        render(&findings(run, &jobs, (&by_task(&jobs), "")), &mut out);
        out
    }

    #[test]
    fn the_oom_kill_is_listed_before_the_failure_each_linked_to_its_row() {
        let out = page(None, &a_failure_and_an_oom_kill());
        let (a, b) = (
            out.find("\">align sample=A</a>"),
            out.find("\">stats sample=B</a>"),
        );
        assert!(a.unwrap() < b.unwrap(), "{out}");
        assert!(
            out.contains("<li class=\"oom\"><a href=\"#job-t-1\">"),
            "{out}"
        );
    }

    #[test]
    fn a_clean_run_says_there_is_nothing_to_flag() {
        let out = page(None, &[task("a", "sort", None, (0.0, 1.0))]);
        assert!(out.contains("Nothing to flag"), "{out}");
    }

    #[test]
    fn a_run_that_failed_with_no_job_failing_is_a_finding_not_nothing_to_flag() {
        let mut run = task("r", "run x", None, (0.0, 1.0));
        run.error = Some("run exited with code 1".into());
        let out = page(Some(&run), &[task("a", "sort", None, (0.0, 1.0))]);
        assert!(
            out.contains("<li class=\"failure\">The run failed outside its jobs: run exited"),
            "{out}"
        );
        assert!(!out.contains("Nothing to flag"), "{out}");
    }

    #[test]
    fn every_failure_up_to_its_bound_is_listed_and_the_rest_counted() {
        let spans = failed_jobs(60);
        let out = page(None, &spans);
        assert_eq!(
            out.matches("<li class=\"failure\">").count(),
            PER_FAILURE_RANK
        );
        assert!(out.contains("… and 10 more like these"), "{out}");
    }
}
