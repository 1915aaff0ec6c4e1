//! `pipetrace config show`: every setting in effect, each with what set it (the defaults,
//! the file, an environment variable, a flag).
use std::path::Path;

use figment::{Figment, value::Value};
use serde::Serialize;

use crate::{ConfigError, Flags, layer::describe};

/// One setting in effect.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting {
    /// Dotted, as the docs name it: `export.otlp.endpoint`.
    pub key: String,
    pub value: serde_json::Value,
    /// `defaults`, the file's path, `environment variable X` or `flag --x`.
    pub from: String,
}

/// The settings as `load` would take them (checked the same way), leaf by leaf.
pub fn explain(file: Option<&Path>, flags: &Flags) -> Result<Vec<Setting>, ConfigError> {
    crate::load(file, flags)?;
    let fig = crate::load::layered(file, flags)?;
    let root = fig.find_value("").map_err(|e| ConfigError::Malformed {
        source_name: "config".into(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    leaves(&fig, &root, &mut Vec::new(), &mut out);
    Ok(out)
}

/// Sections are walked; anything else (a list too) is one setting. An empty section is one.
fn leaves(fig: &Figment, v: &Value, path: &mut Vec<String>, out: &mut Vec<Setting>) {
    if let Value::Dict(_, d) = v
        && !d.is_empty()
    {
        for (k, child) in d {
            path.push(k.clone());
            leaves(fig, child, path, out);
            path.pop();
        }
        return;
    }
    let from = (fig.get_metadata(v.tag()))
        .map_or_else(|| "defaults".into(), |md| describe(md, fig.profile(), path));
    let value = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
    let secret = path.iter().any(|k| k == "headers");
    out.push(Setting {
        key: path.join("."),
        value: if secret { redacted(&value) } else { value },
        from,
    });
}

/// A header may carry a token: said to be set, never shown.
fn redacted(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) if m.is_empty() => v.clone(),
        serde_json::Value::Null => v.clone(),
        _ => "(set, not shown)".into(),
    }
}

/// The settings as aligned lines: `key: value   # from`.
pub fn text(settings: &[Setting]) -> String {
    let shown: Vec<(String, &str)> = (settings.iter())
        .map(|s| (format!("{}: {}", s.key, s.value), s.from.as_str()))
        .collect();
    let width = shown
        .iter()
        .map(|(l, _)| l.len())
        .max()
        .unwrap_or(0)
        .min(72);
    (shown.iter())
        .map(|(line, from)| format!("{line:<width$}  # {from}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{file, with_env};

    fn find<'a>(all: &'a [Setting], key: &str) -> &'a Setting {
        (all.iter().find(|s| s.key == key)).unwrap_or_else(|| panic!("no {key} in {all:?}"))
    }

    #[test]
    fn each_value_names_the_layer_that_set_it() {
        let f = file("service_name: from-file\nexport:\n  otlp:\n    compression: none\n");
        let vars = [
            ("PIPETRACE_EXPORT__OTLP__COMPRESSION", "zstd"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20s3cret",
            ),
        ];
        let flags = Flags {
            endpoint: Some("http://flag:4317".into()),
            ..Default::default()
        };
        let all = with_env(&vars, || explain(Some(f.path()), &flags)).unwrap();
        let path = f.path().display().to_string();
        assert_eq!(find(&all, "service_name").from, path);
        assert_eq!(find(&all, "service_name").value, "from-file");
        let compression = find(&all, "export.otlp.compression");
        assert_eq!(compression.value, "zstd");
        assert!(
            compression
                .from
                .contains("PIPETRACE_EXPORT__OTLP__COMPRESSION"),
            "{compression:?}"
        );
        let endpoint = find(&all, "export.otlp.endpoint");
        let got = (endpoint.value.as_str(), endpoint.from.as_str());
        assert_eq!(got, (Some("http://flag:4317"), "flag --endpoint"));
        assert_eq!(find(&all, "probes.ring_buffer_bytes").from, "defaults");
        let shown = text(&all);
        assert!(
            !shown.contains("s3cret"),
            "a header's value is shown:\n{shown}"
        );
        assert!(shown.contains("(set, not shown)"), "{shown}");
    }

    #[test]
    fn a_bad_setting_is_refused_as_load_refuses_it() {
        let f = file("export:\n  otlp:\n    compresion: none\n");
        let e = with_env(&[], || explain(Some(f.path()), &Flags::default()));
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains("compresion") && e.contains("did you mean"),
            "{e}"
        );
    }
}
