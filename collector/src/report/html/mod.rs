//! A self-contained HTML report of a run: no stylesheet, font or script from elsewhere, SVG
//! drawn here. Like Nextflow's report, but every figure is the kernel's, and what needs
//! looking at comes first: the status, the findings, then each job.
mod asked;
mod boxes;
mod facts;
mod findings;
mod happenings;
mod jobs;
mod style;
mod tasks;
mod timeline;
mod usual;
mod went;

use std::fmt::Write as _;

use pipetrace_semconv::attr;

use super::{markup::esc, table::Table};
use pipetrace_core::judgement::{Judgement, Kind, ReportSpan, job, units};

/// HTML a layer above adds to each run's section, after its tasks (the machines).
pub type More<'a> = &'a dyn Fn(&[ReportSpan]) -> String;

/// The report page of one run whose per-task table was summed as its spans came
/// (`pipetrace run`): `spans` may leave out `omitted` tasks that `table` counts; `more` is
/// put after the tasks; `judged`: the run's judgement, as the terminal shows it.
pub fn render_run(
    spans: &[ReportSpan],
    (table, omitted): (&Table, u64),
    more: &str,
    judged: &Judgement,
) -> String {
    one_run(spans, (Some(table), omitted), &|_| more.to_string(), judged)
}

/// The page of one run, named by it; `summed` and `omitted` as for [`section`].
fn one_run(
    spans: &[ReportSpan],
    (summed, omitted): (Option<&Table>, u64),
    extra: More,
    judged: &Judgement,
) -> String {
    let title = (spans.iter().find(|s| s.kind == Kind::Run))
        .map_or("pipetrace report".to_string(), |r| r.name.clone());
    let mut out = head(&title);
    section(spans, summed, (extra, judged), &mut out);
    out.push_str(&super::who::ByWho::of(spans).html());
    if omitted > 0 {
        let _ = write!(
            out,
            "<p>{omitted} more tasks are summed in the tables above but not listed one by one.</p>"
        );
    }
    tail(&mut out);
    out
}

fn head(title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\"><title>{}</title>\
         <style>{}</style></head><body><h1>{}</h1>",
        esc(title),
        style::CSS,
        esc(title)
    );
    out
}

/// The end of the page: the script that sorts and filters the jobs tables.
fn tail(out: &mut String) {
    let _ = writeln!(out, "<script>{}</script></body></html>", style::SCRIPT);
}

/// The report page without a machines section (the tests').
#[cfg(test)]
fn render(spans: &[ReportSpan]) -> String {
    let runs = super::by_run(spans);
    let judged: Vec<Judgement> = runs.iter().map(|r| Judgement::of(r)).collect();
    render_with(spans, (&runs, &judged), &|_| String::new())
}

/// The page of a file's spans: `runs` (as [`super::by_run`] parts them), each with its
/// judgement, with `extra` of each run after its tasks.
pub fn render_with(
    spans: &[ReportSpan],
    (runs, judged): (&[Vec<ReportSpan>], &[Judgement]),
    extra: More,
) -> String {
    // One run (as `pipetrace run` writes) is drawn as a page of its own.
    match (runs, judged) {
        ([run], [judged]) => return one_run(run, (None, 0), extra, judged),
        ([], _) => return one_run(spans, (None, 0), extra, &Judgement::of(spans)),
        _ => {}
    }
    let mut out = head(&format!("pipetrace report: {} runs", runs.len()));
    index(runs, &mut out);
    for (run, judged) in runs.iter().zip(judged) {
        let name = (run.iter().find(|s| s.kind == Kind::Run))
            .map_or("run (no run span)", |r| r.name.as_str());
        let key = run_key(run);
        let _ = write!(out, "<section id=\"run-{key}\"><h1>{}</h1>", esc(name));
        let mut own = String::new();
        section(run, None, (extra, judged), &mut own);
        out.push_str(&own_ids(&own, &key));
        out.push_str("</section>");
    }
    out.push_str(&super::who::ByWho::of(spans).html());
    tail(&mut out);
    out
}

/// The sections' ids, each run's own on a page of several (job rows carry their trace).
const SECTION_IDS: [&str; 11] = [
    "findings", "failures", "events", "jobs", "asked", "went", "spread", "usual", "tasks",
    "machines", "timeline",
];

/// A run's key in ids, as its job rows' anchors have it.
fn run_key(run: &[ReportSpan]) -> String {
    run.first()
        .map_or(String::new(), |s| job::trace_key(&s.trace))
}

/// A run's section with its sections' ids (and links to them) made its own.
fn own_ids(html: &str, key: &str) -> String {
    let mut out = html.to_string();
    for id in SECTION_IDS {
        out = out.replace(&format!("id=\"{id}\""), &format!("id=\"{id}-{key}\""));
        out = out.replace(&format!("href=\"#{id}\""), &format!("href=\"#{id}-{key}\""));
    }
    out
}

/// An index of a page's runs: each linked to its section, with its status and failures.
fn index(runs: &[Vec<ReportSpan>], out: &mut String) {
    out.push_str("<nav><h2>Runs</h2><ol class=\"runs\">");
    for run in runs {
        let r = run.iter().find(|s| s.kind == Kind::Run);
        let name = r.map_or("run (no run span)", |r| r.name.as_str());
        let failed = (run.iter())
            .filter(|s| s.kind == Kind::Task && s.error.is_some())
            .count();
        let status = match (r.and_then(|r| r.error.as_deref()), failed) {
            (Some(e), _) => format!("<span class=\"bad\">{}</span>", esc(e)),
            (None, 0) => "ok".into(),
            (None, n) => format!("<span class=\"bad\">{n} job(s) failed</span>"),
        };
        let _ = write!(
            out,
            "<li><a href=\"#run-{}\">{}</a> {:.1} s, {status}</li>",
            run_key(run),
            esc(name),
            r.map_or(0.0, ReportSpan::secs)
        );
    }
    out.push_str("</ol></nav>");
}

/// One run's part of the report: its status and facts, the findings, its jobs, its tasks,
/// what they asked for and used, where the time went, how jobs spread, the
/// usual, the tasks, the machines, files, timeline and events. `summed`: the per-task table as
/// summed while the run ran, where `spans` may not hold every task; else it is summed from
/// `spans`.
fn section(
    spans: &[ReportSpan],
    summed: Option<&Table>,
    (extra, judged): (More, &Judgement),
    out: &mut String,
) {
    let mut own = Table::default();
    if summed.is_none() {
        for s in spans.iter().filter(|s| s.kind == Kind::Task) {
            own.record_task(s);
        }
    }
    let table = summed.unwrap_or(&own);
    let (run, jobs) = (judged.run, &judged.jobs[..]);
    facts::render(run, jobs, out);
    findings::render(&judged.findings, out);
    // What failed, then what happened, in words, right after the findings.
    happenings::render(spans, out);
    jobs::render(jobs, out);
    asked::render(&judged.asks, judged.engine, out);
    went::render(run, jobs, out);
    boxes::render(jobs, out);
    usual::render(run, jobs, out);
    tasks::render(table, &judged.advice(), out);
    machines(run, extra(spans), out);
    super::files::render_html(spans, out);
    timeline::render(spans, jobs, out);
}

/// The machines that fit, where the run was worth sizing (it cost more than a cent or ran
/// longer than a minute); else how to ask for them.
fn machines(run: Option<&ReportSpan>, html: String, out: &mut String) {
    let small = run.is_some_and(|r| r.num(attr::COST) <= 0.01 && r.secs() <= 60.0);
    if html.is_empty() {
        return;
    }
    if !small {
        out.push_str(&html);
        return;
    }
    out.push_str(
        "<p id=\"machines\">The cloud machines that would fit each task are left out for a \
         run this small (under a minute, under a cent); <code>pipetrace report TRACE-FILE \
         --machines</code> prints them.</p>",
    );
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pipetrace_semconv::event;

    use super::*;
    use pipetrace_core::judgement::ReportEvent;

    fn span(id: &str, parent: Option<&str>, kind: Kind, name: &str) -> ReportSpan {
        let mut texts = BTreeMap::new();
        if kind == Kind::Task {
            texts.insert(attr::CICD_PIPELINE_TASK_NAME.to_string(), name.to_string());
        }
        ReportSpan {
            trace: "t".into(),
            id: id.into(),
            parent: parent.map(Into::into),
            kind,
            name: name.into(),
            start: 1_000_000_000,
            end: 3_000_000_000,
            error: None,
            numbers: BTreeMap::new(),
            texts,
            lists: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    #[test]
    fn happenings_are_placed_on_their_task_and_the_engines_own_are_only_counted() {
        let run = span("r", None, Kind::Run, "run x");
        let task = span("t", Some("r"), Kind::Task, "align");
        let shell = span("s", Some("t"), Kind::Tool, "bash");
        let mut bwa = span("b", Some("s"), Kind::Tool, "bwa");
        bwa.error = Some("bwa killed by SIGTERM".into());
        bwa.events.push(ReportEvent {
            name: event::STALL.into(),
            time: 2_000_000_000,
            numbers: [(attr::STALL_DURATION.to_string(), 4.0)].into(),
            texts: BTreeMap::new(),
        });
        let mut helper = span("h", Some("r"), Kind::Tool, "readlink");
        helper.error = Some("readlink exited with code 1".into());
        let html = render(&[run, task, shell, bwa, helper]);
        assert!(
            html.contains("<td class=\"l place\">align › bwa</td><td class=\"wrap\">no CPU"),
            "{html}"
        );
        assert!(html.contains("bwa killed by SIGTERM"));
        assert!(
            !html.contains("readlink exited"),
            "the engine's own are not listed"
        );
        assert!(html.contains("1 process(es) outside any task"));
    }

    /// The ids of the page's `<h2>` headings, in order.
    fn headings(html: &str) -> Vec<&str> {
        (html.split("<h2 id=\"").skip(1))
            .map(|h| &h[..h.find('"').unwrap()])
            .collect()
    }

    #[test]
    fn the_failures_come_right_after_the_findings_then_the_events_and_the_jobs() {
        let run = span("r", None, Kind::Run, "run x");
        let mut task = span("t", Some("r"), Kind::Task, "align");
        task.error = Some("align exited with code 3".into());
        let mut bwa = span("b", Some("t"), Kind::Tool, "bwa");
        bwa.error = Some("bwa exited with code 3".into());
        bwa.events.push(ReportEvent {
            name: event::STALL.into(),
            time: 2_000_000_000,
            numbers: [(attr::STALL_DURATION.to_string(), 4.0)].into(),
            texts: BTreeMap::new(),
        });
        let html = render(&[run, task, bwa]);
        let h = headings(&html);
        assert_eq!(h[..4], ["findings", "failures", "events", "jobs"], "{h:?}");
        assert_eq!(h.last(), Some(&"timeline"), "{h:?}");
    }

    #[test]
    fn a_file_of_many_runs_has_one_section_per_run_with_its_own_tasks() {
        let mut spans = Vec::new();
        for (trace, name, task, start) in [("b", "run two", "sort", 5), ("a", "run one", "bwa", 1)]
        {
            let mut run = span(&format!("{trace}r"), None, Kind::Run, name);
            let mut t = span(&format!("{trace}t"), Some(&run.id), Kind::Task, task);
            (run.trace, t.trace) = (trace.into(), trace.into());
            (run.start, t.start) = (start * 1_000_000_000, start * 1_000_000_000);
            spans.extend([run, t]);
        }
        let html = render(&spans);
        assert!(
            html.contains("<title>pipetrace report: 2 runs</title>"),
            "{html}"
        );
        let (one, two) = (html.find("<h1>run one</h1>"), html.find("<h1>run two</h1>"));
        let (one, two) = (one.expect("run one"), two.expect("run two"));
        assert!(one < two, "in the order they started");
        let bwa = html.find("<td>bwa</td>").unwrap();
        let sort = html.find("<td>sort</td>").unwrap();
        assert!(
            one < bwa && bwa < two && two < sort,
            "each run's tasks in its section"
        );
        // Each run's rows have ids of their own, for the findings to link to, and so do its
        // sections; an index links to each run.
        assert!(html.contains("<tr id=\"job-a-0\">") && html.contains("<tr id=\"job-b-0\">"));
        assert!(html.contains("id=\"findings-a\"") && html.contains("id=\"findings-b\""));
        assert!(!html.contains("id=\"findings\""), "no id twice");
        let nav = html
            .find("<li><a href=\"#run-a\">run one</a>")
            .expect("an index");
        assert!(nav < one && html.contains("<section id=\"run-a\"><h1>run one</h1>"));
    }

    #[test]
    fn a_run_of_many_jobs_draws_a_lane_per_task() {
        let mut spans = vec![span("r", None, Kind::Run, "run x")];
        for i in 0..2005 {
            spans.push(span(&format!("t{i}"), Some("r"), Kind::Task, "true"));
            spans.push(span(
                &format!("o{i}"),
                Some(&format!("t{i}")),
                Kind::Tool,
                "true",
            ));
        }
        let html = render(&spans);
        assert!(html.contains(">true (2005 jobs)</text>"));
        assert_eq!(html.matches("<tr id=\"job-").count(), 2005);
    }

    #[test]
    fn a_task_with_files_gets_a_files_table_and_a_run_without_none() {
        use crate::report::files::tests::task;
        let run = span("r", None, Kind::Run, "run x");
        let plain = render(&[run.clone(), span("t", Some("r"), Kind::Task, "align")]);
        assert!(!plain.contains("Files"), "{plain}");
        let with = task("t", "align", (&["/d/a.fq"], Some(4)), (&["/o/a.bam"], None));
        let html = render(&[run, with]);
        let (tasks, files) = (html.find(">Tasks</h2>"), html.find("<h2>Files</h2>"));
        let timeline = html.find(">Timeline</h2>").unwrap();
        assert!(tasks.unwrap() < files.unwrap() && files.unwrap() < timeline);
        assert!(
            html.contains("<td class=\"l\">/d/a.fq (+3 more)</td><td class=\"l\">/o/a.bam</td>"),
            "{html}"
        );
    }
}
