//! The deployment's alerting, run for real: Debian's Prometheus scrapes real agents
//! (`metrics.prometheus.listen`), evaluates deploy/alerts/prometheus-rules.yaml, and a real
//! Alertmanager delivers to a webhook here. Real Snakemake pipelines provoke each alert (an
//! OOM kill, a failed task, a stalled task; an idle node) and a clean one provokes none.
//! deploy/dashboards' Prometheus queries run against the same Prometheus and return series.
//! `for:` of the stall and idle rules is cut to 0s here (their expressions are the file's);
//! rules this test does not provoke keep theirs, so none can fire on a busy test machine.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    Agent,
    cgroup::MemoryCgroup,
    prometheus::{self, Daemon, Webhook},
    receiver::free_port,
};
use serde_json::Value;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const WAIT: Duration = Duration::from_secs(150);

fn deploy(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(p)
}

/// The shipped rules, with `for:` cut to 0s on the rules named.
fn rules_with_no_wait(dir: &Path, cut: &[&str]) -> PathBuf {
    let text = std::fs::read_to_string(deploy("alerts/prometheus-rules.yaml")).unwrap();
    let mut rules: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    for r in rules["groups"][0]["rules"].as_sequence_mut().unwrap() {
        if cut.contains(&r["alert"].as_str().unwrap_or_default()) {
            r["for"] = "0s".into();
        }
    }
    let path = dir.join("rules.yaml");
    std::fs::write(&path, serde_yaml::to_string(&rules).unwrap()).unwrap();
    path
}

/// An agent serving its metrics on a free port, every second; returns it and host:port.
/// `diagnosis` holds more keys of that section, `extra` more sections.
fn agent(dir: &Path, diagnosis: &str, extra: &str) -> (Agent, String) {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let cfg = dir.join("pipetrace.yaml");
    let yaml = format!(
        "metrics:\n  interval: 1s\n  prometheus:\n    listen: 127.0.0.1:{port}\n\
         diagnosis:\n{diagnosis}export:\n  file: {}\n{extra}",
        dir.join("t.otlp.jsonl").display()
    );
    std::fs::write(&cfg, yaml).unwrap();
    // A state directory of its own: a second agent on purpose (the tests' default is shared).
    let state = dir.join("state");
    let env = [("PIPETRACE_DIAGNOSIS__STATE_DIR", state.to_str().unwrap())];
    (
        Agent::start_with(&["-c", cfg.to_str().unwrap()], &env),
        format!("127.0.0.1:{port}"),
    )
}

/// A Snakemake workflow in its own folder (its name is the run's pipeline name).
fn workflow(root: &Path, name: &str, snakefile: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Snakefile"), snakefile).unwrap();
    dir
}

fn snakemake(dir: PathBuf) -> std::thread::JoinHandle<std::process::Output> {
    std::thread::spawn(move || {
        Command::new("snakemake")
            .args(["--cores", "1"])
            .current_dir(&dir)
            .output()
            .expect("snakemake (scripts/setup.sh installs it)")
    })
}

pub(crate) fn label<'a>(alert: &'a Value, name: &str) -> &'a str {
    alert["labels"][name].as_str().unwrap_or_default()
}

/// Waits until the webhook got an alert `name` whose labels satisfy `is`.
pub(crate) async fn delivered(hook: &Webhook, name: &str, is: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = hook.alerts();
        if let Some(a) = got.iter().find(|a| label(a, "alertname") == name && is(a)) {
            return a.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{name} never reached the webhook; it got {:?}",
            got.iter().map(|a| &a["labels"]).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until a PromQL query returns series; returns them.
pub(crate) async fn returns_series(prom: &Daemon, q: &str) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = prom.query(q, None).await;
        if !r.is_empty() {
            return r;
        }
        assert!(Instant::now() < deadline, "no series for {q}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every Prometheus query of deploy/dashboards, with Grafana's template variables filled in.
fn dashboard_queries(pipeline: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(deploy("dashboards")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let d: Value = serde_json::from_str(&text).unwrap();
        collect_prometheus_targets(&d, &mut out);
    }
    out.iter()
        .map(|q| {
            q.replace("$pipeline", pipeline)
                .replace("${pipeline}", pipeline)
        })
        .collect()
}

fn collect_prometheus_targets(v: &Value, out: &mut Vec<String>) {
    if let Some(panels) = v["panels"].as_array() {
        for p in panels {
            if p["datasource"]["type"] == "prometheus" {
                for t in p["targets"].as_array().into_iter().flatten() {
                    out.push(t["expr"].as_str().expect("a PromQL target").to_string());
                }
            }
            collect_prometheus_targets(p, out);
        }
    }
}

/// The rule Snakemake says failed (its own log: "Error in rule NAME:").
fn failed_rule(o: &std::process::Output) -> String {
    let log = String::from_utf8_lossy(&o.stderr);
    let line = log
        .lines()
        .find_map(|l| l.trim().strip_prefix("Error in rule "));
    let rule = line.unwrap_or_else(|| panic!("Snakemake reported no failed rule:\n{log}"));
    rule.trim_end_matches(':').to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_alert_fires_on_the_pipeline_that_provokes_it_and_none_on_a_clean_one() {
    let root = tempfile::tempdir().unwrap();
    let tag = std::process::id();
    let hook = Webhook::start().await;
    let am = prometheus::alertmanager(&hook.url);
    // Snakemake's runs, named as usual; a task quiet for 3 s is stalled.
    let (runs_agent, runs_target) = agent(&root.path().join("runs"), "  stall_after: 3s\n", "");
    // A node agent whose only runs carry a marker no pipeline here has: its node is idle
    // once it has run nothing for 2 s (whatever else this machine runs: more CPUs than it has).
    let cpus = std::thread::available_parallelism().unwrap().get() + 1;
    let idle = format!(
        "host:\n  idle_after: 2s\n  idle_cpu_below: {cpus}\nattribution:\n  engines: []\n  \
         run_rules:\n    - match: {{ argv: 'pipetrace-never-{tag}' }}\n      name: never\n"
    );
    let (idle_agent, idle_target) = agent(&root.path().join("idle"), "  min_wall: 1s\n", &idle);
    let rules = rules_with_no_wait(root.path(), &["PipelineTaskStalled", "NodeIdle"]);
    let am_addr = am.url.trim_start_matches("http://").to_string();
    let prom = prometheus::prometheus(&[runs_target, idle_target], &rules, &am_addr);

    let name = |what: &str| format!("alerting-{what}-{tag}");
    let cg = MemoryCgroup::new(64 * 1048576);
    let clean = workflow(
        root.path(),
        &name("clean"),
        "rule all:\n    input: expand('out/{s}.txt', s=['a', 'b'])\n\
         rule shout:\n    output: 'out/{s}.txt'\n    shell: 'echo {wildcards.s} | tr a-z A-Z > {output}'\n",
    );
    let failing = workflow(
        root.path(),
        &name("failing"),
        "rule all:\n    input: 'called.txt'\nrule call:\n    output: 'called.txt'\n    shell: 'echo calling; exit 3'\n",
    );
    let oom = workflow(
        root.path(),
        &name("oom"),
        &format!(
            "rule all:\n    input: 'big.bin'\nrule grow:\n    output: 'big.bin'\n    \
             shell: 'echo $$ > {}/cgroup.procs && {WORKLOAD} alloc 256 && touch {{output}}'\n",
            cg.0.display()
        ),
    );
    let stalled = workflow(
        root.path(),
        &name("stalled"),
        "rule all:\n    input: 'fetched.txt'\nrule fetch:\n    output: 'fetched.txt'\n    shell: 'sleep 25 && touch {output}'\n",
    );
    let runs: Vec<_> = [&clean, &failing, &oom, &stalled]
        .into_iter()
        .map(|d| snakemake(d.clone()))
        .collect();

    // The stall fires while the task still sleeps; the dashboard's queries answer then.
    let stall = delivered(&hook, "PipelineTaskStalled", |a| {
        label(a, "cicd_pipeline_name") == name("stalled")
    })
    .await;
    assert_eq!(label(&stall, "cicd_pipeline_task_name"), "fetch", "{stall}");
    for q in dashboard_queries(&name("stalled")) {
        let series = returns_series(&prom, &q).await;
        assert!(!series.is_empty(), "{q}");
    }
    let idle = delivered(&hook, "NodeIdle", |a| !label(a, "host_name").is_empty()).await;
    assert_eq!(label(&idle, "severity"), "warn", "{idle}");

    let outs: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(
        outs[0].status.success(),
        "{}",
        String::from_utf8_lossy(&outs[0].stderr)
    );
    assert!(!outs[1].status.success() && !outs[2].status.success());
    assert!(
        outs[3].status.success(),
        "{}",
        String::from_utf8_lossy(&outs[3].stderr)
    );
    // Snakemake's own records name the tasks the alerts name.
    let failed = delivered(&hook, "PipelineTaskFailed", |a| {
        label(a, "cicd_pipeline_name") == name("failing")
    })
    .await;
    assert_eq!(
        label(&failed, "cicd_pipeline_task_name"),
        failed_rule(&outs[1])
    );
    let killed = delivered(&hook, "PipelineToolOOMKilled", |a| {
        label(a, "cicd_pipeline_name") == name("oom")
    })
    .await;
    assert_eq!(
        label(&killed, "cicd_pipeline_task_name"),
        failed_rule(&outs[2])
    );
    assert_eq!(
        label(&killed, "pipetrace_tool_name"),
        "workload",
        "{killed}"
    );
    let stalled_rules = pipetrace_e2e::snakemake::metadata(&stalled);
    assert!(
        stalled_rules.iter().any(|(_, m)| m["rule"] == "fetch"),
        "{stalled_rules:?}"
    );

    // The clean pipeline was seen (its tools' CPU is in Prometheus), and nothing fired on
    // it: give the rules a few more evaluations over its last scrapes first.
    let clean_cpu = format!(
        "process_cpu_time_seconds_total{{cicd_pipeline_name=\"{}\"}}",
        name("clean")
    );
    let seen = returns_series(&prom, &clean_cpu).await;
    assert!(
        seen.iter()
            .any(|s| s["metric"]["cicd_pipeline_task_name"] == "shout"),
        "{seen:?}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let clean_alerts = format!("ALERTS{{cicd_pipeline_name=\"{}\"}}[10m]", name("clean"));
    let fired = prom.query(&clean_alerts, None).await;
    assert!(fired.is_empty(), "alerts on the clean pipeline: {fired:?}");
    let delivered_clean: Vec<_> = hook
        .alerts()
        .into_iter()
        .filter(|a| label(a, "cicd_pipeline_name") == name("clean"))
        .collect();
    assert!(delivered_clean.is_empty(), "{delivered_clean:?}");
    runs_agent.stop();
    idle_agent.stop();
}

/// `promtool check rules` passes, and `promtool test rules` passes with a test of every rule,
/// for each rules file shipped: on pipetrace's metrics (prometheus-rules.yaml) and on the
/// Collector's span metrics (spanmetrics-rules.yaml).
#[test]
fn promtool_checks_the_rules_and_unit_tests_every_one() {
    for file in ["prometheus-rules", "spanmetrics-rules"] {
        let (rules, tests) = (format!("{file}.yaml"), format!("{file}.test.yaml"));
        for args in [["check", "rules", &rules], ["test", "rules", &tests]] {
            let o = Command::new("promtool")
                .args(args)
                .current_dir(deploy("alerts"))
                .output()
                .expect("promtool (scripts/setup.sh installs Prometheus)");
            let said = String::from_utf8_lossy(&o.stdout).to_string()
                + &String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "promtool {args:?}:\n{said}");
        }
        let yaml = |p: &str| -> serde_yaml::Value {
            serde_yaml::from_str(&std::fs::read_to_string(deploy(p)).unwrap()).unwrap()
        };
        let rules = yaml(&format!("alerts/{rules}"));
        let tests = serde_yaml::to_string(&yaml(&format!("alerts/{tests}"))).unwrap();
        for r in rules["groups"][0]["rules"].as_sequence().unwrap() {
            let name = r["alert"].as_str().unwrap();
            assert!(
                tests.contains(&format!("alertname: {name}\n")),
                "{name} has no promtool test in {file}.test.yaml"
            );
        }
    }
}
