//! Received metric data points, flattened.
use std::collections::BTreeMap;

use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    metrics::v1::{NumberDataPoint, metric::Data, number_data_point::Value},
};

use crate::spans::{Val, attrs};

#[derive(Clone, Debug)]
pub struct RecvPoint {
    pub name: String,
    pub unit: String,
    /// `sum`, `gauge` or another data kind.
    pub kind: &'static str,
    pub monotonic: bool,
    /// OTLP AggregationTemporality: 1 delta, 2 cumulative, 0 for gauges.
    pub temporality: i32,
    pub attrs: BTreeMap<String, Val>,
    pub value: f64,
    pub start: u64,
    pub time: u64,
    pub resource: BTreeMap<String, Val>,
}

impl RecvPoint {
    pub fn str(&self, k: &str) -> &str {
        self.attrs.get(k).map(Val::str).unwrap_or("")
    }
}

fn number(p: &NumberDataPoint) -> f64 {
    match p.value {
        Some(Value::AsDouble(d)) => d,
        Some(Value::AsInt(i)) => i as f64,
        None => f64::NAN,
    }
}

pub fn flatten_metrics(req: ExportMetricsServiceRequest) -> Vec<RecvPoint> {
    let mut out = Vec::new();
    for rm in req.resource_metrics {
        let resource = attrs(rm.resource.map(|r| r.attributes).unwrap_or_default());
        for sm in rm.scope_metrics {
            for m in sm.metrics {
                let (kind, monotonic, temporality, points) = match m.data {
                    Some(Data::Sum(s)) => (
                        "sum",
                        s.is_monotonic,
                        s.aggregation_temporality,
                        s.data_points,
                    ),
                    Some(Data::Gauge(g)) => ("gauge", false, 0, g.data_points),
                    _ => ("other", false, 0, Vec::new()),
                };
                // A staleness marker (no recorded value) says the series ended: a backend
                // records no sample from it.
                for p in points.into_iter().filter(|p| p.flags & 1 == 0) {
                    out.push(RecvPoint {
                        name: m.name.clone(),
                        unit: m.unit.clone(),
                        kind,
                        monotonic,
                        temporality,
                        value: number(&p),
                        start: p.start_time_unix_nano,
                        time: p.time_unix_nano,
                        attrs: attrs(p.attributes),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
    out
}
