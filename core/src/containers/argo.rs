//! Which Argo workflow and step a pod runs, from what the node records of the pod's labels
//! and annotations: the downward-API volume Argo mounts in each pod, which the kubelet keeps
//! at `/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~downward-api/<volume>/{labels,annotations}`
//! (one `key="value"` a line, the value quoted as Go's `%q`). Only those two files are read.
use std::path::Path;

use crate::port::Host;

const WORKFLOW_LABEL: &str = "workflows.argoproj.io/workflow";
const NODE_NAME: &str = "workflows.argoproj.io/node-name";
/// Older Argo versions put the step's template (JSON) in this annotation.
const TEMPLATE: &str = "workflows.argoproj.io/template";
/// The pod's main container, as Argo names it for `kubectl`.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// The files are small; a bigger one is not the kubelet's.
const MAX_FILE: u64 = 256 << 10;
/// Argo shortens the workflow's part of longer pod names (Kubernetes allows 253).
const MAX_UNCUT_POD_NAME: usize = 200;

/// An Argo workflow's step pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgoPod {
    pub workflow: String,
    /// The workflow node the pod runs (`wf-abc.align(0)`, `wf-abc[0].align`).
    pub node: String,
    pub template: Option<String>,
    /// The container that runs the step (Argo's `main`), where the annotations say.
    pub main_container: Option<String>,
}

impl ArgoPod {
    /// The step's name within its workflow, as Argo displays it: the node name's last
    /// part after the workflow's (`align(0)` of `wf.align(0)` and of `wf[0].align(0)`), a
    /// `.` inside an item's `(...)` or a group's `[...]` being no separator. None for the
    /// workflow's root node (a workflow of one pod).
    pub(crate) fn display(&self) -> Option<String> {
        let rest = self.node.strip_prefix(&self.workflow)?;
        let mut depth = 0i32;
        let mut start = 0;
        for (i, c) in rest.char_indices() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '.' if depth == 0 => start = i + 1,
                _ => {}
            }
        }
        let last = &rest[start..];
        (!last.is_empty() && !last.starts_with('[')).then(|| last.to_string())
    }
}

/// Go's `strconv.Quote`d string, unquoted; None if it is not one.
fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let hex = |chars: &mut std::str::Chars, n: usize| {
            let digits: String = chars.by_ref().take(n).collect();
            u32::from_str_radix(&digits, 16)
                .ok()
                .and_then(char::from_u32)
        };
        out.push(match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'v' => '\x0b',
            'x' => hex(&mut chars, 2)?,
            'u' => hex(&mut chars, 4)?,
            'U' => hex(&mut chars, 8)?,
            c @ ('\\' | '"' | '\'') => c,
            _ => return None,
        });
    }
    Some(out)
}

/// The kubelet's `key="value"` lines; lines that are not are skipped.
pub(crate) fn parse(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.to_string(), unquote(v)?))
        })
        .collect()
}

fn get<'a>(kv: &'a [(String, String)], key: &str) -> Option<&'a str> {
    kv.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// The template's name in Argo's template annotation (JSON), where there is one.
fn template_name(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("name")?.as_str().map(str::to_string)
}

/// The workflow named by the pod's name when its labels are not recorded: Argo names a
/// step's pod `<workflow>-<template>-<hash>` (or `<workflow>-<hash>`), its node
/// `<workflow>.<step>` or `<workflow>[i].<step>`. The workflow is the node name's prefix, up
/// to a `.` or `[`, that the pod's name starts with followed by `-`: a shorter or longer
/// prefix would need a `-` where the other name has a `.` or `[`, so at most one fits. A
/// pod name Argo may have cut short (near Kubernetes' 253 characters) is not used.
fn workflow_of(pod: &str, node: &str) -> Option<String> {
    if pod.len() >= MAX_UNCUT_POD_NAME {
        return None;
    }
    let mut found = node
        .char_indices()
        .filter(|&(i, c)| i > 0 && (c == '.' || c == '['))
        .map(|(i, _)| &node[..i])
        .filter(|wf| pod.strip_prefix(wf).is_some_and(|r| r.starts_with('-')));
    let wf = found.next()?;
    found.next().is_none().then(|| wf.to_string())
}

/// The pod's Argo workflow and step from its labels and annotations; `pod` (its name, from
/// the kubelet's log directory) names the workflow when the labels are not recorded.
pub(crate) fn from_metadata(
    labels: &[(String, String)],
    annotations: &[(String, String)],
    pod: Option<&str>,
) -> Option<ArgoPod> {
    let node = get(annotations, NODE_NAME)?;
    let workflow = match get(labels, WORKFLOW_LABEL) {
        Some(wf) => wf.to_string(),
        None => workflow_of(pod?, node)?,
    };
    Some(ArgoPod {
        node: node.to_string(),
        template: get(annotations, TEMPLATE).and_then(template_name),
        main_container: get(annotations, DEFAULT_CONTAINER).map(str::to_string),
        workflow,
    })
}

fn read_small(host: &dyn Host, path: &Path) -> Option<String> {
    if host.facts(path).ok()?.len > MAX_FILE {
        return None;
    }
    host.read_to_string(path).ok()
}

/// The Argo step pod `pod_dir` (the kubelet's directory of the pod) runs, if it is one.
pub(crate) fn read(host: &dyn Host, pod_dir: &Path, pod: Option<&str>) -> Option<ArgoPod> {
    let volumes = pod_dir.join("volumes/kubernetes.io~downward-api");
    let mut dirs = host.list(&volumes).ok()?;
    dirs.sort();
    dirs.iter().find_map(|d| {
        let annotations = parse(&read_small(host, &d.join("annotations"))?);
        let labels = read_small(host, &d.join("labels")).map_or_else(Vec::new, |t| parse(&t));
        from_metadata(&labels, &annotations, pod)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk_host::DiskHost;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_kubelets_lines_unquote_as_go_quoted_them() {
        let text = "a=\"x\\\"y\"\nkubectl.kubernetes.io/default-container=\"main\"\n\
                    t=\"{\\\"name\\\":\\\"align\\\"}\"\nu=\"caf\\u00e9\\x21\"\nbad=unquoted\n";
        assert_eq!(
            parse(text),
            kv(&[
                ("a", "x\"y"),
                ("kubectl.kubernetes.io/default-container", "main"),
                ("t", "{\"name\":\"align\"}"),
                ("u", "café!"),
            ])
        );
        assert_eq!(unquote("\"a\\q\""), None);
    }

    #[test]
    fn labels_and_annotations_name_the_workflow_its_step_and_template() {
        let labels = kv(&[(WORKFLOW_LABEL, "wf-abc"), ("other", "1")]);
        let ann = kv(&[
            (NODE_NAME, "wf-abc[0].align(0)"),
            (TEMPLATE, "{\"name\":\"bwa\",\"container\":{}}"),
        ]);
        let a = from_metadata(&labels, &ann, None).unwrap();
        assert_eq!(a.workflow, "wf-abc");
        assert_eq!(a.display().as_deref(), Some("align(0)"));
        assert_eq!(a.template.as_deref(), Some("bwa"));
        let dag = kv(&[(NODE_NAME, "wf-abc.align(0)")]);
        let a = from_metadata(&labels, &dag, None).unwrap();
        assert_eq!(a.display().as_deref(), Some("align(0)"));
        let item = kv(&[(NODE_NAME, "wf-abc[1].outer[0].call(0:a.fq)")]);
        let a = from_metadata(&labels, &item, None).unwrap();
        assert_eq!(a.display().as_deref(), Some("call(0:a.fq)"));
        let root = kv(&[(NODE_NAME, "wf-abc")]);
        assert_eq!(from_metadata(&labels, &root, None).unwrap().display(), None);
        assert_eq!(from_metadata(&labels, &[], None), None, "no node: no step");
    }

    #[test]
    fn without_the_label_the_pod_name_names_the_workflow_only_when_unambiguous() {
        let ann = kv(&[(NODE_NAME, "my.wf-abc.align(0)")]);
        let a = from_metadata(&[], &ann, Some("my.wf-abc-align-1234")).unwrap();
        assert_eq!(a.workflow, "my.wf-abc");
        assert_eq!(a.display().as_deref(), Some("align(0)"));
        // Of `a` and `a.b`, only the one the pod's name continues with `-`.
        let ann = kv(&[(NODE_NAME, "a.b.c")]);
        assert_eq!(
            from_metadata(&[], &ann, Some("a-b-x")).unwrap().workflow,
            "a"
        );
        assert_eq!(
            from_metadata(&[], &ann, Some("a.b-c-x")).unwrap().workflow,
            "a.b"
        );
        let long = format!("{}-c-1", "w".repeat(220));
        let ann = kv(&[(NODE_NAME, &*format!("{}.c", "w".repeat(220)))]);
        assert_eq!(
            from_metadata(&[], &ann, Some(&long)),
            None,
            "maybe cut short"
        );
        assert_eq!(
            from_metadata(&[], &kv(&[(NODE_NAME, "a.b")]), Some("a-b-1")),
            Some(ArgoPod {
                workflow: "a".into(),
                node: "a.b".into(),
                template: None,
                main_container: None,
            })
        );
        // A truncated or unrelated pod name: none.
        assert_eq!(
            from_metadata(&[], &kv(&[(NODE_NAME, "wf.s")]), Some("x-1")),
            None
        );
        assert_eq!(from_metadata(&[], &kv(&[(NODE_NAME, "wf.s")]), None), None);
    }

    #[test]
    fn the_downward_api_volume_under_the_pods_directory() {
        let d = tempfile::tempdir().unwrap();
        let vol = d
            .path()
            .join("volumes/kubernetes.io~downward-api/podmetadata");
        std::fs::create_dir_all(&vol).unwrap();
        assert_eq!(read(&DiskHost::default(), d.path(), Some("wf-x-1")), None);
        std::fs::write(
            vol.join("annotations"),
            "workflows.argoproj.io/node-name=\"wf.align(0)\"\n",
        )
        .unwrap();
        std::fs::write(
            vol.join("labels"),
            "workflows.argoproj.io/workflow=\"wf\"\n",
        )
        .unwrap();
        let a = read(&DiskHost::default(), d.path(), None).unwrap();
        assert_eq!(
            (a.workflow.as_str(), a.node.as_str()),
            ("wf", "wf.align(0)")
        );
        assert_eq!(
            read(&DiskHost::default(), Path::new("/nonexistent"), None),
            None
        );
    }
}
