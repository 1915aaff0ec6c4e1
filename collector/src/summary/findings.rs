//! The findings at the top of a run's end on the terminal: the judgement's, as the page and
//! `report --json` give them. Every OOM kill and failure is named by its job up to a bound
//! a terminal still reads; the rest are counted.
use std::fmt::Write as _;

use pipetrace_core::judgement::{Finding, Rank, What};

/// OOM kills and failures named at most, together.
const FAILURES: usize = 20;
/// Findings of any other kind named at most, each.
const PER_RANK: usize = 3;

fn word(rank: Rank) -> &'static str {
    match rank {
        Rank::Oom => "OOM-KILLED",
        Rank::Failure => "FAILED",
        Rank::Stall => "stalled",
        Rank::Slower => "slower",
        Rank::UnderAsk => "under-asked",
        Rank::OverAsk => "over-asked",
        Rank::Bottleneck => "bottleneck",
        Rank::Uncertain => "uncertain",
    }
}

/// `Failure` and `Oom` share one bound: what failed, in the order of the judgement.
fn bound(rank: Rank) -> (usize, bool) {
    match rank {
        Rank::Oom | Rank::Failure => (FAILURES, true),
        _ => (PER_RANK, false),
    }
}

pub fn render(all: &[Finding], out: &mut String) {
    if all.is_empty() {
        return;
    }
    let _ = writeln!(out, "pipetrace: findings, most serious first:");
    let (mut failures_shown, mut failures_hidden) = (0, 0);
    let mut i = 0;
    while i < all.len() {
        let rank = all[i].rank;
        let same = all[i..].iter().take_while(|f| f.rank == rank).count();
        let (max, shared) = bound(rank);
        let room = match shared {
            true => max.saturating_sub(failures_shown),
            false => max,
        };
        for f in &all[i..i + same.min(room)] {
            let who = f
                .job
                .as_ref()
                .map_or(String::new(), |j| format!("{}: ", j.label));
            let _ = writeln!(out, "  {:<10} {who}{}", word(rank), f.text);
            if let What::Failed { log_tail, .. } = &f.what {
                log_tail.iter().for_each(|l| {
                    let _ = writeln!(out, "  {:<10} │ {l}", "");
                });
            }
        }
        let hidden = same.saturating_sub(room);
        if shared {
            failures_shown += same.min(room);
            failures_hidden += hidden;
        } else if hidden > 0 {
            let _ = writeln!(out, "  … and {hidden} more {} findings", word(rank));
        }
        i += same;
    }
    if failures_hidden > 0 {
        let _ = writeln!(
            out,
            "  … and {failures_hidden} more failed or OOM-killed jobs (`pipetrace report \
             TRACE-FILE --json` lists every one)"
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_core::judgement::{asks::by_task, findings, job::jobs_of, testing::failed_jobs};

    #[test]
    fn failures_past_the_bound_are_counted_and_the_trace_file_named_for_them() {
        let spans = failed_jobs(25);
        let mut out = String::new();
        let jobs = jobs_of(&spans);
        render(&findings(None, &jobs, (&by_task(&jobs), "")), &mut out);
        assert_eq!(
            out.matches("\n  FAILED     stats n=").count(),
            FAILURES,
            "{out}"
        );
        assert!(
            out.contains("  … and 5 more failed or OOM-killed jobs (`pipetrace report"),
            "{out}"
        );
        // The heading, the jobs, the count and a blank line before the tree.
        assert_eq!(out.lines().count(), 1 + FAILURES + 2, "{out}");
    }
}
