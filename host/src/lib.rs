//! pipetrace's host crate: the machine the core sees through its port. The `Host` port
//! implemented for this machine (`LiveHost`: /proc with procfs, files, clocks, engines'
//! databases, `squeue` in the background); the probes loaded into the kernel and read
//! (`probes`, `source`), or /proc polled without them (`poller`); cgroup limits (`cgroup`);
//! NVIDIA's driver (`gpu`); pipetrace's own scheduling policy (`cpu_policy`). And, here at its
//! root, facts about this host and its processes: identity, clocks, the seed scan; what the
//! machine is (architecture, kernel, cloud) for the resource. Never reads any process's
//! environment, never asks the network.
pub mod cgroup;
pub mod cloud;
pub mod cpu_policy;
mod database;
pub mod gpu;
mod idle;
mod kept;
mod live;
pub mod pidns;
pub mod poller;
pub mod probes;
pub mod python_dist;
pub mod slurm_alloc;
pub mod slurm_jobs;
pub mod source;
pub mod store;

use std::{
    fs,
    path::{Path, PathBuf},
};

pub use cloud::{CLOUD_INIT_DATA, DMI_DIR, DMI_DIR_ENV};
pub use idle::IdleClock;
pub use live::LiveHost;
use pipetrace_core::{
    facts::page_size,
    machine::HostInfo,
    port::{HostError, ProcSnapshot, SharedHost},
};

/// The machine this runs on.
pub fn this_machine() -> SharedHost {
    std::sync::Arc::new(LiveHost)
}

fn read(path: &str) -> Result<String, HostError> {
    fs::read_to_string(path).map_err(|source| HostError::Read {
        path: path.into(),
        source,
    })
}

/// Who this host is and what it is: its identity (boot id, machine id, host name), its
/// kernel, cloud and memory, and the clock offset; its GPUs are set when a sampler starts.
pub fn host_info() -> Result<HostInfo, HostError> {
    let boot_id = read("/proc/sys/kernel/random/boot_id")?.trim().to_string();
    // OTel's host.id is the machine id where there is one.
    let host_id = read("/etc/machine-id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| boot_id.clone());
    let host_name = read("/proc/sys/kernel/hostname")?.trim().to_string();
    let (machine, release) = uname().unwrap_or_default();
    Ok(HostInfo {
        boot_id,
        host_id,
        host_name,
        arch: otel_arch(&machine),
        os_version: Some(release).filter(|r| !r.is_empty()),
        cloud: cloud::detect(&cloud::dmi_dir(), Path::new(CLOUD_INIT_DATA)),
        memory_bytes: <procfs::Meminfo as procfs::Current>::current()
            .ok()
            .map(|m| m.mem_total),
        boot_to_unix_ns: boot_to_unix_ns(),
        gpus: Default::default(),
    })
}

/// The kernel's machine and release (`uname -m`, `uname -r`).
fn uname() -> Option<(String, String)> {
    // SAFETY: utsname is plain C arrays; all zeroes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname, which uname fills with NUL-terminated strings.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let text = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).trim().to_string()
    };
    Some((text(&u.machine), text(&u.release)))
}

/// OTel's `host.arch` for the kernel's machine name: its well-known values where one
/// applies; another architecture (riscv64, loongarch64 ...) as the kernel names it.
pub(crate) fn otel_arch(machine: &str) -> Option<String> {
    let arch = match machine {
        "" => return None,
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "aarch64_be" | "arm64" => "arm64",
        "i386" | "i486" | "i586" | "i686" | "x86" => "x86",
        "ia64" => "ia64",
        "ppc" | "ppcle" => "ppc32",
        "ppc64" | "ppc64le" => "ppc64",
        "s390x" => "s390x",
        // armv6l, armv7l, and armv8l (a 32-bit system on a 64-bit CPU).
        m if m == "arm" || m.starts_with("armv") => "arm32",
        other => other,
    };
    Some(arch.to_string())
}

fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; both clocks exist on every Linux we support.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// The whole host's busy CPU time since boot, in clock ticks (USER_HZ).
pub(crate) fn cpu_busy_ticks() -> Result<u64, HostError> {
    live::busy_ticks()
}

pub fn boottime_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME) as u64
}

/// Time the system spent suspended since boot (CLOCK_BOOTTIME counts it, the kernel's delay
/// accounting, on CLOCK_MONOTONIC, does not).
pub(crate) fn suspended_ns() -> u64 {
    (clock_ns(libc::CLOCK_BOOTTIME) - clock_ns(libc::CLOCK_MONOTONIC)).max(0) as u64
}

fn boot_to_unix_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_BOOTTIME)
}

pub fn snapshot(pid: u32) -> Option<ProcSnapshot> {
    let p = procfs::process::Process::new(pid as i32).ok()?;
    let stat = p.stat().ok()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    Some(ProcSnapshot {
        pid,
        ppid: u32::try_from(stat.ppid).unwrap_or(0),
        start_ticks: stat.starttime,
        comm: stat.comm,
        exe: p.exe().ok(),
        argv: pipetrace_core::facts::split_argv(&cmdline),
        cwd: p.cwd().ok(),
        uid: p.status().ok().map(|s| s.ruid),
    })
}

/// Every process running now (kernel threads have no cmdline and are left out).
pub(crate) fn scan() -> Vec<ProcSnapshot> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(|p| snapshot(u32::try_from(p.ok()?.pid).ok()?))
        .filter(|p| !p.argv.is_empty())
        .collect()
}

/// This process's memory now, from its status (KiB).
fn own_status() -> Option<procfs::process::Status> {
    procfs::process::Process::myself().ok()?.status().ok()
}

/// This process's peak resident set (VmHWM), KiB. It counts the kernel ring buffer, which
/// the kernel maps into the agent.
pub fn peak_rss_kib() -> Option<u64> {
    own_status()?.vmhwm
}

/// This process's resident memory now, KiB: statm's one line of numbers, read at every
/// poll (status's fifty keyed lines cost a few per cent of the agent's CPU in a storm).
pub(crate) fn rss_kib() -> Option<u64> {
    let statm = procfs::process::Process::myself().ok()?.statm().ok()?;
    Some(statm.resident * page_size() / 1024)
}

/// This process's private memory now (RssAnon), KiB: its own heap, without the ring buffer.
pub fn private_rss_kib() -> Option<u64> {
    own_status()?.rssanon
}

/// The session a running process belongs to.
pub(crate) fn session(pid: u32) -> Option<u32> {
    let stat = procfs::process::Process::new(pid as i32)
        .ok()?
        .stat()
        .ok()?;
    u32::try_from(stat.session).ok()
}

pub(crate) fn cwd(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_map_to_otel_architectures() {
        for (machine, arch) in [
            ("x86_64", "amd64"),
            ("aarch64", "arm64"),
            ("armv7l", "arm32"),
            ("armv8l", "arm32"),
            ("i686", "x86"),
            ("ppc64le", "ppc64"),
            ("s390x", "s390x"),
            ("riscv64", "riscv64"),
        ] {
            assert_eq!(otel_arch(machine).as_deref(), Some(arch), "{machine}");
        }
        assert_eq!(otel_arch(""), None);
    }

    #[test]
    fn this_kernel_says_what_it_is() {
        let (machine, release) = uname().expect("uname");
        assert!(!machine.is_empty() && !release.is_empty());
        let want = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(release, want.trim());
    }

    #[test]
    fn resident_memory_from_statm_is_status_vmrss() {
        let statm = rss_kib().expect("statm");
        let status = own_status().and_then(|s| s.vmrss).expect("status");
        // Read one after the other: the test's threads may fault in a page or two between.
        assert!(
            statm > 0 && statm.abs_diff(status) < 1024,
            "{statm} vs {status} KiB"
        );
    }

    #[test]
    fn own_process_is_found_by_the_scan() {
        let me = std::process::id();
        let found = scan()
            .into_iter()
            .find(|p| p.pid == me)
            .expect("own pid in /proc");
        assert!(found.start_ticks > 0);
        assert!(!found.argv.is_empty());
    }
}
