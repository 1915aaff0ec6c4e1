//! What to look at first: OOM kills, failures, stalls, jobs slower than usual, the largest
//! over-ask and the dominant bottleneck, most serious first, each naming its job; last, the
//! jobs whose processes may as well be other jobs' (the records cannot tell). Typed, so that
//! every view (the terminal, the page, `report --json`, `report --fail-on`) renders these
//! and decides nothing of its own.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::{attr, event};
use serde::Serialize;

use super::{ReportEvent, ReportSpan};
use super::{
    asks::{self, Asked},
    job::Job,
    units::{bytes, money, pct, secs},
};
use crate::sizing::Fit;

/// How serious a finding is; every view lists the most serious first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    Oom,
    Failure,
    Stall,
    Slower,
    UnderAsk,
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
        /// Where another process's allocation set the OOM killer off: its name and pid,
        /// and its job's label where that is another job of the run.
        trigger: Option<String>,
        trigger_pid: Option<u32>,
        trigger_job: Option<String>,
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
    /// A task's jobs needed more than it asked for (CPUs kept busy, memory near its limit).
    UnderAsk(Miss),
    /// A task's jobs left most of what it asked for unused.
    OverAsk(Miss),
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

/// What a task asked for against what its jobs used, and what it should ask next time.
#[derive(Clone, Debug, Serialize)]
pub struct Miss {
    /// The most CPUs any of its jobs was given, and the most the busiest used on average.
    pub cpus_asked: Option<f64>,
    pub cpus_used: f64,
    /// CPU time asked for and not used, over its jobs.
    pub idle_cpu_seconds: f64,
    pub memory_asked_bytes: Option<f64>,
    pub memory_peak_bytes: f64,
    /// What the CPU time asked for and not used cost (an over-ask, where the run had a
    /// price), and in which currency.
    pub wasted_cost: Option<f64>,
    pub currency: Option<String>,
    /// What should change, in the engine's words (`threads: 1, mem_mb: 64`): what the
    /// page's "ask next time" and `suggest` say.
    pub recommendation: Option<String>,
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
            What::UnderAsk(_) => "under_ask",
            What::OverAsk(_) => "over_ask",
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

/// The process whose allocation set the OOM killer off, where it is not the one killed
/// (the event says it only then): its pid, name and, where another job of the run ran it,
/// that job's label.
fn trigger(j: &Job, e: &ReportEvent, jobs: &[Job]) -> Option<(u32, String, Option<String>)> {
    let pid = *e.numbers.get(attr::OOM_TRIGGER_PID)?;
    let ran = |s: &ReportSpan| s.num(attr::PROCESS_PID) == pid;
    let other = (jobs.iter())
        .find(|o| ran(o.span) || o.tools.iter().any(|t| ran(t)))
        .filter(|o| !std::ptr::eq(o.span, j.span))
        .map(Job::label);
    let comm = e
        .texts
        .get(attr::OOM_TRIGGER)
        .cloned()
        .unwrap_or_else(|| "?".into());
    Some((pid as u32, comm, other))
}

fn oom(j: &Job, jobs: &[Job]) -> Option<Finding> {
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
    let by = trigger(j, e, jobs);
    if let Some((pid, comm, other)) = &by {
        let _ = write!(s, "; set off by an allocation of {comm} (pid {pid})");
        if let Some(o) = other {
            let _ = write!(s, " in job {o}, which shares its memory limit");
        }
    }
    let what = What::Oom {
        peak_bytes: peak,
        limit_bytes: limit,
        cgroup,
        trigger: by.as_ref().map(|b| b.1.clone()),
        trigger_pid: by.as_ref().map(|b| b.0),
        trigger_job: by.and_then(|b| b.2),
    };
    Some(about(j, peak, Rank::Oom, what, s))
}

fn failure(j: &Job, run_log: Option<&str>) -> Option<Finding> {
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
    let mut logs = j.logs();
    if !logs.is_empty() {
        let _ = write!(s, "; its log: {}", logs.join(", "));
    } else if let Some(l) = run_log {
        // No log of its own: the engine's log of the run says why.
        let _ = write!(s, "; the run's log: {l}");
        logs.push(l.to_string());
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

/// Each task whose asks miss what its jobs needed, by the rule span building and every
/// view read (`sizing::fit`): an under-ask where its jobs needed more, an over-ask where
/// they left most of it unused. An OOM kill is its own finding, not also an under-ask.
fn ask_misses(jobs: &[Job], (asks, engine): Asks) -> Vec<Finding> {
    let mut out = Vec::new();
    for (task, a) in asks {
        let fitted = a.fitted();
        let of_task: Vec<&Job> = jobs.iter().filter(|j| j.task() == task).collect();
        let recommendation = Some(asks::next_time(a, engine)).filter(|n| !n.is_empty());
        let is = |f: Option<Fit>, want: Fit| f == Some(want);
        let under_cpus = is(fitted.cpus, Fit::Under);
        let under_memory = is(fitted.memory, Fit::Under) && !a.oom;
        if under_cpus || under_memory {
            let miss = Miss::of(a, &of_task, recommendation.clone(), false);
            out.extend(under_ask(&of_task, miss, (under_cpus, under_memory)));
        }
        let (over_cpus, over_memory) = (is(fitted.cpus, Fit::Over), is(fitted.memory, Fit::Over));
        if over_cpus || over_memory {
            let miss = Miss::of(a, &of_task, recommendation, true);
            out.extend(over_ask(&of_task, miss, (over_cpus, over_memory)));
        }
    }
    out
}

impl Miss {
    fn of(a: &Asked, jobs: &[&Job], recommendation: Option<String>, priced: bool) -> Self {
        let idle: f64 = jobs.iter().map(|j| j.idle_cpu_secs()).sum();
        // What each job's CPU time asked for and not used cost, where it had a price.
        let wasted = |j: &&Job| {
            let (asked, (cost, _)) = (j.cpus_asked()?, j.cost()?);
            Some(cost * j.idle_cpu_secs() / (asked * j.wall()).max(1e-9))
        };
        let costs: Vec<f64> = jobs.iter().filter_map(wasted).collect();
        let currency = jobs
            .iter()
            .find_map(|j| j.cost())
            .map(|(_, c)| c.to_string());
        Miss {
            cpus_asked: a.cpus,
            cpus_used: a.cpus_used,
            idle_cpu_seconds: idle,
            memory_asked_bytes: a.memory,
            memory_peak_bytes: a.peak,
            wasted_cost: (priced && !costs.is_empty()).then(|| costs.iter().sum()),
            currency: currency.filter(|_| priced && !costs.is_empty()),
            recommendation,
        }
    }

    /// ". Ask next time: threads: 1", where something should change.
    fn next(&self, s: &mut String) {
        if let Some(next) = &self.recommendation {
            let _ = write!(s, ". Ask next time: {next}");
        }
    }
}

fn cpus_word(n: f64) -> String {
    match n == 1.0 {
        true => "1 CPU".into(),
        false => format!("{n:.0} CPUs"),
    }
}

/// Named on the job that needed the most: the busiest, or the largest peak.
fn under_ask(jobs: &[&Job], m: Miss, (cpus, memory): (bool, bool)) -> Option<Finding> {
    let need = |j: &&&Job| match cpus {
        true => j.cpus_wanted(),
        false => j.peak_seen(),
    };
    let j = jobs.iter().max_by(|a, b| need(a).total_cmp(&need(b)))?;
    let mut said = Vec::new();
    if let (true, Some(asked)) = (cpus, m.cpus_asked) {
        let busy = jobs.iter().map(|j| j.cpus_wanted()).fold(0.0, f64::max);
        said.push(format!(
            "asked for {} and kept {busy:.1} busy or waiting for one",
            cpus_word(asked)
        ));
    }
    if let (true, Some(limit)) = (memory, m.memory_asked_bytes) {
        let (peak, limit) = (bytes(m.memory_peak_bytes), bytes(limit));
        said.push(format!(
            "peaked at {peak} of its {limit}, too close to be safe"
        ));
    }
    let mut s = said.join("; ");
    m.next(&mut s);
    let weight: f64 = jobs.iter().map(|j| j.wall()).sum();
    Some(about(j, weight, Rank::UnderAsk, What::UnderAsk(m), s))
}

/// Named on the job that left the most of its ask unused.
fn over_ask(jobs: &[&Job], m: Miss, (cpus, memory): (bool, bool)) -> Option<Finding> {
    let unused = |j: &Job| {
        let cpu = j.cpu_of_asked().filter(|_| cpus).map_or(0.0, |u| 1.0 - u);
        let mem = j
            .memory_of_asked()
            .filter(|_| memory)
            .map_or(0.0, |u| 1.0 - u);
        cpu.max(mem).max(0.0) * j.wall()
    };
    let j = jobs.iter().max_by(|a, b| unused(a).total_cmp(&unused(b)))?;
    let mut said = Vec::new();
    if let (true, Some(asked)) = (cpus, m.cpus_asked) {
        let mut c = format!(
            "asked for {} and used {:.1} at most: {} of CPU time asked for and not used",
            cpus_word(asked),
            m.cpus_used,
            secs(m.idle_cpu_seconds)
        );
        if let (Some(w), Some(cur)) = (m.wasted_cost, &m.currency) {
            let _ = write!(c, ", about {}", money(w, cur));
        }
        said.push(c);
    }
    if let (true, Some(limit)) = (memory, m.memory_asked_bytes) {
        let (limit, peak) = (bytes(limit), bytes(m.memory_peak_bytes));
        said.push(format!("asked for {limit} of memory and peaked at {peak}"));
    }
    let mut s = said.join("; ");
    m.next(&mut s);
    let weight: f64 = jobs.iter().map(|j| unused(j)).sum();
    Some(about(j, weight, Rank::OverAsk, What::OverAsk(m), s))
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
    let run = run?;
    let e = run.error.as_deref()?;
    let log = run.text(attr::RUN_LOG);
    let s = match log {
        Some(l) => format!("The run failed outside its jobs: {e}. Its log says why: {l}"),
        None => format!("The run failed outside its jobs: {e}. The engine's own output says why."),
    };
    (!jobs.iter().any(|j| j.failed())).then(|| Finding {
        rank: Rank::Failure,
        weight: f64::MAX,
        job: None,
        what: What::Failed {
            error: e.to_string(),
            signal: None,
            tool_error: None,
            logs: log.map(str::to_string).into_iter().collect(),
            log_tail: Vec::new(),
        },
        text: s,
    })
}

/// Every finding of the run, most serious first; within a rank, the larger first, then
/// the earlier-starting job.
pub fn findings(run: Option<&ReportSpan>, jobs: &[Job], asks: Asks) -> Vec<Finding> {
    let mut all: Vec<Finding> = run_failure(run, jobs).into_iter().collect();
    let run_log = run.and_then(|r| r.text(attr::RUN_LOG));
    for j in jobs {
        all.extend(
            [
                oom(j, jobs),
                failure(j, run_log),
                stalls(j),
                slower(j),
                uncertain(j, jobs),
            ]
            .into_iter()
            .flatten(),
        );
    }
    all.extend(ask_misses(jobs, asks));
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

    /// Two jobs under one memory limit: the one whose allocation set the OOM killer off is
    /// named on the other's kill.
    #[test]
    fn an_oom_kill_set_off_by_another_job_names_that_job() {
        let [_, oom, mut victim] = a_failure_and_an_oom_kill();
        victim.numbers.insert(attr::PROCESS_PID.into(), 100.0);
        let e = victim.events.last_mut().unwrap();
        e.numbers.insert(attr::OOM_TRIGGER_PID.into(), 200.0);
        e.texts.insert(attr::OOM_TRIGGER.into(), "samtools".into());
        let other = task("m", "merge", None, (0.0, 3.0));
        let mut tool_of_other = tool("s", "m", "samtools");
        tool_of_other
            .numbers
            .insert(attr::PROCESS_PID.into(), 200.0);
        let spans = [oom, victim.clone(), other, tool_of_other];
        let all = judged(&spans, "snakemake");
        let said = "; set off by an allocation of samtools (pid 200) in job merge, which \
                    shares its memory limit";
        assert!(all[0].text.ends_with(said), "{}", all[0].text);
        let json = serde_json::to_value(&all[0]).unwrap();
        assert_eq!(json["trigger_job"], "merge");
        // Its own allocation: the event says nothing of it, nor does the finding.
        let e = victim.events.last_mut().unwrap();
        e.numbers.remove(attr::OOM_TRIGGER_PID);
        let [_, oom, _] = a_failure_and_an_oom_kill();
        let all = judged(&[oom, victim], "snakemake");
        assert!(!all[0].text.contains("set off"), "{}", all[0].text);
    }

    /// A failed job with no log of its own names the engine's log of the run, as does a run
    /// that failed outside its jobs.
    #[test]
    fn a_failure_with_no_log_of_its_own_names_the_runs_log() {
        let mut run = task("r", "snakemake", None, (0.0, 3.0));
        run.kind = super::super::Kind::Run;
        let log = ".snakemake/log/2026-12-03T101500.snakemake.log";
        run.texts.insert(attr::RUN_LOG.into(), log.into());
        let [failed, ..] = a_failure_and_an_oom_kill();
        let jobs = jobs_of(std::slice::from_ref(&failed));
        let all = findings(Some(&run), &jobs, (&asks::by_task(&jobs), "snakemake"));
        assert!(
            all[0].text.ends_with(&format!("; the run's log: {log}")),
            "{}",
            all[0].text
        );
        run.error = Some("snakemake exited with code 1".into());
        let all = findings(Some(&run), &[], (&BTreeMap::new(), "snakemake"));
        assert!(
            all[0].text.ends_with(&format!("Its log says why: {log}")),
            "{}",
            all[0].text
        );
        let json = serde_json::to_value(&all[0]).unwrap();
        assert_eq!(json["logs"][0], log);
    }

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

    const MIB: f64 = 1048576.0;

    /// A job of `task` given `cpus` and `mem` MiB, busy `cpu` s of `wall`, peaking at `peak`.
    fn asked(
        id: &str,
        task_name: &str,
        (cpus, mem): (f64, f64),
        (cpu, wall, peak): (f64, f64, f64),
    ) -> ReportSpan {
        with(
            task(id, task_name, Some(id), (0.0, wall)),
            &[
                (attr::CPU_ALLOCATED, cpus),
                (attr::CPU_USER_TIME, cpu),
                (attr::MEMORY_LIMIT, mem * MIB),
                (attr::MEMORY_PEAK, peak * MIB),
                (attr::COST, 1.0),
            ],
            &[(attr::CPU_ALLOCATION_SOURCE, "engine.threads")],
        )
    }

    fn judged(spans: &[ReportSpan], engine: &str) -> Vec<Finding> {
        let jobs = jobs_of(spans);
        findings(None, &jobs, (&asks::by_task(&jobs), engine))
    }

    #[test]
    fn an_over_ask_names_the_job_that_left_most_of_its_task_s_ask_unused() {
        // 8 CPUs for 1 s leave less unused than 2 CPUs for 10 s.
        let spans = [
            asked("a", "ask", (8.0, 400.0), (0.0, 1.0, 300.0)),
            asked("b", "ask", (2.0, 400.0), (0.0, 10.0, 300.0)),
        ];
        let all = judged(&spans, "snakemake");
        assert_eq!(all.len(), 1, "{all:?}");
        let f = &all[0];
        assert_eq!(
            (f.rank, f.job.as_ref().unwrap().label.as_str()),
            (Rank::OverAsk, "ask b")
        );
        assert!(
            f.text
                .starts_with("asked for 8 CPUs and used 0.0 at most: 28.0 s of CPU time"),
            "{}",
            f.text
        );
        assert!(f.text.contains("about 2.00 USD"), "{}", f.text);
        assert!(
            f.text.ends_with("Ask next time: threads: 1, mem_mb: 378"),
            "{}",
            f.text
        );
    }

    /// Snakemake's merge asking `threads: 2` and `mem_mb: 4000` for a single-threaded 25 MB
    /// step: one over-ask naming both, with the ask `suggest` writes.
    #[test]
    fn memory_asked_for_and_not_used_is_an_over_ask_too() {
        let spans = [asked("m", "merge", (2.0, 3815.0), (6.0, 10.0, 25.0))];
        let all = judged(&spans, "snakemake");
        assert_eq!(all.len(), 1, "{all:?}");
        let f = &all[0];
        assert_eq!(f.rank, Rank::OverAsk);
        assert!(
            f.text.contains("asked for 2 CPUs and used 0.6 at most"),
            "{}",
            f.text
        );
        assert!(
            f.text
                .contains("asked for 3.7 GiB of memory and peaked at 25 MiB"),
            "{}",
            f.text
        );
        let a = &asks::by_task(&jobs_of(&spans))["merge"];
        let next = asks::next_time(a, "snakemake");
        assert_eq!(next, "threads: 1, mem_mb: 68");
        assert!(
            f.text.ends_with(&format!("Ask next time: {next}")),
            "{}",
            f.text
        );
        let json = serde_json::to_value(f).unwrap();
        assert_eq!(json["kind"], "over_ask");
        assert_eq!(json["memory_asked_bytes"], 3815.0 * MIB);
    }

    #[test]
    fn a_task_that_needed_more_than_it_asked_is_an_under_ask() {
        let busy = asked("u", "sort", (1.0, 200.0), (38.0, 10.0, 190.0));
        let all = judged(&[busy], "nextflow");
        assert_eq!(all.len(), 1, "{all:?}");
        let f = &all[0];
        assert_eq!((f.rank, f.what.kind()), (Rank::UnderAsk, "under_ask"));
        assert!(
            f.text
                .contains("asked for 1 CPU and kept 3.8 busy or waiting for one"),
            "{}",
            f.text
        );
        assert!(
            f.text.contains("peaked at 190 MiB of its 200 MiB"),
            "{}",
            f.text
        );
        assert!(
            f.text.ends_with("Ask next time: cpus: 4, memory: '228 MB'"),
            "{}",
            f.text
        );
    }

    /// One CPU is the least one can ask for; a job's OOM kill is its own finding.
    #[test]
    fn no_finding_asks_below_the_least_nor_repeats_an_oom_kill() {
        let idle = asked("i", "wait", (1.0, 400.0), (0.0, 10.0, 300.0));
        assert!(judged(&[idle], "snakemake").is_empty());
        let [_, oom, victim] = a_failure_and_an_oom_kill();
        let oom = with(oom, &[(attr::MEMORY_LIMIT, 64.0 * MIB)], &[]);
        let all = judged(&[oom, victim], "snakemake");
        let ranks: Vec<_> = all.iter().map(|f| f.rank).collect();
        assert_eq!(ranks, [Rank::Oom]);
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
