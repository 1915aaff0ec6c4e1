//! deploy/'s Helm chart read as Kubernetes would run it, translated flag by flag into
//! `podman run`: its DaemonSet rendered from values, a container's securityContext, volumes,
//! mounts, environment and memory limit.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use pipetrace_e2e::{receiver::Receiver, repo};
use serde_yaml::Value as Yaml;

use super::{NODE, agent_image, podman_run};

pub(super) fn read(p: &str) -> String {
    std::fs::read_to_string(repo(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

pub(super) fn yaml(what: &str, text: &str) -> Yaml {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{what} is not valid YAML: {e}\n{text}"))
}

/// The DaemonSet as Helm renders it with `values`, for what this test reads: `{{ if
/// .Values.X }}` blocks kept or left out, `{{ .Values.X | quote }}` filled in, any other
/// `{{ }}` made `x`. Anything else (else, range) fails rather than be guessed.
fn daemonset(values: &Yaml) -> Yaml {
    let p = "deploy/helm/pipetrace/templates/daemonset.yaml";
    let value = |path: &str| path.split('.').fold(values, |v, k| &v[k]).clone();
    let mut taken: Vec<bool> = Vec::new();
    let mut kept = Vec::new();
    for line in read(p).lines() {
        let t = line.trim();
        let action = t.strip_prefix("{{").and_then(|r| r.strip_suffix("}}"));
        let action = action.filter(|a| !a.contains("{{"));
        match action.map(|a| a.trim_matches(|c: char| c == '-' || c.is_whitespace())) {
            Some(a) if a.starts_with("if .Values.") => {
                let on = match value(&a["if .Values.".len()..]) {
                    Yaml::Bool(b) => b,
                    Yaml::String(s) => !s.is_empty(),
                    Yaml::Mapping(m) => !m.is_empty(),
                    Yaml::Sequence(s) => !s.is_empty(),
                    Yaml::Null => false,
                    // Helm takes 0 as false.
                    Yaml::Number(n) => n.as_f64() != Some(0.0),
                    other => panic!("{p}: {a} on {other:?}"),
                };
                taken.push(on);
            }
            Some("end") => {
                taken.pop().expect("end without if");
            }
            Some(a) if a.starts_with("else") || a.starts_with("range") => {
                panic!("{p}: {a}: this test cannot render it")
            }
            _ if !taken.iter().all(|t| *t) => {}
            _ => {
                let mut out = String::new();
                let mut rest = line;
                while let Some(start) = rest.find("{{") {
                    out.push_str(&rest[..start]);
                    let end = rest[start..].find("}}").expect("an unclosed {{") + start + 2;
                    let inner =
                        rest[start + 2..end - 2].trim_matches(|c: char| c == '-' || c == ' ');
                    match inner
                        .strip_prefix(".Values.")
                        .and_then(|r| r.strip_suffix(" | quote"))
                    {
                        Some(path) => {
                            let v = value(path);
                            let v = v.as_str().unwrap_or_else(|| panic!("{path}: {v:?}"));
                            out.push_str(&serde_json::to_string(v).unwrap());
                        }
                        None => out.push('x'),
                    }
                    rest = &rest[end..];
                }
                kept.push(out + rest);
            }
        }
    }
    assert!(taken.is_empty(), "{p}: an if without end");
    yaml(p, &kept.join("\n"))
}

/// `--cap-drop`/`--cap-add`, `--security-opt` flags of a container's securityContext; and
/// that nothing privileged is asked for.
pub(super) fn security_flags(sc: &Yaml) -> Vec<String> {
    assert_ne!(sc["privileged"].as_bool(), Some(true), "{sc:?}");
    let mut flags = Vec::new();
    let caps = &sc["capabilities"];
    let drop: Vec<&str> = (caps["drop"].as_sequence().expect("capabilities.drop"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(drop, ["ALL"], "{sc:?}");
    flags.push("--cap-drop=all".to_string());
    for c in caps["add"].as_sequence().expect("capabilities.add") {
        flags.push(format!("--cap-add=CAP_{}", c.as_str().unwrap()));
    }
    if sc["allowPrivilegeEscalation"].as_bool() == Some(false) {
        flags.push("--security-opt=no-new-privileges".into());
    }
    match sc["appArmorProfile"]["type"].as_str() {
        Some("Unconfined") => flags.push("--security-opt=apparmor=unconfined".into()),
        None => {}
        Some(other) => panic!("appArmorProfile {other}: not translated"),
    }
    // Kubernetes runs a pod without a seccompProfile unconfined (podman's default profile
    // would refuse bpf() without CAP_SYS_ADMIN).
    assert!(sc["seccompProfile"].is_null(), "{sc:?}");
    flags.push("--security-opt=seccomp=unconfined".into());
    flags
}

/// A volume's source on this machine: a hostPath (made when missing, as the kubelet makes
/// a `DirectoryOrCreate` and the runtime an unchecked one), a configMap's files written to
/// `scratch`, an emptyDir as a folder of `scratch` shared by the pod's containers.
fn volume_source(
    volume: &Yaml,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    scratch: &Path,
) -> PathBuf {
    let name = volume["name"].as_str().unwrap();
    if let Some(path) = volume["hostPath"]["path"].as_str() {
        std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        return path.into();
    }
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(cm) = volume["configMap"]["name"].as_str() {
        let data = config_maps
            .get(cm)
            .unwrap_or_else(|| panic!("no ConfigMap {cm}"));
        for (file, text) in data {
            std::fs::write(dir.join(file), text).unwrap();
        }
        return dir;
    }
    assert!(
        !volume["emptyDir"].is_null(),
        "volume {volume:?}: not translated"
    );
    dir
}

/// `-v SOURCE:PATH:OPTIONS` for each of a container's volumeMounts.
pub(super) fn mount_flags(
    container: &Yaml,
    volumes: &Yaml,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    scratch: &Path,
) -> Vec<String> {
    let mut flags = Vec::new();
    for m in container["volumeMounts"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        let name = m["name"].as_str().unwrap();
        let volume = (volumes.as_sequence().expect("volumes").iter())
            .find(|v| v["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no volume {name}"));
        let source = volume_source(volume, config_maps, scratch);
        let mut opts = vec![if m["readOnly"].as_bool() == Some(true) {
            "ro"
        } else {
            "rw"
        }];
        match m["mountPropagation"].as_str() {
            Some("HostToContainer") => opts.push("rslave"),
            None => {}
            Some(other) => panic!("mountPropagation {other}: not translated"),
        }
        flags.push(format!(
            "-v={}:{}:{}",
            source.display(),
            m["mountPath"].as_str().unwrap(),
            opts.join(",")
        ));
    }
    flags
}

/// `-e NAME=VALUE` for each env entry; `value_of` gives those the template fills in (and
/// the downward API's).
pub(super) fn env_flags(
    container: &Yaml,
    value_of: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    for e in container["env"].as_sequence().into_iter().flatten() {
        let name = e["name"].as_str().unwrap().to_string();
        let value = match (value_of(&name), e["value"].as_str()) {
            (Some(v), _) => v,
            (None, Some(v)) if v != "x" => v.to_string(),
            _ => panic!("env {name}: no value to give it"),
        };
        vars.push((name, value));
    }
    // Kubernetes expands $(VAR) of variables defined before or after.
    let expanded: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| {
            let v = vars
                .iter()
                .fold(v.clone(), |v, (n, val)| v.replace(&format!("$({n})"), val));
            (k.clone(), v)
        })
        .collect();
    expanded
        .iter()
        .map(|(k, v)| format!("-e={k}={v}"))
        .collect()
}

fn memory_flag(container: &Yaml) -> Vec<String> {
    match container["resources"]["limits"]["memory"].as_str() {
        Some(m) => vec![format!(
            "--memory={}",
            m.strip_suffix("Mi").map(|n| format!("{n}m")).unwrap()
        )],
        None => vec![],
    }
}

pub(super) fn args_of(container: &Yaml) -> Vec<String> {
    (container["args"].as_sequence().expect("args").iter())
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// The chart's agent as `podman run` arguments, up to the image and its args; the
/// receiver's gRPC URL as its endpoint. Host network: the receiver listens on the host's
/// loopback (the chart's pod reaches its endpoint through the cluster's network).
/// `pipeline_dir`: the chart's `pipelineDir`, where the host's pipelines run.
pub(super) fn node_agent_run(
    rx: &Receiver,
    scratch: &Path,
    name: &str,
    pipeline_dir: &Path,
) -> Vec<String> {
    let mut values = yaml("values.yaml", &read("deploy/helm/pipetrace/values.yaml"));
    assert_eq!(
        values["pipelineDir"].as_str(),
        Some(""),
        "the chart's default"
    );
    values["pipelineDir"] = Yaml::String(pipeline_dir.to_str().unwrap().to_string());
    let ds = daemonset(&values);
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"].as_bool(), Some(true), "{spec:?}");
    let agent = (spec["containers"].as_sequence().unwrap().iter())
        .find(|c| c["name"].as_str() == Some("pipetrace"))
        .expect("the pipetrace container");
    let config = serde_yaml::to_string(&values["config"]).unwrap();
    let maps = BTreeMap::from([(
        "x-config".to_string(),
        BTreeMap::from([("config.yaml".to_string(), config)]),
    )]);
    let protocol = values["otlp"]["protocol"].as_str().unwrap().to_string();
    let mut run = podman_run(&["-d", "--pid=host", "--network=host"]);
    run.push(format!("--name={name}"));
    run.extend(security_flags(&agent["securityContext"]));
    run.extend(memory_flag(agent));
    run.extend(mount_flags(agent, &spec["volumes"], &maps, scratch));
    run.extend(env_flags(agent, |n| match n {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(rx.grpc_url()),
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some(protocol.clone()),
        "NODE_NAME" => Some(NODE.to_string()),
        _ => None,
    }));
    run.push(agent_image());
    run.extend(args_of(agent));
    run
}
