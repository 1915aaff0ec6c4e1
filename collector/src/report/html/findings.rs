//! What to look at first: OOM kills, failures, stalls, jobs slower than usual, the largest
//! over-ask and the dominant bottleneck, most serious first, each linked to its job's row;
//! last, the jobs whose processes may as well be other jobs' (the records cannot tell).
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::{attr, event};

use super::{
    job::Job,
    units::{bytes, money, pct, secs},
};
use crate::report::{ReportSpan, markup::esc};

/// How serious a finding is; the page lists the most serious first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Oom,
    Failure,
    Stall,
    Slower,
    OverAsk,
    Bottleneck,
    Uncertain,
}

pub struct Finding {
    pub rank: Rank,
    /// Within a rank, larger first (seconds lost, bytes over).
    pub weight: f64,
    /// The job's anchor and label, where it is about one job.
    pub job: Option<(String, String)>,
    /// The sentence after the job's name, escaped.
    pub html: String,
}

fn about(j: &Job, weight: f64, rank: Rank, html: String) -> Finding {
    Finding {
        rank,
        weight,
        job: Some((j.anchor(), j.label())),
        html,
    }
}

fn oom(j: &Job) -> Option<Finding> {
    let e = j.oom()?;
    let mut s = format!(
        "killed by the OOM killer at a peak of {}",
        bytes(j.peak_seen())
    );
    if let Some(limit) = j.memory_asked() {
        let _ = write!(s, ", over its limit of {}", bytes(limit));
    }
    if let Some(cg) = e.texts.get(attr::OOM_CGROUP) {
        let _ = write!(s, " (cgroup {cg})");
    }
    Some(about(j, j.peak_seen(), Rank::Oom, esc(&s)))
}

fn failure(j: &Job) -> Option<Finding> {
    if !j.failed() || j.oom().is_some() {
        return None;
    }
    let mut s = format!("failed: {}", j.span.error.as_deref().unwrap_or_default());
    if let Some(sig) = j.signal() {
        let _ = write!(s, "; {}", sig.describe());
    }
    if let Some(tool) = j.failed_tools.first() {
        let _ = write!(s, " ({})", tool.error.as_deref().unwrap_or_default());
    }
    Some(about(j, j.wall(), Rank::Failure, esc(&s)))
}

/// Its own stalls only: a tool that slept beside a busy one did not hold the job up.
fn stalls(j: &Job) -> Option<Finding> {
    let stalled: f64 = (j.span.events.iter())
        .filter(|e| e.name == event::STALL)
        .map(|e| e.numbers.get(attr::STALL_DURATION).copied().unwrap_or(0.0))
        .sum();
    let s = format!(
        "stalled for {}: no CPU, no I/O and no process started or ended",
        secs(stalled)
    );
    (stalled > 0.0).then(|| about(j, stalled, Rank::Stall, esc(&s)))
}

fn slower(j: &Job) -> Option<Finding> {
    let e = (j.span.events.iter()).find(|e| e.name == event::SLOWER_THAN_USUAL)?;
    let factor = e.numbers.get(attr::HISTORY_FACTOR).copied().unwrap_or(0.0);
    Some(about(j, factor, Rank::Slower, esc(&e.describe())))
}

/// A job some of whose processes may as well be other jobs' (`.map()`ped Prefect task runs
/// started together: the engine records no thread), with those jobs named.
fn uncertain(j: &Job, jobs: &[Job]) -> Option<Finding> {
    let lists = (j.tools.iter())
        .filter_map(|t| t.lists.get(attr::TOOL_TASK_RUN_ALTERNATIVES))
        .filter(|l| !l.is_empty());
    let (mut count, mut ids) = (0, std::collections::BTreeSet::new());
    for l in lists {
        count += 1;
        ids.extend(l.iter().map(String::as_str));
    }
    if ids.is_empty() {
        return None;
    }
    let label = |id: &str| {
        (jobs.iter())
            .find(|o| o.span.text(attr::CICD_PIPELINE_TASK_RUN_ID) == Some(id))
            .map_or_else(|| id.to_string(), Job::label)
    };
    let names: Vec<String> = ids.iter().map(|id| label(id)).collect();
    let s = format!(
        "{count} of its processes (with what they started) may as well be those of {}: \
         these started together and the engine's records cannot tell which ran which",
        names.join(" or ")
    );
    Some(about(j, count as f64, Rank::Uncertain, esc(&s)))
}

/// The job that left the most asked-for CPU time unused, with what that cost.
fn largest_over_ask(jobs: &[Job]) -> Option<Finding> {
    let j = (jobs.iter())
        .filter(|j| j.over_asked())
        .max_by(|a, b| a.idle_cpu_secs().total_cmp(&b.idle_cpu_secs()))?;
    let (asked, idle) = (j.cpus_asked()?, j.idle_cpu_secs());
    let mut s = format!(
        "asked for {asked:.0} CPUs and used {:.1} on average: {} of CPU time asked for and \
         not used",
        j.cpus_used(),
        secs(idle)
    );
    if let Some((cost, cur)) = j.cost() {
        let wasted = cost * idle / (asked * j.wall()).max(1e-9);
        let _ = write!(
            s,
            ", about {} of its {}",
            money(wasted, cur),
            money(cost, cur)
        );
    }
    if let Some(next) = j.span.text(attr::RECOMMENDATION) {
        let _ = write!(s, ". {next}");
    }
    Some(about(j, idle, Rank::OverAsk, esc(&s)))
}

/// The verdict most of the jobs' time went to, where jobs have verdicts.
fn dominant_bottleneck(jobs: &[Job]) -> Option<Finding> {
    let mut by: BTreeMap<&str, f64> = BTreeMap::new();
    for j in jobs {
        if let Some(b) = j.span.text(attr::BOTTLENECK) {
            *by.entry(b).or_default() += j.wall();
        }
    }
    let total: f64 = by.values().sum();
    let (b, t) = by.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let longest = (jobs.iter())
        .filter(|j| j.span.text(attr::BOTTLENECK) == Some(b))
        .max_by(|x, y| x.wall().total_cmp(&y.wall()))?;
    let why = longest.span.text(attr::BOTTLENECK_REASON).unwrap_or(b);
    let s = format!(
        "is the longest of the {b} jobs, which took {} of the jobs' time ({}): {why}",
        pct(t / total.max(1e-9)),
        secs(t)
    );
    Some(about(longest, t, Rank::Bottleneck, esc(&s)))
}

/// A run that failed with no job failing failed in the engine itself (a Snakefile that does
/// not parse, a missing input): said, rather than "nothing to flag".
fn run_failure(run: Option<&ReportSpan>, jobs: &[Job]) -> Option<Finding> {
    let e = run?.error.as_deref()?;
    let s = format!("The run failed outside its jobs: {e}. The engine's own output says why.");
    (!jobs.iter().any(|j| j.failed())).then(|| Finding {
        rank: Rank::Failure,
        weight: f64::MAX,
        job: None,
        html: esc(&s),
    })
}

/// Every finding of the run, most serious first.
pub fn findings(run: Option<&ReportSpan>, jobs: &[Job]) -> Vec<Finding> {
    let mut all: Vec<Finding> = run_failure(run, jobs).into_iter().collect();
    for j in jobs {
        all.extend(
            [oom(j), failure(j), stalls(j), slower(j), uncertain(j, jobs)]
                .into_iter()
                .flatten(),
        );
    }
    all.extend(largest_over_ask(jobs));
    all.extend(dominant_bottleneck(jobs));
    all.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.weight.total_cmp(&a.weight)));
    all
}

/// Findings listed at most of one kind; the rest are counted, the table has them.
const PER_RANK: usize = 5;

pub fn render(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    let all = findings(run, jobs);
    out.push_str("<h2 id=\"findings\">Findings</h2>");
    if all.is_empty() {
        out.push_str(
            "<p class=\"good\">Nothing to flag: no job was killed, failed, stalled, ran slower \
             than usual or asked for far more than it used.</p>",
        );
        return;
    }
    out.push_str("<ol class=\"findings\">");
    let mut i = 0;
    while i < all.len() {
        let rank = all[i].rank;
        let same = all[i..].iter().take_while(|f| f.rank == rank).count();
        for f in &all[i..i + same.min(PER_RANK)] {
            let class = format!("{rank:?}").to_lowercase();
            let _ = write!(out, "<li class=\"{class}\">");
            if let Some((anchor, label)) = &f.job {
                let _ = write!(out, "<a href=\"#{anchor}\">{}</a> ", esc(label));
            }
            let _ = write!(out, "{}</li>", f.html);
        }
        if same > PER_RANK {
            let _ = write!(
                out,
                "<li>… and {} more like these: the jobs table has them.</li>",
                same - PER_RANK
            );
        }
        i += same;
    }
    out.push_str("</ol>");
}

#[cfg(test)]
mod tests {
    use super::{
        super::job::{jobs_of, tests::*},
        *,
    };

    #[test]
    fn an_oom_kill_comes_before_a_failure_and_names_its_peak_and_limit() {
        let mut failed = task("f", "stats", Some("sample=B"), (0.0, 1.0));
        failed.error = Some("task stats exited with code 3".into());
        let mut oom = task("o", "align", Some("sample=A"), (0.5, 2.0));
        oom.error = Some("killed".into());
        let mut victim = tool("v", "o", "bwa");
        victim.events.push(ev(
            event::OOM_KILL,
            &[
                (attr::OOM_RSS, 80.0 * 1048576.0),
                (attr::MEMORY_LIMIT, 64.0 * 1048576.0),
            ],
            &[],
        ));
        let slow = with(
            task("s", "nap", None, (0.0, 9.0)),
            &[(attr::CPU_USER_TIME, 8.0)],
            &[(attr::BOTTLENECK, "cpu-bound")],
        );
        let spans = [failed, oom, victim, slow];
        let jobs = jobs_of(&spans);
        let all = findings(None, &jobs);
        let ranks: Vec<_> = all.iter().map(|f| f.rank).collect();
        assert_eq!(ranks, [Rank::Oom, Rank::Failure, Rank::Bottleneck]);
        let label = |f: &Finding| f.job.as_ref().unwrap().1.clone();
        assert_eq!(label(&all[0]), "align sample=A");
        assert!(
            all[0]
                .html
                .contains("peak of 80 MiB, over its limit of 64 MiB")
        );
        assert!(
            all[1].html.contains("exited with code 3"),
            "{}",
            all[1].html
        );
        let mut out = String::new();
        render(None, &jobs, &mut out);
        let (a, b) = (
            out.find("\">align sample=A</a>"),
            out.find("\">stats sample=B</a>"),
        );
        assert!(a.unwrap() < b.unwrap(), "{out}");
    }

    #[test]
    fn the_largest_over_ask_is_the_one_that_left_most_cpu_time_unused() {
        let over = |id: &str, asked: f64, wall: f64| {
            with(
                task(id, "ask", Some(id), (0.0, wall)),
                &[(attr::CPU_ALLOCATED, asked), (attr::COST, 1.0)],
                &[
                    (attr::CPU_ALLOCATION_SOURCE, "engine.threads"),
                    (attr::RIGHTSIZING, "over-allocated"),
                ],
            )
        };
        // 2 CPUs for 10 s leave more unused than 8 CPUs for 1 s.
        let spans = [over("a", 8.0, 1.0), over("b", 2.0, 10.0)];
        let jobs = jobs_of(&spans);
        let f = largest_over_ask(&jobs).unwrap();
        assert_eq!(f.job.unwrap().1, "ask b");
        assert!(
            f.html.contains("about 1.00 USD of its 1.00 USD"),
            "{}",
            f.html
        );
    }

    #[test]
    fn processes_that_may_be_other_jobs_name_those_jobs_last() {
        let run = |id: &str, name: &str| {
            let t = task(id, name, None, (0.0, 1.0));
            with(t, &[], &[(attr::CICD_PIPELINE_TASK_RUN_ID, id)])
        };
        let mut maybe = tool("x", "a", "sh");
        let alternatives = vec!["b".to_string(), "gone".to_string()];
        (maybe.lists).insert(attr::TOOL_TASK_RUN_ALTERNATIVES.into(), alternatives);
        let mut failed = run("c", "work-c");
        failed.error = Some("task work-c exited with code 1".into());
        let spans = [
            run("a", "work-a"),
            run("b", "work-b"),
            failed,
            maybe,
            tool("y", "a", "sh"),
        ];
        let jobs = jobs_of(&spans);
        let all = findings(None, &jobs);
        let ranks: Vec<_> = all.iter().map(|f| f.rank).collect();
        assert_eq!(ranks, [Rank::Failure, Rank::Uncertain]);
        assert_eq!(all[1].job.as_ref().unwrap().1, "work-a");
        assert!(
            all[1].html.starts_with(
                "1 of its processes (with what they started) may as well be those of \
                     work-b or gone:"
            ),
            "{}",
            all[1].html
        );
    }

    #[test]
    fn a_clean_run_says_there_is_nothing_to_flag() {
        let spans = [task("a", "sort", None, (0.0, 1.0))];
        let mut out = String::new();
        render(None, &jobs_of(&spans), &mut out);
        assert!(out.contains("Nothing to flag"), "{out}");
    }

    #[test]
    fn a_run_that_failed_with_no_job_failing_is_a_finding_not_nothing_to_flag() {
        let mut run = task("r", "run x", None, (0.0, 1.0));
        run.error = Some("run exited with code 1".into());
        let spans = [task("a", "sort", None, (0.0, 1.0))];
        let mut out = String::new();
        render(Some(&run), &jobs_of(&spans), &mut out);
        assert!(
            out.contains("<li class=\"failure\">The run failed outside its jobs: run exited"),
            "{out}"
        );
        assert!(!out.contains("Nothing to flag"), "{out}");
    }
}
