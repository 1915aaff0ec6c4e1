//! deploy/ ships what works: each file parses, and the config the Helm chart gives the agent
//! passes `pipetrace config validate`.
use std::path::{Path, PathBuf};

use pipetrace_e2e::{pipetrace, stderr};
use regex::Regex;

fn deploy(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(p)
}

fn yaml(p: &str) -> serde_yaml::Value {
    let text = std::fs::read_to_string(deploy(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{p} is not valid YAML: {e}"))
}

/// The default of a collector setting `${env:NAME:-default}`.
fn env_default(setting: &serde_yaml::Value) -> &str {
    let s = setting.as_str().unwrap_or_default();
    let (_, default) = s.split_once(":-").unwrap_or(("", s));
    default.trim_end_matches('}')
}

/// The compose stack wires the agent to the shipped collector configuration, the collector
/// to Jaeger, and Prometheus to the collector's metrics with the shipped rules (the
/// collector's pipeline itself runs in tests/tests/e2e/collector.rs).
#[test]
fn compose_stack_wires_pipetrace_through_the_collector_to_jaeger() {
    let compose = yaml("compose/docker-compose.yml");
    let services = &compose["services"];
    let env = &services["pipetrace"]["environment"];
    assert_eq!(
        env["OTEL_EXPORTER_OTLP_ENDPOINT"].as_str(),
        Some("http://collector:4317")
    );
    let collector = &services["collector"];
    let mount = collector["volumes"][0].as_str().unwrap();
    let (file, _) = mount.split_once(':').unwrap();
    assert_eq!(file, "../collector/pipetrace.yaml");
    let config = yaml("collector/pipetrace.yaml");
    let grpc = &config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"];
    assert_eq!(
        env_default(grpc),
        "0.0.0.0:4317",
        "it listens where pipetrace sends"
    );
    let backend = collector["environment"]["PIPETRACE_BACKEND"].as_str();
    assert_eq!(backend, Some("jaeger:4317"));
    assert!(
        services["jaeger"]["image"]
            .as_str()
            .unwrap()
            .starts_with("jaegertracing/jaeger:2")
    );
    let prometheus = yaml("compose/prometheus.yml");
    let target = prometheus["scrape_configs"][0]["static_configs"][0]["targets"][0].as_str();
    let port = env_default(&config["exporters"]["prometheus"]["endpoint"]);
    assert_eq!(
        target.map(|t| t.split_once(':').unwrap().1),
        port.split_once(':').map(|p| p.1)
    );
    for rules in prometheus["rule_files"].as_sequence().unwrap() {
        let name = rules.as_str().unwrap().rsplit('/').next().unwrap();
        yaml(&format!("alerts/{name}"));
    }
    for e in std::fs::read_dir(deploy("dashboards")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        // Dashboards query names from the registry, which stay stable.
        let queries = v.to_string();
        assert!(
            queries.contains("cicd.pipeline.task.name"),
            "{}",
            p.display()
        );
    }
}

#[test]
fn helm_values_carry_a_valid_agent_config() {
    let values = yaml("helm/pipetrace/values.yaml");
    yaml("helm/pipetrace/Chart.yaml");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("config.yaml");
    std::fs::write(&f, serde_yaml::to_string(&values["config"]).unwrap()).unwrap();
    let o = pipetrace()
        .args(["config", "validate", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the chart's config is refused: {}",
        stderr(&o)
    );
    let ds = std::fs::read_to_string(deploy("helm/pipetrace/templates/daemonset.yaml")).unwrap();
    for needle in [
        "hostPID: true",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "/sys/kernel/btf",
        "agent",
        "mountPath: /var/log/pods, readOnly: true",
        "mountPath: /var/lib/kubelet/pods, readOnly: true",
    ] {
        assert!(ds.contains(needle), "daemonset lacks {needle}");
    }
}

#[test]
fn systemd_unit_runs_the_agent_with_a_validated_config() {
    let unit = std::fs::read_to_string(deploy("systemd/pipetrace.service")).unwrap();
    assert!(unit.contains("ExecStartPre=/usr/bin/pipetrace config validate"));
    assert!(unit.contains("agent"));
    for section in ["[Unit]", "[Service]", "[Install]"] {
        assert!(unit.contains(section), "{section}");
    }
}

/// Metric names an alert query uses, mapped back to OTel names: Prometheus' underscores and
/// suffixes are undone; Datadog keeps the dots.
fn metric_names_in(query: &str) -> Vec<String> {
    let names = pipetrace_semconv::metric::ALL;
    names
        .iter()
        .filter(|m| {
            let prom = m.replace('.', "_");
            query.contains(*m) || query.contains(&prom)
        })
        .map(|m| m.to_string())
        .collect()
}

/// The name Prometheus gives an OTLP metric (OTel's Prometheus compatibility rules, as the
/// Collector's exporters and Prometheus' OTLP receiver apply them): dots to underscores, the
/// unit as a suffix (annotations like `{kill}` dropped), `_total` on monotonic counters.
fn prometheus_name(g: &pipetrace_semconv::registry::Group) -> String {
    let mut name = g.metric_name.as_deref().unwrap().replace('.', "_");
    match g.unit.as_deref() {
        Some("By") => name += "_bytes",
        Some("s") => name += "_seconds",
        _ => {}
    }
    if g.instrument.as_deref() == Some("counter") {
        name += "_total";
    }
    name
}

/// Every metric a PromQL expression names is spelt as Prometheus stores a registered metric:
/// a wrong suffix would make the alert silently never fire.
#[test]
fn prometheus_rules_name_metrics_as_prometheus_stores_them() {
    let registry = pipetrace_semconv::registry::Registry::embedded();
    let known: Vec<String> = registry
        .groups
        .iter()
        .filter(|g| g.metric_name.is_some())
        .map(prometheus_name)
        .collect();
    assert!(known.contains(&"pipetrace_process_oom_kills_total".to_string()));
    assert!(known.contains(&"process_memory_usage_bytes".to_string()));
    let rules = yaml("alerts/prometheus-rules.yaml");
    let mut checked = 0;
    // Label matchers (`{pipetrace_finding_kind="under_ask"}`) name labels, not metrics.
    let matchers = Regex::new(r"\{[^}]*\}").unwrap();
    for r in rules["groups"][0]["rules"].as_sequence().expect("rules") {
        let expr = r["expr"].as_str().expect("expr");
        let metrics_only = matchers.replace_all(expr, " ");
        let words = metrics_only.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        for w in words.filter(|w| w.starts_with("pipetrace_") || w.starts_with("process_")) {
            assert!(
                known.iter().any(|k| k == w),
                "{w} in `{expr}` is not how Prometheus names any registered metric; one of {known:?}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "only {checked} metric names found in the rules"
    );
}

/// The labels a metric of the registry carries (refs of its metric groups).
fn metric_labels() -> Vec<String> {
    let registry = pipetrace_semconv::registry::Registry::embedded();
    registry
        .groups
        .iter()
        .filter(|g| g.metric_name.is_some())
        .flat_map(|g| g.attributes.iter().filter_map(|a| a.r#ref.clone()))
        .collect()
}

/// The names inside each `by (...)` / `by {...}` of a query.
fn grouped_by(query: &str, open: char, close: char) -> Vec<String> {
    query
        .split("by ")
        .skip(1)
        .filter_map(|rest| rest.strip_prefix(open)?.split(close).next())
        .flat_map(|inner| inner.split(',').map(|l| l.trim().to_string()))
        .collect()
}

/// Alerts group by labels the metrics really carry: a misspelt one would group everything
/// into one series and lose the task's name in the alert.
#[test]
fn alert_examples_group_by_labels_the_metrics_carry() {
    let labels = metric_labels();
    let rules = yaml("alerts/prometheus-rules.yaml");
    let mut checked = 0;
    for r in rules["groups"][0]["rules"].as_sequence().expect("rules") {
        let expr = r["expr"].as_str().expect("expr");
        for l in grouped_by(expr, '(', ')') {
            assert!(
                labels.iter().any(|k| k.replace('.', "_") == l),
                "label {l} in `{expr}` is on no metric"
            );
            checked += 1;
        }
    }
    // Datadog's OTLP intake makes the resource's host.name its own `host` tag.
    let registry = pipetrace_semconv::registry::Registry::embedded();
    assert!(registry.attribute_ids().any(|a| a == "host.name"));
    let text = std::fs::read_to_string(deploy("alerts/datadog-monitors.json")).unwrap();
    let monitors: serde_json::Value = serde_json::from_str(&text).unwrap();
    for m in monitors.as_array().expect("monitors") {
        let q = m["query"].as_str().expect("query");
        for l in grouped_by(q, '{', '}') {
            let known = labels.contains(&l) || l == "host";
            assert!(known, "tag {l} in `{q}` is on no metric");
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} labels found");
}

#[test]
fn alert_examples_parse_and_use_registered_metrics() {
    let rules = yaml("alerts/prometheus-rules.yaml");
    let rules = rules["groups"][0]["rules"].as_sequence().expect("rules");
    assert!(rules.len() >= 4);
    for r in rules {
        let expr = r["expr"].as_str().expect("expr");
        assert!(
            !metric_names_in(expr).is_empty(),
            "{expr} uses no pipetrace metric"
        );
    }
    let text = std::fs::read_to_string(deploy("alerts/datadog-monitors.json")).unwrap();
    let monitors: serde_json::Value = serde_json::from_str(&text).unwrap();
    for m in monitors.as_array().expect("monitors") {
        let q = m["query"].as_str().expect("query");
        assert!(
            !metric_names_in(q).is_empty(),
            "{q} uses no pipetrace metric"
        );
    }
}

#[test]
fn sidecar_examples_carry_a_valid_scoped_config() {
    let text = std::fs::read_to_string(deploy("sidecar/pod.yaml")).unwrap();
    let docs: Vec<serde_yaml::Value> = text
        .split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let config = docs
        .iter()
        .find_map(|d| d["data"]["config.yaml"].as_str())
        .expect("the sidecar's ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("config.yaml");
    std::fs::write(&f, config).unwrap();
    let o = pipetrace()
        .args(["config", "validate", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "the sidecar's config: {}", stderr(&o));
    assert!(config.contains("scope_cgroup"), "{config}");
    let pod = docs.iter().find(|d| d["kind"] == "Pod").expect("the pod");
    let containers = pod["spec"]["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 2, "the pipeline and the agent in one pod");
    // The compose sidecar scopes to the cgroup its pipeline is put under.
    let compose = yaml("sidecar/docker-compose.yml");
    let parent = compose["services"]["pipeline"]["cgroup_parent"]
        .as_str()
        .unwrap();
    let scope = &compose["services"]["pipetrace"]["environment"]["PIPETRACE_PROBES__SCOPE_CGROUP"];
    assert_eq!(scope.as_str(), Some(format!("/{parent}").as_str()));
}

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(deploy("dashboards/pipetrace-runs.json")).unwrap();
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every (panel, target) of a dashboard.
fn targets(d: &serde_json::Value) -> Vec<(&serde_json::Value, &serde_json::Value)> {
    let panels = d["panels"].as_array().expect("panels");
    let each = panels.iter().flat_map(|p| {
        let ts = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        ts.iter().map(move |t| (p, t))
    });
    each.collect()
}

/// The names after each `$` (or inside `${...}`) of a query.
fn variables_in(query: &str) -> Vec<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    query
        .split('$')
        .skip(1)
        .map(|rest| {
            rest.trim_start_matches('{')
                .chars()
                .take_while(|c| word(*c))
                .collect()
        })
        .collect()
}

/// The dashboard narrows spans to a container, a pod or a Slurm job: each filter is a
/// template variable applied, in some TraceQL span selector, to the span attribute the agent
/// sets; and no query uses a variable the dashboard does not define.
#[test]
fn dashboard_filters_by_container_pod_and_slurm_job() {
    use pipetrace_semconv::attr;
    let d = dashboard();
    let vars: Vec<&str> = (d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter())
    .filter_map(|v| v["name"].as_str())
    .collect();
    let queries: Vec<&str> = (targets(&d).into_iter())
        .filter_map(|(_, t)| t["query"].as_str().or(t["expr"].as_str()))
        .collect();
    let registry = pipetrace_semconv::registry::Registry::embedded();
    for (var, a) in [
        ("container", attr::CONTAINER_NAME),
        ("pod", attr::K8S_POD_NAME),
        ("slurm_job", attr::SLURM_JOB_ID),
    ] {
        assert!(vars.contains(&var), "no `{var}` variable among {vars:?}");
        assert!(registry.attribute_ids().any(|id| id == a), "{a}");
        let filtered = queries
            .iter()
            .flat_map(|q| q.split('{').skip(1))
            .any(|sel| {
                let sel = sel.split('}').next().unwrap_or_default();
                let on_attr =
                    sel.contains(&format!("span.\"{a}\"")) || sel.contains(&format!("span.{a} "));
                on_attr && sel.contains(&format!("\"${var}\""))
            });
        assert!(
            filtered,
            "no span selector filters {a} by ${var}: {queries:?}"
        );
    }
    for q in &queries {
        for v in variables_in(q) {
            assert!(
                vars.contains(&v.as_str()),
                "`${v}` in `{q}` is not a variable of {vars:?}"
            );
        }
    }
}

/// A panel shows how long nodes have been idle, and one what runs now, each from a
/// Prometheus data source the user chooses, under the name Prometheus stores the registered
/// metric by.
#[test]
fn dashboard_shows_host_idle_time_and_tasks_running_now() {
    let d = dashboard();
    for metric in [
        pipetrace_semconv::metric::HOST_IDLE,
        pipetrace_semconv::metric::TASKS_RUNNING,
    ] {
        panel_from_prometheus(&d, metric);
    }
}

fn panel_from_prometheus(d: &serde_json::Value, metric: &str) {
    let registry = pipetrace_semconv::registry::Registry::embedded();
    let g = (registry.groups.iter())
        .find(|g| g.metric_name.as_deref() == Some(metric))
        .expect("the metric is registered");
    let name = prometheus_name(g);
    let (panel, _) = (targets(d).into_iter())
        .find(|(_, t)| t["expr"].as_str().is_some_and(|e| e.contains(&name)))
        .unwrap_or_else(|| panic!("no panel queries {name}"));
    assert_eq!(panel["datasource"]["type"], "prometheus");
    // A count (`{task}`) is a plain number to Grafana.
    let unit = match g.unit.as_deref() {
        Some(u) if u.starts_with('{') => Some("none"),
        u => u,
    };
    assert_eq!(panel["fieldConfig"]["defaults"]["unit"].as_str(), unit);
    let uid = panel["datasource"]["uid"]
        .as_str()
        .expect("a data source uid");
    let var = variables_in(uid)
        .pop()
        .expect("the data source is a variable");
    let list = d["templating"]["list"].as_array().unwrap();
    let ds = list
        .iter()
        .find(|v| v["name"] == var.as_str())
        .expect("its variable");
    assert_eq!(
        (ds["type"].as_str(), ds["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
}
