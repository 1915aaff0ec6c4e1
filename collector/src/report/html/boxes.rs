//! How a task's jobs spread: box plots of wall time, CPU, peak memory and I/O per task,
//! the job far from the rest named ("align sample=B, 3.1x the median").
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, pct, secs},
};
use crate::report::markup::{self, esc};

/// Five figures of a sample: least, quartiles, median, most.
#[derive(Debug, PartialEq)]
pub struct Five {
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
}

/// The `q` quantile of sorted `v`, interpolated between neighbours.
fn quantile(v: &[f64], q: f64) -> f64 {
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

pub(crate) fn five(values: &[f64]) -> Option<Five> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(Five {
        min: v[0],
        q1: quantile(&v, 0.25),
        median: quantile(&v, 0.5),
        q3: quantile(&v, 0.75),
        max: v[v.len() - 1],
    })
}

/// Jobs a task needs before one may be called far from the rest.
const OUTLIER_JOBS: usize = 3;
/// How far above the median an outlier is, at least.
const OUTLIER_FACTOR: f64 = 1.5;

/// The job furthest above the median, where it is far enough and there are enough jobs:
/// its label and how many times the median it is.
pub(crate) fn outlier<'j, 'a>(
    jobs: &[&'j Job<'a>],
    value: &dyn Fn(&Job) -> f64,
) -> Option<(&'j Job<'a>, f64)> {
    if jobs.len() < OUTLIER_JOBS {
        return None;
    }
    let values: Vec<f64> = jobs.iter().map(|j| value(j)).collect();
    let median = five(&values)?.median;
    let top = (jobs.iter().copied()).max_by(|a, b| value(a).total_cmp(&value(b)))?;
    let factor = value(top) / median;
    (median > 0.0 && factor >= OUTLIER_FACTOR).then_some((top, factor))
}

/// A plot's title, each job's figure (None: the job has none, as one that asked for
/// nothing has no % of its ask), how to show a figure and the step of its axis's ticks.
type Metric = (
    &'static str,
    fn(&Job) -> Option<f64>,
    fn(f64) -> String,
    fn(f64) -> f64,
);

const METRICS: [Metric; 7] = [
    ("Wall time", |j| Some(j.wall()), secs, nice_step),
    ("CPU time", |j| Some(j.cpu()), secs, nice_step),
    ("Peak memory", |j| Some(j.peak_seen()), bytes, binary_step),
    (
        "Disk I/O (read + written)",
        |j| Some(io(j)),
        bytes,
        binary_step,
    ),
    (
        "CPU used, % of the CPUs asked",
        |j| j.cpu_of_asked(),
        pct,
        nice_step,
    ),
    (
        "Peak memory, % of the memory asked",
        |j| j.memory_of_asked(),
        pct,
        nice_step,
    ),
    (
        "Wall time, % of the time asked",
        |j| j.time_of_asked(),
        pct,
        nice_step,
    ),
];

fn io(j: &Job) -> f64 {
    j.span.num(attr::DISK_READ_BYTES) + j.span.num(attr::DISK_WRITE_BYTES)
}

const W: f64 = 800.0;
const LABEL: f64 = 170.0;
const PLOT: f64 = 380.0;
const ROW: f64 = 24.0;
/// Under the rows: the axis, its ticks and their figures.
const AXIS: f64 = 22.0;
/// A task of fewer jobs shows each as a dot: a box of two or three says nothing.
const DOTS_BELOW: usize = 5;

/// A step of 1, 2 or 5 times a power of ten that puts 2 to 5 ticks up to `most`.
fn nice_step(most: f64) -> f64 {
    let p = 10f64.powf(most.log10().floor());
    [0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
        .map(|k| k * p)
        .into_iter()
        .find(|s| most / s <= 5.0)
        .unwrap_or(10.0 * p)
}

/// [`nice_step`] in the binary unit bytes are shown in (KiB, MiB, GiB), so that each tick
/// reads round: 0, 5 MiB, 10 MiB, not 0, 4.8 MiB, 9.5 MiB.
fn binary_step(most: f64) -> f64 {
    let mut unit = 1.0;
    while most / unit >= 1024.0 {
        unit *= 1024.0;
    }
    nice_step(most / unit) * unit
}

/// How an axis shows a figure, and the step of its ticks up to its most.
type Scale = (fn(f64) -> String, fn(f64) -> f64);

/// The axis under the rows at `y`: ticks from zero to `most`, each with its figure.
fn axis(most: f64, y: f64, (show, step): Scale, out: &mut String) {
    let x = |v: f64| LABEL + v / most * PLOT;
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{LABEL}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>",
        LABEL + PLOT
    );
    let step = step(most);
    let mut v = 0.0;
    while v <= most * 1.000_001 {
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{y:.1}\" y2=\"{1:.1}\"/>\
             <text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}</text>",
            x(v),
            y + 4.0,
            y + 15.0,
            esc(&show(v))
        );
        v += step;
    }
}

/// One task's row at `y`: its jobs as dots where they are few, else a box.
fn row(
    task: &str,
    jobs: &[&Job],
    (m, x, y): (&Metric, &dyn Fn(f64) -> f64, f64),
    out: &mut String,
) {
    let (_, value, show, _) = m;
    let with: Vec<(&Job, f64)> = jobs.iter().filter_map(|j| Some((*j, value(j)?))).collect();
    let values: Vec<f64> = with.iter().map(|(_, v)| *v).collect();
    let Some(f) = five(&values) else { return };
    let mid = y + ROW / 2.0 - 2.0;
    let mut said = format!("median {}, most {}", show(f.median), show(f.max));
    let jobs: Vec<&Job> = with.iter().map(|(j, _)| *j).collect();
    if let Some((j, factor)) = outlier(&jobs, &|j| value(j).unwrap_or(0.0)) {
        said = format!("{}, {factor:.1}x the median", j.label());
    }
    let _ = write!(
        out,
        "<text x=\"4\" y=\"{:.1}\">{} ({})</text>",
        mid + 4.0,
        esc(task),
        markup::jobs(values.len())
    );
    match values.len() < DOTS_BELOW {
        true => dots(&with, (x, mid, *show), out),
        false => boxed(task, &f, (x, y, *show), out),
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        LABEL + PLOT + 12.0,
        mid + 4.0,
        esc(&said)
    );
}

type Place<'x> = (&'x dyn Fn(f64) -> f64, f64, fn(f64) -> String);

fn dots(jobs: &[(&Job, f64)], (x, mid, show): Place, out: &mut String) {
    for (j, v) in jobs {
        let _ = write!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"4\" fill=\"#4e79a7\"><title>{}: {}</title>\
             </circle>",
            x(*v),
            esc(&j.label()),
            show(*v)
        );
    }
}

/// Whiskers from the least to the most, a box between the quartiles, the median in red.
fn boxed(task: &str, f: &Five, (x, y, show): Place, out: &mut String) {
    let mid = y + ROW / 2.0 - 2.0;
    let _ = write!(
        out,
        "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"#888\"/>\
         <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4e79a7\" \
         opacity=\"0.5\"><title>{}: least {}, quartiles {} and {}, median {}, most {}</title>\
         </rect><line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e15759\" \
         stroke-width=\"2\"/>",
        x(f.min),
        x(f.max),
        x(f.q1),
        y + 3.0,
        (x(f.q3) - x(f.q1)).max(1.0),
        ROW - 10.0,
        esc(task),
        show(f.min),
        show(f.q1),
        show(f.q3),
        show(f.median),
        show(f.max),
        x(f.median),
        x(f.median),
        y + 3.0,
        y + ROW - 7.0,
    );
}

/// One metric's plot: a row per task that has the figure, on one axis from zero to the
/// largest job, with its scale under the rows.
fn plot(m: &Metric, tasks: &BTreeMap<&str, Vec<&Job>>, out: &mut String) {
    let (title, value, show, step) = m;
    let rows: Vec<(&&str, &Vec<&Job>)> = (tasks.iter())
        .filter(|(_, js)| js.iter().any(|j| value(j).is_some()))
        .collect();
    let most = (rows.iter().flat_map(|(_, js)| js.iter()))
        .filter_map(|j| value(j))
        .fold(0.0, f64::max);
    if most <= 0.0 || rows.is_empty() {
        return;
    }
    let x = |v: f64| LABEL + v / most * PLOT;
    let h = ROW * rows.len() as f64 + 6.0 + AXIS;
    let _ = write!(
        out,
        "<h3>{title}</h3><div class=\"scroll fig\"><svg viewBox=\"0 0 {W} {h}\" width=\"100%\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    for (i, (task, jobs)) in rows.iter().enumerate() {
        row(task, jobs, (m, &x, 4.0 + ROW * i as f64), out);
    }
    axis(most, h - AXIS, (*show, *step), out);
    out.push_str("</svg></div>");
}

/// The plots, for the tasks of more than one job.
pub(crate) fn render(jobs: &[Job], out: &mut String) {
    let mut tasks: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        tasks.entry(j.task()).or_default().push(j);
    }
    tasks.retain(|_, js| js.len() > 1);
    if tasks.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h2 id=\"spread\">How each task's jobs spread</h2><p>Boxes from the first to the \
         third quartile, the median in red, whiskers to the least and the most; a task of fewer \
         than {DOTS_BELOW} jobs as one dot a job. The % of what was asked where jobs asked \
         (threads or cpus, mem_mb or memory, a cgroup's quota and limit).</p>"
    );
    for m in &METRICS {
        plot(m, &tasks, out);
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_core::judgement::testing::*;

    use super::{super::job::jobs_of, *};

    #[test]
    fn byte_ticks_are_round_in_their_binary_unit() {
        const MIB: f64 = 1048576.0;
        assert_eq!(binary_step(12.5 * MIB), 5.0 * MIB);
        assert_eq!(binary_step(2.1 * MIB), 0.5 * MIB);
        assert_eq!(binary_step(300.0 * 1024.0), 100.0 * 1024.0);
        let mut out = String::new();
        axis(12.5 * MIB, 0.0, (bytes, binary_step), &mut out);
        let ticks: Vec<&str> = (out.split("text-anchor=\"middle\">").skip(1))
            .map(|t| &t[..t.find('<').unwrap()])
            .collect();
        assert_eq!(ticks, ["0 B", "5.0 MiB", "10 MiB"]);
    }

    #[test]
    fn five_figures_interpolate_between_jobs() {
        let f = five(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(
            f,
            Five {
                min: 1.0,
                q1: 1.75,
                median: 2.5,
                q3: 3.25,
                max: 4.0
            }
        );
        assert_eq!(five(&[]), None);
    }

    #[test]
    fn the_job_far_above_the_median_is_named_with_its_factor() {
        let spans: Vec<_> = [("A", 1.0), ("B", 3.1), ("C", 1.0), ("D", 0.9)]
            .into_iter()
            .map(|(s, wall)| task(s, "align", Some(&format!("sample={s}")), (0.0, wall)))
            .collect();
        let jobs = jobs_of(&spans);
        let all: Vec<&Job> = jobs.iter().collect();
        let (j, factor) = outlier(&all, &|j| j.wall()).unwrap();
        assert_eq!(j.label(), "align sample=B");
        assert!((factor - 3.1).abs() < 1e-6, "{factor}");
        // Even jobs have none; two jobs are too few to tell.
        let even: Vec<&Job> = jobs.iter().filter(|j| j.wall() < 2.0).collect();
        assert!(outlier(&even, &|j| j.wall()).is_none());
        assert!(outlier(&all[..2], &|j| j.wall()).is_none());
        let mut out = String::new();
        render(&jobs, &mut out);
        assert!(out.contains("align sample=B, 3.1x the median"), "{out}");
    }

    #[test]
    fn few_jobs_are_dots_many_a_box_each_plot_has_its_scale_and_asks_their_share() {
        let job = |id: &str, name: &str, wall: f64| {
            with(
                task(id, name, Some(id), (0.0, wall)),
                &[(attr::CPU_ALLOCATED, 2.0), (attr::CPU_USER_TIME, wall)],
                &[(attr::CPU_ALLOCATION_SOURCE, "engine.threads")],
            )
        };
        let mut spans: Vec<_> = (0..6)
            .map(|i| job(&format!("m{i}"), "many", 1.0 + i as f64))
            .collect();
        spans.extend((0..3).map(|i| task(&format!("f{i}"), "few", Some("x"), (0.0, 2.0))));
        let jobs = jobs_of(&spans);
        let mut out = String::new();
        render(&jobs, &mut out);
        let wall = out.split("<h3>").nth(1).unwrap();
        assert!(wall.starts_with("Wall time</h3>"), "{wall}");
        assert_eq!(
            wall.matches("<circle").count(),
            3,
            "the 3 jobs of few as dots"
        );
        assert_eq!(wall.matches("<rect").count(), 1, "many's box");
        // 0 to 6 s in steps of 2 s, each tick named.
        for tick in ["0 s", "2.00 s", "4.00 s", "6.00 s"] {
            assert!(
                wall.contains(&format!("text-anchor=\"middle\">{tick}</text>")),
                "{tick}: {wall}"
            );
        }
        let cpu = (out.split("<h3>"))
            .find(|p| p.starts_with("CPU used, % of the CPUs asked"))
            .expect("a % of the ask plot");
        assert!(
            cpu.contains(">many (6 jobs)<") && !cpu.contains(">few"),
            "{cpu}"
        );
        assert!(
            cpu.contains(">50%</text>"),
            "each job used 1 of its 2 CPUs: {cpu}"
        );
        assert!(
            !out.contains("Wall time, % of the time asked"),
            "no job was given a time: no plot"
        );
    }

    /// Jobs given a time (Snakemake's `runtime`, Slurm's `--time`) show their wall time as a
    /// share of it, as Nextflow's report does.
    #[test]
    fn jobs_given_a_time_show_their_wall_time_as_its_share() {
        let spans: Vec<_> = (0..3)
            .map(|i| {
                let t = task(&format!("t{i}"), "align", Some("x"), (0.0, 30.0));
                with(t, &[(attr::TASK_TIME_LIMIT, 60.0)], &[])
            })
            .collect();
        let jobs = jobs_of(&spans);
        let mut out = String::new();
        render(&jobs, &mut out);
        let time = (out.split("<h3>"))
            .find(|p| p.starts_with("Wall time, % of the time asked"))
            .expect("a % of the time asked plot");
        assert!(time.contains(">align (3 jobs)<"), "{time}");
        assert_eq!(time.matches("<circle").count(), 3, "{time}");
    }
}
