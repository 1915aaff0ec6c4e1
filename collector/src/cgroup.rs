//! What a process may use, as the kernel enforces it: CPUs (affinity/cpuset and the cgroup's
//! CPU quota) and memory (the cgroup's limit). cgroup v2 and v1 hierarchies are both read.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use crate::accounting::Allocation;

/// v1 memory "limits" at or above this mean no limit.
const V1_UNLIMITED: u64 = 1 << 60;

/// How long limits read for one cgroup are reused: tasks start by the thousand in one
/// cgroup, and limits change rarely.
const CACHE_FOR: Duration = Duration::from_secs(10);

/// Limits per cgroup membership (the text of /proc/PID/cgroup), read at most every
/// [`CACHE_FOR`].
#[derive(Default)]
pub struct Limits {
    mounts: Option<(Instant, String)>,
    by_membership: HashMap<String, (Instant, Option<f64>, Option<u64>)>,
}

impl Limits {
    /// The allocation of process `pid` now. A process already gone gets the host's CPUs.
    pub fn allocation(&mut self, pid: u32) -> Allocation {
        let online = online_cpus();
        let affinity = affinity(pid).unwrap_or(online);
        let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let (quota, memory_limit) = self.limits(membership);
        let (cpus, source) = match quota {
            Some(q) if q < f64::from(affinity) => (q, "cgroup.cpu.max"),
            _ if affinity < online => (f64::from(affinity), "cpuset"),
            _ => (f64::from(affinity), "host"),
        };
        Allocation {
            cpus,
            source,
            memory_limit,
        }
    }

    fn limits(&mut self, membership: String) -> (Option<f64>, Option<u64>) {
        if let Some((at, q, m)) = self.by_membership.get(&membership)
            && at.elapsed() < CACHE_FOR
        {
            return (*q, *m);
        }
        let fresh = self
            .mounts
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < CACHE_FOR);
        if !fresh {
            let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            self.mounts = Some((Instant::now(), text));
        }
        let mounts = self.mounts.as_ref().map(|(_, m)| m.as_str()).unwrap_or("");
        let dirs = |controller: &str| cgroup_dirs(&membership, mounts, controller);
        let quota = dirs("cpu")
            .iter()
            .filter_map(|d| cpu_quota(d))
            .fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.min(q))));
        let memory = dirs("memory").iter().filter_map(|d| memory_limit(d)).min();
        if self.by_membership.len() > 4096 {
            self.by_membership.clear();
        }
        self.by_membership
            .insert(membership, (Instant::now(), quota, memory));
        (quota, memory)
    }
}

/// The memory cgroup of `pid` (path within its hierarchy) and its limit, if any.
pub fn memory_cgroup(pid: u32) -> (Option<String>, Option<u64>) {
    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dirs = cgroup_dirs(&membership, &mounts, "memory");
    let limit = dirs.iter().filter_map(|d| memory_limit(d)).min();
    let path = membership.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        (ctrls.split(',').any(|c| c == "memory") || ctrls.is_empty()).then(|| path.to_string())
    });
    (path, limit)
}

/// CPUs online on this host: what any process here could use at most.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u32
}

fn affinity(pid: u32) -> Option<u32> {
    // SAFETY: a zeroed cpu_set_t is valid; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(pid as i32, size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: `set` was filled by the kernel.
    (rc == 0).then(|| unsafe { libc::CPU_COUNT(&set) } as u32)
}

/// The process's cgroup directory for `controller` and every ancestor up to the mount,
/// innermost first: a limit anywhere above applies too.
pub fn cgroup_dirs(membership: &str, mountinfo: &str, controller: &str) -> Vec<PathBuf> {
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
        if !v2 || out.iter().any(|d| has_v2_file(d, controller)) {
            return out;
        }
    }
    Vec::new()
}

fn has_v2_file(dir: &Path, controller: &str) -> bool {
    dir.join(format!("{controller}.max")).exists()
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
pub fn cpu_quota(dir: &Path) -> Option<f64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
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
pub fn memory_limit(dir: &Path) -> Option<u64> {
    let v = std::fs::read_to_string(dir.join("memory.max"))
        .or_else(|_| std::fs::read_to_string(dir.join("memory.limit_in_bytes")))
        .ok()?;
    v.trim().parse::<u64>().ok().filter(|&b| b < V1_UNLIMITED)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
37 25 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn v1_controller_directories_walk_up_to_the_mount() {
        let membership = "4:memory:/jobs/a\n2:cpu,cpuacct:/\n0::/\n";
        let dirs = cgroup_dirs(membership, MOUNTS, "memory");
        assert_eq!(
            dirs,
            [
                PathBuf::from("/sys/fs/cgroup/memory/jobs/a"),
                "/sys/fs/cgroup/memory/jobs".into(),
                "/sys/fs/cgroup/memory".into()
            ]
        );
        assert_eq!(
            cgroup_dirs(membership, MOUNTS, "cpu"),
            [PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")]
        );
    }

    #[test]
    fn quota_and_limit_files_are_read_in_both_formats() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cpu.max"), "150000 100000\n").unwrap();
        std::fs::write(d.path().join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(cpu_quota(d.path()), Some(1.5));
        assert_eq!(memory_limit(d.path()), Some(1 << 30));
        std::fs::write(d.path().join("cpu.max"), "max 100000\n").unwrap();
        std::fs::write(d.path().join("memory.max"), "max\n").unwrap();
        assert_eq!((cpu_quota(d.path()), memory_limit(d.path())), (None, None));
        let v1 = tempfile::tempdir().unwrap();
        std::fs::write(v1.path().join("cpu.cfs_quota_us"), "-1\n").unwrap();
        std::fs::write(v1.path().join("cpu.cfs_period_us"), "100000\n").unwrap();
        std::fs::write(
            v1.path().join("memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(
            (cpu_quota(v1.path()), memory_limit(v1.path())),
            (None, None)
        );
    }

    #[test]
    fn this_process_has_at_least_one_cpu() {
        let a = Limits::default().allocation(std::process::id());
        assert!(a.cpus >= 0.01, "{a:?}");
    }
}
