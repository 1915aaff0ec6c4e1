//! What a process may use, as the kernel enforces it: CPUs (affinity/cpuset and the cgroup's
//! CPU quota) and memory (the cgroup's limit). cgroup v2 and v1 hierarchies are both read.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::Duration,
};

use pipetrace_core::{accounting::Allocation, port::Host};

/// v1 memory "limits" at or above this mean no limit.
const V1_UNLIMITED: u64 = 1 << 60;

/// How long limits read for one cgroup are reused: tasks start by the thousand in one
/// cgroup, and limits change rarely.
const CACHE_FOR: Duration = Duration::from_secs(10);

/// Limits per cgroup membership (the text of /proc/PID/cgroup), read at most every
/// [`CACHE_FOR`].
#[derive(Default)]
pub struct Limits {
    /// Read at (the host's uptime).
    mounts: Option<(Duration, String)>,
    /// CPUs online, read at: asked for every task that starts, and `sysconf` reads /sys.
    online: Option<(Duration, u32)>,
    by_membership: HashMap<String, Read>,
}

/// What was read for one cgroup membership, and when.
#[derive(Clone, Copy)]
struct Read {
    at: Duration,
    quota: Option<f64>,
    memory: Option<u64>,
    gpus: Option<u64>,
}

impl Limits {
    /// The allocation of process `pid` now. A process already gone gets the host's CPUs.
    pub fn allocation(&mut self, host: &dyn Host, pid: u32) -> Allocation {
        let online = self.online_cpus(host);
        let affinity = host.affinity(pid).unwrap_or(online);
        let read = self.limits(host, membership(host, pid));
        let (quota, memory_limit) = (read.quota, read.memory);
        let (cpus, source) = match quota {
            Some(q) if q < f64::from(affinity) => (q, "cgroup.cpu.max"),
            _ if affinity < online => (f64::from(affinity), "cpuset"),
            _ => (f64::from(affinity), "host"),
        };
        Allocation {
            cpus,
            source,
            memory_limit,
            host_cpus: online,
            gpus: read.gpus,
        }
    }

    /// The allocation of a process that already ended: what [`Self::allocation`] finds once
    /// it is reaped (the host's CPUs), without trying to read what is gone or about to be.
    pub fn allocation_of_gone(&mut self, host: &dyn Host) -> Allocation {
        let online = self.online_cpus(host);
        Allocation {
            cpus: f64::from(online),
            source: "host",
            memory_limit: None,
            host_cpus: online,
            gpus: None,
        }
    }

    fn online_cpus(&mut self, host: &dyn Host) -> u32 {
        let now = host.uptime();
        match self.online {
            Some((at, n)) if now.saturating_sub(at) < CACHE_FOR => n,
            _ => {
                let n = host.online_cpus();
                self.online = Some((now, n));
                n
            }
        }
    }

    fn limits(&mut self, host: &dyn Host, membership: String) -> Read {
        let now = host.uptime();
        let young = |at: &Duration| now.saturating_sub(*at) < CACHE_FOR;
        if let Some(r) = self.by_membership.get(&membership)
            && young(&r.at)
        {
            return *r;
        }
        if !self.mounts.as_ref().is_some_and(|(at, _)| young(at)) {
            self.mounts = Some((now, mountinfo(host)));
        }
        let mounts = self.mounts.as_ref().map(|(_, m)| m.as_str()).unwrap_or("");
        let dirs = |controller: &str| cgroup_dirs(host, &membership, mounts, controller);
        let quota = dirs("cpu")
            .iter()
            .filter_map(|d| cpu_quota(host, d))
            .fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.min(q))));
        let memory = (dirs("memory").iter())
            .filter_map(|d| memory_limit(host, d))
            .min();
        // The innermost devices cgroup holds the rules in force (v1 copies them down).
        let gpus = dirs("devices").first().and_then(|d| gpu_devices(host, d));
        if self.by_membership.len() > 4096 {
            self.by_membership.clear();
        }
        let read = Read {
            at: now,
            quota,
            memory,
            gpus,
        };
        self.by_membership.insert(membership, read);
        read
    }
}

/// NVIDIA's character-device major: /dev/nvidiaN is 195:N (255: the control device).
const NVIDIA_MAJOR: &str = "195";

/// The GPUs a v1 devices cgroup lets its processes open, bit N for /dev/nvidiaN, as Slurm
/// (`ConstrainDevices`) and Kubernetes' device plugin allocate them. None where every device
/// is allowed, or the cgroup says nothing (cgroup v2 keeps its rules in eBPF programs).
pub(crate) fn gpu_devices(host: &dyn Host, dir: &Path) -> Option<u64> {
    let list = host.read_to_string(&dir.join("devices.list")).ok()?;
    let mut mask = 0u64;
    for line in list.lines() {
        let mut w = line.split_whitespace();
        let (kind, dev) = (w.next()?, w.next()?);
        let (major, minor) = dev.split_once(':')?;
        if kind == "a" || (major == NVIDIA_MAJOR || major == "*") && minor == "*" {
            return None;
        }
        if kind == "c"
            && major == NVIDIA_MAJOR
            && let Ok(n) = minor.parse::<u32>()
            && n < 64
        {
            mask |= 1 << n;
        }
    }
    Some(mask)
}

/// The memory cgroup of `pid` (path within its hierarchy) and its limit, if any.
pub fn memory_cgroup(host: &dyn Host, pid: u32) -> (Option<String>, Option<u64>) {
    let membership = membership(host, pid);
    let mounts = mountinfo(host);
    let dirs = cgroup_dirs(host, &membership, &mounts, "memory");
    let limit = dirs.iter().filter_map(|d| memory_limit(host, d)).min();
    let path = membership.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        (ctrls.split(',').any(|c| c == "memory") || ctrls.is_empty()).then(|| path.to_string())
    });
    (path, limit)
}

/// The process's cgroup directory for `controller` and every ancestor up to the mount,
/// innermost first: a limit anywhere above applies too.
pub(crate) fn cgroup_dirs(
    host: &dyn Host,
    membership: &str,
    mountinfo: &str,
    controller: &str,
) -> Vec<PathBuf> {
    for line in membership.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let v2 = ctrls.is_empty();
        if !v2 && !ctrls.split(',').any(|c| c == controller) {
            continue;
        }
        let Some((mount, root)) = mount_of(mountinfo, v2, controller) else {
            continue;
        };
        // In a namespace the mount's root is a prefix of what /proc says.
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .trim_start_matches('/');
        let mut dir = mount.join(rel);
        let mut out = Vec::new();
        loop {
            out.push(dir.clone());
            if dir == mount || !dir.pop() {
                break;
            }
        }
        // A v2 line exists on hybrid hosts too; prefer a v1 controller when one is mounted.
        if !v2 || out.iter().any(|d| has_v2_file(host, d, controller)) {
            return out;
        }
    }
    Vec::new()
}

fn has_v2_file(host: &dyn Host, dir: &Path, controller: &str) -> bool {
    host.facts(&dir.join(format!("{controller}.max"))).is_ok()
}

/// The text of /proc/PID/cgroup ("" for a process gone).
fn membership(host: &dyn Host, pid: u32) -> String {
    let path = format!("/proc/{pid}/cgroup");
    host.read_to_string(Path::new(&path)).unwrap_or_default()
}

fn mountinfo(host: &dyn Host) -> String {
    (host.read_to_string(Path::new("/proc/self/mountinfo"))).unwrap_or_default()
}

/// (mount point, mount root) of the v2 hierarchy or of the v1 one holding `controller`.
fn mount_of(mountinfo: &str, v2: bool, controller: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let mut post = post.split(' ');
        let fstype = post.next()?;
        let opts = post.nth(1).unwrap_or("");
        let fits = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && opts.split(',').any(|o| o == controller)
        };
        if !fits {
            return None;
        }
        Some((PathBuf::from(*pre.get(4)?), pre.get(3)?.to_string()))
    })
}

/// CPUs the quota allows in `dir` (v2 `cpu.max`, v1 `cpu.cfs_quota_us`/`cfs_period_us`).
pub(crate) fn cpu_quota(host: &dyn Host, dir: &Path) -> Option<f64> {
    let read = |f: &str| host.read_to_string(&dir.join(f)).ok();
    let (quota, period) = match read("cpu.max") {
        Some(v) => {
            let mut w = v.split_whitespace();
            (
                w.next()?.parse::<f64>().ok()?,
                w.next()?.parse::<f64>().ok()?,
            )
        }
        None => (
            read("cpu.cfs_quota_us")?.trim().parse::<f64>().ok()?,
            read("cpu.cfs_period_us")?.trim().parse::<f64>().ok()?,
        ),
    };
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// The memory limit in `dir` (v2 `memory.max`, v1 `memory.limit_in_bytes`).
pub(crate) fn memory_limit(host: &dyn Host, dir: &Path) -> Option<u64> {
    let read = |f: &str| host.read_to_string(&dir.join(f));
    let v = read("memory.max")
        .or_else(|_| read("memory.limit_in_bytes"))
        .ok()?;
    v.trim().parse::<u64>().ok().filter(|&b| b < V1_UNLIMITED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LiveHost;

    const MOUNTS: &str = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
37 25 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn v1_controller_directories_walk_up_to_the_mount() {
        let membership = "4:memory:/jobs/a\n2:cpu,cpuacct:/\n0::/\n";
        let dirs = cgroup_dirs(&LiveHost, membership, MOUNTS, "memory");
        assert_eq!(
            dirs,
            [
                PathBuf::from("/sys/fs/cgroup/memory/jobs/a"),
                "/sys/fs/cgroup/memory/jobs".into(),
                "/sys/fs/cgroup/memory".into()
            ]
        );
        assert_eq!(
            cgroup_dirs(&LiveHost, membership, MOUNTS, "cpu"),
            [PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")]
        );
    }

    #[test]
    fn quota_and_limit_files_are_read_in_both_formats() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cpu.max"), "150000 100000\n").unwrap();
        std::fs::write(d.path().join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(cpu_quota(&LiveHost, d.path()), Some(1.5));
        assert_eq!(memory_limit(&LiveHost, d.path()), Some(1 << 30));
        std::fs::write(d.path().join("cpu.max"), "max 100000\n").unwrap();
        std::fs::write(d.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(
            (
                cpu_quota(&LiveHost, d.path()),
                memory_limit(&LiveHost, d.path())
            ),
            (None, None)
        );
        let v1 = tempfile::tempdir().unwrap();
        std::fs::write(v1.path().join("cpu.cfs_quota_us"), "-1\n").unwrap();
        std::fs::write(v1.path().join("cpu.cfs_period_us"), "100000\n").unwrap();
        std::fs::write(
            v1.path().join("memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(
            (
                cpu_quota(&LiveHost, v1.path()),
                memory_limit(&LiveHost, v1.path())
            ),
            (None, None)
        );
    }

    #[test]
    fn this_process_has_at_least_one_cpu() {
        let a = Limits::default().allocation(&LiveHost, std::process::id());
        assert!(a.cpus >= 0.01, "{a:?}");
    }

    #[test]
    fn gpus_allowed_by_a_v1_devices_cgroup_are_read_from_its_list() {
        let host = pipetrace_core::port::fake::FakeHost::default();
        let dir = Path::new("/sys/fs/cgroup/devices/slurm/uid_0/job_7");
        let list = |text: &str| {
            host.write(dir.join("devices.list"), text);
            gpu_devices(&host, dir)
        };
        // Slurm's ConstrainDevices with two GPUs of a gres: /dev/nvidia0 and 2, the control
        // device (255) and the usual character devices.
        let slurm = "c 1:3 rwm\nc 136:* rwm\nc 195:255 rwm\nc 195:0 rwm\nc 195:2 rwm\n";
        assert_eq!(list(slurm), Some(0b101));
        assert_eq!(list("c 1:3 rwm\n"), Some(0), "no GPU allowed");
        assert_eq!(list("a *:* rwm\n"), None, "every device: no allocation");
        assert_eq!(list("c 195:* rwm\n"), None, "every GPU");
    }
}
