//! The end-of-run table: one row per task name, from the task spans' own attributes.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::files::{self, MAX_TEXT_TASKS, TaskFiles};
use pipetrace_core::judgement::Advice;
use pipetrace_core::judgement::ReportSpan;

use pipetrace_core::diagnosis::gib;

#[derive(Default)]
struct Row {
    jobs: u64,
    wall: f64,
    cpu: f64,
    peak: u64,
    disk: u64,
    failed: u64,
    bottlenecks: BTreeMap<String, u64>,
    /// GPU seconds, of them busy (utilisation times time), the largest GPU memory peak.
    gpu_time: f64,
    gpu_busy: f64,
    gpu_peak: u64,
    /// What a job given GPUs it barely used should ask for.
    gpu_advice: Option<String>,
}

impl Row {
    fn gpu(&self) -> Option<String> {
        (self.gpu_time > 0.0).then(|| {
            let busy = 100.0 * self.gpu_busy / self.gpu_time;
            format!("{busy:.0}% {}", gib(self.gpu_peak))
        })
    }
}

#[derive(Default)]
pub struct Table {
    rows: BTreeMap<String, Row>,
    /// The tasks (jobs) with files, by span name, as many as the terminal lists.
    files: Vec<(String, TaskFiles)>,
    /// Tasks with files past those.
    files_hidden: u64,
}

/// Rows kept at most (task names), against runaway naming.
const MAX_ROWS: usize = 1000;

impl Table {
    pub(crate) fn record_task(&mut self, s: &ReportSpan) {
        if let Some(f) = super::files::files_of(s) {
            match self.files.len() < MAX_TEXT_TASKS {
                true => self.files.push((s.name.clone(), f)),
                false => self.files_hidden += 1,
            }
        }
        let name = s
            .text(attr::CICD_PIPELINE_TASK_NAME)
            .unwrap_or_default()
            .to_string();
        if !self.rows.contains_key(&name) && self.rows.len() >= MAX_ROWS {
            return;
        }
        let r = self.rows.entry(name).or_default();
        // A folded span stands for its repeats (short, successful jobs of one task).
        r.jobs += (s.num(attr::FOLD_SPANS) as u64).max(1);
        r.wall += s.secs();
        r.cpu += s.cpu();
        let peak = s.num(attr::MEMORY_PEAK) as u64;
        r.peak = r.peak.max(peak);
        r.disk += (s.num(attr::DISK_READ_BYTES) + s.num(attr::DISK_WRITE_BYTES)) as u64;
        r.failed += u64::from(s.error.is_some());
        let gpu_time = s.num(attr::GPU_TIME);
        r.gpu_time += gpu_time;
        r.gpu_busy += gpu_time * s.num(attr::GPU_UTILIZATION);
        r.gpu_peak = r.gpu_peak.max(s.num(attr::GPU_MEMORY_PEAK) as u64);
        if s.text(attr::GPU_RIGHTSIZING) == Some("over-allocated") {
            r.gpu_advice = s.text(attr::GPU_RECOMMENDATION).map(str::to_string);
        }
        if let Some(b) = s.text(attr::BOTTLENECK) {
            *r.bottlenecks.entry(b.to_string()).or_default() += 1;
        }
    }

    /// The rows, one per task name, each with the judgement's advice for it (its ask for
    /// next time), else what its GPUs say.
    pub(crate) fn rows<'a>(&'a self, advice: &'a Advice) -> Vec<RowView<'a>> {
        self.rows
            .iter()
            .map(|(name, r)| RowView {
                name,
                jobs: r.jobs,
                wall: r.wall,
                cpu: r.cpu,
                peak: r.peak,
                disk: r.disk,
                bottleneck: r
                    .bottlenecks
                    .iter()
                    .max_by_key(|(_, n)| **n)
                    .map(|(b, _)| b.as_str())
                    .unwrap_or("-"),
                failed: r.failed,
                advice: match (advice.get(name).map(String::as_str), &r.gpu_advice) {
                    (Some("as now") | None, Some(gpu)) => gpu.clone(),
                    (Some(a), Some(gpu)) => format!("{a}; {gpu}"),
                    (Some(a), None) => a.to_string(),
                    (None, None) => "-".into(),
                },
                gpu: r.gpu(),
            })
            .collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Whether a task used a GPU: the table shows a GPU column then.
    pub(crate) fn has_gpu(&self) -> bool {
        self.rows.values().any(|r| r.gpu_time > 0.0)
    }

    pub(crate) fn render(&self, advice: &Advice, out: &mut String) {
        let gpu = self.has_gpu();
        let gpu_head = if gpu {
            format!(" {:>14}", "gpu busy/mem")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<20} {:>5} {:>9} {:>9} {:>9}{gpu_head} {:>9}  {:<13} {:>6}  advice",
            "task", "jobs", "wall s", "cpu s", "peak mem", "disk I/O", "bottleneck", "failed"
        );
        for r in self.rows(advice) {
            let gpu_cell = match (gpu, &r.gpu) {
                (true, Some(g)) => format!(" {g:>14}"),
                (true, None) => format!(" {:>14}", "-"),
                (false, _) => String::new(),
            };
            let _ = writeln!(
                out,
                "{:<20} {:>5} {:>9.2} {:>9.2} {:>9}{gpu_cell} {:>9}  {:<13} {:>6}  {}",
                truncate(r.name, 20),
                r.jobs,
                r.wall,
                r.cpu,
                gib(r.peak),
                gib(r.disk),
                r.bottleneck,
                r.failed,
                r.advice
            );
        }
        files::render_text(&self.files, self.files_hidden, out);
    }
}

/// One row, ready to show.
pub struct RowView<'a> {
    pub name: &'a str,
    pub jobs: u64,
    pub wall: f64,
    pub cpu: f64,
    pub peak: u64,
    pub disk: u64,
    pub bottleneck: &'a str,
    pub failed: u64,
    pub advice: String,
    /// GPU utilisation and memory peak, where a job used a GPU.
    pub gpu: Option<String>,
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::files::tests::task;

    #[test]
    fn the_table_lists_each_tasks_files_after_its_rows() {
        let mut table = Table::default();
        let inputs = ["/d/a.fq", "/d/b.fq", "/d/c.fq", "/d/d.fq"];
        table.record_task(&task(
            "a",
            "align",
            (&inputs, Some(9)),
            (&["/o/a.bam"], Some(1)),
        ));
        table.record_task(&task("b", "plain", (&[], None), (&[], None)));
        let mut out = String::new();
        table.render(&Advice::new(), &mut out);
        let files = out.find("\nfiles (").expect("files section");
        assert!(out.find("plain").unwrap() < files, "after the table: {out}");
        let section = &out[files..];
        assert!(section.contains("\nalign\n  in:  /d/a.fq, /d/b.fq, /d/c.fq (+6 more)\n"));
        assert!(section.contains("  out: /o/a.bam\n"), "{out}");
        assert!(
            !section.contains("plain"),
            "a task without files is not listed"
        );
    }

    #[test]
    fn the_table_without_files_is_as_before_and_many_tasks_are_counted() {
        let mut table = Table::default();
        table.record_task(&task("a", "plain", (&[], None), (&[], None)));
        let mut out = String::new();
        table.render(&Advice::new(), &mut out);
        assert_eq!(out.lines().count(), 2, "a header and a row: {out}");
        assert!(!out.contains("files"), "{out}");
        let mut table = Table::default();
        for i in 0..MAX_TEXT_TASKS + 3 {
            table.record_task(&task(
                &i.to_string(),
                "sort",
                (&[], None),
                (&["/o/x"], None),
            ));
        }
        let mut out = String::new();
        table.render(&Advice::new(), &mut out);
        assert_eq!(out.matches("  out: /o/x\n").count(), MAX_TEXT_TASKS);
        assert!(out.contains("… and 3 more tasks with files"), "{out}");
    }
}
