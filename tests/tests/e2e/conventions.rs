//! The command line as its conventions have it: each flag on the commands it applies to,
//! `-q`/`-v` and RUST_LOG, `config show` with what set each value, and `--json` wherever a
//! script would read the output.
use std::io::Write;

use pipetrace_e2e::{pipetrace, stderr};

fn json(o: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}\n{}", stderr(o)))
}

/// A config file only its owner may write (as pipetrace requires), holding `yaml`.
fn config_file(dir: &std::path::Path, yaml: &str) -> std::path::PathBuf {
    let path = dir.join("pipetrace.yaml");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    path
}

#[test]
fn config_show_names_what_set_each_value() {
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(
        dir.path(),
        "service_name: from-file\nexport:\n  batch_spans: 64\n",
    );
    let o = pipetrace()
        .args(["config", "show", "--json", "-c", file.to_str().unwrap()])
        .args(["--endpoint", "http://127.0.0.1:9/"])
        .env("PIPETRACE_EXPORT__BATCH_SPANS", "128")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let all = json(&o);
    let find = |key: &str| {
        (all.as_array().unwrap().iter())
            .find(|s| s["key"] == key)
            .unwrap_or_else(|| panic!("no {key} in {all}"))
            .clone()
    };
    assert_eq!(find("service_name")["from"], file.to_str().unwrap());
    assert_eq!(find("export.batch_spans")["value"], 128);
    let by = find("export.batch_spans")["from"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(by.contains("PIPETRACE_EXPORT__BATCH_SPANS"), "{by}");
    assert_eq!(find("export.otlp.endpoint")["from"], "flag --endpoint");
    assert_eq!(find("export.queue_spans")["from"], "defaults");
    assert!(
        !all.to_string().contains("s3cret"),
        "a header's value is shown: {all}"
    );
    // The same as text, one line per setting, and a bad file refused as `run` refuses it.
    let o = pipetrace().args(["config", "show"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("export.batch_spans: ") && l.ends_with("# defaults"))
    );
    let bad = config_file(dir.path(), "export:\n  batch_spanz: 1\n");
    let o = pipetrace()
        .args(["config", "show", "-c"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `batch_spans`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_flag_before_a_command_it_does_not_apply_to_is_refused() {
    let o = pipetrace()
        .args(["--endpoint", "http://x:4317", "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--endpoint does not apply to `pipetrace status`"));
    let o = pipetrace()
        .args(["report", "x.jsonl", "--endpoint", "u"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Before `run`, as the docs of earlier releases wrote it, it still works.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args([
            "--output",
            out.to_str().unwrap(),
            "run",
            "--no-summary",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(o.status.success() && out.exists(), "{}", stderr(&o));
}

#[test]
fn quiet_says_nothing_but_errors_and_verbose_or_rust_log_say_more() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        pipetrace()
            .args(args)
            .env_remove("PIPETRACE_LOG")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let loud = run(&["run", "--", "sh", "-c", "echo out"], &[]);
    assert!(
        stderr(&loud).contains("pipetrace: tracing"),
        "{}",
        stderr(&loud)
    );
    let quiet = run(&["run", "-q", "--", "sh", "-c", "echo out"], &[]);
    assert!(quiet.status.success());
    assert_eq!(
        String::from_utf8_lossy(&quiet.stdout),
        "out\n",
        "the command's own output stays"
    );
    assert_eq!(stderr(&quiet), "", "-q: nothing of pipetrace's own");
    // A failure is still said under -q.
    let o = run(&["-q", "report", "missing.otlp.jsonl"], &[]);
    assert!(!o.status.success() && stderr(&o).contains("missing.otlp.jsonl"));
    let info = |o: &std::process::Output| stderr(o).lines().any(|l| l.contains(" INFO "));
    assert!(!info(&loud), "warnings only by default: {}", stderr(&loud));
    assert!(info(&run(&["-v", "run", "--", "true"], &[])));
    assert!(info(&run(&["run", "--", "true"], &[("RUST_LOG", "info")])));
    // pipetrace's own variable before the Rust one.
    let o = run(
        &["run", "--", "true"],
        &[("RUST_LOG", "info"), ("PIPETRACE_LOG", "error")],
    );
    assert!(!info(&o), "{}", stderr(&o));
}

#[test]
fn doctor_and_report_and_status_answer_in_json() {
    let o = pipetrace().args(["doctor", "--json"]).output().unwrap();
    let d = json(&o);
    let checks = d["checks"].as_array().unwrap();
    let probes = checks
        .iter()
        .find(|c| c["check"] == "probes")
        .expect("a probes check");
    assert_eq!(probes["status"], "ok", "{d}");
    assert_eq!(d["ok"], o.status.success());
    // A run whose gzip processes are tasks (a task rule), its table as JSON.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(
        dir.path(),
        "attribution:\n  task_rules:\n    - match: { executable: gzip }\n      name: compress\n",
    );
    let trace = dir.path().join("t.otlp.jsonl");
    let script = "head -c 3000000 /dev/urandom > a; head -c 1000 /dev/zero > b; gzip a; gzip b";
    let o = pipetrace()
        .args([
            "run",
            "--no-summary",
            "-c",
            cfg.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ])
        .args(["--", "sh", "-c", script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = pipetrace()
        .args(["report", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let r = json(&o);
    let tasks = r["runs"][0]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    let compress = tasks
        .iter()
        .find(|t| t["task"] == "compress")
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(compress["jobs"], 2, "{compress}");
    assert_eq!(compress["failed"], 0);
    assert!(
        compress["cpu_seconds"].as_f64().unwrap() > 0.0,
        "{compress}"
    );
    assert_eq!(r["runs"][0]["status"], "ok");
}

#[test]
fn status_without_an_agent_is_an_empty_list_in_json() {
    // Other tests' agents run on this host: /run of a mount namespace of its own has none.
    let bin = pipetrace_e2e::pipetrace_bin();
    let script = format!(
        "mount -t tmpfs none /run && exec {} status --json",
        bin.display()
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(json(&o), serde_json::json!([]));
    assert!(
        stderr(&o).contains("no pipetrace agent runs"),
        "{}",
        stderr(&o)
    );
}
