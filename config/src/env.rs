//! Environment variables as config layers: the OpenTelemetry SDK's OTEL_* variables and
//! PIPETRACE_* (any key, nesting with `__`: PIPETRACE_EXPORT__BATCH_SPANS=1024).
use std::sync::Arc;

use figment::{Metadata, Profile, Provider, Source, providers::Env};
use serde_json::{Map, Value};

use crate::{
    ConfigError,
    layer::{Layer, Origin, origin_of},
};

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

/// `k1=v1,k2=v2` with percent-encoded values, as the OTLP exporter spec defines it. A pair
/// without `=` is no map: the text as given, which the model refuses naming the variable.
fn headers(raw: &str) -> Value {
    let mut m = Map::new();
    for pair in raw.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Value::String(raw.into());
        };
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
        _ if name.ends_with("_LIMIT") => limit_setting(name, raw)?,
        _ => return otlp_setting(name, raw),
    })
}

/// The span and attribute limits (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, ...): a count, or the
/// text as given, which the model then refuses naming the variable.
fn limit_setting(name: &str, raw: &str) -> Option<(Vec<String>, Value)> {
    let (_, key) = crate::limits::VARIABLES.iter().find(|(v, _)| *v == name)?;
    let value = match raw.trim().parse::<u64>() {
        Ok(n) => Value::from(n),
        Err(_) => Value::String(raw.trim().into()),
    };
    Some((path(&["export", "limits", key]), value))
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
pub(crate) fn otel(vars: &[(String, String)]) -> Layer {
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

/// The prefix of pipetrace's own variables.
const PREFIX: &str = "PIPETRACE_";

/// The top-level keys with a value of their own, each a PIPETRACE_ variable.
const TOP_LEVEL: [&str; 3] = ["SERVICE_NAME", "RESOURCE_ATTRIBUTES", "CPU_POLICY"];

/// Keys whose value is a map of names to text, which a variable may give whole as OTel's
/// variables do (`k1=v1,k2=v2`, values percent-encoded), or one name at a time
/// (PIPETRACE_RESOURCE_ATTRIBUTES__TEAM=genomics).
const MAPS: [&str; 4] = [
    "resource_attributes",
    "export.otlp.headers",
    "export.otlp.traces.headers",
    "export.otlp.metrics.headers",
];

/// PIPETRACE_ variables that are config keys: any with a `__` (a nested key) and the
/// top-level ones. The rest (PIPETRACE_LOG, PIPETRACE_BIN, PIPETRACE_CONFIG, ...) are the
/// process's own settings, or other programs' (the collector's configuration in deploy/).
fn is_config(rest: &str) -> bool {
    rest.contains("__") || TOP_LEVEL.iter().any(|k| rest.eq_ignore_ascii_case(k))
}

/// Whether a variable gives a whole map (`MAPS`): read by [`maps`], not by figment, whose
/// values would be text where a map is wanted.
fn is_whole_map(rest: &str) -> bool {
    let key = rest.replace("__", ".").to_ascii_lowercase();
    MAPS.contains(&key.as_str())
}

/// figment's own provider for PIPETRACE_*: PIPETRACE_EXPORT__BATCH_SPANS=64 is
/// `export.batch_spans: 64` (keys lowercased, values typed by figment). Global, as the
/// other layers above the file are, so that the order of merging alone decides.
fn figments_env() -> Env {
    Env::prefixed(PREFIX)
        .filter(|rest| is_config(rest.as_str()) && !is_whole_map(rest.as_str()))
        .split("__")
        .global()
}

/// PIPETRACE_ variables that give a whole map (`MAPS`), as `k1=v1,k2=v2`.
pub(crate) fn maps(vars: &[(String, String)]) -> Layer {
    let mut layer = Layer::new("environment");
    for (name, raw) in vars {
        // get(), not slicing: a name may hold a multi-byte character across the prefix's end.
        let (Some(head), Some(rest)) = (name.get(..PREFIX.len()), name.get(PREFIX.len()..)) else {
            continue;
        };
        if rest.is_empty() || !head.eq_ignore_ascii_case(PREFIX) || !is_whole_map(rest) {
            continue;
        }
        let key = rest.replace("__", ".").to_ascii_lowercase();
        let path: Vec<&str> = key.split('.').collect();
        layer.set(&path, headers(raw), variable(name));
    }
    layer
}

/// A PIPETRACE_ variable a letter or two away from a top-level key's (PIPETRACE_SERVICE_NAM):
/// a typo, refused rather than ignored. Others without `__` belong to the process or to
/// other programs and are left alone.
fn misspelt(name: &str) -> Option<ConfigError> {
    let rest = name.get(PREFIX.len()..)?;
    if !name.get(..PREFIX.len())?.eq_ignore_ascii_case(PREFIX) || is_config(rest) {
        return None;
    }
    let near = crate::layer::nearest(&rest.to_ascii_uppercase(), &TOP_LEVEL)?;
    Some(ConfigError::Invalid {
        source_name: variable(name),
        key: rest.to_ascii_lowercase(),
        message: format!(
            "no setting has this name: did you mean PIPETRACE_{near}? (a key inside a section \
             is PIPETRACE_SECTION__KEY, as in PIPETRACE_EXPORT__BATCH_SPANS)"
        ),
    })
}

/// The key path figment's Env makes of a variable's name, None for a name it leaves out.
/// Env does not say which variable made a key; this is what names them in errors and
/// finds collisions, and a test holds it to Env's keys. As in Env, the prefix may be in
/// any case and a `.` in a name nests too.
fn key_of(name: &str) -> Option<Vec<String>> {
    let name = name.trim();
    let rest = name.get(PREFIX.len()..)?;
    if !name.get(..PREFIX.len())?.eq_ignore_ascii_case(PREFIX) || !is_config(rest) {
        return None;
    }
    let key = rest.replace("__", ".").trim().to_ascii_lowercase();
    Some(key.split('.').map(String::from).collect())
}

/// A config variable's key path and its name.
type Named = (Vec<String>, String);

/// PIPETRACE_* as figment's Env reads them from the process environment, each key named
/// in errors by the variable that set it (Env's own metadata says `EXPORT.BATCH_SPANS`).
pub struct PipetraceEnv {
    env: Env,
    origins: Arc<Vec<Origin>>,
}

impl Provider for PipetraceEnv {
    fn metadata(&self) -> Metadata {
        let origins = Arc::clone(&self.origins);
        (self.env.metadata())
            .source(Source::Custom("environment".into()))
            .interpolater(move |_: &Profile, keys: &[&str]| {
                origin_of(&origins, keys).unwrap_or_else(|| "environment".into())
            })
    }

    fn data(&self) -> Result<figment::value::Map<Profile, figment::value::Dict>, figment::Error> {
        self.env.data()
    }
}

/// PIPETRACE_* from the process environment, for figment's Env to read. Refused first, by
/// the variables' names: one that sets a value where another makes a section
/// (PIPETRACE_A__B=x beside PIPETRACE_A__B__C=y), two spellings of one key, and an empty
/// key name; Env would silently keep whichever comes last, or skip the variable.
pub(crate) fn pipetrace() -> Result<PipetraceEnv, ConfigError> {
    let names = std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned());
    let names: Vec<String> = names.collect();
    if let Some(e) = names.iter().find_map(|n| misspelt(n)) {
        return Err(e);
    }
    let names = names.into_iter();
    let mut settings: Vec<Named> = names.filter_map(|n| Some((key_of(&n)?, n))).collect();
    if let Some((key, name)) = settings
        .iter()
        .find(|(k, _)| k.iter().any(String::is_empty))
    {
        return Err(ConfigError::Invalid {
            source_name: variable(name),
            key: key.join("."),
            message: "a key name in it is empty: `__` goes between two names, as in \
                      PIPETRACE_EXPORT__BATCH_SPANS"
                .into(),
        });
    }
    // Sorted, a key sits right before the keys below it.
    settings.sort();
    // A map given whole may have names added one at a time: they merge.
    let merges = |key: &[String], sub: &[String]| {
        sub.len() > key.len() && MAPS.contains(&key.join(".").as_str())
    };
    let clash = |w: &&[Named]| w[1].0.starts_with(&w[0].0) && !merges(&w[0].0, &w[1].0);
    if let Some(pair) = settings.windows(2).find(clash) {
        return Err(collision(&pair[0], &pair[1]));
    }
    let origins = (settings.into_iter())
        .map(|(key, name)| (key, variable(&name)))
        .collect();
    Ok(PipetraceEnv {
        env: figments_env(),
        origins: Arc::new(origins),
    })
}

/// Two variables for one key, or a value and a key below it.
fn collision((key, a): &Named, (sub, b): &Named) -> ConfigError {
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
mod tests;
