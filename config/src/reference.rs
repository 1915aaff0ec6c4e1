//! docs/configuration.md, made from the model: every key with its default (from
//! `Config::default()`), its environment variable and what it means (the table in
//! `docs.rs`, which `pipetrace config print-default` prints too). `make docs` writes it
//! (`cargo run -p pipetrace-config --bin config-docs`); a test fails when the page is stale.
use std::fmt::Write as _;

use serde_yaml::Value;

/// Where the page lives, from the workspace root.
pub const PAGE: &str = "docs/configuration.md";

const HEAD: &str = r#"# Configuration reference

Every setting pipetrace reads, with its default, its environment variable and what it means:
for whoever writes a `pipetrace.yaml` or sets the agent's environment. This page is generated
from the config model (`config/src/model.rs`, meanings in `config/src/docs.rs`) by `make docs`;
a test fails when it is stale, so edit those files, not this page.

## How settings are layered

Later layers win: the defaults below < the YAML file (`--config FILE` or `PIPETRACE_CONFIG`)
< the environment (OpenTelemetry's `OTEL_*` variables, then `PIPETRACE_*`) < the command-line
flags (`--endpoint`, `--protocol`, `-o FILE`). Any key can be set from the environment as
`PIPETRACE_` followed by its path in capitals, with `__` between levels
(`PIPETRACE_EXPORT__BATCH_SPANS=1024`); a variable that names no key (one with `__`, or one a
letter or two away from a top-level key, as `PIPETRACE_SERVICE_NAM`) is an error that names
the key it resembles. A map (`resource_attributes`, `export.otlp.headers`) is given whole as
OpenTelemetry's variables give it, `PIPETRACE_RESOURCE_ATTRIBUTES=team=genomics,site=north`
(values percent-encoded), or one name at a time,
`PIPETRACE_RESOURCE_ATTRIBUTES__TEAM=genomics`. A list is written in brackets,
`PIPETRACE_ATTRIBUTION__ENGINES='[snakemake,nextflow]'`. Durations are written as `5s`, `10m`, `1h`.

- `pipetrace config show [--json]`: every setting in effect (file, environment and flags merged)
  with what set it: `defaults`, the file's path, `environment variable X` or `flag --x`; a
  header's value is never shown.
- `pipetrace config print-default > pipetrace.yaml`: every setting with its default, commented.
- `pipetrace config validate pipetrace.yaml`: checks a file; exits 2 naming the key at fault.

## OpenTelemetry's variables

The OpenTelemetry SDK's variables are honoured: `OTEL_EXPORTER_OTLP_ENDPOINT`, `_PROTOCOL` (`grpc`, `http/protobuf`),
`_HEADERS`, `_TIMEOUT` (ms), `_COMPRESSION` (`gzip`, `zstd`) and their `_TRACES_` and
`_METRICS_` forms (a signal's endpoint is used as is; a general one gets `/v1/traces` or
`/v1/metrics` for HTTP), `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` (`cumulative`,
`delta`), `OTEL_METRIC_EXPORT_INTERVAL` (ms), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
and the span and attribute limits `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`,
`OTEL_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`,
`OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_EVENT_COUNT_LIMIT`, `OTEL_SPAN_LINK_COUNT_LIMIT`,
`OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT`, `OTEL_LINK_ATTRIBUTE_COUNT_LIMIT` (`export.limits.*`; the
`SPAN_` ones win; defaults: no value length limit, 128 of each count). A value cut to its
length (in bytes, at a UTF-8 character boundary) is listed in `pipetrace.attributes.truncated`;
what passes a count is counted in the span's dropped counts. Grafana Tempo cuts attributes
over its `max_attribute_bytes` (2048) unmarked: `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=2048` cuts
them here, marked. Any key can be set as `PIPETRACE_<PATH>` with `__` between levels
(`PIPETRACE_EXPORT__BATCH_SPANS=512`). An unknown key or a bad value stops pipetrace with exit
code 2 (125 under `pipetrace run`, apart from the command's own codes) and one line naming the
file and the key, before anything starts.

## An example

```yaml
export:
  otlp:
    endpoint: http://tempo:4317
    protocol: grpc
    headers: { x-scope-orgid: lab }
attribution:
  task_rules:
    - match: { executable: step.py, argv: "--sample" }
      name: "step {argv3}"
redaction:
  patterns: ["ACC-[0-9]+"]
metrics:
  interval: 5s
  temporality: delta      # cumulative (default) or delta (Datadog)
  max_series: 1000        # (pipeline, task, tool) sets; the rest share an overflow series
probes:
  usage_wait: 2s          # how long an exited process waits for its reap-time figures (then: those taken at exit)
cpu_policy: batch         # pipetrace's own threads never preempt the pipeline when they wake; normal: as started
diagnosis:
  stall_after: 5m         # no CPU, no I/O, nothing starting or ending: a stall
  state_dir: /var/lib/pipetrace   # task history for slower-than-usual
cost:
  currency: USD
  host_type: c5.2xlarge   # unset: the detected host.type (EC2), else the `default` row
  prices:
    c5.2xlarge: { cpu_hour: 0.0425, gib_hour: 0.0053 }
```
"#;

/// The page for `defaults` (`Config::default()` as YAML).
pub(crate) fn markdown(defaults: &Value) -> String {
    let mut out = String::from(HEAD);
    let Value::Mapping(top) = defaults else {
        return out;
    };
    let (sections, plain): (Vec<_>, Vec<_>) = top
        .iter()
        .partition(|(_, v)| matches!(v, Value::Mapping(m) if !m.is_empty()));
    out.push_str("\n## Sections\n\n");
    out.push_str("- [Top-level keys](#top-level-keys)\n");
    for (k, _) in &sections {
        let k = k.as_str().unwrap_or_default();
        let _ = writeln!(out, "- [`{k}`](#{k}): {}", first_sentence(&meaning(k)));
    }
    out.push_str("\n## Top-level keys\n\n");
    table_head(&mut out);
    for (k, v) in plain {
        row(k.as_str().unwrap_or_default(), v, &mut out);
    }
    for (k, v) in sections {
        let k = k.as_str().unwrap_or_default();
        let _ = write!(out, "\n## `{k}`\n\n{}\n\n", meaning(k));
        table_head(&mut out);
        if let Value::Mapping(m) = v {
            rows(m, k, &mut out);
        }
    }
    out
}

fn table_head(out: &mut String) {
    out.push_str("| Key | Default | Environment | Meaning |\n|---|---|---|---|\n");
}

/// Rows of a section's keys in the model's order; a nested section's row comes before its
/// own keys.
fn rows(m: &serde_yaml::Mapping, path: &str, out: &mut String) {
    for (k, v) in m {
        let full = format!("{path}.{}", k.as_str().unwrap_or_default());
        row(&full, v, out);
        if let Value::Mapping(inner) = v
            && !inner.is_empty()
        {
            rows(inner, &full, out);
        }
    }
}

fn row(path: &str, v: &Value, out: &mut String) {
    let default = match v {
        Value::Mapping(m) if !m.is_empty() => "(section)".to_string(),
        other => format!("`{}`", cell(&inline(other))),
    };
    let env = format!("PIPETRACE_{}", path.replace('.', "__").to_uppercase());
    let _ = writeln!(
        out,
        "| `{path}` | {default} | `{env}` | {} |",
        cell(&meaning(path))
    );
}

/// A default on one line: scalars as YAML writes them, lists and maps in flow form.
fn inline(v: &Value) -> String {
    match v {
        Value::Sequence(_) | Value::Mapping(_) => serde_json::to_string(v).unwrap_or_default(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim_end()
            .to_string(),
    }
}

/// Text safe inside a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn meaning(path: &str) -> String {
    crate::docs::comment(path).unwrap_or_default()
}

fn first_sentence(s: &str) -> &str {
    match s.find(". ") {
        Some(i) => &s[..=i],
        None => s,
    }
}

/// The page as the model makes it now.
pub fn current() -> String {
    let value =
        serde_yaml::to_value(crate::Config::default()).expect("the default config serialises");
    markdown(&value)
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_configuration_md_is_generated_from_the_model() {
        let have = include_str!("../../docs/configuration.md");
        let want = super::current();
        assert!(
            have == want,
            "docs/configuration.md is stale: run `make docs` \
             (cargo run -p pipetrace-config --bin config-docs)"
        );
    }

    #[test]
    fn every_key_of_the_model_has_its_row() {
        let page = super::current();
        for (k, _) in crate::docs::KEYS {
            let row = page.contains(&format!("| `{k}` |"));
            let heading = page.contains(&format!("\n## `{k}`\n"));
            assert!(row || heading, "no row or section for `{k}`");
        }
        assert!(
            page.contains("`PIPETRACE_EXPORT__OTLP__ENDPOINT`"),
            "{page}"
        );
    }
}
