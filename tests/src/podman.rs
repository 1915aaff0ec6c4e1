//! Real Podman containers as they run here: runc and the cgroupfs manager (crun fails on
//! this host's hybrid cgroups), a root filesystem of the static BusyBox (no image can be
//! pulled), no network.
use std::path::Path;

/// A root filesystem of the static BusyBox: `/bin/<applet>` for what the tests run.
pub fn busybox_rootfs(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).expect("busybox-static is installed");
    for applet in ["sh", "sleep", "cat", "true"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    for d in ["proc", "sys", "dev", "etc", "tmp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
}

/// `podman ...` arguments up to the container's own options.
pub const PODMAN_RUN: [&str; 11] = [
    "--cgroup-manager=cgroupfs",
    "--runtime",
    "runc",
    "run",
    "--rm",
    "--network=none",
    "--ulimit",
    "nofile=20000:20000",
    "--ulimit",
    "nproc=32768:32768",
    "--pull=never",
];

/// The id podman wrote to its `--cidfile`.
pub fn container_id(cidfile: &Path) -> String {
    let id = std::fs::read_to_string(cidfile).expect("podman wrote its --cidfile");
    id.trim().to_string()
}
