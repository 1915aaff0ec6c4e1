//! A self-contained HTML report: no script, no stylesheet or font from elsewhere; SVG drawn
//! here. Like Nextflow's report, but every figure is the kernel's.
use std::{collections::HashMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::{
    Kind, ReportSpan,
    markup::{MAX_LISTED, esc, more},
    table::Table,
};
use crate::diagnosis::gib;

fn color(s: &ReportSpan) -> &'static str {
    if s.error.is_some() {
        return "#d9534f";
    }
    match s.text(attr::BOTTLENECK) {
        Some("cpu-bound") => "#4e79a7",
        Some("io-bound") => "#f28e2b",
        Some("memory-bound") => "#b07aa1",
        Some("network-bound") => "#59a14f",
        Some("idle") => "#bab0ac",
        _ => "#76b7b2",
    }
}

const WIDTH: f64 = 1000.0;
const LABEL: f64 = 220.0;
const ROW: f64 = 22.0;

/// Task rows drawn at most: past a few thousand a timeline is no longer read, only scrolled.
const MAX_TIMELINE_ROWS: usize = 2000;

/// Tasks as rows on a time axis, their tools as thin bars inside.
fn timeline(spans: &[ReportSpan], out: &mut String) {
    let mut tasks: Vec<&ReportSpan> = spans.iter().filter(|s| s.kind == Kind::Task).collect();
    tasks.sort_by_key(|s| s.start);
    let hidden = tasks.len().saturating_sub(MAX_TIMELINE_ROWS);
    tasks.truncate(MAX_TIMELINE_ROWS);
    let mut tools: HashMap<&str, Vec<&ReportSpan>> = HashMap::new();
    for s in spans.iter().filter(|s| s.kind == Kind::Tool) {
        if let Some(p) = s.parent.as_deref() {
            tools.entry(p).or_default().push(s);
        }
    }
    let (Some(t0), Some(t1)) = (
        spans.iter().map(|s| s.start).min(),
        spans.iter().map(|s| s.end).max(),
    ) else {
        return;
    };
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    let x = |t: u64| LABEL + (t.saturating_sub(t0)) as f64 / span * (WIDTH - LABEL - 10.0);
    let h = ROW * tasks.len() as f64 + 30.0;
    let _ = write!(
        out,
        "<svg width=\"{WIDTH}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-family=\"sans-serif\" font-size=\"11\">"
    );
    for (i, t) in tasks.iter().enumerate() {
        let y = 10.0 + ROW * i as f64;
        let (x0, x1) = (x(t.start), x(t.end).max(x(t.start) + 1.0));
        let _ = write!(
            out,
            "<text x=\"4\" y=\"{:.1}\">{}</text><rect x=\"{x0:.1}\" y=\"{y:.1}\" \
             width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" opacity=\"0.45\"><title>{} — {:.2} s, \
             CPU {:.2} s, peak {}{}</title></rect>",
            y + 13.0,
            esc(&t.name),
            x1 - x0,
            ROW - 4.0,
            color(t),
            esc(&t.name),
            t.secs(),
            t.cpu(),
            gib(t.num(attr::MEMORY_PEAK) as u64),
            t.text(attr::BOTTLENECK_REASON)
                .map(|r| format!(" — {}", esc(r)))
                .unwrap_or_default()
        );
        for tool in tools.get(t.id.as_str()).into_iter().flatten() {
            let (a, b) = (x(tool.start), x(tool.end).max(x(tool.start) + 1.0));
            let _ = write!(
                out,
                "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"6\" fill=\"{}\">\
                 <title>{} — {:.2} s, CPU {:.2} s, peak {}</title></rect>",
                y + 6.0,
                b - a,
                color(tool),
                esc(&tool.name),
                tool.secs(),
                tool.cpu(),
                gib(tool.num(attr::MEMORY_PEAK) as u64)
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"{LABEL}\" y=\"{:.1}\">0 s</text><text x=\"{:.1}\" y=\"{:.1}\" \
         text-anchor=\"end\">{:.1} s</text></svg>",
        h - 4.0,
        WIDTH - 10.0,
        h - 4.0,
        span / 1e9
    );
    if hidden > 0 {
        let _ = write!(
            out,
            "<p>The first {MAX_TIMELINE_ROWS} tasks by start are drawn; {hidden} more are in the \
             table above and in the trace.</p>"
        );
    }
}

/// One horizontal bar per task name.
fn bars(title: &str, rows: &[(String, f64, String)], out: &mut String) {
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-9);
    let h = ROW * rows.len() as f64 + 10.0;
    let _ = write!(
        out,
        "<h3>{}</h3><svg width=\"{WIDTH}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-family=\"sans-serif\" font-size=\"11\">",
        esc(title)
    );
    for (i, (name, v, label)) in rows.iter().enumerate() {
        let y = 5.0 + ROW * i as f64;
        let w = v / max * (WIDTH - LABEL - 120.0);
        let _ = write!(
            out,
            "<text x=\"4\" y=\"{:.1}\">{}</text><rect x=\"{LABEL}\" y=\"{y:.1}\" width=\"{w:.1}\" \
             height=\"{:.1}\" fill=\"#4e79a7\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            y + 13.0,
            esc(name),
            ROW - 6.0,
            LABEL + w + 6.0,
            y + 13.0,
            esc(label)
        );
    }
    out.push_str("</svg>");
}

/// The task a tool runs in, however deep it nests; None for the engine's own processes.
fn task_of<'a>(s: &'a ReportSpan, by_id: &HashMap<&str, &'a ReportSpan>) -> Option<&'a ReportSpan> {
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

/// Where a span sits, for a reader: its task's name before a tool's own.
fn place(s: &ReportSpan, by_id: &HashMap<&str, &ReportSpan>) -> String {
    match task_of(s, by_id) {
        Some(t) if s.kind == Kind::Tool => format!("{} › {}", t.name, s.name),
        _ => s.name.clone(),
    }
}

/// Events and failures in time order, in words.
fn happenings(spans: &[ReportSpan], out: &mut String) {
    let t0 = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let by_id: HashMap<&str, &ReportSpan> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut events: Vec<(u64, String, String)> = spans
        .iter()
        .flat_map(|s| {
            s.events
                .iter()
                .map(|e| (e.time, place(s, &by_id), e.describe()))
        })
        .collect();
    events.sort();
    if !events.is_empty() {
        out.push_str(
            "<h2>Events</h2><table><tr><th>at s</th><th class=\"l\">where</th><th>what</th></tr>",
        );
        for (t, at, what) in events.iter().take(MAX_LISTED) {
            let _ = write!(
                out,
                "<tr><td>{:.1}</td><td class=\"l\">{}</td><td>{}</td></tr>",
                t.saturating_sub(t0) as f64 / 1e9,
                esc(at),
                esc(what)
            );
        }
        out.push_str("</table>");
        more(events.len(), out);
    }
    // The engine's own helpers (a shim's probe that exits 1) are not the pipeline's failures:
    // they are counted, not listed.
    let (mut failed, engine): (Vec<&ReportSpan>, Vec<&ReportSpan>) = spans
        .iter()
        .filter(|s| s.error.is_some() && s.kind != Kind::Run)
        .partition(|s| task_of(s, &by_id).is_some());
    failed.sort_by_key(|s| (s.end, s.id.clone()));
    if !failed.is_empty() {
        out.push_str("<h2>Failures</h2><table><tr><th>ended at s</th><th class=\"l\">where</th><th>why</th></tr>");
        for s in failed.iter().take(MAX_LISTED) {
            let _ = write!(
                out,
                "<tr><td>{:.1}</td><td class=\"l\">{}</td><td class=\"err\">{}</td></tr>",
                s.end.saturating_sub(t0) as f64 / 1e9,
                esc(&place(s, &by_id)),
                esc(s.error.as_deref().unwrap_or_default())
            );
        }
        out.push_str("</table>");
        more(failed.len(), out);
    }
    if !engine.is_empty() {
        let _ = write!(
            out,
            "<p>{} process(es) outside any task (the engine's own) exited non-zero; the trace \
             has them.</p>",
            engine.len()
        );
    }
}

/// HTML a layer above adds to each run's section, after its tasks (the machines).
pub type More<'a> = &'a dyn Fn(&[ReportSpan]) -> String;

/// The report page of one run whose per-task table was summed as its spans came
/// (`pipetrace run`): `spans` may leave out `omitted` tasks that `table` counts; `more` is
/// put after the tasks.
pub fn render_run(spans: &[ReportSpan], table: &Table, omitted: u64, more: &str) -> String {
    one_run(spans, Some(table), omitted, &|_| more.to_string())
}

/// The page of one run, named by it; `summed` and `omitted` as for [`section`].
fn one_run(spans: &[ReportSpan], summed: Option<&Table>, omitted: u64, extra: More) -> String {
    let title = (spans.iter().find(|s| s.kind == Kind::Run))
        .map_or("pipetrace report".to_string(), |r| r.name.clone());
    let mut out = head(&title);
    section(spans, summed, extra, &mut out);
    out.push_str(&super::who::ByWho::of(spans).html());
    if omitted > 0 {
        let _ = write!(
            out,
            "<p>{omitted} more tasks are summed in the tables above but not listed one by one.</p>"
        );
    }
    out.push_str("</body></html>\n");
    out
}

fn head(title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}}\
         td:first-child,th:first-child,td:last-child,th:last-child{{text-align:left}}\
         td.l,th.l{{text-align:left}}.err{{color:#d9534f}}</style></head><body><h1>{}</h1>",
        esc(title),
        esc(title)
    );
    out
}

/// The report page without a machines section (the tests').
#[cfg(test)]
fn render(spans: &[ReportSpan]) -> String {
    render_with(spans, &|_| String::new())
}

/// [`render`] with `extra` of each run after its tasks.
pub fn render_with(spans: &[ReportSpan], extra: More) -> String {
    // One run (as `pipetrace run` writes) is drawn from the spans as they are.
    let one = spans
        .iter()
        .all(|s| Some(&s.trace) == spans.first().map(|f| &f.trace));
    if one {
        return one_run(spans, None, 0, extra);
    }
    let runs = super::by_run(spans);
    let mut out = head(&format!("pipetrace report: {} runs", runs.len()));
    for run in &runs {
        let name = (run.iter().find(|s| s.kind == Kind::Run))
            .map_or("run (no run span)", |r| r.name.as_str());
        let _ = write!(out, "<section><h1>{}</h1>", esc(name));
        section(run, None, extra, &mut out);
        out.push_str("</section>");
    }
    out.push_str(&super::who::ByWho::of(spans).html());
    out.push_str("</body></html>\n");
    out
}

/// One run's part of the report: its summary, tasks, timeline, resources and events.
/// `summed`: the per-task table as summed while the run ran, where `spans` may not hold
/// every task; else it is summed from `spans`.
fn section(spans: &[ReportSpan], summed: Option<&Table>, extra: More, out: &mut String) {
    let mut own = Table::default();
    if summed.is_none() {
        for s in spans.iter().filter(|s| s.kind == Kind::Task) {
            own.record_task(s);
        }
    }
    let table = summed.unwrap_or(&own);
    let run = spans.iter().find(|s| s.kind == Kind::Run);
    if let Some(r) = run {
        let state = match &r.error {
            Some(e) => format!("<span class=\"err\">{}</span>", esc(e)),
            None => "completed".into(),
        };
        let _ = write!(
            out,
            "<p>{state} in {:.1} s; CPU {:.1} s; peak memory {}; {} processes; engine {}; run id {}</p>",
            r.secs(),
            r.cpu(),
            gib(r.num(attr::MEMORY_PEAK) as u64),
            r.num(attr::USAGE_PROCESSES),
            esc(r.text(attr::RUN_ENGINE).unwrap_or("-")),
            esc(r.text(attr::CICD_PIPELINE_RUN_ID).unwrap_or("-"))
        );
    }
    let gpu = table.has_gpu();
    let _ = write!(
        out,
        "<h2>Tasks</h2><table><tr><th>task</th><th>jobs</th><th>wall s</th><th>cpu s</th>\
         <th>peak memory</th>{}<th>disk I/O</th><th>bottleneck</th><th>failed</th>\
         <th>advice</th></tr>",
        if gpu { "<th>GPU busy, memory</th>" } else { "" }
    );
    let rows = table.rows();
    for r in &rows {
        let gpu_cell = match gpu {
            true => format!("<td>{}</td>", esc(r.gpu.as_deref().unwrap_or("-"))),
            false => String::new(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td>{gpu_cell}\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(r.name),
            r.jobs,
            r.wall,
            r.cpu,
            gib(r.peak),
            gib(r.disk),
            esc(r.bottleneck),
            r.failed,
            esc(r.advice)
        );
    }
    out.push_str("</table>");
    out.push_str(&extra(spans));
    super::files::render_html(spans, out);
    out.push_str("<h2>Timeline</h2>");
    timeline(spans, out);
    out.push_str("<h2>Resources</h2>");
    let cpu: Vec<_> = rows
        .iter()
        .map(|r| (r.name.to_string(), r.cpu, format!("{:.2} s", r.cpu)))
        .collect();
    bars("CPU time per task (all jobs)", &cpu, out);
    let mem: Vec<_> = rows
        .iter()
        .map(|r| (r.name.to_string(), r.peak as f64, gib(r.peak)))
        .collect();
    bars("Peak memory per task (largest job)", &mem, out);
    let disk: Vec<_> = rows
        .iter()
        .map(|r| (r.name.to_string(), r.disk as f64, gib(r.disk)))
        .collect();
    bars("Disk I/O per task (read + written, all jobs)", &disk, out);
    happenings(spans, out);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pipetrace_semconv::event;

    use super::*;
    use crate::report::ReportEvent;

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
            html.contains("<td class=\"l\">align › bwa</td><td>no CPU"),
            "{html}"
        );
        assert!(html.contains("bwa killed by SIGTERM"));
        assert!(
            !html.contains("readlink exited"),
            "the engine's own are not listed"
        );
        assert!(html.contains("1 process(es) outside any task"));
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
    }

    #[test]
    fn a_run_of_many_tasks_draws_a_bounded_timeline_quickly() {
        let mut spans = vec![span("r", None, Kind::Run, "run x")];
        for i in 0..MAX_TIMELINE_ROWS + 5 {
            spans.push(span(&format!("t{i}"), Some("r"), Kind::Task, "true"));
            spans.push(span(
                &format!("o{i}"),
                Some(&format!("t{i}")),
                Kind::Tool,
                "true",
            ));
        }
        let html = render(&spans);
        assert!(html.contains("tasks by start are drawn; 5 more are in the"));
        let rows = html.matches("opacity=\"0.45\"").count();
        assert_eq!(rows, MAX_TIMELINE_ROWS);
    }

    #[test]
    fn a_task_with_files_gets_a_files_table_and_a_run_without_none() {
        use crate::report::files::tests::task;
        let run = span("r", None, Kind::Run, "run x");
        let plain = render(&[run.clone(), span("t", Some("r"), Kind::Task, "align")]);
        assert!(!plain.contains("Files"), "{plain}");
        let with = task("t", "align", (&["/d/a.fq"], Some(4)), (&["/o/a.bam"], None));
        let html = render(&[run, with]);
        let (tasks, files) = (html.find("<h2>Tasks</h2>"), html.find("<h2>Files</h2>"));
        let timeline = html.find("<h2>Timeline</h2>").unwrap();
        assert!(tasks.unwrap() < files.unwrap() && files.unwrap() < timeline);
        assert!(
            html.contains("<td class=\"l\">/d/a.fq (+3 more)</td><td class=\"l\">/o/a.bam</td>"),
            "{html}"
        );
    }
}
