//! The GPUs' live metrics: GPU memory each (pipeline, task, tool) holds now, and each GPU
//! a run used at the last look (OTel's `hw.*` names where they exist).
use std::{collections::BTreeMap, time::SystemTime};

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{
        AggregationTemporality, Gauge, Metric, NumberDataPoint, Sum, metric::Data,
        number_data_point::Value,
    },
};
use pipetrace_semconv::{attr, metric};

use super::SeriesKey;
use pipetrace_core::machine::DeviceNow;

fn s(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn point(attributes: Vec<KeyValue>, now: u64, v: Value) -> NumberDataPoint {
    NumberDataPoint {
        attributes,
        start_time_unix_nano: now,
        time_unix_nano: now,
        value: Some(v),
        ..Default::default()
    }
}

fn metric(
    name: &str,
    unit: &str,
    description: &str,
    points: Vec<NumberDataPoint>,
    up_down: bool,
) -> Metric {
    let data = if up_down {
        Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: false,
        })
    } else {
        Data::Gauge(Gauge {
            data_points: points,
        })
    };
    Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(data),
        ..Default::default()
    }
}

/// `held`: GPU memory by series now; `devices`: the GPUs a run used at the last look.
pub fn metrics(
    held: &BTreeMap<SeriesKey, u64>,
    devices: &[DeviceNow],
    now: SystemTime,
) -> Vec<Metric> {
    let now = nanos(now);
    let mut out = Vec::new();
    if !held.is_empty() {
        let points = (held.iter())
            .map(|(k, bytes)| {
                let a = vec![
                    s(attr::CICD_PIPELINE_NAME, &k.pipeline),
                    s(attr::CICD_PIPELINE_TASK_NAME, &k.task),
                    s(attr::TOOL_NAME, &k.tool),
                ];
                point(a, now, Value::AsInt(*bytes as i64))
            })
            .collect();
        out.push(metric(
            metric::PROCESS_GPU_MEMORY_USAGE,
            "By",
            "GPU memory held now",
            points,
            true,
        ));
    }
    out.extend(device_metrics(devices, now));
    out.retain(|m| match &m.data {
        Some(Data::Sum(x)) => !x.data_points.is_empty(),
        Some(Data::Gauge(x)) => !x.data_points.is_empty(),
        _ => true,
    });
    out
}

fn ratio(percent: Option<u32>) -> Option<Value> {
    percent.map(|p| Value::AsDouble(f64::from(p) / 100.0))
}

type Figure = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    fn(&DeviceNow) -> Option<Value>,
);

fn device_metrics(devices: &[DeviceNow], now: u64) -> Vec<Metric> {
    let figures: [Figure; 7] = [
        (
            metric::HW_GPU_UTILIZATION,
            "1",
            "Share of the last period a kernel ran",
            false,
            |d| ratio(d.figures.utilization),
        ),
        (
            metric::HW_GPU_MEMORY_UTILIZATION,
            "1",
            "Share of the last period the memory controller was busy",
            false,
            |d| ratio(d.figures.memory_utilization),
        ),
        (
            metric::HW_GPU_MEMORY_USAGE,
            "By",
            "GPU memory in use",
            true,
            |d| d.figures.memory_used_bytes.map(|b| Value::AsInt(b as i64)),
        ),
        (metric::HW_GPU_MEMORY_LIMIT, "By", "GPU memory", true, |d| {
            d.figures.memory_total_bytes.map(|b| Value::AsInt(b as i64))
        }),
        (metric::HW_POWER, "W", "Power draw", false, |d| {
            d.figures.power_watts.map(Value::AsDouble)
        }),
        (metric::HW_TEMPERATURE, "Cel", "Temperature", false, |d| {
            d.figures
                .temperature_celsius
                .map(|c| Value::AsDouble(f64::from(c)))
        }),
        (metric::GPU_CLOCK_SM, "MHz", "SM clock", false, |d| {
            d.figures.sm_clock_mhz.map(|c| Value::AsInt(i64::from(c)))
        }),
    ];
    let mut out = Vec::new();
    for (name, unit, description, up_down, get) in figures {
        let points = (devices.iter())
            .filter_map(|d| {
                let mut a = vec![s(attr::HW_ID, &d.gpu.uuid), s(attr::HW_NAME, &d.gpu.name)];
                if matches!(name, metric::HW_POWER | metric::HW_TEMPERATURE) {
                    a.push(s(attr::HW_TYPE, "gpu"));
                }
                Some(point(a, now, get(d)?))
            })
            .collect();
        out.push(metric(name, unit, description, points, up_down));
    }
    let throttled = (devices.iter())
        .flat_map(|d| {
            d.figures.throttle_reasons.iter().map(move |r| {
                let a = vec![
                    s(attr::HW_ID, &d.gpu.uuid),
                    s(attr::HW_NAME, &d.gpu.name),
                    s(attr::GPU_THROTTLE_REASON, r),
                ];
                point(a, now, Value::AsInt(1))
            })
        })
        .collect();
    out.push(metric(
        metric::GPU_THROTTLED,
        "{reason}",
        "Why its clocks are held down",
        throttled,
        false,
    ));
    out
}
