//! The environment's layer, held to what it says: maps given whole or a name at a time,
//! and what figment makes of PIPETRACE_* variables.
use super::*;

#[test]
fn a_map_is_given_whole_as_otel_gives_it_or_a_name_at_a_time() {
    use crate::{Flags, testing::load_with};
    let vars = [
        (
            "PIPETRACE_RESOURCE_ATTRIBUTES",
            "team=genomics,site=north%20wing",
        ),
        ("PIPETRACE_RESOURCE_ATTRIBUTES__COST", "lab-7"),
        ("PIPETRACE_EXPORT__OTLP__HEADERS", "api-key=a%3Db"),
    ];
    let cfg = load_with(None, &vars, &Flags::default()).unwrap();
    let r = &cfg.resource_attributes;
    assert_eq!(r.get("team").map(String::as_str), Some("genomics"));
    assert_eq!(r.get("site").map(String::as_str), Some("north wing"));
    assert_eq!(r.get("cost").map(String::as_str), Some("lab-7"));
    let h = &cfg.export.otlp.headers;
    assert_eq!(h.get("api-key").map(String::as_str), Some("a=b"));
}

#[test]
fn a_variable_a_letter_from_a_top_level_key_is_a_typo() {
    use crate::{Flags, testing::load_with};
    let e = load_with(None, &[("PIPETRACE_SERVICE_NAM", "x")], &Flags::default());
    let err = e.unwrap_err().to_string();
    assert!(
        err.starts_with("environment variable PIPETRACE_SERVICE_NAM:"),
        "{err}"
    );
    assert!(
        err.contains("did you mean PIPETRACE_SERVICE_NAME?"),
        "{err}"
    );
    // The process's own and other programs' variables are not.
    let others = [("PIPETRACE_LOG", "debug"), ("PIPETRACE_KEEP_PERCENT", "10")];
    assert!(load_with(None, &others, &Flags::default()).is_ok());
}

#[test]
fn a_name_with_a_wide_character_where_the_prefix_ends_is_left_alone() {
    use crate::{Flags, testing::load_with};
    // 'é' takes bytes 9 and 10, across PIPETRACE_'s end: the name is not ours, and reading
    // it is no panic (the config fuzzer found one). So with blanks before the prefix.
    let vars = [
        ("PIPETRACE\u{e9}SERVICE_NAME", "x"),
        ("PIPETRAC\u{e9}", "y"),
        ("        \u{2003}PIPETRACE_SERVICE_NAME", "z"),
    ];
    assert_eq!(maps(&pairs(&vars)).value(), serde_json::json!({}));
    assert!(load_with(None, &vars, &Flags::default()).is_ok());
}

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
fn otel_limit_variables_map_to_their_keys() {
    let v = vars(&[
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "2048"),
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", " 16 "),
        ("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", "many"),
        ("OTEL_UNKNOWN_LIMIT", "1"),
    ]);
    let l = &v["export"]["limits"];
    assert_eq!(l["attribute_value_length"], 2048);
    assert_eq!(l["span_attribute_count"], 16);
    assert_eq!(
        l["link_attribute_count"], "many",
        "refused by the model, named"
    );
    assert_eq!(l.as_object().unwrap().len(), 3);
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

/// PIPETRACE_* set in figment's test jail and read by figment's Env.
mod pipetrace_vars {
    use figment::Figment;

    use crate::env::*;
    use crate::testing::with_env;

    /// What figment makes of PIPETRACE_* in an environment of exactly `vars`.
    fn read(vars: &[(&str, &str)]) -> Result<Value, ConfigError> {
        with_env(vars, || {
            let fig = Figment::from(pipetrace()?);
            Ok(fig.extract().expect("figment's Env reads the environment"))
        })
    }

    #[test]
    fn pipetrace_variables_nest_and_type() {
        let v = read(&[
            ("PIPETRACE_EXPORT__BATCH_SPANS", "64"),
            ("PIPETRACE_METRICS__ENABLED", "true"),
            ("PIPETRACE_EXPORT__BATCH_TIMEOUT", "5s"),
            ("PIPETRACE_HOST__IDLE_CPU_BELOW", "0.5"),
            ("PIPETRACE_EXPORT__OTLP__HEADERS__X-SCOPE-ORGID", "Lab"),
            ("PIPETRACE_SERVICE_NAME", "lab"),
            ("PIPETRACE_CPU_POLICY", "normal"),
            ("PIPETRACE_LOG", "debug"),
            ("PIPETRACE_BIN", "/usr/bin/pipetrace"),
            ("PIPETRACE_CONFIG", "/etc/pipetrace.yaml"),
            ("OTEL_SERVICE_NAME", "otel"),
        ])
        .unwrap();
        assert_eq!(v["export"]["batch_spans"], 64);
        assert_eq!(v["metrics"]["enabled"], true);
        assert_eq!(v["export"]["batch_timeout"], "5s");
        assert_eq!(v["host"]["idle_cpu_below"], 0.5);
        assert_eq!(v["export"]["otlp"]["headers"]["x-scope-orgid"], "Lab");
        assert_eq!(v["service_name"], "lab");
        assert_eq!(v["cpu_policy"], "normal");
        for process_only in ["log", "bin", "config"] {
            assert!(v.get(process_only).is_none(), "{process_only}");
        }
    }

    fn sorted(keys: impl Iterator<Item = String>) -> Vec<String> {
        let mut keys: Vec<String> = keys.collect();
        keys.sort();
        keys
    }

    /// Env says no variable's name; the check's names must be of the keys Env makes.
    #[test]
    fn variables_are_named_by_the_keys_figments_env_makes() {
        let vars = [
            ("PIPETRACE_EXPORT__BATCH_SPANS", "64"),
            ("pipetrace_metrics__enabled", "true"),
            ("Pipetrace_Service_Name", "lab"),
            ("PIPETRACE_COST__PRICES__M5.LARGE__CPU_HOUR", "0.2"),
            ("PIPETRACE_LOG", "debug"),
            ("PIPETRACE_", "x"),
            ("OTEL_SERVICE_NAME", "otel"),
        ];
        let (ours, figments) = with_env(&vars, || {
            let ours = (std::env::vars_os())
                .filter_map(|(name, _)| key_of(&name.to_string_lossy()))
                .map(|key| key.join("."));
            let env = figments_env();
            let figments = env.iter().map(|(key, _)| key.to_string());
            (sorted(ours), sorted(figments))
        });
        assert_eq!(ours, figments);
        assert_eq!(ours.len(), 4, "{ours:?}");
    }

    #[test]
    fn a_key_is_named_by_the_variable_that_set_it_as_it_is_spelt() {
        let name = "pipetrace_export__batch_spans";
        let md = with_env(&[(name, "64")], || pipetrace().unwrap().metadata());
        for key in [&["export", "batch_spans"][..], &["export"]] {
            let named = md.interpolate(&Profile::Global, key);
            assert_eq!(named, format!("environment variable {name}"));
        }
    }

    #[test]
    fn an_empty_key_name_between_separators_names_the_variable() {
        for name in ["PIPETRACE_EXPORT____BATCH_SPANS", "PIPETRACE_EXPORT__"] {
            let err = read(&[(name, "1")]).unwrap_err().to_string();
            let head = format!("environment variable {name}:");
            assert!(err.starts_with(&head), "{err}");
            assert!(err.contains("PIPETRACE_EXPORT__BATCH_SPANS"), "{err}");
        }
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
            let err = read(&vars).expect_err("a conflict").to_string();
            let head = format!(
                "environment variables PIPETRACE_A__B and PIPETRACE_A__B__{below}: key `a.b`: "
            );
            assert!(err.starts_with(&head), "{err}");
            assert!(err.contains("not both: unset one of them"), "{err}");
            // Why the check: figment's Env alone keeps one of the two, silently.
            let alone = with_env(&vars, || {
                Figment::from(figments_env()).extract::<Value>().is_ok()
            });
            assert!(alone);
        }
        // Names that share a start but not a section are no conflict.
        let ok = [("PIPETRACE_A__B", "x"), ("PIPETRACE_A__BB__C", "y")];
        assert!(read(&ok).is_ok());
    }

    #[test]
    fn two_spellings_of_one_key_are_an_error() {
        let name = "PIPETRACE_EXPORT__OTLP__ENDPOINT";
        // Env takes the prefix in any case and nests at a `.` as at a `__`.
        for other in [
            "PIPETRACE_export__otlp__endpoint",
            "PIPETRACE_EXPORT__OTLP.ENDPOINT",
        ] {
            let vars = [(name, "http://a:4317"), (other, "http://b:4317")];
            let err = read(&vars).unwrap_err().to_string();
            assert!(err.contains("both set it"), "{err}");
            assert!(err.contains(name) && err.contains(other), "{err}");
        }
    }
}
