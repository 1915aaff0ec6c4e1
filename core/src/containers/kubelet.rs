//! What the kubelet itself shows on the node of a pod's container, with no API access:
//! - `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`: the pod's namespace
//!   and name (found by its uid, which the cgroup path gives) and its containers' names;
//! - `/var/log/containers/<pod>_<namespace>_<container>-<id>.log`, links into the above: the
//!   only record on the node (besides the runtimes' bundles, which hold the container's
//!   environment and are not read) that ties a container's id to its name.
use std::path::{Path, PathBuf};

use crate::port::Host;

/// A Kubernetes container's place: its pod, namespace and (where the node tells) its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct K8s {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

/// Where the kubelet's records are: under `/`, or under [`ROOT_ENV`] (tests).
#[derive(Clone, Debug)]
pub struct Paths {
    root: PathBuf,
}

/// A directory standing for `/` when reading the kubelet's records (tests use it).
pub const ROOT_ENV: &str = "PIPETRACE_KUBELET_ROOT";

impl Default for Paths {
    fn default() -> Self {
        let root = std::env::var_os(ROOT_ENV).map_or_else(|| PathBuf::from("/"), PathBuf::from);
        Self { root }
    }
}

impl Paths {
    #[cfg(test)]
    pub(crate) fn under(root: &Path) -> Self {
        Self { root: root.into() }
    }

    pub(crate) fn pod_logs(&self) -> PathBuf {
        self.root.join("var/log/pods")
    }

    pub(crate) fn log_links(&self) -> PathBuf {
        self.root.join("var/log/containers")
    }

    /// The kubelet's own directory of pod `uid` (its volumes).
    pub(crate) fn pod(&self, uid: &str) -> PathBuf {
        self.root.join("var/lib/kubelet/pods").join(uid)
    }
}

/// Names of the directory entries of `dir` (none when it cannot be read), with their paths.
fn entries(host: &dyn Host, dir: &Path) -> impl Iterator<Item = (String, PathBuf)> {
    (host.list(dir).into_iter().flatten()).filter_map(|p| {
        let name = p.file_name()?.to_string_lossy().into_owned();
        Some((name, p))
    })
}

/// The pod directory of pod `uid` under `/var/log/pods`: its namespace, name and path.
/// Namespace and pod names are DNS labels / subdomains: they hold no `_`.
pub(crate) fn pod_dir(
    host: &dyn Host,
    pod_logs: &Path,
    uid: &str,
) -> Option<(String, String, PathBuf)> {
    let suffix = format!("_{uid}");
    entries(host, pod_logs).find_map(|(name, path)| {
        let (namespace, pod) = name.strip_suffix(&suffix)?.split_once('_')?;
        let ok = !namespace.is_empty() && !pod.is_empty() && !pod.contains('_');
        ok.then(|| (namespace.to_string(), pod.to_string(), path))
    })
}

/// The containers' directories of a pod's log directory: their names, sorted.
pub(crate) fn container_dirs(host: &dyn Host, dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = entries(host, dir)
        .filter(|(_, p)| host.facts(p).is_ok_and(|f| f.is_dir))
        .map(|(name, _)| name)
        .collect();
    out.sort();
    out
}

/// The kubelet's log link of container `id`: `<pod>_<namespace>_<container>-<id>.log`
/// (the container's name ends at the id).
pub(crate) fn log_link(host: &dyn Host, dir: &Path, id: &str) -> Option<K8s> {
    let suffix = format!("-{id}.log");
    let name = entries(host, dir)
        .map(|(name, _)| name)
        .find(|n| n.ends_with(&suffix))?;
    let mut parts = name.strip_suffix(&suffix)?.splitn(3, '_');
    let (pod, namespace, container) = (parts.next()?, parts.next()?, parts.next()?);
    Some(K8s {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        container: Some(container.to_string()),
    })
}

/// Container `id` of pod `uid`: namespace and pod from the pod's log directory; the
/// container's name from its log link, else the pod's only container directory. Without
/// the pod's directory, the link alone (older kubelets, or a pod directory not mounted).
pub(crate) fn names(host: &dyn Host, paths: &Paths, uid: &str, id: &str) -> Option<K8s> {
    let link = log_link(host, &paths.log_links(), id);
    let Some((namespace, pod, dir)) = pod_dir(host, &paths.pod_logs(), uid) else {
        return link;
    };
    let dirs = container_dirs(host, &dir);
    let container = match link {
        // The link names this pod's container: one of its directories.
        Some(l) if l.pod == pod && l.namespace == namespace => l.container,
        _ if dirs.len() == 1 => dirs.into_iter().next(),
        _ => None,
    };
    Some(K8s {
        namespace,
        pod,
        container,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk_host::DiskHost;

    const ID: &str = "d58300be3bbcea62824d701e8e65a6ef855797f83a73764be8331015bb2148a6";
    const UID: &str = "0c7a3f5e-8b1d-4c2e-9f00-1234567890ab";

    fn pod(root: &Path, dir: &str, containers: &[&str]) {
        for c in containers {
            let d = root.join("var/log/pods").join(dir).join(c);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("0.log"), "").unwrap();
        }
    }

    #[test]
    fn the_pods_log_directory_names_its_namespace_pod_and_only_container() {
        let d = tempfile::tempdir().unwrap();
        pod(d.path(), &format!("rnaseq_align-7f9c_{UID}"), &["main"]);
        pod(
            d.path(),
            "rnaseq_other_11111111-2222-3333-4444-555555555555",
            &["x"],
        );
        let k = names(&DiskHost::default(), &Paths::under(d.path()), UID, ID).unwrap();
        assert_eq!(
            (k.namespace.as_str(), k.pod.as_str(), k.container.as_deref()),
            ("rnaseq", "align-7f9c", Some("main"))
        );
        let none = names(
            &DiskHost::default(),
            &Paths::under(d.path()),
            "99999999-2222-3333-4444-555555555555",
            ID,
        );
        assert_eq!(none, None);
    }

    #[test]
    fn of_several_containers_the_log_link_tells_which_one_and_else_none() {
        let d = tempfile::tempdir().unwrap();
        let dir = format!("argo_wf-abc-align-123_{UID}");
        pod(d.path(), &dir, &["init", "wait", "main"]);
        let paths = Paths::under(d.path());
        let k = names(&DiskHost::default(), &paths, UID, ID).unwrap();
        assert_eq!((k.pod.as_str(), k.container), ("wf-abc-align-123", None));
        let links = paths.log_links();
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink(
            paths.pod_logs().join(&dir).join("wait/0.log"),
            links.join(format!("wf-abc-align-123_argo_wait-{ID}.log")),
        )
        .unwrap();
        let k = names(&DiskHost::default(), &paths, UID, ID).unwrap();
        assert_eq!(k.container.as_deref(), Some("wait"));
        assert_eq!(k.namespace, "argo");
    }

    #[test]
    fn without_the_pods_directory_the_log_link_alone_names_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join(format!("align-7f9c_rnaseq_bwa-mem-{ID}.log")),
            "",
        )
        .unwrap();
        std::fs::write(
            d.path().join(format!("other_ns_c-{}.log", "1".repeat(64))),
            "",
        )
        .unwrap();
        let k = log_link(&DiskHost::default(), d.path(), ID).unwrap();
        assert_eq!(
            (k.pod.as_str(), k.namespace.as_str(), k.container.as_deref()),
            ("align-7f9c", "rnaseq", Some("bwa-mem"))
        );
        assert_eq!(
            log_link(&DiskHost::default(), d.path(), &"2".repeat(64)),
            None
        );
        let paths = Paths::under(Path::new("/nonexistent"));
        assert_eq!(names(&DiskHost::default(), &paths, UID, ID), None);
    }
}
