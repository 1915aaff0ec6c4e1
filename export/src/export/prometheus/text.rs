//! The exposition: OpenMetrics text (what Prometheus asks for), or the older text format.
use std::fmt::Write;

use super::{
    names::Kind,
    store::{Labels, Store},
};

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) fn render(store: &Store, openmetrics: bool) -> String {
    let mut out = String::new();
    if !store.target.is_empty() {
        let (family, kind) = match openmetrics {
            true => ("target", "info"),
            false => ("target_info", "gauge"),
        };
        let _ = writeln!(out, "# HELP {family} Target metadata");
        let _ = writeln!(out, "# TYPE {family} {kind}");
        sample(&mut out, "target_info", &store.target, 1.0);
    }
    for (name, f) in &store.families {
        if f.samples.is_empty() {
            continue;
        }
        // OpenMetrics names a counter's family without the `_total` of its samples.
        let family = match (f.kind, openmetrics) {
            (Kind::Counter, true) => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge | Kind::UpDown => "gauge",
        };
        if !f.help.is_empty() {
            let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(out, "# HELP {family} {help}");
        }
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for (labels, s) in &f.samples {
            sample(&mut out, name, labels, s.value);
        }
    }
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn sample(out: &mut String, name: &str, labels: &Labels, v: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let val = val
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let _ = write!(out, "{k}=\"{val}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {}", number(v));
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        (if v > 0.0 { "+Inf" } else { "-Inf" }).into()
    } else {
        format!("{v}")
    }
}
