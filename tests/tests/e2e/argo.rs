//! Argo workflows on a node, as the kubelet leaves them: each step pod's log directory
//! (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log`, with `/var/log/containers`
//! links), its downward-API volume of labels and annotations under
//! `/var/lib/kubelet/pods/<uid>/`, and real kubepods cgroups named by pod uid and container
//! id that real processes move into, under the real agent (the kubelet's directories are
//! made under a root given by PIPETRACE_KUBELET_ROOT). The workflow is the run, each step a
//! task of it; Argo's own executor is never a task.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use pipetrace_e2e::{Agent, receiver::Receiver, spans::RecvSpan};
use pipetrace_semconv::attr;

const NS: &str = "genomics";

/// A cgroup directory (and its parents up to the test's own) in the unified hierarchy,
/// removed when dropped.
struct Cgroup {
    dir: PathBuf,
    top: PathBuf,
}

impl Cgroup {
    fn new(top: &str, path: &str) -> Self {
        let top = Path::new("/sys/fs/cgroup/unified").join(top);
        let dir = top.join(path);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self { dir, top }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Innermost first; a directory is removable once no process is in it.
        let mut at = Some(self.dir.as_path());
        while let Some(d) = at.filter(|d| d.starts_with(&self.top)) {
            let _ = std::fs::remove_dir(d);
            at = d.parent();
        }
    }
}

/// A pod as the kubelet records it on the node.
struct Pod {
    uid: String,
    name: String,
    containers: Vec<(&'static str, String)>,
}

/// Ids made from a seed: a pod uid and a container id, unique to this test process.
fn uid(seed: u32) -> String {
    let h = format!("{:08x}{:08x}", std::process::id(), seed);
    format!("{}-{}-{}-a000-{seed:012x}", &h[..8], &h[8..12], &h[12..16])
}

fn container_id(seed: u32) -> String {
    format!("{:08x}{:08x}", std::process::id(), seed).repeat(4)
}

/// Writes the kubelet's records of `pod` under `root`: its log directories, a log link per
/// container when `links`, and its downward-API volume (annotations, and labels when given)
/// in the kubelet's atomic-writer layout (`..data` pointing at a timestamped directory).
fn kubelet_records(root: &Path, pod: &Pod, node: &str, labels: Option<&str>, links: bool) {
    let dir = format!("{NS}_{}_{}", pod.name, pod.uid);
    let logs = root.join("var/log/pods").join(&dir);
    let link_dir = root.join("var/log/containers");
    std::fs::create_dir_all(&link_dir).unwrap();
    for (name, id) in &pod.containers {
        std::fs::create_dir_all(logs.join(name)).unwrap();
        std::fs::write(logs.join(name).join("0.log"), "").unwrap();
        if links {
            std::os::unix::fs::symlink(
                logs.join(name).join("0.log"),
                link_dir.join(format!("{}_{NS}_{name}-{id}.log", pod.name)),
            )
            .unwrap();
        }
    }
    let vol = root
        .join("var/lib/kubelet/pods")
        .join(&pod.uid)
        .join("volumes/kubernetes.io~downward-api/podmetadata");
    let data = vol.join("..2024_05_01_10_00_00.000000001");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(data.file_name().unwrap(), vol.join("..data")).unwrap();
    let annotations = format!(
        "kubectl.kubernetes.io/default-container=\"main\"\nworkflows.argoproj.io/node-id=\"{}\"\nworkflows.argoproj.io/node-name={:?}\n",
        pod.name, node
    );
    let mut files = vec![("annotations", annotations)];
    if let Some(l) = labels {
        files.push(("labels", l.to_string()));
    }
    for (file, text) in files {
        std::fs::write(data.join(file), text).unwrap();
        std::os::unix::fs::symlink(format!("..data/{file}"), vol.join(file)).unwrap();
    }
}

fn workflow_labels(wf: &str) -> String {
    format!("workflows.argoproj.io/completed=\"false\"\nworkflows.argoproj.io/workflow=\"{wf}\"\n")
}

/// Starts `command` (a shell command line) as the first process of container `id` of pod
/// `uid`: a shell that moves itself into the container's kubepods cgroup, then execs it.
fn in_container(top: &str, uid: &str, id: &str, command: &str) -> (Cgroup, std::process::Child) {
    let cg = Cgroup::new(top, &format!("kubepods/besteffort/pod{uid}/{id}"));
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {command}",
        cg.dir.display()
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    (cg, child)
}

/// Argo's executor, as its containers run it: `argoexec emissary -- CMD...` runs the step's
/// command as its child; `argoexec wait` waits beside it.
fn argoexec(dir: &Path) -> PathBuf {
    let p = dir.join("argoexec");
    std::fs::write(
        &p,
        "#!/bin/sh\nif [ \"$1\" = emissary ]; then shift 2; \"$@\"; exit $?; fi\nsleep 0.6\n",
    )
    .unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

fn named<'a>(spans: &'a [RecvSpan], key: &str, value: &str) -> Vec<&'a RecvSpan> {
    spans.iter().filter(|s| s.str(key) == value).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_argo_workflows_step_pods_are_tasks_of_one_run_named_by_the_node() {
    let root = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let argoexec = argoexec(bin.path());
    let top = format!("pipetrace-test-argo-{}", std::process::id());
    let wf = format!("rnaseq-{:x}", std::process::id());
    // Step 1 (a DAG task over items): main beside Argo's wait, told apart by the log links.
    let align = Pod {
        uid: uid(1),
        name: format!("{wf}-align-1111"),
        containers: vec![("main", container_id(1)), ("wait", container_id(2))],
    };
    kubelet_records(
        root.path(),
        &align,
        &format!("{wf}.align(0)"),
        Some(&workflow_labels(&wf)),
        true,
    );
    // Step 2 (a step of a steps template): its only container; no labels recorded, so the
    // pod's name and the node's name together name the workflow.
    let sort = Pod {
        uid: uid(2),
        name: format!("{wf}-sort-2222"),
        containers: vec![("main", container_id(3))],
    };
    kubelet_records(root.path(), &sort, &format!("{wf}[1].sort"), None, false);
    // Another workflow of one pod: the pod runs the workflow's root node, so it is the run.
    let solo_wf = format!("hello-{:x}", std::process::id());
    let solo = Pod {
        uid: uid(3),
        name: solo_wf.clone(),
        containers: vec![("main", container_id(4))],
    };
    kubelet_records(
        root.path(),
        &solo,
        &solo_wf,
        Some(&workflow_labels(&solo_wf)),
        false,
    );

    let rx = Receiver::start().await;
    let url = rx.grpc_url();
    let kubelet_root = root.path().to_str().unwrap();
    let agent = Agent::start_with(
        &["--endpoint", &url],
        &[("PIPETRACE_KUBELET_ROOT", kubelet_root)],
    );
    let exe = argoexec.display();
    let mut running = vec![
        in_container(
            &top,
            &align.uid,
            &align.containers[0].1,
            &format!("{exe} emissary -- sh -c 'gzip -c /etc/services > /dev/null; sleep 0.3'"),
        ),
        in_container(
            &top,
            &align.uid,
            &align.containers[1].1,
            &format!("{exe} wait"),
        ),
        in_container(
            &top,
            &sort.uid,
            &sort.containers[0].1,
            "sh -c 'sort /etc/services > /dev/null; sleep 0.3'",
        ),
        in_container(
            &top,
            &solo.uid,
            &solo.containers[0].1,
            "sh -c 'cat /etc/services > /dev/null; sleep 0.2'",
        ),
    ];
    for (_, child) in &mut running {
        assert!(child.wait().unwrap().success());
    }
    let ours = |s: &[RecvSpan]| {
        named(s, attr::ARGO_WORKFLOW_NAME, &wf)
            .iter()
            .filter(|s| s.is_task())
            .count()
            >= 2
            && s.iter()
                .any(|s| s.is_run() && s.str(attr::CICD_PIPELINE_NAME) == solo_wf)
    };
    let spans = rx.wait_for(Duration::from_secs(20), ours).await;
    agent.stop();
    drop(running);

    // The workflow's steps: one task each, named as Argo displays the step, from two pods.
    let steps: Vec<&RecvSpan> = named(&spans, attr::ARGO_WORKFLOW_NAME, &wf)
        .into_iter()
        .filter(|s| s.is_task())
        .collect();
    let mut names: Vec<&str> = steps
        .iter()
        .map(|s| s.str(attr::CICD_PIPELINE_TASK_NAME))
        .collect();
    names.sort();
    assert_eq!(names, ["align(0)", "sort"], "{spans:?}");
    for s in &steps {
        assert_eq!(s.str(attr::RUN_ENGINE), "argo", "{s:?}");
        assert_eq!(s.str(attr::K8S_NAMESPACE_NAME), NS);
        assert_eq!(s.str(attr::K8S_CONTAINER_NAME), "main", "{s:?}");
    }
    let step = |n: &str| {
        *steps
            .iter()
            .find(|s| s.str(attr::CICD_PIPELINE_TASK_NAME) == n)
            .unwrap()
    };
    let (a, b) = (step("align(0)"), step("sort"));
    assert_eq!(a.str(attr::K8S_POD_NAME), align.name);
    assert_eq!(a.str(attr::K8S_POD_UID), align.uid);
    assert_eq!(a.str(attr::ARGO_NODE_NAME), format!("{wf}.align(0)"));
    assert_eq!(b.str(attr::K8S_POD_NAME), sort.name);
    assert_eq!(b.str(attr::ARGO_NODE_NAME), format!("{wf}[1].sort"));
    // One trace, one run: both steps under the span the workflow's identity names, which no
    // pod exports (no pod is the workflow).
    assert_eq!(a.trace_id, b.trace_id);
    assert_eq!(a.str(attr::CICD_PIPELINE_RUN_ID), a.trace_id);
    assert_eq!(b.str(attr::CICD_PIPELINE_RUN_ID), a.trace_id);
    let run = a.parent.clone().expect("a step has the workflow as parent");
    assert_eq!(b.parent.as_deref(), Some(run.as_str()));
    assert!(
        !spans.iter().any(|s| s.span_id == run),
        "no pod exports the workflow's span"
    );
    let trace: Vec<&RecvSpan> = spans.iter().filter(|s| s.trace_id == a.trace_id).collect();
    assert!(trace.iter().all(|s| s.parent.is_some()), "{trace:?}");

    // The steps' commands are their tools (under argoexec, its command's shell is one);
    // Argo's executor (emissary, wait) is none.
    let step_of = |name: &str| {
        let mut at = trace
            .iter()
            .find(|s| s.is_tool() && s.str(attr::TOOL_NAME) == name)
            .unwrap_or_else(|| panic!("{name}: {trace:?}"));
        while !at.is_task() {
            let parent = at.parent.as_deref();
            at = trace
                .iter()
                .find(|s| Some(s.span_id.as_str()) == parent)
                .unwrap();
        }
        at.span_id.clone()
    };
    assert_eq!(step_of("gzip"), a.span_id);
    assert_eq!(step_of("sort"), b.span_id);
    assert!(
        !spans.iter().any(|s| s.str(attr::TOOL_NAME) == "argoexec"
            || s.str(attr::CICD_PIPELINE_TASK_NAME) == "argoexec"
            || s.str(attr::K8S_CONTAINER_NAME) == "wait"),
        "Argo's executor is no step and no tool: {spans:?}"
    );
    // The wait container's sleep ran in no task of the workflow.
    assert!(
        trace
            .iter()
            .filter(|s| s.str(attr::TOOL_NAME) == "sleep")
            .count()
            == 2,
        "{trace:?}"
    );

    // A workflow of one pod: that pod is the run, named by the workflow, its command a task.
    let solo_run = spans
        .iter()
        .find(|s| s.is_run() && s.str(attr::CICD_PIPELINE_NAME) == solo_wf)
        .unwrap();
    assert_eq!(solo_run.str(attr::RUN_ENGINE), "argo");
    assert_eq!(solo_run.str(attr::K8S_POD_NAME), solo.name);
    assert_eq!(
        solo_run.str(attr::K8S_CONTAINER_NAME),
        "main",
        "the only container directory"
    );
    assert!(solo_run.parent.is_none(), "{solo_run:?}");
    // Each command its shell runs is a task (no engine names them).
    let mut solo_tasks: Vec<_> = spans
        .iter()
        .filter(|s| s.is_task() && s.parent.as_deref() == Some(solo_run.span_id.as_str()))
        .map(|s| s.str(attr::CICD_PIPELINE_TASK_NAME))
        .collect();
    solo_tasks.sort();
    assert_eq!(solo_tasks, ["cat", "sleep"], "{spans:?}");
}
