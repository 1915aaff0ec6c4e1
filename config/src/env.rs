//! Environment variables as a partial config: the OpenTelemetry SDK's OTEL_* variables and
//! PIPETRACE_* (nesting with `__`: PIPETRACE_EXPORT__BATCH_SPANS=1024).
use serde_json::{Map, Value};

/// OTEL_EXPORTER_OTLP_{X} and OTEL_EXPORTER_OTLP_TRACES_{X} -> export.otlp[.traces].{x}.
const OTLP_KEYS: [&str; 8] = [
    "ENDPOINT",
    "PROTOCOL",
    "HEADERS",
    "TIMEOUT",
    "COMPRESSION",
    "CERTIFICATE",
    "CLIENT_KEY",
    "CLIENT_CERTIFICATE",
];

/// Sets `path` to `value`. False, and nothing set, when the path runs through a value or
/// would replace a section: a setting is a value or a section, not both.
pub(crate) fn insert(root: &mut Map<String, Value>, path: &[&str], value: Value) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = root;
    for p in parents {
        let next = node
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(section) = next.as_object_mut() else {
            return false;
        };
        node = section;
    }
    if node.get(*last).is_some_and(Value::is_object) && !value.is_object() {
        return false;
    }
    node.insert(last.to_string(), value);
    true
}

/// `k1=v1,k2=v2` with percent-encoded values, as the OTLP exporter spec defines it.
fn headers(raw: &str) -> Value {
    let mut m = Map::new();
    for pair in raw.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.insert(
            k.trim().to_string(),
            Value::String(percent_decode(v.trim())),
        );
    }
    Value::Object(m)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = || u8::from_str_radix(std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?, 16).ok();
        match (b[i], hex()) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn otlp_value(key: &str, raw: &str) -> Value {
    match key {
        "HEADERS" => headers(raw),
        // The spec gives OTLP timeouts in milliseconds.
        "TIMEOUT" => match raw.trim().parse::<u64>() {
            Ok(ms) => Value::String(format!("{ms}ms")),
            Err(_) => Value::String(raw.into()),
        },
        _ => Value::String(raw.trim().into()),
    }
}

/// A scalar from the environment: numbers and booleans typed, the rest strings.
fn scalar(raw: &str) -> Value {
    match serde_yaml::from_str::<Value>(raw) {
        Ok(v @ (Value::Bool(_) | Value::Number(_))) => v,
        _ => Value::String(raw.into()),
    }
}

/// Builds the partial config the given environment variables describe.
pub fn from_vars<I: IntoIterator<Item = (String, String)>>(
    vars: I,
) -> Result<Value, crate::ConfigError> {
    let mut root = Map::new();
    for (name, raw) in vars {
        // The OTel specification: an empty variable is as if unset.
        if name.starts_with("OTEL_") && raw.trim().is_empty() {
            continue;
        }
        if name == "OTEL_SERVICE_NAME" {
            insert(&mut root, &["service_name"], Value::String(raw));
        } else if name == "OTEL_RESOURCE_ATTRIBUTES" {
            insert(&mut root, &["resource_attributes"], headers(&raw));
        } else if name == "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE" {
            // The spec's `lowmemory` is delta for counters, as is ours.
            let t = match raw.trim().to_ascii_lowercase().as_str() {
                "lowmemory" => "delta".to_string(),
                other => other.to_string(),
            };
            insert(&mut root, &["metrics", "temporality"], Value::String(t));
        } else if name == "OTEL_METRIC_EXPORT_INTERVAL" {
            insert(
                &mut root,
                &["metrics", "interval"],
                otlp_value("TIMEOUT", &raw),
            );
        } else if let Some(key) = name.strip_prefix("OTEL_EXPORTER_OTLP_METRICS_") {
            if OTLP_KEYS.contains(&key) {
                let k = key.to_ascii_lowercase();
                insert(
                    &mut root,
                    &["export", "otlp", "metrics", &k],
                    otlp_value(key, &raw),
                );
            }
        } else if let Some(key) = name.strip_prefix("OTEL_EXPORTER_OTLP_TRACES_") {
            if OTLP_KEYS.contains(&key) {
                let k = key.to_ascii_lowercase();
                insert(
                    &mut root,
                    &["export", "otlp", "traces", &k],
                    otlp_value(key, &raw),
                );
            }
        } else if let Some(key) = name.strip_prefix("OTEL_EXPORTER_OTLP_") {
            if OTLP_KEYS.contains(&key) {
                let k = key.to_ascii_lowercase();
                insert(&mut root, &["export", "otlp", &k], otlp_value(key, &raw));
            }
        } else if let Some(rest) = name.strip_prefix("PIPETRACE_") {
            // PIPETRACE_LOG and PIPETRACE_BIN are for the process, not the config.
            if !rest.contains("__") && !matches!(rest, "SERVICE_NAME") {
                continue;
            }
            let path: Vec<String> = rest.split("__").map(|p| p.to_ascii_lowercase()).collect();
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            if !insert(&mut root, &path, scalar(&raw)) {
                return Err(crate::ConfigError::Invalid {
                    source_name: "environment".into(),
                    key: name,
                    message: "another PIPETRACE_ variable sets a value above or a section below \
                              it; a setting is a value or a section, not both: unset one"
                        .into(),
                });
            }
        }
    }
    Ok(Value::Object(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Value {
        from_vars(v.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn an_empty_otel_variable_is_unset() {
        let v = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", " "),
            ("OTEL_SERVICE_NAME", ""),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4317"),
        ]);
        assert_eq!(v["export"]["otlp"].get("endpoint"), None);
        assert_eq!(v["export"]["otlp"].get("protocol"), None);
        assert_eq!(v.get("service_name"), None);
        assert_eq!(v["export"]["otlp"]["traces"]["endpoint"], "http://t:4317");
    }

    #[test]
    fn otel_variables_map_to_config_keys() {
        let v = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%3Db,x=1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(v["export"]["otlp"]["endpoint"], "http://collector:4317");
        assert_eq!(v["export"]["otlp"]["traces"]["protocol"], "http/protobuf");
        assert_eq!(v["export"]["otlp"]["headers"]["api-key"], "a=b");
        assert_eq!(v["export"]["otlp"]["timeout"], "2500ms");
        assert_eq!(v["resource_attributes"]["deployment.environment"], "prod");
        let tls = vars(&[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/etc/key.pem"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
                "/etc/m.pem",
            ),
        ]);
        assert_eq!(tls["export"]["otlp"]["certificate"], "/etc/ca.pem");
        assert_eq!(tls["export"]["otlp"]["client_key"], "/etc/key.pem");
        assert_eq!(
            tls["export"]["otlp"]["metrics"]["client_certificate"],
            "/etc/m.pem"
        );
        assert!(v.get("path").is_none());
        let m = vars(&[
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1500"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://m:4318/v1/metrics",
            ),
        ]);
        assert_eq!(m["metrics"]["temporality"], "delta");
        assert_eq!(m["metrics"]["interval"], "1500ms");
        assert_eq!(
            m["export"]["otlp"]["metrics"]["endpoint"],
            "http://m:4318/v1/metrics"
        );
    }

    #[test]
    fn pipetrace_variables_nest_and_type() {
        let v = vars(&[
            ("PIPETRACE_EXPORT__BATCH_SPANS", "64"),
            ("PIPETRACE_LOG", "debug"),
        ]);
        assert_eq!(v["export"]["batch_spans"], 64);
        assert!(v.get("log").is_none());
    }
}

#[cfg(test)]
mod conflicts {
    use super::from_vars;

    #[test]
    fn a_value_and_a_section_at_one_path_is_an_error_not_a_panic() {
        for vars in [
            [("PIPETRACE_A__B", "x"), ("PIPETRACE_A__B__C", "y")],
            [("PIPETRACE_A__B__C", "y"), ("PIPETRACE_A__B", "x")],
        ] {
            let got = from_vars(vars.map(|(k, v)| (k.to_string(), v.to_string())));
            let err = got.expect_err("a conflict").to_string();
            assert!(
                err.contains("environment") && err.contains("not both"),
                "{err}"
            );
        }
    }
}
