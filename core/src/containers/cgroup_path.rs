//! Which container (and pod) a process runs in, from its cgroup paths: every runtime and
//! cgroup manager names the container's cgroup after the container's id.
//!
//! Layouts read (cgroup v1 and v2, systemd and cgroupfs managers):
//! - Docker: `/docker/<id>`, `/system.slice/docker-<id>.scope`
//! - Podman: `/libpod_parent/libpod-<id>`, `/machine.slice/libpod-<id>.scope[/container]`
//! - containerd (CRI): `cri-containerd-<id>.scope`, `/system.slice/containerd.service/...:cri-containerd:<id>`
//! - CRI-O: `crio-<id>.scope`, `/crio/<id>`
//! - Kubernetes: `kubepods[-<qos>]-pod<uid>.slice` (systemd, `_` for `-` in the uid) or
//!   `/kubepods/<qos>/pod<uid>/<id>` (cgroupfs), the container's id in the last component.
//!
//! The runtimes' own helpers (`libpod-conmon-<id>`, `crio-conmon-<id>`) are not the container.

/// Where a process runs, as its cgroup says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The container's full id (64 hex digits).
    pub id: String,
    /// `docker`, `podman`, `containerd` or `cri-o`; None where the layout does not say.
    pub runtime: Option<&'static str>,
    /// The Kubernetes pod's uid, for a container of a pod.
    pub pod_uid: Option<String>,
}

const ID_LEN: usize = 64;

fn is_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The id in one path component, and the runtime its prefix names.
fn component(c: &str) -> Option<(String, Option<&'static str>)> {
    let c = c.strip_suffix(".scope").unwrap_or(c);
    if c.contains("conmon") {
        return None;
    }
    const PREFIXES: [(&str, &str); 5] = [
        ("docker-", "docker"),
        ("libpod-", "podman"),
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("containerd-", "containerd"),
    ];
    for (prefix, runtime) in PREFIXES {
        if let Some(id) = c.strip_prefix(prefix)
            && is_id(id)
        {
            return Some((id.to_string(), Some(runtime)));
        }
    }
    // `...:cri-containerd:<id>` (containerd's systemd cgroup names).
    if let Some((_, id)) = c.rsplit_once(":cri-containerd:")
        && is_id(id)
    {
        return Some((id.to_string(), Some("containerd")));
    }
    is_id(c).then(|| (c.to_string(), None))
}

/// The pod uid in one path component (`pod<uid>`, `kubepods-burstable-pod<uid>.slice`).
fn pod_uid(c: &str) -> Option<String> {
    let c = c.strip_suffix(".slice").unwrap_or(c);
    let uid = c.rsplit_once("pod").map(|(_, u)| u)?;
    let uid = uid.replace('_', "-");
    let ok = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    ok.then_some(uid)
}

/// One cgroup path: the innermost container id, with its runtime, and the pod above it.
pub(crate) fn from_path(path: &str) -> Option<Placement> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let (at, (id, mut runtime)) = parts
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, c)| component(c).map(|found| (i, found)))?;
    let above = &parts[..at];
    // A bare id counts only where a runtime's parent names it.
    if runtime.is_none() {
        runtime = match above.last().copied() {
            Some("docker") => Some("docker"),
            Some("crio") => Some("cri-o"),
            Some("libpod_parent") => Some("podman"),
            _ => None,
        };
    }
    let pod_uid = above
        .iter()
        .filter(|c| c.starts_with("kubepods") || c.starts_with("pod"))
        .find_map(|c| pod_uid(c));
    let known = runtime.is_some() || pod_uid.is_some();
    known.then_some(Placement {
        id,
        runtime,
        pod_uid,
    })
}

/// The text of `/proc/<pid>/cgroup`: the first line whose path names a container.
pub(crate) fn from_proc_cgroup(text: &str) -> Option<Placement> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .find_map(from_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "36c420745143207423046a43e56a0f007f462cd97e862a46d3095908d406324e";
    const UID: &str = "0c7a3f5e-8b1d-4c2e-9f00-1234567890ab";

    fn at(path: &str) -> Option<(String, Option<&'static str>, Option<String>)> {
        from_path(path).map(|p| (p.id, p.runtime, p.pod_uid))
    }

    #[test]
    fn each_runtime_and_manager_layout_names_its_container() {
        let cases: Vec<(String, Option<&str>)> = vec![
            (format!("/docker/{ID}"), Some("docker")),
            (format!("/system.slice/docker-{ID}.scope"), Some("docker")),
            (format!("/libpod_parent/libpod-{ID}"), Some("podman")),
            (
                format!("/machine.slice/libpod-{ID}.scope/container"),
                Some("podman"),
            ),
            (
                format!("/system.slice/cri-containerd-{ID}.scope"),
                Some("containerd"),
            ),
            (format!("/system.slice/crio-{ID}.scope"), Some("cri-o")),
            (format!("/crio/{ID}"), Some("cri-o")),
        ];
        for (path, runtime) in cases {
            assert_eq!(at(&path), Some((ID.to_string(), runtime, None)), "{path}");
        }
    }

    #[test]
    fn kubernetes_pods_under_both_managers() {
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
            UID.replace('-', "_")
        );
        assert_eq!(
            at(&systemd),
            Some((ID.to_string(), Some("containerd"), Some(UID.to_string())))
        );
        let cgroupfs = format!("/kubepods/besteffort/pod{UID}/{ID}");
        assert_eq!(
            at(&cgroupfs),
            Some((ID.to_string(), None, Some(UID.to_string())))
        );
        let crio = format!(
            "/kubepods.slice/kubepods-pod{}.slice/crio-{ID}.scope",
            UID.replace('-', "_")
        );
        assert_eq!(
            at(&crio),
            Some((ID.to_string(), Some("cri-o"), Some(UID.to_string())))
        );
    }

    #[test]
    fn helpers_and_hosts_are_no_container() {
        for path in [
            "/".to_string(),
            "/user.slice/user-0.slice/session-1.scope".to_string(),
            format!("/libpod_parent/conmon/libpod-conmon-{ID}"),
            format!("/system.slice/crio-conmon-{ID}.scope"),
            // An id-like name nobody's runtime made.
            format!("/mine/{ID}"),
            "/slurm/uid_0/job_7/step_0".to_string(),
        ] {
            assert_eq!(at(&path), None, "{path}");
        }
    }

    #[test]
    fn a_proc_cgroup_file_of_cgroup_v1_and_v2() {
        let v1 = format!(
            "12:pids:/libpod_parent/libpod-{ID}\n1:name=systemd:/libpod_parent/libpod-{ID}\n0::/\n"
        );
        assert_eq!(
            from_proc_cgroup(&v1).map(|p| p.runtime),
            Some(Some("podman"))
        );
        let v2 = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(from_proc_cgroup(&v2).map(|p| p.id), Some(ID.to_string()));
        assert_eq!(from_proc_cgroup("0::/user.slice\n"), None);
    }
}
