//! Environment variables as config layers: the OpenTelemetry SDK's OTEL_* variables and
//! PIPETRACE_* (any key, nesting with `__`: PIPETRACE_EXPORT__BATCH_SPANS=1024).
use serde_json::{Map, Value};

use crate::{ConfigError, layer::Layer};

/// The {X} of OTEL_EXPORTER_OTLP_{X} (and its _TRACES_ and _METRICS_ forms) pipetrace reads.
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

fn variable(name: &str) -> String {
    format!("environment variable {name}")
}

fn path(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// The config key an OTEL_* variable sets, and its value in config terms.
fn otel_setting(name: &str, raw: &str) -> Option<(Vec<String>, Value)> {
    Some(match name {
        "OTEL_SERVICE_NAME" => (path(&["service_name"]), raw.into()),
        "OTEL_RESOURCE_ATTRIBUTES" => (path(&["resource_attributes"]), headers(raw)),
        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE" => {
            // The spec's `lowmemory` is delta for counters, as is ours.
            let t = match raw.trim().to_ascii_lowercase().as_str() {
                "lowmemory" => "delta".to_string(),
                other => other.to_string(),
            };
            (path(&["metrics", "temporality"]), t.into())
        }
        "OTEL_METRIC_EXPORT_INTERVAL" => {
            (path(&["metrics", "interval"]), otlp_value("TIMEOUT", raw))
        }
        _ => return otlp_setting(name, raw),
    })
}

/// OTEL_EXPORTER_OTLP_{X}, _TRACES_{X} and _METRICS_{X}: export.otlp[.traces|.metrics].{x}.
fn otlp_setting(name: &str, raw: &str) -> Option<(Vec<String>, Value)> {
    // A signal's own variable; one it does not define is ignored, not taken as general.
    let (signal, key) = if let Some(k) = name.strip_prefix("OTEL_EXPORTER_OTLP_METRICS_") {
        (Some("metrics"), k)
    } else if let Some(k) = name.strip_prefix("OTEL_EXPORTER_OTLP_TRACES_") {
        (Some("traces"), k)
    } else {
        (None, name.strip_prefix("OTEL_EXPORTER_OTLP_")?)
    };
    if !OTLP_KEYS.contains(&key) {
        return None;
    }
    let mut p = path(&["export", "otlp"]);
    p.extend(signal.map(String::from));
    p.push(key.to_ascii_lowercase());
    Some((p, otlp_value(key, raw)))
}

/// The OTel SDK's OTEL_* variables as config keys. The mapping is written out by hand:
/// headers are percent-decoded and timeouts are milliseconds, which no key mapping says.
pub fn otel(vars: &[(String, String)]) -> Layer {
    let mut layer = Layer::new("environment");
    for (name, raw) in vars {
        // The OTel specification: an empty variable is as if unset.
        if !name.starts_with("OTEL_") || raw.trim().is_empty() {
            continue;
        }
        if let Some((path, value)) = otel_setting(name, raw) {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            // No OTEL_ key lies inside another: setting cannot fail.
            layer.set(&path, value, variable(name));
        }
    }
    layer
}

/// PIPETRACE_ variables that are config keys: any with a `__` (a nested key) and
/// PIPETRACE_SERVICE_NAME. The rest (PIPETRACE_LOG, PIPETRACE_BIN, PIPETRACE_CONFIG, ...)
/// are the process's own settings.
pub fn is_config(rest: &str) -> bool {
    rest.contains("__") || rest == "SERVICE_NAME"
}

/// One PIPETRACE_ variable: its key path, name and raw value.
type Setting<'a> = (Vec<String>, &'a str, &'a str);

/// The PIPETRACE_* variables as config keys, keyed as figment's own
/// `Env::prefixed("PIPETRACE_").filter(is_config).split("__")` keys them (lowercased; the
/// prefix in capitals, as pipetrace always read it, where Env would take any case; a `.`
/// stays inside its key name, where Env would nest at it).
/// figment's Env reads only the process environment, and `load` takes the environment as
/// a parameter so that tests and the fuzzer pass theirs: hence this provider over the
/// given pairs, held to Env's keys by the `figment_env` test. Unlike Env, a variable that
/// sets a value where another makes a section is an error naming both, not whichever
/// comes last in the environment.
pub fn pipetrace(vars: &[(String, String)]) -> Result<Layer, ConfigError> {
    // A name given twice (possible in a list, not in an environment): the last counts.
    let mut by_name = std::collections::BTreeMap::new();
    for (name, raw) in vars {
        if let Some(rest) = name.strip_prefix("PIPETRACE_").filter(|r| is_config(r)) {
            by_name.insert(name.as_str(), (rest, raw.as_str()));
        }
    }
    let mut settings: Vec<Setting> = Vec::with_capacity(by_name.len());
    for (name, (rest, raw)) in by_name {
        let path: Vec<String> = rest.split("__").map(|p| p.to_ascii_lowercase()).collect();
        if path.iter().any(String::is_empty) {
            return Err(ConfigError::Invalid {
                source_name: variable(name),
                key: path.join("."),
                message: "`__` goes between two key names and this name has an empty one; \
                          write e.g. PIPETRACE_EXPORT__BATCH_SPANS"
                    .into(),
            });
        }
        settings.push((path, name, raw));
    }
    // Sorted, a key sits right before the keys below it.
    settings.sort();
    if let Some(pair) = settings.windows(2).find(|w| w[1].0.starts_with(&w[0].0)) {
        return Err(collision(&pair[0], &pair[1]));
    }
    let mut layer = Layer::new("environment");
    for (path, name, raw) in &settings {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        layer.set(&path, scalar(raw), variable(name));
    }
    Ok(layer)
}

/// Two variables for one key, or a value and a key below it.
fn collision(above: &Setting, below: &Setting) -> ConfigError {
    let ((key, a, _), (sub, b, _)) = (above, below);
    let what = if key == sub {
        format!("{a} and {b} both set it")
    } else {
        format!(
            "{a} sets it to a value and {b} sets `{}` inside it",
            sub.join(".")
        )
    };
    ConfigError::Invalid {
        source_name: format!("environment variables {a} and {b}"),
        key: key.join("."),
        message: format!(
            "{what}; a key holds a value or a section of keys, not both: unset one of them"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn vars(v: &[(&str, &str)]) -> Value {
        otel(&pairs(v)).value()
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
        let v = pipetrace(&pairs(&[
            ("PIPETRACE_EXPORT__BATCH_SPANS", "64"),
            ("PIPETRACE_METRICS__ENABLED", "true"),
            ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "5s"),
            ("PIPETRACE_SERVICE_NAME", "lab"),
            ("PIPETRACE_COST__PRICES__M5.LARGE__CPU_HOUR", "0.2"),
            ("PIPETRACE_LOG", "debug"),
            ("PIPETRACE_BIN", "/usr/bin/pipetrace"),
            ("PIPETRACE_CONFIG", "/etc/pipetrace.yaml"),
            ("OTEL_SERVICE_NAME", "otel"),
        ]))
        .unwrap()
        .value();
        assert_eq!(v["export"]["batch_spans"], 64);
        assert_eq!(v["metrics"]["enabled"], true);
        assert_eq!(v["export"]["batch_timeout"], "5s");
        assert_eq!(v["service_name"], "lab");
        assert_eq!(v["cost"]["prices"]["m5.large"]["cpu_hour"], 0.2);
        for process_only in ["log", "bin", "config"] {
            assert!(v.get(process_only).is_none(), "{process_only}");
        }
    }

    #[test]
    fn an_empty_key_name_between_separators_names_the_variable() {
        for name in ["PIPETRACE_EXPORT____BATCH_SPANS", "PIPETRACE_EXPORT__"] {
            let err = pipetrace(&pairs(&[(name, "1")])).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("environment variable {name}:")),
                "{err}"
            );
            assert!(err.contains("PIPETRACE_EXPORT__BATCH_SPANS"), "{err}");
        }
    }

    #[test]
    fn otel_errors_name_the_variable() {
        let l = otel(&pairs(&[("OTEL_EXPORTER_OTLP_HEADERS", "a=b")]));
        let md = figment::Provider::metadata(&l);
        let at = ["export", "otlp", "headers", "a"];
        assert_eq!(
            md.interpolate(&figment::Profile::Global, &at),
            "environment variable OTEL_EXPORTER_OTLP_HEADERS"
        );
    }
}

#[cfg(test)]
mod conflicts {
    use super::pipetrace;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_value_and_a_section_at_one_path_is_an_error_not_a_panic() {
        for (vars, below) in [
            ([("PIPETRACE_A__B", "x"), ("PIPETRACE_A__B__C", "y")], "C"),
            ([("PIPETRACE_A__B__C", "y"), ("PIPETRACE_A__B", "x")], "C"),
            (
                [("PIPETRACE_A__B__C__D", "y"), ("PIPETRACE_A__B", "x")],
                "C__D",
            ),
        ] {
            let err = pipetrace(&pairs(&vars)).expect_err("a conflict");
            let head = format!(
                "environment variables PIPETRACE_A__B and PIPETRACE_A__B__{below}: key `a.b`: "
            );
            assert!(err.to_string().starts_with(&head), "{err}");
            assert!(
                err.to_string().contains("not both: unset one of them"),
                "{err}"
            );
        }
        // Names that share a start but not a section are no conflict.
        let ok = [("PIPETRACE_A__B", "x"), ("PIPETRACE_A__BB__C", "y")];
        assert!(pipetrace(&pairs(&ok)).is_ok());
    }

    #[test]
    fn two_spellings_of_one_key_are_an_error() {
        let vars = [
            ("PIPETRACE_EXPORT__BATCH_SPANS", "1"),
            ("PIPETRACE_export__batch_spans", "2"),
        ];
        let err = pipetrace(&pairs(&vars)).unwrap_err().to_string();
        assert!(err.contains("both set it"), "{err}");
        assert!(err.contains("PIPETRACE_EXPORT__BATCH_SPANS"), "{err}");
        assert!(err.contains("PIPETRACE_export__batch_spans"), "{err}");
    }
}
