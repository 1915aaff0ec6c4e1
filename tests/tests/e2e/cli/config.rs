//! The configuration as a user meets it: `config validate` names the file and the key, the
//! printed default is valid, and a bad or unsafe file starts nothing.
use std::path::Path;

use pipetrace_e2e::{pipetrace, stderr};

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn config_validate_names_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.yaml",
        "export:\n  otlp:\n    endpoint: http://localhost:4317\n",
    );
    let o = pipetrace()
        .args(["config", "validate", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let bad = write(
        dir.path(),
        "bad.yaml",
        "export:\n  otlp:\n    endpoit: http://localhost:4317\n",
    );
    let o = pipetrace()
        .args(["config", "validate", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("export.otlp.endpoit"),
        "{err}"
    );

    let value = write(dir.path(), "value.yaml", "export:\n  queue_spans: lots\n");
    let o = pipetrace()
        .args(["config", "validate", value.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("export.queue_spans"), "{}", stderr(&o));
}

#[test]
fn the_printed_default_config_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let o = pipetrace()
        .args(["config", "print-default"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let f = write(
        dir.path(),
        "default.yaml",
        &String::from_utf8(o.stdout).unwrap(),
    );
    let o = pipetrace()
        .args(["config", "validate", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_bad_config_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.yaml",
        "probes:\n  ring_buffer_bytes: 12345\n",
    );
    let marker = dir.path().join("ran");
    let o = pipetrace()
        .args([
            "-c",
            bad.to_str().unwrap(),
            "run",
            "--",
            "touch",
            marker.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("probes.ring_buffer_bytes"),
        "{}",
        stderr(&o)
    );
    assert!(!marker.exists(), "the command must not have run");
    let o = pipetrace()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4317")
        .args(["run", "--", "touch", marker.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(125),
        "an endpoint without a scheme is refused"
    );
    assert!(
        stderr(&o).contains("export.otlp.endpoint"),
        "{}",
        stderr(&o)
    );
    assert!(!marker.exists());
}

#[test]
fn an_engine_pipetrace_does_not_model_is_refused_naming_those_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "engines.yaml",
        "attribution:\n  engines: [snakemake, nextflw]\n",
    );
    let o = pipetrace()
        .args(["config", "validate", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("attribution.engines") && err.contains("`nextflw`"),
        "{err}"
    );
    assert!(err.contains("nextflow") && err.contains("cwltool"), "{err}");
    let marker = dir.path().join("ran");
    let o = pipetrace()
        .env("PIPETRACE_ATTRIBUTION__ENGINES", "[prefekt]")
        .args(["run", "--", "touch", marker.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(stderr(&o).contains("`prefekt`"), "{}", stderr(&o));
    assert!(!marker.exists(), "the command must not have run");
    let good = write(
        dir.path(),
        "good.yaml",
        "attribution:\n  engines: [snakemake]\n",
    );
    let o = pipetrace()
        .args(["config", "validate", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_config_other_users_can_write_is_refused_and_nothing_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "open.yaml", "export:\n  batch_spans: 10\n");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
    let marker = dir.path().join("ran");
    let o = pipetrace()
        .arg("-c")
        .arg(&cfg)
        .args(["run", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("writable by other users"),
        "{}",
        stderr(&o)
    );
    assert!(!marker.exists(), "the command must not have run");
}
