//! The test NVML library (tests/fake-nvml): where it is, and the "hardware" it reports.
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// libfake_nvml.so of this build, built first if it is not there yet.
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = (exe.ancestors().skip(1).take(2))
        .find(|d| d.join("pipetrace").is_file())
        .expect("the build's target folder")
        .to_path_buf();
    let lib = dir.join("libfake_nvml.so");
    if !lib.is_file() {
        let st = std::process::Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "pipetrace-fake-nvml"])
            .status()
            .expect("cargo");
        assert!(st.success(), "building the test NVML library failed");
    }
    assert!(lib.is_file(), "no {}", lib.display());
    lib
}

/// A process on a fake GPU: pid, GPU memory bytes, SM and memory-controller percent.
pub fn process(pid: u32, used: u64, sm: u32, mem: u32) -> Value {
    json!({ "pid": pid, "used": used, "sm": sm, "mem": mem })
}

/// A fake GPU with `processes` on it.
pub fn device(index: u32, processes: Vec<Value>) -> Value {
    json!({
        "uuid": format!("GPU-fa4e0000-0000-0000-0000-00000000000{index}"),
        "name": "Fake H200",
        "memory_total": 150_754_820_096u64,
        "memory_used": processes.iter().map(|p| p["used"].as_u64().unwrap_or(0)).sum::<u64>(),
        "util_gpu": 90, "util_mem": 40, "power_mw": 612_000, "temp_c": 61,
        "sm_clock_mhz": 1980, "throttle": 4,
        "processes": processes,
    })
}

/// Writes the state the library answers from (atomically: it reads at every call).
pub fn write(state: &Path, devices: Vec<Value>) {
    let v = json!({ "driver": "560.35.03", "devices": devices });
    let tmp = state.with_extension("tmp");
    std::fs::write(&tmp, v.to_string()).unwrap();
    std::fs::rename(&tmp, state).unwrap();
}
