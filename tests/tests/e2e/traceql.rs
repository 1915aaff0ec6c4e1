//! The dashboards' TraceQL queries cannot run here (no Tempo in any reachable registry):
//! Grafana's own TraceQL grammar (npm `@grafana/lezer-traceql`, installed in tests/traceql by
//! scripts/setup.sh) parses each, and every attribute a query names is in the registry.
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::Value;

fn here(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

/// Every Tempo target's query of deploy/dashboards.
fn traceql_queries() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(here("../deploy/dashboards")).unwrap() {
        let d: Value = serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap())
            .expect("a dashboard is JSON");
        for p in d["panels"].as_array().into_iter().flatten() {
            if p["datasource"]["type"] != "tempo" {
                continue;
            }
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(t["query"].as_str().expect("a TraceQL target").to_string());
            }
        }
    }
    out
}

/// What the grammar says of each query: error offsets and the attributes named.
fn parse(queries: &[String]) -> Vec<Value> {
    let dir = here("traceql");
    assert!(
        dir.join("node_modules/@grafana/lezer-traceql").exists(),
        "the TraceQL grammar is missing: run scripts/setup.sh (npm ci in tests/traceql)"
    );
    let mut child = Command::new("node")
        .arg("check.mjs")
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node (scripts/setup.sh installs it)");
    let input = serde_json::to_vec(queries).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "check.mjs failed");
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("check.mjs writes JSON")
}

#[test]
fn dashboard_traceql_parses_and_names_registered_attributes() {
    let queries = traceql_queries();
    assert!(
        queries.len() >= 4,
        "the dashboard's Tempo panels: {queries:?}"
    );
    let registry = pipetrace_semconv::registry::Registry::embedded();
    let known: Vec<&str> = registry.attribute_ids().collect();
    let mut named = 0;
    for r in parse(&queries) {
        let q = r["query"].as_str().unwrap();
        assert_eq!(
            r["errors"],
            Value::Array(vec![]),
            "TraceQL syntax error in `{q}`"
        );
        for a in r["attributes"].as_array().unwrap() {
            let name = a["name"].as_str().unwrap();
            assert!(
                known.contains(&name),
                "`{name}` in `{q}` is not in the registry"
            );
            named += 1;
        }
    }
    assert!(named >= queries.len(), "attributes found: {named}");
}

/// The check itself tells a broken query and an unknown attribute.
#[test]
fn the_grammar_check_finds_a_syntax_error_and_names_attributes() {
    let r = parse(&[
        "{ span.cicd.pipeline.name = \"x\" } >> { span.\"k8s.pod.name\" =~ \"p\" ".into(),
        "{ resource.service.name = \"pipetrace\" && duration > 1m }".into(),
    ]);
    assert_ne!(r[0]["errors"], Value::Array(vec![]), "{r:?}");
    let names = |i: usize| -> Vec<String> {
        let a = r[i]["attributes"].as_array().unwrap();
        a.iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(0), ["cicd.pipeline.name", "k8s.pod.name"]);
    assert_eq!(names(1), ["service.name"]);
    assert_eq!(r[1]["errors"], Value::Array(vec![]), "{r:?}");
}
