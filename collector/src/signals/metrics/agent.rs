//! Self-telemetry: what pipetrace itself lost, dropped or failed to send, and how much it
//! tracks, as `pipetrace.agent.*` metrics. Nothing is lost silently. These stay cumulative
//! (since the agent started) whatever the temporality of the pipeline metrics.
use std::time::SystemTime;

use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Metric, NumberDataPoint, Sum, metric::Data,
    number_data_point::Value,
};
use pipetrace_semconv::metric;

/// The agent's own figures at one moment.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
// A status file from an older agent lacks the newer figures: they read as 0.
#[serde(default)]
pub struct AgentFigures {
    /// Kernel records refused by a full ring buffer.
    pub lost_events: u64,
    /// Ring-buffer records that did not decode.
    pub undecodable: u64,
    /// Spans refused by a full export queue.
    pub spans_dropped: u64,
    /// Spans the OTLP endpoint or the file did not take.
    pub export_failures: u64,
    /// Metric export requests refused for good, dropped, or spooled.
    pub metric_exports_failed: u64,
    pub metric_exports_dropped: u64,
    pub metric_exports_spooled: u64,
    /// Processes that ended with no figures at all.
    pub usage_missing: u64,
    /// Processes whose figures were taken at exit (no reap-time report).
    pub usage_at_exit: u64,
    /// Kernel figures dropped as physically impossible.
    pub figures_dropped: u64,
    /// Metric attribute sets placed in the overflow series.
    pub series_overflowed: u64,
    /// Processes known (the whole host's tree) and in runs now.
    pub processes_known: u64,
    pub processes_tracked: u64,
    pub rss_bytes: u64,
    /// Failed OTLP attempts tried again.
    pub export_retries: u64,
    /// Spans written to the on-disk spool.
    pub spans_spooled: u64,
    /// Encoded telemetry waiting in memory.
    pub export_queue_bytes: u64,
    /// How long the node has been idle, seconds (0 before `host.idle_after`); none outside
    /// a node agent, or when the host's CPU figures could not be read.
    pub host_idle_s: Option<u64>,
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn point(start: SystemTime, now: SystemTime, v: u64) -> NumberDataPoint {
    NumberDataPoint {
        start_time_unix_nano: nanos(start),
        time_unix_nano: nanos(now),
        value: Some(Value::AsInt(i64::try_from(v).unwrap_or(i64::MAX))),
        ..Default::default()
    }
}

pub fn metrics(f: &AgentFigures, start: SystemTime, now: SystemTime) -> Vec<Metric> {
    let counter = |name: &str, unit: &str, description: &str, v: u64| Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(Data::Sum(Sum {
            data_points: vec![point(start, now, v)],
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Default::default()
    };
    let gauge = |name: &str, unit: &str, description: &str, v: u64| Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(Data::Gauge(Gauge {
            data_points: vec![point(now, now, v)],
        })),
        ..Default::default()
    };
    let mut out = vec![
        counter(
            metric::AGENT_EVENTS_LOST,
            "{event}",
            "Kernel events lost to a full ring buffer",
            f.lost_events,
        ),
        counter(
            metric::AGENT_RECORDS_UNDECODABLE,
            "{record}",
            "Kernel records that did not decode",
            f.undecodable,
        ),
        counter(
            metric::AGENT_SPANS_DROPPED,
            "{span}",
            "Spans dropped by a full export queue",
            f.spans_dropped,
        ),
        counter(
            metric::AGENT_EXPORT_FAILURES,
            "{span}",
            "Spans the OTLP endpoint or file did not take",
            f.export_failures,
        ),
        counter(
            metric::AGENT_METRIC_EXPORTS_FAILED,
            "{request}",
            "Metric export requests the OTLP endpoint or file did not take",
            f.metric_exports_failed,
        ),
        counter(
            metric::AGENT_METRIC_EXPORTS_DROPPED,
            "{request}",
            "Metric export requests dropped",
            f.metric_exports_dropped,
        ),
        counter(
            metric::AGENT_METRIC_EXPORTS_SPOOLED,
            "{request}",
            "Metric export requests written to the on-disk spool",
            f.metric_exports_spooled,
        ),
        counter(
            metric::AGENT_USAGE_MISSING,
            "{process}",
            "Processes that ended with no usage figures at all",
            f.usage_missing,
        ),
        counter(
            metric::AGENT_USAGE_AT_EXIT,
            "{process}",
            "Processes whose figures were taken at exit: no reap-time report came",
            f.usage_at_exit,
        ),
        counter(
            metric::AGENT_FIGURES_DROPPED,
            "{figure}",
            "Kernel figures dropped as physically impossible",
            f.figures_dropped,
        ),
        counter(
            metric::AGENT_SERIES_OVERFLOWED,
            "{series}",
            "Metric attribute sets put in the overflow series",
            f.series_overflowed,
        ),
        counter(
            metric::AGENT_EXPORT_RETRIES,
            "{request}",
            "OTLP export attempts tried again after a retryable failure",
            f.export_retries,
        ),
        counter(
            metric::AGENT_SPANS_SPOOLED,
            "{span}",
            "Spans written to the on-disk spool",
            f.spans_spooled,
        ),
        gauge(
            metric::AGENT_EXPORT_QUEUE_USAGE,
            "By",
            "Encoded telemetry waiting in memory to be sent",
            f.export_queue_bytes,
        ),
        gauge(
            metric::AGENT_PROCESSES_KNOWN,
            "{process}",
            "Processes in the agent's tree",
            f.processes_known,
        ),
        gauge(
            metric::AGENT_PROCESSES_TRACKED,
            "{process}",
            "Processes in runs now",
            f.processes_tracked,
        ),
        gauge(
            metric::AGENT_MEMORY_RSS,
            "By",
            "The agent's resident memory",
            f.rss_bytes,
        ),
    ];
    if let Some(idle) = f.host_idle_s {
        out.push(gauge(
            metric::HOST_IDLE,
            "s",
            "How long this node has run no pipeline work and used almost no CPU, once that \
             lasted host.idle_after (0 otherwise)",
            idle,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_points(f: &AgentFigures) -> Vec<(String, Option<Value>)> {
        let now = SystemTime::now();
        let ms = metrics(f, now, now);
        let idle = ms.iter().filter(|m| m.name == metric::HOST_IDLE);
        idle.map(|m| match &m.data {
            Some(Data::Gauge(g)) => (m.unit.clone(), g.data_points[0].value),
            other => panic!("a gauge: {other:?}"),
        })
        .collect()
    }

    #[test]
    fn host_idle_is_a_gauge_in_seconds_only_where_it_is_judged() {
        assert!(idle_points(&AgentFigures::default()).is_empty());
        for v in [0, 7200] {
            let f = AgentFigures {
                host_idle_s: Some(v),
                ..Default::default()
            };
            let want = vec![("s".to_string(), Some(Value::AsInt(v as i64)))];
            assert_eq!(idle_points(&f), want);
        }
    }
}
