//! Cgroups the tests make: a memory limit and throttled I/O for the planted faults, a head's
//! own for the cluster runs (each removed when dropped).
use std::path::{Path, PathBuf};

pub struct MemoryCgroup(pub PathBuf);

impl MemoryCgroup {
    /// In the v1 memory hierarchy where there is one, else in cgroup v2 (no swap).
    pub fn new(limit: u64) -> Self {
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let name = format!("pipetrace-test-mem-{}", std::process::id());
        let dir = if v1.join("cgroup.procs").exists() {
            let d = v1.join(&name);
            let _ = std::fs::create_dir(&d);
            std::fs::write(d.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
            d
        } else {
            let root = Path::new("/sys/fs/cgroup");
            std::fs::write(root.join("cgroup.subtree_control"), "+memory").unwrap();
            let d = root.join(&name);
            let _ = std::fs::create_dir(&d);
            std::fs::write(d.join("memory.max"), limit.to_string()).unwrap();
            let _ = std::fs::write(d.join("memory.swap.max"), "0");
            d
        };
        Self(dir)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A block-I/O cgroup that lets its processes write to one device only `iops` times a
/// second: storage that is slow for them alone, and the same on every machine.
pub struct ThrottledIo(pub PathBuf);

impl ThrottledIo {
    /// In the v1 blkio hierarchy where there is one, else in cgroup v2's io controller.
    pub fn new(device: &Path, iops: u32) -> Self {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(device).unwrap().rdev();
        let dev = format!("{}:{}", libc::major(rdev), libc::minor(rdev));
        let v1 = Path::new("/sys/fs/cgroup/blkio");
        let name = format!("pipetrace-test-io-{}", std::process::id());
        let dir = if v1.join("cgroup.procs").exists() {
            let d = v1.join(&name);
            let _ = std::fs::create_dir(&d);
            let limit = format!("{dev} {iops}");
            std::fs::write(d.join("blkio.throttle.write_iops_device"), limit).unwrap();
            d
        } else {
            let root = Path::new("/sys/fs/cgroup");
            std::fs::write(root.join("cgroup.subtree_control"), "+io").unwrap();
            let d = root.join(&name);
            let _ = std::fs::create_dir(&d);
            std::fs::write(d.join("io.max"), format!("{dev} wiops={iops}")).unwrap();
            d
        };
        Self(dir)
    }
}

impl Drop for ThrottledIo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A cgroup of its own for a cluster run's head, in the unified (v2) hierarchy where a move
/// changes the id the probes report, removed when dropped.
pub struct HeadCgroup {
    pub dir: PathBuf,
    /// Its path as /proc/PID/cgroup shows it, for the agent's scope.
    pub path: String,
}

impl HeadCgroup {
    pub fn new(tag: &str) -> Self {
        let name = format!("pipetrace-head-{}-{tag}", std::process::id());
        let hybrid = Path::new("/sys/fs/cgroup/unified");
        let root = match hybrid.join("cgroup.procs").exists() {
            true => hybrid,
            false => Path::new("/sys/fs/cgroup"),
        };
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            dir,
            path: format!("/{name}"),
        }
    }
}

impl Drop for HeadCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
