//! The latest value of every series, as the exports of the live metrics leave it: what a
//! scrape reads. Counters hold their totals (deltas are summed); an ended counter (a tool
//! that ran for a second, killed by the OOM killer) stays at its final value for
//! `keep_ended`, so that a scrape every so often still sees it. Gauges are what the latest
//! export said, and a gauge it left out is gone.
use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{AggregationTemporality, NumberDataPoint, metric::Data, number_data_point},
};

use super::names::{self, Kind};

/// OTLP `DataPointFlags.FLAG_NO_RECORDED_VALUE`: the series has ended.
const NO_RECORDED_VALUE: u32 = 1;

pub type Labels = Vec<(String, String)>;

pub struct Family {
    pub kind: Kind,
    pub help: String,
    pub samples: BTreeMap<Labels, Sample>,
}

pub struct Sample {
    pub value: f64,
    /// When its series ended (a stale marker came).
    ended: Option<Instant>,
}

#[derive(Default)]
pub struct Store {
    /// How long an ended counter stays.
    pub keep_ended: Duration,
    /// By sample name.
    pub families: BTreeMap<String, Family>,
    /// Every resource attribute, for `target_info`.
    pub target: Labels,
}

impl Store {
    /// Takes an export: `promote` names the resource attributes every series carries.
    pub(crate) fn update(&mut self, req: &ExportMetricsServiceRequest, promote: &[String]) {
        // A gauge not in this export is not current any more.
        self.families.retain(|_, f| f.kind == Kind::Counter);
        let now = Instant::now();
        for rm in &req.resource_metrics {
            let resource = rm.resource.as_ref().map(|r| &r.attributes[..]);
            let resource = resource.unwrap_or_default();
            self.target = labels(resource);
            merge_duplicates(&mut self.target);
            let promoted: Vec<KeyValue> = (resource.iter())
                .filter(|kv| promote.contains(&kv.key))
                .cloned()
                .collect();
            for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                let (kind, points, delta) = match &m.data {
                    Some(Data::Sum(s)) => {
                        let delta =
                            s.aggregation_temporality == AggregationTemporality::Delta as i32;
                        let kind = if s.is_monotonic {
                            Kind::Counter
                        } else {
                            Kind::UpDown
                        };
                        (kind, &s.data_points, delta && s.is_monotonic)
                    }
                    Some(Data::Gauge(g)) => (Kind::Gauge, &g.data_points, false),
                    // The live metrics have no histograms or summaries.
                    _ => continue,
                };
                let family = self
                    .families
                    .entry(names::metric(&m.name, &m.unit, kind))
                    .or_insert_with(|| Family {
                        kind,
                        help: m.description.clone(),
                        samples: BTreeMap::new(),
                    });
                for p in points {
                    let mut l = labels(&promoted);
                    l.extend(labels(&p.attributes));
                    merge_duplicates(&mut l);
                    take(family, l, p, delta, now);
                }
            }
        }
        // Ended counters kept long enough are gone (at once when none are kept).
        let keep = self.keep_ended;
        for f in self.families.values_mut() {
            (f.samples).retain(|_, s| s.ended.is_none_or(|t| now.duration_since(t) < keep));
        }
    }
}

fn take(family: &mut Family, labels: Labels, p: &NumberDataPoint, delta: bool, now: Instant) {
    if p.flags & NO_RECORDED_VALUE != 0 {
        if let Some(s) = family.samples.get_mut(&labels) {
            s.ended.get_or_insert(now);
        }
        return;
    }
    let v = match p.value {
        Some(number_data_point::Value::AsDouble(v)) => v,
        Some(number_data_point::Value::AsInt(v)) => v as f64,
        None => return,
    };
    let slot = family.samples.entry(labels).or_insert(Sample {
        value: 0.0,
        ended: None,
    });
    slot.value = if delta { slot.value + v } else { v };
    slot.ended = None;
}

/// Attributes as labels, in order; values as their text.
fn labels(attrs: &[KeyValue]) -> Labels {
    (attrs.iter())
        .map(|kv| (names::label(&kv.key), text(kv.value.as_ref())))
        .collect()
}

/// Two attributes whose names became the same label share it, values joined by `;`, as
/// Prometheus' translation does.
fn merge_duplicates(l: &mut Labels) {
    l.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Labels = Vec::with_capacity(l.len());
    for (k, v) in l.drain(..) {
        match out.last_mut() {
            Some((lk, lv)) if *lk == k => {
                lv.push(';');
                lv.push_str(&v);
            }
            _ => out.push((k, v)),
        }
    }
    *l = out;
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
