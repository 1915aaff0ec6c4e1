//! The timeline: jobs as bars on a time axis with readable ticks, their tools as thin bars
//! inside, the engine's start-up shaded, a legend of exactly the colours drawn, and the number
//! of jobs running over time. Past a few hundred jobs, one lane per task instead of a row
//! per job.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, secs},
};
use crate::report::markup::{self, esc};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// The colour of a span's verdict, and the verdict's name for the legend.
fn color(s: &ReportSpan) -> (&'static str, &'static str) {
    if s.error.is_some() {
        return ("#d9534f", "failed");
    }
    match s.text(attr::BOTTLENECK) {
        Some("cpu-bound") => ("#4e79a7", "cpu-bound"),
        Some("single-threaded") => ("#9c755f", "single-threaded"),
        Some("io-bound") => ("#f28e2b", "io-bound"),
        Some("memory-bound") => ("#b07aa1", "memory-bound"),
        Some("network-bound") => ("#59a14f", "network-bound"),
        Some("cpu-starved") => ("#edc948", "cpu-starved"),
        Some("idle") => ("#bab0ac", "idle"),
        _ => ("#76b7b2", "no verdict"),
    }
}

const WIDTH: f64 = 1000.0;
const LABEL: f64 = 220.0;
const ROW: f64 = 22.0;
/// Past this many jobs, a lane per task.
const LANES_FROM: usize = 300;
/// Lanes drawn at most (task names).
const MAX_LANES: usize = 500;
const CURVE: f64 = 60.0;
/// Job bars drawn at most: past that the page grows by megabytes and shows no more.
const MAX_BARS: usize = 20_000;

/// A step of 1, 2 or 5 times a power of ten (or minutes, hours) that gives 4 to 10 ticks.
pub(crate) fn tick_step(span_s: f64) -> f64 {
    const STEPS: [f64; 22] = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
        60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
    ];
    (STEPS.iter().copied())
        .find(|s| span_s / s <= 10.0)
        .unwrap_or_else(|| (span_s / 10.0 / 3600.0).ceil() * 3600.0)
}

struct Axis {
    t0: u64,
    span: f64,
}

impl Axis {
    fn x(&self, t: u64) -> f64 {
        LABEL + (t.saturating_sub(self.t0)) as f64 / self.span * (WIDTH - LABEL - 10.0)
    }
}

/// Ticks and grid lines from the top of the drawing to `h`.
fn ticks(axis: &Axis, h: f64, out: &mut String) {
    let span_s = axis.span / 1e9;
    let step = tick_step(span_s);
    let mut t = 0.0;
    while t <= span_s + 1e-9 {
        let x = axis.x(axis.t0 + (t * 1e9) as u64);
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{x:.1}\" y1=\"0\" x2=\"{x:.1}\" y2=\"{h:.1}\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            h + 12.0,
            secs(t)
        );
        t += step;
    }
}

fn bar(out: &mut String, (x0, x1, y, h): (f64, f64, f64, f64), fill: &str, title: &str) {
    let _ = write!(
        out,
        "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{fill}\" \
         opacity=\"0.55\"><title>{}</title></rect>",
        (x1 - x0).max(1.0),
        esc(title)
    );
}

fn job_title(j: &Job) -> String {
    let mut t = format!(
        "{} — {}, CPU {}, peak {}",
        j.label(),
        secs(j.wall()),
        secs(j.cpu()),
        bytes(j.peak_seen())
    );
    if let Some(r) = j.span.text(attr::BOTTLENECK_REASON) {
        let _ = write!(t, " — {r}");
    }
    t
}

/// The verdicts drawn, by name, with their colours: the legend lists exactly these.
type Drawn = BTreeMap<&'static str, &'static str>;

/// A job's tools as thin bars inside its own, where it has a row of its own.
fn tools(j: &Job, axis: &Axis, y: f64, (out, drawn): (&mut String, &mut Drawn)) {
    for t in j.tools.iter().take(MAX_TOOLS) {
        let (fill, verdict) = color(t);
        drawn.insert(verdict, fill);
        let (a, b) = (axis.x(t.start), axis.x(t.end));
        let title = format!(
            "{} › {} — {}, CPU {}, peak {}",
            j.label(),
            t.name,
            secs(t.secs()),
            secs(t.cpu()),
            bytes(t.num(attr::MEMORY_PEAK))
        );
        let _ = write!(
            out,
            "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"6\" fill=\"{}\">\
             <title>{}</title></rect>",
            y + 6.0,
            (b - a).max(1.0),
            fill,
            esc(&title)
        );
    }
}

/// Tools drawn at most in one job's row.
const MAX_TOOLS: usize = 50;

/// The rows: (label, jobs on it). One per job, or past [`LANES_FROM`] one per task.
fn rows<'j, 'a>(jobs: &'j [Job<'a>]) -> Vec<(String, Vec<&'j Job<'a>>)> {
    if jobs.len() < LANES_FROM {
        return jobs.iter().map(|j| (j.label(), vec![j])).collect();
    }
    let mut lanes: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        lanes.entry(j.task()).or_default().push(j);
    }
    let mut rows: Vec<_> = (lanes.into_iter())
        .map(|(t, js)| (format!("{t} ({})", markup::jobs(js.len())), js))
        .collect();
    rows.sort_by_key(|(_, js)| js.first().map(|j| j.span.start));
    rows.truncate(MAX_LANES);
    rows
}

/// Jobs running over time as a step curve under the rows, at `y` of height `CURVE`.
fn running(jobs: &[Job], axis: &Axis, y: f64, out: &mut String) {
    let mut edges: Vec<(u64, i64)> = (jobs.iter())
        .flat_map(|j| [(j.span.start, 1), (j.span.end, -1)])
        .collect();
    edges.sort();
    // The most running within each pixel: a bounded curve however many jobs ran.
    let mut at: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    let (mut n, mut most) = (0i64, 1i64);
    for (t, d) in &edges {
        let before = n;
        n += d;
        most = most.max(n);
        let px = axis.x(*t).round() as i64;
        let e = at.entry(px).or_insert((before, n));
        (e.0, e.1) = (e.0.max(before).max(n), n);
    }
    let yv = |n: i64| y + CURVE - n as f64 / most as f64 * (CURVE - 4.0);
    let mut path = String::new();
    let mut last = 0;
    for (px, (peak, after)) in &at {
        let _ = write!(
            path,
            "{px},{:.1} {px},{:.1} {px},{:.1} ",
            yv(last),
            yv(*peak),
            yv(*after)
        );
        last = *after;
    }
    // In the muted text's colour: no verdict's.
    let _ = write!(
        out,
        "<text x=\"4\" y=\"{:.1}\">jobs running (at most {most})</text>\
         <polyline points=\"{}\" fill=\"none\" style=\"stroke:var(--muted)\" stroke-width=\"1\"/>",
        y + CURVE / 2.0,
        path.trim_end()
    );
}

/// The legend: the colours drawn, jobs' and tools' alike, and the start-up's shade.
fn legend(drawn: &Drawn, startup: bool, out: &mut String) {
    out.push_str("<p class=\"legend\">");
    for (name, c) in drawn {
        let _ = write!(out, "<span><i style=\"background:{c}\"></i>{name}</span>");
    }
    if startup {
        out.push_str("<span><i style=\"background:var(--shade)\"></i>engine start-up</span>");
    }
    out.push_str("</p>");
}

pub(crate) fn render(spans: &[ReportSpan], jobs: &[Job], out: &mut String) {
    let (Some(t0), Some(t1)) = (
        spans.iter().map(|s| s.start).min(),
        spans.iter().map(|s| s.end).max(),
    ) else {
        return;
    };
    if jobs.is_empty() {
        return;
    }
    let axis = Axis {
        t0,
        span: (t1.saturating_sub(t0)).max(1) as f64,
    };
    let rows = rows(jobs);
    let first = jobs.iter().map(|j| j.span.start).min().unwrap_or(t0);
    let startup = (spans.iter().find(|s| s.kind == Kind::Run)).filter(|r| first > r.start);
    let h_rows = ROW * rows.len() as f64;
    let h = h_rows + CURVE + 30.0;
    let mut svg = String::new();
    if let Some(r) = startup {
        let (a, b) = (axis.x(r.start), axis.x(first));
        let _ = write!(
            svg,
            "<rect x=\"{a:.1}\" y=\"0\" width=\"{:.1}\" height=\"{h_rows:.1}\" \
             style=\"fill:var(--shade)\"><title>engine start-up: {}</title></rect>",
            b - a,
            secs((first - r.start) as f64 / 1e9)
        );
    }
    ticks(&axis, h_rows + CURVE + 10.0, &mut svg);
    let (drawn, verdicts) = bars(&rows, &axis, &mut svg);
    running(jobs, &axis, h_rows + 4.0, &mut svg);
    out.push_str("<h2 id=\"timeline\">Timeline</h2>");
    legend(&verdicts, startup.is_some(), out);
    let _ = write!(
        out,
        "<div class=\"scroll fig\"><svg viewBox=\"0 0 {WIDTH} {h}\" width=\"100%\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">{svg}\
         </svg></div>"
    );
    if jobs.len() > drawn {
        let _ = write!(
            out,
            "<p>{drawn} of {} jobs are drawn; the jobs table and the trace have them all.</p>",
            jobs.len()
        );
    }
}

/// Each row's label and its jobs' bars (a job alone on its row with its tools inside), up
/// to [`MAX_BARS`]: how many jobs were drawn, and the verdicts their colours say.
fn bars(rows: &[(String, Vec<&Job>)], axis: &Axis, svg: &mut String) -> (usize, Drawn) {
    let (mut drawn, mut verdicts) = (0, Drawn::new());
    for (i, (label, on)) in rows.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let _ = write!(
            svg,
            "<text x=\"4\" y=\"{:.1}\">{}</text>",
            y + 13.0,
            esc(label)
        );
        for j in on.iter().take(MAX_BARS.saturating_sub(drawn)) {
            let (x0, x1) = (axis.x(j.span.start), axis.x(j.span.end));
            let (fill, verdict) = color(j.span);
            verdicts.insert(verdict, fill);
            bar(svg, (x0, x1, y, ROW - 4.0), fill, &job_title(j));
            if on.len() == 1 {
                tools(j, axis, y, (svg, &mut verdicts));
            }
        }
        drawn += on.len().min(MAX_BARS.saturating_sub(drawn));
    }
    (drawn, verdicts)
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(4.2), 0.5);
        assert_eq!(tick_step(95.0), 10.0);
        assert_eq!(tick_step(3000.0), 300.0);
        for span in [0.003, 0.7, 13.0, 800.0, 50_000.0, 1e6] {
            let n = span / tick_step(span);
            assert!((1.0..=10.0).contains(&n), "{span}: {n} ticks");
        }
    }

    #[test]
    fn many_jobs_share_a_lane_per_task_and_the_legend_has_only_what_is_drawn() {
        let spans: Vec<_> = (0..LANES_FROM + 1)
            .map(|i| {
                let name = if i % 2 == 0 { "even" } else { "odd" };
                task(&i.to_string(), name, None, (i as f64, i as f64 + 1.5))
            })
            .collect();
        let jobs = jobs_of(&spans);
        let mut out = String::new();
        render(&spans, &jobs, &mut out);
        assert!(out.contains(">even (151 jobs)</text>"), "{out}");
        assert!(out.contains(">odd (150 jobs)</text>"));
        assert_eq!(out.matches("<rect").count(), LANES_FROM + 1);
        assert!(out.contains("no verdict") && !out.contains("cpu-bound"));
        assert!(out.contains("jobs running (at most 2)"), "{out}");
    }

    /// Every fill the drawing paints, as `fill="…"` or `style="fill:…"` (a line's `none` is
    /// no paint).
    fn fills(svg: &str) -> std::collections::BTreeSet<&str> {
        let attrs = svg
            .split("fill=\"")
            .skip(1)
            .map(|f| &f[..f.find('"').unwrap()]);
        let styles = (svg.split("style=\"fill:").skip(1)).map(|f| &f[..f.find('"').unwrap()]);
        attrs.chain(styles).filter(|f| *f != "none").collect()
    }

    /// A job `id` of task `name` with one tool that ended as `error` says.
    fn job_with_tool(id: &str, name: &str, error: Option<&str>) -> [ReportSpan; 2] {
        let job = with(
            task(id, name, None, (0.0, 2.0)),
            &[],
            &[(attr::BOTTLENECK, "cpu-bound")],
        );
        let mut tool = task(&format!("{id}-tool"), "cat", None, (0.5, 1.5));
        (tool.kind, tool.parent) = (Kind::Tool, Some(id.into()));
        tool.texts.clear();
        tool.error = error.map(Into::into);
        [job, tool]
    }

    #[test]
    fn every_colour_the_timeline_draws_has_a_legend_entry_and_no_other() {
        // A row per job; and past LANES_FROM a lane per task, a task of one job keeping its
        // row and its tools drawn inside.
        for n in [3, LANES_FROM + 1] {
            let mut spans: Vec<_> = (0..n)
                .map(|i| task(&i.to_string(), "make", None, (i as f64, i as f64 + 1.0)))
                .collect();
            spans.extend(job_with_tool("m", "merge", Some("cat exited with code 1")));
            let mut out = String::new();
            render(&spans, &jobs_of(&spans), &mut out);
            let (legend, svg) = out.split_once("<svg").unwrap();
            let legend = between(legend, "<p class=\"legend\">", "</p>");
            let listed: std::collections::BTreeSet<&str> = (legend.split("background:").skip(1))
                .map(|c| &c[..c.find('"').unwrap()])
                .collect();
            assert_eq!(fills(svg), listed, "{n} jobs: {legend}");
            for name in ["no verdict", "cpu-bound", "failed"] {
                assert!(
                    legend.contains(&format!("</i>{name}</span>")),
                    "{n}: {legend}"
                );
            }
            if n > LANES_FROM {
                assert!(svg.contains(">merge (1 job)</text>"), "1 job, not 1 jobs");
            }
        }
    }

    #[test]
    fn the_running_curve_is_drawn_in_the_text_s_colour_not_a_verdict_s() {
        let spans = job_with_tool("m", "merge", None);
        let mut out = String::new();
        render(&spans, &jobs_of(&spans), &mut out);
        let curve = between(&out, "<polyline", "/>");
        let (fill, _) = color(&spans[0]);
        assert!(!curve.contains(fill), "{curve}");
        assert!(curve.contains("stroke:var(--muted)"), "{curve}");
    }

    fn between<'a>(s: &'a str, a: &str, b: &str) -> &'a str {
        let from = s.find(a).unwrap() + a.len();
        &s[from..from + s[from..].find(b).unwrap()]
    }

    #[test]
    fn the_running_curve_has_a_few_points_per_pixel_however_many_jobs() {
        let spans: Vec<_> = (0..5000)
            .map(|i| {
                task(
                    &i.to_string(),
                    "x",
                    None,
                    (i as f64 * 0.01, i as f64 * 0.01 + 0.5),
                )
            })
            .collect();
        let jobs = jobs_of(&spans);
        let axis = Axis {
            t0: spans[0].start,
            span: 51e9,
        };
        let mut out = String::new();
        running(&jobs, &axis, 0.0, &mut out);
        let curve = out.split("<polyline points=\"").nth(1).unwrap();
        let points = curve[..curve.find('"').unwrap()].split(' ').count();
        assert!(
            points <= 3 * WIDTH as usize,
            "{points} points for 10000 starts and ends"
        );
        // 50 at once, 51 where float starts and ends of neighbours overlap by a nanosecond.
        let most: u32 = between(&out, "(at most ", ")").parse().unwrap();
        assert!((50..=51).contains(&most), "{most}");
    }
}
