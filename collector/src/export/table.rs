//! The end-of-run table: one row per task name, from the task spans' own attributes.
use std::{collections::BTreeMap, fmt::Write as _};

use opentelemetry::{Value, trace::Status};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::attr;

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

fn get<'a>(s: &'a SpanData, key: &str) -> Option<&'a Value> {
    s.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn num(s: &SpanData, key: &str) -> f64 {
    match get(s, key) {
        Some(Value::F64(v)) => *v,
        Some(Value::I64(v)) => *v as f64,
        _ => 0.0,
    }
}

fn text(s: &SpanData, key: &str) -> Option<String> {
    match get(s, key) {
        Some(Value::String(v)) => Some(v.to_string()),
        _ => None,
    }
}

/// Rows kept at most (task names), against runaway naming.
const MAX_ROWS: usize = 1000;

impl Table {
    pub fn record_task(&mut self, s: &SpanData) {
        let name = text(s, attr::CICD_PIPELINE_TASK_NAME).unwrap_or_default();
        if !self.rows.contains_key(&name) && self.rows.len() >= MAX_ROWS {
            return;
        }
        let r = self.rows.entry(name).or_default();
        r.jobs += 1;
        r.wall += s
            .end_time
            .duration_since(s.start_time)
            .unwrap_or_default()
            .as_secs_f64();
        r.cpu += num(s, attr::CPU_USER_TIME) + num(s, attr::CPU_SYSTEM_TIME);
        let peak = num(s, attr::MEMORY_PEAK) as u64;
        r.peak = r.peak.max(peak);
        r.disk += (num(s, attr::DISK_READ_BYTES) + num(s, attr::DISK_WRITE_BYTES)) as u64;
        r.failed += u64::from(matches!(s.status, Status::Error { .. }));
        if let Some(b) = text(s, attr::BOTTLENECK) {
            *r.bottlenecks.entry(b).or_default() += 1;
        }
        if let Some(sentence) = text(s, attr::RECOMMENDATION) {
            r.over_allocated +=
                u64::from(text(s, attr::RIGHTSIZING).as_deref() == Some("over-allocated"));
            if r.advice.as_ref().is_none_or(|(p, _)| peak >= *p) {
                r.advice = Some((peak, sentence));
            }
        }
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
        for (name, r) in &self.rows {
            let bottleneck = r
                .bottlenecks
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(b, _)| b.as_str())
                .unwrap_or("-");
            // Advice only when every job of the task asked for too much: one that used its
            // request is reason enough to keep it.
            let advice = match &r.advice {
                Some((_, s)) if r.over_allocated == r.jobs => s.as_str(),
                Some(_) => "fits its request",
                None => "-",
            };
            let _ = writeln!(
                out,
                "{:<20} {:>5} {:>9.2} {:>9.2} {:>9} {:>9}  {:<13} {:>6}  {advice}",
                truncate(name, 20),
                r.jobs,
                r.wall,
                r.cpu,
                gib(r.peak),
                gib(r.disk),
                bottleneck,
                r.failed
            );
        }
    }
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
