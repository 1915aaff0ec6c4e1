//! The end-of-run table: one row per task name, from the task spans' own attributes.
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;

use super::ReportSpan;
use crate::diagnosis::gib;

#[derive(Default)]
struct Row {
    jobs: u64,
    wall: f64,
    cpu: f64,
    peak: u64,
    disk: u64,
    failed: u64,
    bottlenecks: BTreeMap<String, u64>,
    /// (peak, sentence) of the job with the largest peak.
    advice: Option<(u64, String)>,
    over_allocated: u64,
}

#[derive(Default)]
pub struct Table {
    rows: BTreeMap<String, Row>,
}

/// Rows kept at most (task names), against runaway naming.
const MAX_ROWS: usize = 1000;

impl Table {
    pub fn record_task(&mut self, s: &ReportSpan) {
        let name = s
            .text(attr::CICD_PIPELINE_TASK_NAME)
            .unwrap_or_default()
            .to_string();
        if !self.rows.contains_key(&name) && self.rows.len() >= MAX_ROWS {
            return;
        }
        let r = self.rows.entry(name).or_default();
        r.jobs += 1;
        r.wall += s.secs();
        r.cpu += s.cpu();
        let peak = s.num(attr::MEMORY_PEAK) as u64;
        r.peak = r.peak.max(peak);
        r.disk += (s.num(attr::DISK_READ_BYTES) + s.num(attr::DISK_WRITE_BYTES)) as u64;
        r.failed += u64::from(s.error.is_some());
        if let Some(b) = s.text(attr::BOTTLENECK) {
            *r.bottlenecks.entry(b.to_string()).or_default() += 1;
        }
        if let Some(sentence) = s.text(attr::RECOMMENDATION) {
            r.over_allocated += u64::from(s.text(attr::RIGHTSIZING) == Some("over-allocated"));
            if r.advice.as_ref().is_none_or(|(p, _)| peak >= *p) {
                r.advice = Some((peak, sentence.to_string()));
            }
        }
    }

    /// The rows, one per task name.
    pub fn rows(&self) -> Vec<RowView<'_>> {
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
                // Advice only when every job of the task asked for too much: one that used
                // its request is reason enough to keep it.
                advice: match &r.advice {
                    Some((_, s)) if r.over_allocated == r.jobs => s.as_str(),
                    Some(_) => "fits its request",
                    None => "-",
                },
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{:<20} {:>5} {:>9} {:>9} {:>9} {:>9}  {:<13} {:>6}  advice",
            "task", "jobs", "wall s", "cpu s", "peak mem", "disk I/O", "bottleneck", "failed"
        );
        for r in self.rows() {
            let _ = writeln!(
                out,
                "{:<20} {:>5} {:>9.2} {:>9.2} {:>9} {:>9}  {:<13} {:>6}  {}",
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
    pub advice: &'a str,
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
