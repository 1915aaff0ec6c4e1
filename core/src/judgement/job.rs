//! A job (one task span) with what its tools tell of it, the unit every part of the page
//! speaks of: findings link to it, the table lists it, the box plots name it.
use std::collections::HashMap;

use pipetrace_semconv::{attr, event};

use super::{Kind, ReportEvent, ReportSpan};

pub struct Job<'a> {
    /// Its place by start, for its row's anchor.
    pub n: usize,
    pub span: &'a ReportSpan,
    /// Its tools' events (an OOM kill or a signal lands on the process it hit).
    pub tool_events: Vec<&'a ReportEvent>,
    /// Its tools that failed, in the order they ended.
    pub failed_tools: Vec<&'a ReportSpan>,
    /// Its tools, however deep, in the order they ended.
    pub tools: Vec<&'a ReportSpan>,
}

/// A run's key in the page's ids: the start of its trace id.
pub fn trace_key(trace: &str) -> String {
    trace.chars().take(8).collect()
}

/// The task a tool runs in, however deep it nests; None for the engine's own processes.
pub fn task_of<'a>(
    s: &'a ReportSpan,
    by_id: &HashMap<&str, &'a ReportSpan>,
) -> Option<&'a ReportSpan> {
    let mut at = s;
    // Bounded: a malformed file could hold a parent cycle.
    for _ in 0..64 {
        if at.kind == Kind::Task {
            return Some(at);
        }
        at = by_id.get(at.parent.as_deref()?)?;
    }
    None
}

/// The run's jobs by start, each with its tools' events and failures.
pub fn jobs_of(spans: &[ReportSpan]) -> Vec<Job<'_>> {
    let by_id: HashMap<&str, &ReportSpan> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut tasks: Vec<&ReportSpan> = spans.iter().filter(|s| s.kind == Kind::Task).collect();
    tasks.sort_by_key(|s| (s.start, s.id.as_str()));
    let mut jobs: Vec<Job> = (tasks.iter().enumerate())
        .map(|(n, &span)| Job {
            n,
            span,
            tool_events: Vec::new(),
            failed_tools: Vec::new(),
            tools: Vec::new(),
        })
        .collect();
    let at: HashMap<&str, usize> = (tasks.iter().enumerate())
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut tools: Vec<&ReportSpan> = spans.iter().filter(|s| s.kind == Kind::Tool).collect();
    tools.sort_by_key(|s| s.end);
    for tool in tools {
        let Some(i) = task_of(tool, &by_id).and_then(|t| at.get(t.id.as_str())) else {
            continue;
        };
        jobs[*i].tools.push(tool);
        jobs[*i].tool_events.extend(tool.events.iter());
        if tool.error.is_some() {
            jobs[*i].failed_tools.push(tool);
        }
    }
    jobs
}

impl<'a> Job<'a> {
    pub fn task(&self) -> &'a str {
        (self.span.text(attr::CICD_PIPELINE_TASK_NAME)).unwrap_or(&self.span.name)
    }

    /// What tells this job from the task's others: the engine's tag, else its wildcards.
    pub fn tag(&self) -> Option<&'a str> {
        (self.span.text(attr::TASK_TAG))
            .or_else(|| self.span.text(attr::TASK_WILDCARDS))
            .filter(|t| !t.is_empty())
    }

    /// "align sample=B": the task and its tag.
    pub fn label(&self) -> String {
        match self.tag() {
            Some(t) => format!("{} {t}", self.task()),
            None => self.task().to_string(),
        }
    }

    /// Its row's id: the run's trace and its place, unique in a page of many runs.
    pub fn anchor(&self) -> String {
        format!("job-{}-{}", trace_key(&self.span.trace), self.n)
    }

    /// Its own log files, as the engine names them.
    pub(crate) fn logs(&self) -> Vec<String> {
        self.span
            .lists
            .get(attr::TASK_LOGS)
            .cloned()
            .unwrap_or_default()
    }

    pub fn failed(&self) -> bool {
        self.span.error.is_some()
    }

    /// Its own events and its tools', of one name.
    pub fn events(&self, name: &'a str) -> impl Iterator<Item = &'a ReportEvent> + '_ {
        (self
            .span
            .events
            .iter()
            .chain(self.tool_events.iter().copied()))
        .filter(move |e| e.name == name)
    }

    pub(crate) fn oom(&self) -> Option<&'a ReportEvent> {
        self.events(event::OOM_KILL).next()
    }

    pub(crate) fn signal(&self) -> Option<&'a ReportEvent> {
        self.events(event::SIGNAL).next()
    }

    /// How it ended, where that says more than "ok": the signal, else a non-zero exit code.
    pub fn ending(&self) -> Option<String> {
        if self.oom().is_some() {
            return Some("SIGKILL (OOM)".into());
        }
        if let Some(sig) = self
            .signal()
            .and_then(|e| e.texts.get(attr::PROCESS_SIGNAL))
        {
            return Some(sig.clone());
        }
        if let Some(sig) = self.span.text(attr::PROCESS_SIGNAL) {
            return Some(sig.to_string());
        }
        let code = self.span.numbers.get(attr::PROCESS_EXIT_CODE).copied();
        match code {
            Some(c) if c != 0.0 => Some(format!("exit {c:.0}")),
            _ => None,
        }
    }

    pub fn status(&self) -> &'static str {
        match (self.failed(), self.oom().is_some()) {
            (true, true) => "OOM-killed",
            (true, false) => "failed",
            (false, _) => "ok",
        }
    }

    /// The jobs this span stands for: a folded span holds short, successful repeats.
    pub fn repeats(&self) -> u64 {
        (self.span.num(attr::FOLD_SPANS) as u64).max(1)
    }

    pub fn wall(&self) -> f64 {
        self.span.secs()
    }

    pub fn cpu(&self) -> f64 {
        self.span.cpu()
    }

    /// The CPUs it asked for, where something asked (the engine, a cgroup, a cpuset), not
    /// the host's CPUs it was merely free to use.
    pub(crate) fn cpus_asked(&self) -> Option<f64> {
        let source = self.span.text(attr::CPU_ALLOCATION_SOURCE);
        let n = self.span.num(attr::CPU_ALLOCATED);
        (n > 0.0 && source.is_some_and(|s| s != "host")).then_some(n)
    }

    /// CPUs busy on average over its life.
    pub(crate) fn cpus_used(&self) -> f64 {
        self.cpu() / self.wall().max(1e-9)
    }

    /// CPUs it kept busy or waited for on average: a job on a busy host that waited for a
    /// CPU wanted it, though it could not use it.
    pub(crate) fn cpus_wanted(&self) -> f64 {
        (self.cpu() + self.span.num(attr::CPU_RUN_QUEUE_DELAY)) / self.wall().max(1e-9)
    }

    pub fn cpu_of_asked(&self) -> Option<f64> {
        self.cpus_asked().map(|n| self.cpus_used() / n)
    }

    pub(crate) fn peak(&self) -> f64 {
        self.span.num(attr::MEMORY_PEAK)
    }

    /// The memory it could use (its cgroup's limit or the engine's grant), else that of
    /// the OOM kill that ended it.
    pub(crate) fn memory_asked(&self) -> Option<f64> {
        let own = self.span.num(attr::MEMORY_LIMIT);
        let killed = || {
            self.oom()
                .and_then(|e| e.numbers.get(attr::MEMORY_LIMIT).copied())
        };
        Some(own).filter(|v| *v > 0.0).or_else(killed)
    }

    /// The peak, counting the OOM kill's figures where they are higher (the kill ends the
    /// process before its exit reads its high-water mark).
    pub fn peak_seen(&self) -> f64 {
        let oom = self.oom().map_or(0.0, |e| {
            let n = |k: &str| e.numbers.get(k).copied().unwrap_or(0.0);
            n(attr::MEMORY_PEAK).max(n(attr::OOM_RSS))
        });
        self.peak().max(oom)
    }

    /// The time the engine or its scheduler gave it (Snakemake's `runtime`, Slurm's
    /// `--time`), seconds.
    pub(crate) fn time_asked(&self) -> Option<f64> {
        Some(self.span.num(attr::TASK_TIME_LIMIT)).filter(|t| *t > 0.0)
    }

    pub fn time_of_asked(&self) -> Option<f64> {
        self.time_asked().map(|t| self.wall() / t)
    }

    pub fn memory_of_asked(&self) -> Option<f64> {
        self.memory_asked().map(|l| self.peak_seen() / l)
    }

    pub(crate) fn over_asked(&self) -> bool {
        self.span.text(attr::RIGHTSIZING) == Some("over-allocated")
    }

    /// CPU-seconds asked for and not used.
    pub(crate) fn idle_cpu_secs(&self) -> f64 {
        self.cpus_asked()
            .map_or(0.0, |n| (n * self.wall() - self.cpu()).max(0.0))
    }

    pub fn cost(&self) -> Option<(f64, &'a str)> {
        let c = self.span.num(attr::COST);
        let cur = self.span.text(attr::COST_CURRENCY).unwrap_or("USD");
        (c > 0.0).then_some((c, cur))
    }

    /// Its figures as the asks' rule reads them: the one reading the page's "ask next
    /// time" and `pipetrace suggest` share.
    pub fn figures(&self) -> crate::sizing::JobFigures {
        crate::sizing::JobFigures {
            busy: self.cpus_wanted(),
            peak: self.peak_seen() as u64,
            wall: self.wall(),
            asked_cpus: self.cpus_asked(),
            asked_memory: self.memory_asked().map(|m| m as u64),
            oom: self.oom().is_some(),
            oom_limit: (self.oom())
                .and_then(|e| e.numbers.get(attr::MEMORY_LIMIT))
                .map(|m| *m as u64),
        }
    }

    /// The bottleneck, and "over-asked" where it asked for far more than it used.
    pub fn verdict(&self) -> Option<String> {
        let b = self.span.text(attr::BOTTLENECK);
        match (b, self.over_asked()) {
            (Some(b), true) => Some(format!("{b}, over-asked")),
            (Some(b), false) => Some(b.to_string()),
            (None, true) => Some("over-asked".into()),
            (None, false) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{super::testing::*, *};

    #[test]
    fn an_oom_kill_on_a_nested_tool_is_its_jobs_with_the_kills_limit() {
        let t = task("t", "align", Some("sample=B"), (0.0, 2.0));
        let shell = tool("s", "t", "bash");
        let mut bwa = tool("b", "s", "bwa");
        bwa.error = Some("bwa killed".into());
        bwa.events.push(ev(
            event::OOM_KILL,
            &[(attr::OOM_RSS, 70e6), (attr::MEMORY_LIMIT, 64e6)],
            &[],
        ));
        let spans = [t, shell, bwa];
        let jobs = jobs_of(&spans);
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.label(), "align sample=B");
        assert_eq!(j.ending().as_deref(), Some("SIGKILL (OOM)"));
        assert_eq!(j.memory_asked(), Some(64e6));
        assert_eq!(j.peak_seen(), 70e6);
        assert_eq!(j.failed_tools.len(), 1);
    }

    #[test]
    fn the_hosts_cpus_are_not_an_ask_and_a_zero_exit_says_nothing() {
        let free = with(
            task("a", "x", None, (0.0, 1.0)),
            &[(attr::CPU_ALLOCATED, 8.0), (attr::PROCESS_EXIT_CODE, 0.0)],
            &[(attr::CPU_ALLOCATION_SOURCE, "host")],
        );
        let asked = with(
            task("b", "x", None, (0.0, 2.0)),
            &[(attr::CPU_ALLOCATED, 4.0), (attr::CPU_USER_TIME, 2.0)],
            &[(attr::CPU_ALLOCATION_SOURCE, "engine.threads")],
        );
        let spans = [free, asked];
        let jobs = jobs_of(&spans);
        assert_eq!((jobs[0].cpus_asked(), jobs[0].ending()), (None, None));
        assert_eq!(jobs[1].cpu_of_asked(), Some(0.25));
        assert_eq!(jobs[1].idle_cpu_secs(), 6.0);
    }
}
