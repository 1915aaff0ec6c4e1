//! Whether the agent shares the host's PID namespace. The probes report each process by its
//! PID in the host's (initial) namespace, and the agent reads `/proc/<that pid>`: in a PID
//! namespace of its own (a container or pod without hostPID, a pod's shared namespace
//! included) those PIDs name nothing in its `/proc`, or another process, and no process
//! would be traced. Measured with podman: an agent in a pod's shared PID namespace loads its
//! probes and exports nothing of the pod's pipeline.

/// The initial PID namespace's inode number (`PROC_PID_INIT_INO`, fixed since Linux 3.8).
pub const HOST_PID_NS: u64 = 0xEFFF_FFFC;

#[derive(Debug, thiserror::Error)]
#[error(
    "pipetrace runs in a PID namespace of its own ({0}; the host's is pid:[{HOST_PID_NS}]): the \
     kernel reports host PIDs, which its /proc cannot see, so its eBPF probes would trace \
     nothing. Run it in the host's PID namespace: `hostPID: true` in Kubernetes (a pod's \
     shareProcessNamespace is not enough), `--pid=host` with podman or docker, `pid: host` in \
     compose"
)]
pub struct PrivatePidNamespace(pub String);

/// The inode of a `/proc/PID/ns/pid` link's target (`pid:[4026531836]`).
pub(crate) fn ns_inode(link: &str) -> Option<u64> {
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// How many namespaces `/proc/self/status`'s `NSpid:` names the process in (1: only the one
/// of this /proc; more: it sits in a namespace below it).
pub(crate) fn nspid_levels(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| ids.split_whitespace().count())
}

/// Refuses a PID namespace other than the host's. What cannot be read passes: nothing tells.
pub fn check() -> Result<(), PrivatePidNamespace> {
    let link = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|l| l.to_string_lossy().into_owned());
    if let Some(link) = &link
        && ns_inode(link).is_some_and(|ino| ino != HOST_PID_NS)
    {
        return Err(PrivatePidNamespace(link.clone()));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if nspid_levels(&status).is_some_and(|n| n > 1) {
        let nspid = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .unwrap_or("");
        return Err(PrivatePidNamespace(
            nspid.split_whitespace().collect::<Vec<_>>().join(" "),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_namespace_inode_and_levels() {
        assert_eq!(ns_inode("pid:[4026531836]"), Some(HOST_PID_NS));
        assert_eq!(ns_inode("pid:[4026532281]"), Some(4026532281));
        assert_eq!(ns_inode("net:[4026531840]"), None);
        assert_eq!(nspid_levels("Name:\tx\nNSpid:\t4242\n"), Some(1));
        assert_eq!(nspid_levels("NSpid:\t4242\t7\n"), Some(2));
        assert_eq!(nspid_levels("Name:\tx\n"), None);
    }

    #[test]
    fn the_message_says_what_is_wrong_and_what_to_do() {
        let e = PrivatePidNamespace("pid:[4026532281]".into()).to_string();
        for needle in [
            "PID namespace of its own",
            "host PIDs",
            "hostPID: true",
            "--pid=host",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }
}
