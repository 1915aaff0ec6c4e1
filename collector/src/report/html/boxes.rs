//! How a task's jobs spread: box plots of wall time, CPU, peak memory and I/O per task,
//! the job far from the rest named ("align sample=B, 3.1x the median").
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::{
    job::Job,
    units::{bytes, secs},
};
use crate::report::markup::esc;

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

pub fn five(values: &[f64]) -> Option<Five> {
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
pub fn outlier<'j, 'a>(jobs: &[&'j Job<'a>], value: fn(&Job) -> f64) -> Option<(&'j Job<'a>, f64)> {
    if jobs.len() < OUTLIER_JOBS {
        return None;
    }
    let values: Vec<f64> = jobs.iter().map(|j| value(j)).collect();
    let median = five(&values)?.median;
    let top = (jobs.iter().copied()).max_by(|a, b| value(a).total_cmp(&value(b)))?;
    let factor = value(top) / median;
    (median > 0.0 && factor >= OUTLIER_FACTOR).then_some((top, factor))
}

type Metric = (&'static str, fn(&Job) -> f64, fn(f64) -> String);

const METRICS: [Metric; 4] = [
    ("Wall time", |j| j.wall(), secs),
    ("CPU time", |j| j.cpu(), secs),
    ("Peak memory", |j| j.peak_seen(), bytes),
    ("Disk I/O (read + written)", io, bytes),
];

fn io(j: &Job) -> f64 {
    j.span.num(attr::DISK_READ_BYTES) + j.span.num(attr::DISK_WRITE_BYTES)
}

const W: f64 = 800.0;
const LABEL: f64 = 170.0;
const PLOT: f64 = 380.0;
const ROW: f64 = 24.0;

/// One metric's plot: a row per task, on one axis from zero to the largest job.
fn plot(m: &Metric, tasks: &BTreeMap<&str, Vec<&Job>>, out: &mut String) {
    let (title, value, show) = m;
    let most = (tasks.values().flatten())
        .map(|j| value(j))
        .fold(0.0, f64::max);
    if most <= 0.0 {
        return;
    }
    let x = |v: f64| LABEL + v / most * PLOT;
    let h = ROW * tasks.len() as f64 + 6.0;
    let _ = write!(
        out,
        "<h3>{title}</h3><div class=\"scroll fig\"><svg viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    for (i, (task, jobs)) in tasks.iter().enumerate() {
        let values: Vec<f64> = jobs.iter().map(|j| value(j)).collect();
        let Some(f) = five(&values) else { continue };
        let y = 4.0 + ROW * i as f64;
        let mid = y + ROW / 2.0 - 2.0;
        let mut said = format!("median {}, most {}", show(f.median), show(f.max));
        if let Some((j, factor)) = outlier(jobs, *value) {
            said = format!("{}, {factor:.1}x the median", j.label());
        }
        let _ = write!(
            out,
            "<text x=\"4\" y=\"{:.1}\">{} ({} jobs)</text>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"#888\"/>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4e79a7\" \
             opacity=\"0.5\"><title>{}: least {}, quartiles {} and {}, median {}, most {}</title>\
             </rect><line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e15759\" \
             stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            mid + 4.0,
            esc(task),
            jobs.len(),
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
            LABEL + PLOT + 12.0,
            mid + 4.0,
            esc(&said)
        );
    }
    out.push_str("</svg></div>");
}

/// The plots, for the tasks of more than one job.
pub fn render(jobs: &[Job], out: &mut String) {
    let mut tasks: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        tasks.entry(j.task()).or_default().push(j);
    }
    tasks.retain(|_, js| js.len() > 1);
    if tasks.is_empty() {
        return;
    }
    out.push_str(
        "<h2 id=\"spread\">How each task's jobs spread</h2><p>Boxes from the first to the \
         third quartile, the median in red, whiskers to the least and the most.</p>",
    );
    for m in &METRICS {
        plot(m, &tasks, out);
    }
}

#[cfg(test)]
mod tests {
    use super::{
        super::job::{jobs_of, tests::*},
        *,
    };

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
        let (j, factor) = outlier(&all, |j| j.wall()).unwrap();
        assert_eq!(j.label(), "align sample=B");
        assert!((factor - 3.1).abs() < 1e-6, "{factor}");
        // Even jobs have none; two jobs are too few to tell.
        let even: Vec<&Job> = jobs.iter().filter(|j| j.wall() < 2.0).collect();
        assert!(outlier(&even, |j| j.wall()).is_none());
        assert!(outlier(&all[..2], |j| j.wall()).is_none());
        let mut out = String::new();
        render(&jobs, &mut out);
        assert!(out.contains("align sample=B, 3.1x the median"), "{out}");
    }
}
