//! The run's status banner and its facts: when, what ran, where, and how its jobs ended.
use std::fmt::Write as _;

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, secs, when},
};
use crate::report::markup::esc;
use pipetrace_core::judgement::ReportSpan;

/// Jobs that ran and failed: the run's own count where it has one (a long run's page may
/// list only some of its jobs), else the jobs here, folded ones as the jobs they stand for.
fn counts(run: Option<&ReportSpan>, jobs: &[Job]) -> (usize, usize) {
    let of_run = |k: &str| run.and_then(|r| r.numbers.get(k)).map(|v| *v as usize);
    let ran = jobs.iter().map(|j| j.repeats() as usize).sum();
    let failed = jobs.iter().filter(|j| j.failed()).count();
    match (of_run(attr::RUN_TASKS), of_run(attr::RUN_TASKS_FAILED)) {
        (Some(r), Some(f)) if r >= ran => (r, f),
        _ => (ran, failed),
    }
}

/// The banner: succeeded or failed, in words, with how many jobs ended how.
fn banner(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    let (ran, failed) = counts(run, jobs);
    let (class, head) = match run.and_then(|r| r.error.as_deref()) {
        Some(e) => ("bad", format!("Failed: {e}")),
        None if failed > 0 => ("bad", format!("Completed, with {failed} failed jobs")),
        None if run.is_none() => ("", "No run span: the trace holds jobs only".to_string()),
        None => ("good", "Succeeded".to_string()),
    };
    let _ = write!(
        out,
        "<div class=\"banner {class}\"><strong>{}</strong>",
        esc(&head)
    );
    if let Some(r) = run {
        let _ = write!(out, " in {}", secs(r.secs()));
    }
    let _ = write!(out, " · {} ok · {failed} failed</div>", ran - failed);
}

/// One fact as a term and its value, where the value is known.
fn fact(out: &mut String, term: &str, value: Option<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", esc(term), esc(&v));
    }
}

/// The facts of the run span.
fn facts(r: &ReportSpan, jobs: &[Job], out: &mut String) {
    out.push_str("<dl class=\"facts\">");
    fact(out, "started", Some(when(r.start)));
    fact(out, "ended", Some(when(r.end)));
    fact(
        out,
        "command",
        r.text(attr::PROCESS_COMMAND_LINE).map(str::to_string),
    );
    fact(
        out,
        "directory",
        r.text(attr::PROCESS_WORKING_DIRECTORY).map(str::to_string),
    );
    let engine = r
        .text(attr::RUN_ENGINE)
        .map(|e| match r.text(attr::RUN_ENGINE_VERSION) {
            Some(v) => format!("{e} {v}"),
            None => e.to_string(),
        });
    fact(out, "engine", engine);
    let host = r.text(attr::CPU_ALLOCATION_SOURCE) == Some("host");
    let cpus = r.num(attr::CPU_ALLOCATED);
    let memory = r.num(attr::HOST_MEMORY);
    let machine = [
        (host && cpus > 0.0).then(|| format!("{cpus:.0} CPUs")),
        (memory > 0.0).then(|| format!("{} of memory", bytes(memory))),
    ];
    let machine: Vec<String> = machine.into_iter().flatten().collect();
    fact(out, "host", Some(machine.join(", ")));
    fact(
        out,
        "CPUs it could use",
        (!host && cpus > 0.0).then(|| format!("{cpus:.0}")),
    );
    let planned = r.num(attr::RUN_TASKS_PLANNED) as usize;
    let (ran, failed) = counts(Some(r), jobs);
    let mut counts = format!("{} ok, {failed} failed", ran - failed);
    let cached = r.num(attr::RUN_TASKS_CACHED) as usize;
    if cached > 0 {
        let _ = write!(
            counts,
            ", {cached} cached (taken from the engine's cache, not run)"
        );
    }
    if planned > ran {
        let _ = write!(
            counts,
            "; {planned} planned by the engine ({} ran no process of their own or did not run)",
            planned - ran
        );
    }
    fact(out, "jobs", Some(counts));
    fact(
        out,
        "CPU, peak memory",
        Some(format!(
            "{} of CPU, {} at most at once, {} processes",
            secs(r.cpu()),
            bytes(r.num(attr::MEMORY_PEAK)),
            r.num(attr::USAGE_PROCESSES)
        )),
    );
    fact(
        out,
        "run id",
        r.text(attr::CICD_PIPELINE_RUN_ID).map(str::to_string),
    );
    fact(
        out,
        "report by",
        Some(format!("pipetrace {}", env!("CARGO_PKG_VERSION"))),
    );
    out.push_str("</dl>");
}

pub(crate) fn render(run: Option<&ReportSpan>, jobs: &[Job], out: &mut String) {
    banner(run, jobs, out);
    if let Some(r) = run {
        facts(r, jobs, out);
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};
    use pipetrace_core::judgement::Kind;

    #[test]
    fn a_failed_run_says_so_first_with_its_counts() {
        let mut run = task("r", "run x", None, (0.0, 5.0));
        (run.kind, run.parent) = (Kind::Run, None);
        run.error = Some("run exited with code 1; 1 of 2 tasks failed".into());
        run.texts
            .insert(attr::RUN_ENGINE.into(), "snakemake".into());
        let mut bad = task("b", "stats", None, (1.0, 2.0));
        bad.error = Some("exit 3".into());
        let spans = [task("a", "sort", None, (0.0, 1.0)), bad];
        let jobs = jobs_of(&spans);
        let mut out = String::new();
        render(Some(&run), &jobs, &mut out);
        assert!(
            out.starts_with("<div class=\"banner bad\"><strong>Failed: run exited with code 1"),
            "{out}"
        );
        assert!(out.contains("1 ok · 1 failed"), "{out}");
        assert!(out.contains("<dt>engine</dt><dd>snakemake</dd>"), "{out}");
        assert!(!out.contains("<dt>host</dt>"), "no figure, no fact: {out}");
    }

    #[test]
    fn the_facts_name_the_engines_version_the_hosts_size_and_the_cached_jobs() {
        let mut run = with(
            task("r", "run x", None, (0.0, 5.0)),
            &[
                (attr::CPU_ALLOCATED, 2.0),
                (attr::HOST_MEMORY, 24.0 * 1073741824.0),
                (attr::RUN_TASKS, 2.0),
                (attr::RUN_TASKS_FAILED, 0.0),
                (attr::RUN_TASKS_CACHED, 3.0),
            ],
            &[
                (attr::RUN_ENGINE, "nextflow"),
                (attr::RUN_ENGINE_VERSION, "24.10.0"),
                (attr::CPU_ALLOCATION_SOURCE, "host"),
            ],
        );
        (run.kind, run.parent) = (Kind::Run, None);
        let spans = [
            task("a", "sort", None, (0.0, 1.0)),
            task("b", "sort", None, (0.0, 1.0)),
        ];
        let mut out = String::new();
        render(Some(&run), &jobs_of(&spans), &mut out);
        assert!(
            out.contains("<dt>engine</dt><dd>nextflow 24.10.0</dd>"),
            "{out}"
        );
        assert!(
            out.contains("<dt>host</dt><dd>2 CPUs, 24 GiB of memory</dd>"),
            "{out}"
        );
        let cached = "<dd>2 ok, 0 failed, 3 cached (taken from the engine's cache, not run)</dd>";
        assert!(out.contains(cached), "{out}");
    }

    #[test]
    fn a_folded_span_counts_as_the_jobs_it_stands_for() {
        let folded = with(
            task("a", "touch", None, (0.0, 1.0)),
            &[(attr::FOLD_SPANS, 40.0)],
            &[],
        );
        let spans = [folded, task("b", "sort", None, (0.0, 1.0))];
        let jobs = jobs_of(&spans);
        let mut out = String::new();
        render(None, &jobs, &mut out);
        assert!(out.contains("41 ok · 0 failed"), "{out}");
        let mut table = String::new();
        super::super::jobs::render(&jobs, &mut table);
        assert!(table.contains(">ok ×40 (folded)<"), "{table}");
    }

    #[test]
    fn a_run_that_lists_only_some_jobs_is_counted_by_its_own_figures() {
        let mut run = with(
            task("r", "run x", None, (0.0, 5.0)),
            &[(attr::RUN_TASKS, 100.0), (attr::RUN_TASKS_FAILED, 3.0)],
            &[],
        );
        (run.kind, run.parent) = (Kind::Run, None);
        let spans = [task("a", "sort", None, (0.0, 1.0))];
        let mut out = String::new();
        render(Some(&run), &jobs_of(&spans), &mut out);
        assert!(out.contains("97 ok · 3 failed"), "{out}");
        assert!(out.contains("<dd>97 ok, 3 failed</dd>"), "{out}");
    }
}
