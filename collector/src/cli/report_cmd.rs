//! `pipetrace report FILE`: the end-of-run findings and table, the machines that fit each
//! task and the HTML report from a trace file; `--json`: each run's findings, jobs, tasks and
//! machines as JSON (docs/report-json.md); `--fail-on`: exit 3 on findings of the kinds given.
use std::path::Path;

use pipetrace_config::Config;
use pipetrace_core::judgement::{Judgement, Rank};

use crate::{
    report::{self, table::Table, tails::Tails},
    sizing,
};
use pipetrace_core::judgement::{Kind, ReportSpan};

/// The findings `--fail-on` fails on, by the names `report --json` gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A job killed by the OOM killer.
    Oom,
    /// A job that failed (OOM-killed ones too), or the run itself.
    Failed,
    /// A job that stalled: no CPU, no I/O, no process started or ended.
    Stalled,
    /// A job slower than its usual.
    Slower,
    /// A task whose jobs needed more than it asked for (CPUs, memory near its limit).
    #[value(alias = "under_ask")]
    UnderAsk,
    /// A task whose jobs left most of what it asked for unused.
    #[value(alias = "over_ask")]
    OverAsk,
    Bottleneck,
    /// Processes that may as well be other jobs'.
    Uncertain,
}

impl FailOn {
    /// The findings it fails on: a failed job is one whose OOM kill is its finding too.
    fn ranks(self) -> &'static [Rank] {
        match self {
            FailOn::Oom => &[Rank::Oom],
            FailOn::Failed => &[Rank::Failure, Rank::Oom],
            FailOn::Stalled => &[Rank::Stall],
            FailOn::Slower => &[Rank::Slower],
            FailOn::UnderAsk => &[Rank::UnderAsk],
            FailOn::OverAsk => &[Rank::OverAsk],
            FailOn::Bottleneck => &[Rank::Bottleneck],
            FailOn::Uncertain => &[Rank::Uncertain],
        }
    }
}

/// `report --fail-on`'s exit code when a run has such findings.
pub const EXIT_FOUND: i32 = 3;

/// What `report` was asked for.
pub struct Ask<'a> {
    pub file: &'a Path,
    pub html: Option<&'a Path>,
    pub json: bool,
    /// The machines on the terminal too (they are in the JSON and the page always).
    pub machines: bool,
    /// Exit [`EXIT_FOUND`] when any run has findings of these kinds.
    pub fail_on: &'a [FailOn],
}

pub(crate) fn run(cfg: &Config, ask: Ask) -> i32 {
    let machines = match sizing::catalog(&cfg.sizing) {
        Ok(m) => m,
        Err(e) => {
            errln!("pipetrace: {e}");
            return super::EXIT_USAGE;
        }
    };
    let spans = match report::read_file(ask.file) {
        Ok(s) => s,
        Err(e) => {
            errln!("pipetrace: {e}");
            return super::EXIT_USAGE;
        }
    };
    let runs = report::by_run(&spans);
    // Each run sized once, for the text (or JSON) and the page.
    let sized: std::collections::HashMap<&str, sizing::Sizing> = (machines.as_ref())
        .map(|m| {
            (runs.iter())
                .filter_map(|run| Some((run.first()?.trace.as_str(), run)))
                .map(|(trace, run)| (trace, sizing::recommend(run, m, cfg.diagnosis.headroom)))
                .collect()
        })
        .unwrap_or_default();
    let size = |run: &[ReportSpan]| sized.get(run.first()?.trace.as_str());
    // Each run judged once, for the text or the JSON, the page and --fail-on (with the
    // failures' log lines where asked).
    let tails = Tails::of(cfg);
    let judged: Vec<Judgement> = (runs.iter()).map(|run| tails.judge(run)).collect();
    let path = (ask.html.map(Path::to_path_buf))
        .unwrap_or_else(|| pipetrace_export::export::paths::report_beside(ask.file));
    let more = |run: &[ReportSpan]| size(run).map(sizing::html).unwrap_or_default();
    let page = report::html_with(&spans, (&runs, &judged), &more);
    // The page first (its folder made where missing): a destination it cannot be written
    // to stops the command before it prints anything, as `compare --html` does.
    if let Err(e) = super::run::write_report(&path, &page) {
        errln!("pipetrace: {e}");
        return 1;
    }
    if ask.json {
        outln!("{}", json(&runs, &judged, &size));
    } else {
        let shown = |run: &[ReportSpan]| size(run).filter(|_| ask.machines);
        let mut out = tables(&runs, &judged, &shown);
        report::who::ByWho::of(&spans).render(&mut out);
        out!("{out}");
    }
    say!("pipetrace: report written to {}", path.display());
    match fail_on(&judged, ask.fail_on) {
        0 => 0,
        n => {
            let kinds: Vec<String> = ask.fail_on.iter().map(|k| format!("{k:?}")).collect();
            errln!(
                "pipetrace: {n} finding(s) of the kinds --fail-on names ({}): exit {EXIT_FOUND}",
                kinds.join(", ").to_lowercase()
            );
            EXIT_FOUND
        }
    }
}

/// How many findings of the runs are of the kinds given.
fn fail_on(judged: &[Judgement], kinds: &[FailOn]) -> usize {
    let ranks: Vec<Rank> = kinds
        .iter()
        .flat_map(|k| k.ranks().iter().copied())
        .collect();
    if ranks.is_empty() {
        return 0;
    }
    (judged.iter()).map(|j| j.of_ranks(&ranks).count()).sum()
}

type Size<'a> = &'a dyn Fn(&[ReportSpan]) -> Option<&'a sizing::Sizing>;

/// Each run's table and machines, under a heading where the file holds several.
fn tables(runs: &[Vec<ReportSpan>], judged: &[Judgement], size: Size) -> String {
    let mut out = String::new();
    for (run, judged) in runs.iter().zip(judged) {
        if runs.len() > 1 {
            heading(run, &mut out);
        }
        // What `pipetrace run` said at the run's end: the findings, then the tasks.
        crate::summary::render_findings(&judged.findings, &mut out);
        let mut table = Table::default();
        for s in run.iter().filter(|s| s.kind == Kind::Task) {
            table.record_task(s);
        }
        if !judged.findings.is_empty() {
            out.push('\n');
        }
        table.render(&judged.advice(), &mut out);
        if let Some(s) = size(run) {
            sizing::text(s, &mut out);
        }
    }
    out
}

/// `{"runs": [{"trace", "name", "status", "findings", "jobs", "tasks", "machines"}]}`:
/// for scripts and `pipetrace compare` (docs/report-json.md). The findings are the
/// judgement's, as the terminal and the page give them; a task's row is the table's, in
/// units a script need not parse.
fn json(runs: &[Vec<ReportSpan>], judged: &[Judgement], size: Size) -> String {
    let runs: Vec<serde_json::Value> = (runs.iter().zip(judged))
        .map(|(run, judged)| {
            let root = judged.run;
            serde_json::json!({
                "trace": run.first().map(|s| s.trace.as_str()),
                "name": root.map(|r| r.name.as_str()),
                "status": root.map(|r| r.error.as_deref().unwrap_or("ok")),
                "findings": judged.findings,
                "jobs": judged.rows(),
                "asks": judged.ask_rows(),
                "tasks": task_rows(run, &judged.advice()),
                "machines": size(run),
            })
        })
        .collect();
    serde_json::json!({ "runs": runs }).to_string()
}

/// The table's rows: bytes, seconds, no units.
fn task_rows(
    run: &[ReportSpan],
    advice: &pipetrace_core::judgement::Advice,
) -> Vec<serde_json::Value> {
    let mut table = Table::default();
    for s in run.iter().filter(|s| s.kind == Kind::Task) {
        table.record_task(s);
    }
    (table.rows(advice).iter())
        .map(|r| {
            serde_json::json!({
                "task": r.name,
                "jobs": r.jobs,
                "failed": r.failed,
                "wall_seconds": r.wall,
                "cpu_seconds": r.cpu,
                "memory_peak_bytes": r.peak,
                "disk_bytes": r.disk,
                "bottleneck": (r.bottleneck != "-").then_some(r.bottleneck),
                "advice": (r.advice != "-").then_some(&r.advice),
                "gpu": r.gpu,
            })
        })
        .collect()
}

/// A run's line above its table, where a file holds several: name, status, wall time and
/// trace id.
fn heading(run: &[ReportSpan], out: &mut String) {
    use std::fmt::Write;
    let Some(r) = run.iter().find(|s| s.kind == Kind::Run) else {
        let trace = run.first().map_or("", |s| s.trace.as_str());
        let _ = writeln!(out, "\n(spans of trace {trace} without their run span)");
        return;
    };
    let status = r.error.as_deref().unwrap_or("ok");
    let _ = writeln!(
        out,
        "\n{}  {:.1}s  {status}  trace {}",
        r.name,
        r.secs(),
        r.trace
    );
}
