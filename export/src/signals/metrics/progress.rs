//! How far each run is, where its engine says: tasks done, in all, and queued (not started).
use std::time::SystemTime;

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{Gauge, Metric, NumberDataPoint, metric::Data, number_data_point::Value},
};
use pipetrace_semconv::{attr, metric};

/// A run's progress: its pipeline, tasks done, in all, and running now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub pipeline: String,
    pub done: u32,
    pub total: u32,
    pub running: u32,
    /// Waiting to run, where the engine's records say.
    pub waiting: Option<u32>,
}

impl Progress {
    /// Not started yet: what the engine says waits, else what is neither done nor running.
    pub(crate) fn queued(&self) -> u32 {
        (self.waiting).unwrap_or_else(|| self.total.saturating_sub(self.done + self.running))
    }
}

/// A metric: its name, description, and its value for a run.
type Figure = (&'static str, &'static str, fn(&Progress) -> u32);

pub fn metrics(runs: &[Progress], now: SystemTime) -> Vec<Metric> {
    if runs.is_empty() {
        return Vec::new();
    }
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let figures: [Figure; 3] = [
        (metric::TASKS_DONE, "Tasks done", |p| p.done),
        (metric::TASKS_TOTAL, "Tasks the run will run", |p| p.total),
        (
            metric::TASKS_QUEUED,
            "Tasks not started yet",
            Progress::queued,
        ),
    ];
    let point = |p: &Progress, v: u32| NumberDataPoint {
        attributes: vec![KeyValue {
            key: attr::CICD_PIPELINE_NAME.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(p.pipeline.clone())),
            }),
        }],
        start_time_unix_nano: now,
        time_unix_nano: now,
        value: Some(Value::AsInt(i64::from(v))),
        ..Default::default()
    };
    (figures.iter())
        .map(|(name, description, get)| Metric {
            name: (*name).into(),
            unit: "{task}".into(),
            description: (*description).into(),
            data: Some(Data::Gauge(Gauge {
                data_points: runs.iter().map(|p| point(p, get(p))).collect(),
            })),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_is_what_is_neither_done_nor_running() {
        let p = Progress {
            pipeline: "wgs".into(),
            done: 2,
            total: 6,
            running: 1,
            waiting: None,
        };
        assert_eq!(p.queued(), 3);
        let said = Progress {
            waiting: Some(1),
            ..p.clone()
        };
        assert_eq!(said.queued(), 1, "the engine's own count stands");
        let m = metrics(&[p], SystemTime::now());
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                metric::TASKS_DONE,
                metric::TASKS_TOTAL,
                metric::TASKS_QUEUED
            ]
        );
    }
}
