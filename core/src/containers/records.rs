//! What the runtimes record on the node about a container: its name, image and labels.
//! Only those records are read: Docker's `config.v2.json`, Podman's event log; for a pod's
//! container, the kubelet's (see [`super::kubelet`] and [`super::argo`]).
use std::path::Path;

use super::{argo::ArgoPod, kubelet, kubelet::K8s};
use crate::port::Host;

/// A container's name, image and labels, as far as its runtime's records say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    pub name: Option<String>,
    pub image: Option<String>,
    /// Labels, sorted, at most [`MAX_LABELS`].
    pub labels: Vec<(String, String)>,
    /// For a pod's container: what the kubelet's directories on the node say.
    pub k8s: Option<K8s>,
    /// For a container of an Argo workflow's step pod: the workflow and step.
    pub argo: Option<ArgoPod>,
}

pub const MAX_LABELS: usize = 16;
/// The tail of Podman's event log read: its container's `create` is among its last events.
const EVENT_LOG_TAIL: u64 = 4 << 20;

const DOCKER_ROOT: &str = "/var/lib/docker/containers";
const PODMAN_EVENT_LOGS: [&str; 2] = [
    "/run/libpod/events/events.log",
    "/var/run/libpod/events/events.log",
];

fn labels(v: Option<&serde_json::Value>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v
        .and_then(|v| v.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.truncate(MAX_LABELS);
    out
}

fn text(v: Option<&serde_json::Value>) -> Option<String> {
    v.and_then(|v| v.as_str())
        .map(|s| s.trim_start_matches('/').to_string())
        .filter(|s| !s.is_empty())
}

/// Docker's record of a container (`config.v2.json`).
pub(crate) fn docker(host: &dyn Host, root: &Path, id: &str) -> Option<Details> {
    let raw = host.read(&root.join(id).join("config.v2.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&raw).ok()?;
    let config = v.get("Config");
    Some(Details {
        name: text(v.get("Name")),
        image: text(config.and_then(|c| c.get("Image"))),
        labels: labels(config.and_then(|c| c.get("Labels"))),
        ..Default::default()
    })
}

/// Podman's event log: the last event of the container that names it.
pub(crate) fn podman_events(host: &dyn Host, log: &Path, id: &str) -> Option<Details> {
    let len = host.facts(log).ok()?.len;
    let from = len.saturating_sub(EVENT_LOG_TAIL);
    let bytes = host.read_from(log, from, EVENT_LOG_TAIL as usize).ok()?;
    // The tail may start inside a character: bytes, not a strict string.
    let tail = String::from_utf8_lossy(&bytes);
    let needle = format!("\"ID\":\"{id}\"");
    let line = tail.lines().rev().find(|l| l.contains(&needle))?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    Some(Details {
        name: text(v.get("Name")),
        image: text(v.get("Image")),
        labels: labels(v.get("Attributes")),
        ..Default::default()
    })
}

/// What the container's runtime (and, for a pod's container, the kubelet) records of it.
pub(crate) fn read(
    host: &dyn Host,
    runtime: Option<&str>,
    id: &str,
    pod_uid: Option<&str>,
    paths: &kubelet::Paths,
) -> Details {
    let found = match runtime {
        Some("docker") => docker(host, Path::new(DOCKER_ROOT), id),
        Some("podman") => PODMAN_EVENT_LOGS
            .iter()
            .find_map(|l| podman_events(host, Path::new(l), id)),
        _ => None,
    };
    let mut d = found.unwrap_or_default();
    if let Some(uid) = pod_uid {
        d.k8s = kubelet::names(host, paths, uid, id);
        if d.name.is_none() {
            d.name = d.k8s.as_ref().and_then(|k| k.container.clone());
        }
        let pod = d.k8s.as_ref().map(|k| k.pod.as_str());
        d.argo = super::argo::read(host, &paths.pod(uid), pod);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk_host::DiskHost;

    const ID: &str = "d58300be3bbcea62824d701e8e65a6ef855797f83a73764be8331015bb2148a6";

    #[test]
    fn dockers_config_names_the_container_its_image_and_labels() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(ID)).unwrap();
        std::fs::write(
            d.path().join(ID).join("config.v2.json"),
            r#"{"Name":"/align_1","Config":{"Image":"biocontainers/bwa:0.7.17","Labels":{"b":"2","a":"1"}}}"#,
        )
        .unwrap();
        let got = docker(&DiskHost::default(), d.path(), ID).unwrap();
        assert_eq!(got.name.as_deref(), Some("align_1"));
        assert_eq!(got.image.as_deref(), Some("biocontainers/bwa:0.7.17"));
        assert_eq!(
            got.labels,
            [("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(
            docker(&DiskHost::default(), d.path(), "0".repeat(64).as_str()),
            None
        );
    }

    #[test]
    fn podmans_event_log_names_the_container_and_its_labels() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.log");
        std::fs::write(
            &log,
            format!(
                "{{\"ID\":\"{other}\",\"Name\":\"other\",\"Status\":\"start\",\"Type\":\"container\",\"Attributes\":{{}}}}\n\
                 {{\"ID\":\"{ID}\",\"Image\":\"docker.io/library/busybox:latest\",\"Name\":\"ptest2\",\"Status\":\"start\",\"Type\":\"container\",\"Attributes\":{{\"pipeline\":\"demo\"}}}}\n",
                other = "1".repeat(64)
            ),
        )
        .unwrap();
        let got = podman_events(&DiskHost::default(), &log, ID).unwrap();
        assert_eq!(got.name.as_deref(), Some("ptest2"));
        assert_eq!(
            got.image.as_deref(),
            Some("docker.io/library/busybox:latest")
        );
        assert_eq!(got.labels, [("pipeline".into(), "demo".into())]);
    }
}
