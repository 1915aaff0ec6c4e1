//! The resource says what the machine is: its architecture and kernel as uname tells them,
//! its cloud and instance type as its DMI strings tell them (here a directory written as an
//! EC2 Nitro instance's, given by PIPETRACE_DMI_DIR), and the cost takes the price row of the
//! detected instance type without the config naming it.
use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use pipetrace_e2e::{pipetrace, read_jsonl, spans::RecvSpan, stderr};
use pipetrace_semconv::attr;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

fn uname(flag: &str) -> String {
    let o = Command::new("uname").arg(flag).output().expect("uname");
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// OTel's `host.arch` for what `uname -m` prints (OTel's well-known values).
fn otel_arch(machine: &str) -> String {
    match machine {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "i386" | "i486" | "i586" | "i686" => "x86",
        "ppc64" | "ppc64le" => "ppc64",
        "ppc" => "ppc32",
        m if m.starts_with("armv") => "arm32",
        m => m,
    }
    .to_string()
}

/// A DMI directory as an m5.large shows it: world-readable strings, and the serial and UUID
/// only root may read (which pipetrace must leave alone).
fn ec2_nitro_dmi(dir: &Path) -> PathBuf {
    let dmi = dir.join("dmi");
    std::fs::create_dir(&dmi).unwrap();
    for (file, text, mode) in [
        ("sys_vendor", "Amazon EC2", 0o444),
        ("product_name", "m5.large", 0o444),
        ("board_vendor", "Amazon EC2", 0o444),
        ("bios_vendor", "Amazon EC2", 0o444),
        ("chassis_asset_tag", "Amazon EC2", 0o444),
        (
            "product_serial",
            "ec2e1916-9099-7caf-fd21-012345abcdef",
            0o400,
        ),
        (
            "product_uuid",
            "ec2e1916-9099-7caf-fd21-012345abcdef",
            0o400,
        ),
    ] {
        let p = dmi.join(file);
        std::fs::write(&p, format!("{text}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    dmi
}

fn write_config(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// `pipetrace -c CONFIG run` of a 300 ms CPU burner on the fixture's DMI: its spans.
fn run(dir: &Path, dmi: &Path, config: &Path) -> Vec<RecvSpan> {
    let out = dir.join("t.otlp.jsonl");
    let _ = std::fs::remove_file(&out);
    let o = pipetrace()
        .env("PIPETRACE_DMI_DIR", dmi)
        .arg("-c")
        .arg(config)
        .arg("run")
        .arg("--output")
        .arg(&out)
        .args(["--", "sh", "-c", &format!("{WORKLOAD} burn 300; true")])
        .output()
        .expect("run pipetrace");
    assert!(o.status.success(), "{}", stderr(&o));
    read_jsonl(&out)
}

/// The tool's cost at `cpu_hour` and `gib_hour`, from its own figures.
fn want_cost(tool: &RecvSpan, cpu_hour: f64, gib_hour: f64) -> f64 {
    let cpu_s = tool.num(attr::CPU_USER_TIME).unwrap() + tool.num(attr::CPU_SYSTEM_TIME).unwrap();
    let hours = (tool.end - tool.start) as f64 / 3.6e12;
    let gib = tool.num(attr::MEMORY_PEAK).unwrap() / (1u64 << 30) as f64;
    cpu_s / 3600.0 * cpu_hour + gib * hours * gib_hour
}

fn burner(spans: &[RecvSpan]) -> &RecvSpan {
    spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload")
        .expect("the workload's tool span")
}

#[test]
fn an_ec2_host_is_described_and_priced_by_its_detected_instance_type() {
    let dir = tempfile::tempdir().unwrap();
    let dmi = ec2_nitro_dmi(dir.path());
    let config = dir.path().join("pipetrace.yaml");
    // No host_type: a row for the detected type is enough (3600 per CPU-hour is 1 per
    // CPU-second); the other row must not be taken.
    write_config(
        &config,
        "cost:\n  prices:\n    m5.large: { cpu_hour: 3600, gib_hour: 36 }\n    \
         c5.xlarge: { cpu_hour: 7200, gib_hour: 72 }\n",
    );
    let o = pipetrace()
        .args(["config", "validate"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    let spans = run(dir.path(), &dmi, &config);
    assert!(!spans.is_empty());
    let (machine, release) = (uname("-m"), uname("-r"));
    for s in &spans {
        let r = &s.resource;
        let get = |k: &str| r.get(k).map(|v| v.str().to_string());
        assert_eq!(get(attr::HOST_ARCH), Some(otel_arch(&machine)), "{machine}");
        assert_eq!(get(attr::OS_TYPE).as_deref(), Some("linux"));
        assert_eq!(get(attr::OS_VERSION), Some(release.clone()));
        assert_eq!(get(attr::CLOUD_PROVIDER).as_deref(), Some("aws"));
        assert_eq!(get(attr::HOST_TYPE).as_deref(), Some("m5.large"));
        // DMI does not tell the region; only cloud-init's instance data on the machine could.
        if !Path::new("/run/cloud-init/instance-data.json").exists() {
            assert_eq!(get(attr::CLOUD_REGION), None);
        }
        assert!(get(attr::HOST_NAME).is_some() && get(attr::HOST_ID).is_some());
    }

    let tool = burner(&spans);
    let (cost, want) = (tool.num(attr::COST).unwrap(), want_cost(tool, 3600.0, 36.0));
    assert!(
        (cost - want).abs() < 1e-6,
        "cost {cost} vs m5.large's {want}"
    );
    assert!(cost > 0.25, "300 ms of CPU at 1 per CPU-second: {cost}");
    assert_eq!(tool.str(attr::COST_CURRENCY), "USD");
    let run_span = spans.iter().find(|s| s.is_run()).expect("run span");
    assert!(run_span.num(attr::COST).unwrap() >= cost);

    // A host_type the config names still wins over the detected one.
    write_config(
        &config,
        "cost:\n  host_type: c5.xlarge\n  prices:\n    m5.large: { cpu_hour: 3600, gib_hour: 36 }\n    \
         c5.xlarge: { cpu_hour: 7200, gib_hour: 72 }\n",
    );
    let spans = run(dir.path(), &dmi, &config);
    let tool = burner(&spans);
    assert_eq!(
        tool.resource.get(attr::HOST_TYPE).map(|v| v.str()),
        Some("m5.large")
    );
    let (cost, want) = (tool.num(attr::COST).unwrap(), want_cost(tool, 7200.0, 72.0));
    assert!(
        (cost - want).abs() < 1e-6,
        "cost {cost} vs c5.xlarge's {want}"
    );
}
