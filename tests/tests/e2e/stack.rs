//! `make stack` (scripts/stack.sh): Jaeger v2 and a node agent started here, the demo pipeline
//! run by Snakemake under the agent, its trace waited for in Jaeger, where to look printed;
//! `scripts/stack.sh stop` stops both. Judged by Jaeger's query API against Snakemake's own
//! records of the run. `scripts/setup.sh stack`, which `make stack` runs, installs what the
//! stack's scripts run (Go for Jaeger, curl) and `make dist`'s mode none of it.
use std::{collections::BTreeSet, path::Path, process::Command};

use pipetrace_e2e::{
    jaeger::http_get, pipetrace_bin, receiver::free_ports, snakemake::metadata, stderr,
};
use serde_json::Value;

fn get(url: &str) -> Value {
    serde_json::from_str(&http_get(url).unwrap()).unwrap()
}

#[test]
fn the_stack_traces_the_demo_into_jaeger_and_stops() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let [query, query_grpc, otlp_grpc, otlp_http] = free_ports();
    let query = format!("127.0.0.1:{query}");
    let run = |args: &[&str]| {
        Command::new(root.join("scripts/stack.sh"))
            .args(args)
            .env("PIPETRACE", pipetrace_bin())
            .env("STACK_DIR", dir.path())
            .env("JAEGER_QUERY", &query)
            .env("JAEGER_QUERY_GRPC", format!("127.0.0.1:{query_grpc}"))
            .env("JAEGER_OTLP_GRPC", format!("127.0.0.1:{otlp_grpc}"))
            .env("JAEGER_OTLP_HTTP", format!("127.0.0.1:{otlp_http}"))
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{said}{}", stderr(&o));
    let hex = |w: &&str| w.len() == 32 && w.chars().all(|c| c.is_ascii_hexdigit());
    let trace = (said.split_whitespace())
        .map(|w| w.trim_end_matches('.'))
        .find(hex)
        .unwrap_or_else(|| panic!("no trace named: {said}"));
    let spans = get(&format!("http://{query}/api/traces/{trace}"));
    let spans = spans["data"][0]["spans"].as_array().unwrap().clone();
    let demo = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path());
    let demo = (demo.filter(|p| p.is_dir()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("demo-")
        })
        .expect("the demo's folder");
    let name = format!("run {}", demo.file_name().unwrap().to_string_lossy());
    let run_span = spans.iter().find(|s| s["operationName"] == name.as_str());
    assert!(run_span.is_some(), "{name} in Jaeger");
    // Every job Snakemake recorded is a task in Jaeger, by its rule.
    let rules: BTreeSet<String> = (metadata(&demo).into_iter())
        .map(|(_, m)| m["rule"].as_str().unwrap().to_string())
        .collect();
    let ops: BTreeSet<String> = (spans.iter())
        .filter(|s| {
            (s["tags"].as_array().unwrap().iter()).any(|t| t["key"] == "cicd.pipeline.task.name")
        })
        .map(|s| s["operationName"].as_str().unwrap().to_string())
        .collect();
    for rule in &rules {
        assert!(
            ops.iter()
                .any(|o| o == rule || o.starts_with(&format!("{rule} ("))),
            "{rule} in {ops:?}"
        );
    }
    assert!(rules.len() >= 4, "the demo's jobs: {rules:?}");
    let o = run(&["stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let gone = http_get(&format!("http://{query}/api/services"));
    assert!(gone.is_err(), "Jaeger stopped: {gone:?}");
}

/// What `scripts/setup.sh MODE` would install on a machine whose PATH is `path` only (no Go
/// in /usr/local/go either): its Debian packages, and whether Go.
fn would_install(mode: &str, path: &Path) -> (BTreeSet<String>, bool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = Command::new("/bin/bash")
        .arg(root.join("scripts/setup.sh"))
        .arg(mode)
        .env("PATH", path)
        .env("SETUP_DRY_RUN", "1")
        .env("SETUP_GO_ROOT", path.join("no-go"))
        .output()
        .unwrap();
    let said = stderr(&o);
    assert!(o.status.success(), "setup.sh {mode}: {said}");
    let packages = (said.lines())
        .find_map(|l| l.strip_prefix("setup: would install Debian packages: "))
        .unwrap_or_else(|| panic!("setup.sh {mode}: {said}"));
    let packages = (packages.split_whitespace())
        .filter(|p| *p != "none")
        .map(str::to_string)
        .collect();
    (packages, said.contains("setup: would install Go "))
}

/// The `scripts/setup.sh` line a make target runs.
fn setup_of(target: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = Command::new("make")
        .args(["-n", "-C"])
        .arg(&root)
        .arg(target)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    (said.lines())
        .find_map(|l| l.split("scripts/setup.sh").nth(1))
        .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("make {target} runs no scripts/setup.sh: {said}"))
}

#[test]
fn make_stack_installs_go_and_curl_and_make_dist_neither() {
    assert_eq!(setup_of("stack"), "stack");
    assert_eq!(setup_of("dist"), "dist");
    let bare = tempfile::tempdir().unwrap();
    let (stack, go) = would_install("stack", bare.path());
    let want = ["snakemake", "bwa", "samtools", "coreutils", "curl", "unzip"];
    assert_eq!(stack, want.map(String::from).into(), "stack");
    assert!(go, "Go for scripts/jaeger.sh");
    let (dist, go) = would_install("dist", bare.path());
    assert_eq!(dist, ["dpkg", "gzip"].map(String::from).into(), "dist");
    assert!(!go, "make dist builds no Jaeger");
    let (demo, go) = would_install("demo", bare.path());
    assert!(!go && !demo.contains("curl"), "demo: {demo:?}");
    assert!(
        would_install("all", bare.path()).1,
        "make test builds Jaeger"
    );
    // A Go older than tests/jaeger/go.mod's is replaced, one as new is kept.
    let go_mod = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/jaeger/go.mod"),
    )
    .unwrap();
    let wanted = (go_mod.lines())
        .find_map(|l| l.strip_prefix("go "))
        .unwrap()
        .to_string();
    for (version, replaced) in [("1.19.8", true), (wanted.as_str(), false)] {
        let fake = bare.path().join("go");
        std::fs::write(&fake, format!("#!/bin/sh\necho go{version}\n")).unwrap();
        let o = Command::new("chmod").arg("+x").arg(&fake).output().unwrap();
        assert!(o.status.success());
        let (_, go) = would_install("stack", bare.path());
        assert_eq!(go, replaced, "go{version}");
    }
}
