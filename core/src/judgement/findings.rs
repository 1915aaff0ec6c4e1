//! What to look at first: OOM kills, failures, stalls, jobs slower than usual, the largest
//! over-ask and the dominant bottleneck, most serious first, each naming its job; last, the
//! jobs whose processes may as well be other jobs' (the records cannot tell). Typed, so that
//! every view (the terminal, the page, `report --json`, `report --fail-on`) renders these
//! and decides nothing of its own.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::{attr, event};
use serde::Serialize;

use super::ReportSpan;
use super::{
    asks::{self, Asked},
    job::Job,
    units::{bytes, money, pct, secs},
};

/// How serious a finding is; every view lists the most serious first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    Oom,
    Failure,
    Stall,
    Slower,
    OverAsk,
    Bottleneck,
    Uncertain,
}

/// The job a finding is about, as every view names it.
#[derive(Clone, Debug, Serialize)]
pub struct JobRef {
    /// The engine's name of its task (Snakemake's rule, Nextflow's process).
    pub task: String,
    /// What tells it from the task's other jobs (the engine's tag, else its wildcards).
    pub tag: Option<String>,
    /// "align sample=B".
    pub label: String,
    /// Its task span's id in the trace.
    pub span_id: String,
    /// Its row's id on the page.
    #[serde(skip)]
    pub anchor: String,
}

/// What was found, with the figures behind it.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum What {
    /// Killed by the kernel's OOM killer.
    Oom {
        peak_bytes: f64,
        limit_bytes: Option<f64>,
        cgroup: Option<String>,
    },
    /// Failed (a job), or the run failed with no job failing (`job` is null then).
    Failed {
        error: String,
        /// The signal that ended it and who sent it, in words.
        signal: Option<String>,
        /// Its first failed tool's own status.
        tool_error: Option<String>,
        /// Its own log files as the engine names them: where to read why.
        logs: Vec<String>,
        /// Their last lines, where `report.failure_log_lines` asks for them (local views
        /// only: never exported).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        log_tail: Vec<String>,
    },
    /// No CPU, no I/O and no process started or ended, this long in all.
    Stalled { seconds: f64 },
    Slower {
        factor: f64,
        usual_seconds: f64,
        /// Earlier runs the usual is the median of.
        runs: u64,
    },
    /// The job that left the most asked-for CPU time unused.
    OverAsk {
        cpus_asked: f64,
        cpus_used: f64,
        idle_cpu_seconds: f64,
        /// What the CPU time asked for and not used cost, and in which currency.
        wasted_cost: Option<f64>,
        currency: Option<String>,
        recommendation: Option<String>,
    },
    /// The verdict most of the jobs' time went to, on its longest job.
    Bottleneck {
        verdict: String,
        share: f64,
        seconds: f64,
        reason: String,
    },
    /// Processes that may as well be those of other jobs.
    Uncertain {
        processes: u64,
        alternatives: Vec<String>,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    #[serde(skip)]
    pub rank: Rank,
    /// Within a rank, larger first (seconds lost, bytes over).
    #[serde(skip)]
    pub weight: f64,
    /// The job it is about; None for the run itself.
    pub job: Option<JobRef>,
    #[serde(flatten)]
    pub what: What,
    /// The sentence every view shows after the job's name.
    pub text: String,
}

impl What {
    /// Its kind as `report --json` and the `pipetrace.finding` event name it.
    pub fn kind(&self) -> &'static str {
        match self {
            What::Oom { .. } => "oom",
            What::Failed { .. } => "failed",
            What::Stalled { .. } => "stalled",
            What::Slower { .. } => "slower",
            What::OverAsk { .. } => "over_ask",
            What::Bottleneck { .. } => "bottleneck",
            What::Uncertain { .. } => "uncertain",
        }
    }
}

impl JobRef {
    fn of(j: &Job) -> Self {
        JobRef {
            task: j.task().to_string(),
            tag: j.tag().map(str::to_string),
            label: j.label(),
            span_id: j.span.id.clone(),
            anchor: j.anchor(),
        }
    }
}

fn about(j: &Job, weight: f64, rank: Rank, what: What, text: String) -> Finding {
    Finding {
        rank,
        weight,
        job: Some(JobRef::of(j)),
        what,
        text,
    }
}

fn oom(j: &Job) -> Option<Finding> {
    let e = j.oom()?;
    let (peak, limit) = (j.peak_seen(), j.memory_asked());
    let cgroup = e.texts.get(attr::OOM_CGROUP).cloned();
    let peak_said = bytes(peak);
    let mut s = format!("killed by the OOM killer at a peak of {peak_said}");
    // The job's peak (all its processes) beside the killed one's, as the events say it.
    let rss = e.numbers.get(attr::OOM_RSS).map(|v| bytes(*v));
    if let Some(rss) = rss.filter(|r| *r != peak_said) {
        let _ = write!(s, " (the process killed: {rss} resident)");
    }
    if let Some(limit) = limit {
        let _ = write!(s, ", over its limit of {}", bytes(limit));
    }
    if let Some(cg) = &cgroup {
        let _ = write!(s, " (cgroup {cg})");
    }
    let what = What::Oom {
        peak_bytes: peak,
        limit_bytes: limit,
        cgroup,
    };
    Some(about(j, peak, Rank::Oom, what, s))
}

fn failure(j: &Job) -> Option<Finding> {
    if !j.failed() || j.oom().is_some() {
        return None;
    }
    let error = j.span.error.clone().unwrap_or_default();
    let signal = j.signal().map(|e| e.describe());
    let tool_error = (j.failed_tools.first()).and_then(|t| t.error.clone());
    let mut s = format!("failed: {error}");
    if let Some(sig) = &signal {
        let _ = write!(s, "; {sig}");
    }
    if let Some(t) = &tool_error {
        let _ = write!(s, " ({t})");
    }
    let logs = j.logs();
    if !logs.is_empty() {
        let _ = write!(s, "; its log: {}", logs.join(", "));
    }
    let what = What::Failed {
        error,
        signal,
        tool_error,
        logs,
        log_tail: Vec::new(),
    };
    Some(about(j, j.wall(), Rank::Failure, what, s))
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
    let what = What::Stalled { seconds: stalled };
    (stalled > 0.0).then(|| about(j, stalled, Rank::Stall, what, s))
}

fn slower(j: &Job) -> Option<Finding> {
    let e = (j.span.events.iter()).find(|e| e.name == event::SLOWER_THAN_USUAL)?;
    let n = |k: &str| e.numbers.get(k).copied().unwrap_or(0.0);
    let what = What::Slower {
        factor: n(attr::HISTORY_FACTOR),
        usual_seconds: n(attr::HISTORY_USUAL_DURATION),
        runs: n(attr::HISTORY_RUNS) as u64,
    };
    Some(about(
        j,
        n(attr::HISTORY_FACTOR),
        Rank::Slower,
        what,
        e.describe(),
    ))
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
    let what = What::Uncertain {
        processes: count,
        alternatives: names,
    };
    Some(about(j, count as f64, Rank::Uncertain, what, s))
}

/// Each task's asks and the engine whose words they are in.
pub type Asks<'a> = (&'a BTreeMap<String, Asked>, &'a str);

/// The job that left the most asked-for CPU time unused, with what that cost and what its
/// task should ask for next time. Not a job given one CPU, the least one can ask for, nor
/// one whose task's next ask would not be fewer CPUs.
fn largest_over_ask(jobs: &[Job], (asks, engine): Asks) -> Option<Finding> {
    let fewer = |j: &Job| {
        let next = asks.get(j.task()).and_then(Asked::next_cpus);
        matches!((j.cpus_asked(), next), (Some(a), Some(n)) if a > 1.0 && n < a)
    };
    let j = (jobs.iter())
        .filter(|j| j.over_asked() && fewer(j))
        .max_by(|a, b| a.idle_cpu_secs().total_cmp(&b.idle_cpu_secs()))?;
    let (asked, idle) = (j.cpus_asked()?, j.idle_cpu_secs());
    let mut s = format!(
        "asked for {asked:.0} CPUs and used {:.1} on average: {} of CPU time asked for and \
         not used",
        j.cpus_used(),
        secs(idle)
    );
    let cost = j.cost();
    let wasted = cost.map(|(cost, _)| cost * idle / (asked * j.wall()).max(1e-9));
    if let (Some((cost, cur)), Some(wasted)) = (cost, wasted) {
        let _ = write!(
            s,
            ", about {} of its {}",
            money(wasted, cur),
            money(cost, cur)
        );
    }
    let recommendation = (asks.get(j.task()))
        .map(|a| asks::next_time(a, engine))
        .filter(|n| !n.is_empty());
    if let Some(next) = &recommendation {
        let _ = write!(s, ". Ask next time: {next}");
    }
    let what = What::OverAsk {
        cpus_asked: asked,
        cpus_used: j.cpus_used(),
        idle_cpu_seconds: idle,
        wasted_cost: wasted,
        currency: cost.map(|(_, c)| c.to_string()),
        recommendation,
    };
    Some(about(j, idle, Rank::OverAsk, what, s))
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
    let share = t / total.max(1e-9);
    let s = format!(
        "is the longest of the {b} jobs, which took {} of the jobs' time ({}): {why}",
        pct(share),
        secs(t)
    );
    let what = What::Bottleneck {
        verdict: b.to_string(),
        share,
        seconds: t,
        reason: why.to_string(),
    };
    Some(about(longest, t, Rank::Bottleneck, what, s))
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
        what: What::Failed {
            error: e.to_string(),
            signal: None,
            tool_error: None,
            logs: Vec::new(),
            log_tail: Vec::new(),
        },
        text: s,
    })
}

/// Every finding of the run, most serious first; within a rank, the larger first, then
/// the earlier-starting job.
pub fn findings(run: Option<&ReportSpan>, jobs: &[Job], asks: Asks) -> Vec<Finding> {
    let mut all: Vec<Finding> = run_failure(run, jobs).into_iter().collect();
    for j in jobs {
        all.extend(
            [oom(j), failure(j), stalls(j), slower(j), uncertain(j, jobs)]
                .into_iter()
                .flatten(),
        );
    }
    all.extend(largest_over_ask(jobs, asks));
    all.extend(dominant_bottleneck(jobs));
    all.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.weight.total_cmp(&a.weight)));
    all
}

#[cfg(test)]
mod tests {
    use super::{
        super::{job::jobs_of, testing::*},
        *,
    };

    /// The kind the `pipetrace.finding` event names is the one `report --json` gives.
    #[test]
    fn a_findings_kind_is_its_json_kind() {
        let [failed, oom, victim] = a_failure_and_an_oom_kill();
        let spans = [failed, oom, victim];
        let jobs = jobs_of(&spans);
        let all = findings(None, &jobs, (&asks::by_task(&jobs), ""));
        assert!(all.len() >= 2);
        for f in &all {
            let json = serde_json::to_value(f).unwrap();
            assert_eq!(json["kind"], f.what.kind(), "{json}");
        }
    }

    #[test]
    fn an_oom_kill_comes_before_a_failure_and_names_its_peak_and_limit() {
        let [failed, oom, victim] = a_failure_and_an_oom_kill();
        let slow = with(
            task("s", "nap", None, (0.0, 9.0)),
            &[(attr::CPU_USER_TIME, 8.0)],
            &[(attr::BOTTLENECK, "cpu-bound")],
        );
        let spans = [failed, oom, victim, slow];
        let jobs = jobs_of(&spans);
        let all = findings(None, &jobs, (&asks::by_task(&jobs), ""));
        let ranks: Vec<_> = all.iter().map(|f| f.rank).collect();
        assert_eq!(ranks, [Rank::Oom, Rank::Failure, Rank::Bottleneck]);
        let label = |f: &Finding| f.job.as_ref().unwrap().label.clone();
        assert_eq!(label(&all[0]), "align sample=A");
        assert!(
            all[0]
                .text
                .contains("peak of 80 MiB, over its limit of 64 MiB")
        );
        assert!(
            all[1].text.contains("exited with code 3"),
            "{}",
            all[1].text
        );
        // A job whose processes together peaked above the one killed says both figures.
        let [_, oom, victim] = a_failure_and_an_oom_kill();
        let oom = with(oom, &[(attr::MEMORY_PEAK, 90.0 * 1048576.0)], &[]);
        let spans = [oom, victim];
        let jobs = jobs_of(&spans);
        let all = findings(None, &jobs, (&asks::by_task(&jobs), ""));
        let said = "peak of 90 MiB (the process killed: 80 MiB resident), over its limit of 64 MiB";
        assert!(all[0].text.contains(said), "{}", all[0].text);
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
        let asked = asks::by_task(&jobs);
        let f = largest_over_ask(&jobs, (&asked, "snakemake")).unwrap();
        assert_eq!(f.job.unwrap().label, "ask b");
        assert!(
            f.text.contains("about 1.00 USD of its 1.00 USD"),
            "{}",
            f.text
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
        let all = findings(None, &jobs, (&asks::by_task(&jobs), ""));
        let ranks: Vec<_> = all.iter().map(|f| f.rank).collect();
        assert_eq!(ranks, [Rank::Failure, Rank::Uncertain]);
        assert_eq!(all[1].job.as_ref().unwrap().label, "work-a");
        assert!(
            all[1].text.starts_with(
                "1 of its processes (with what they started) may as well be those of \
                     work-b or gone:"
            ),
            "{}",
            all[1].text
        );
    }
}
