//! Containers: a real Podman container (runc, cgroupfs manager, a BusyBox rootfs: no image
//! can be pulled here) running a pipeline's tools, and real cgroup directories named as each
//! runtime and cgroup manager names them. Every tool span says which container it ran in.
use std::{path::Path, time::Duration};

use pipetrace_e2e::{
    pipetrace,
    podman::{PODMAN_RUN, busybox_rootfs, container_id},
    receiver::Receiver,
    run_script,
    spans::RecvSpan,
    stderr,
};
use pipetrace_semconv::attr;

fn tools<'a>(spans: &'a [RecvSpan], name: &str) -> Vec<&'a RecvSpan> {
    spans
        .iter()
        .filter(|s| s.is_tool() && s.str(attr::TOOL_NAME) == name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podman_containers_tools_carry_its_id_runtime_name_and_labels() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    busybox_rootfs(&rootfs);
    let cidfile = dir.path().join("cid");
    let name = format!("pipetrace-test-{}", std::process::id());
    let o = pipetrace()
        // Who pays for what runs on the host; the container's label says for its own.
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "pipetrace.cost.centre=host-default",
        )
        .args(["--endpoint", &rx.grpc_url(), "run", "--no-summary", "--"])
        .arg("podman")
        .args(PODMAN_RUN)
        .args([
            "--label",
            "pipeline=align",
            "--label",
            "cost-centre=genomics-core",
        ])
        .arg("--name")
        .arg(&name)
        .arg("--cidfile")
        .arg(&cidfile)
        .arg("--rootfs")
        .arg(&rootfs)
        .args([
            "/bin/sh",
            "-c",
            "sleep 0.3; cat /proc/self/cgroup >/dev/null",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let id = container_id(&cidfile);
    assert_eq!(id.len(), 64, "{id}");
    let spans = rx.run_trace("podman", Duration::from_secs(30)).await;
    for tool in ["sleep", "cat"] {
        let found = tools(&spans, tool);
        assert_eq!(found.len(), 1, "{tool}: {spans:?}");
        let s = found[0];
        assert_eq!(s.str(attr::CONTAINER_ID), id, "{s:?}");
        assert_eq!(s.str(attr::CONTAINER_RUNTIME), "podman");
        assert_eq!(s.str(attr::CONTAINER_NAME), name);
        assert_eq!(s.str("container.label.pipeline"), "align");
        assert_eq!(s.str(attr::COST_CENTRE), "genomics-core", "{s:?}");
    }
    // The podman client itself runs on the host.
    let client = spans.iter().find(|s| s.is_run()).expect("run span");
    assert!(client.attr(attr::CONTAINER_ID).is_none(), "{client:?}");
    assert_eq!(client.str(attr::COST_CENTRE), "host-default", "{client:?}");
}

/// A cgroup directory the test makes (and removes) in the unified hierarchy.
struct Cgroup(std::path::PathBuf);

impl Cgroup {
    fn new(path: &str) -> Self {
        let dir = Path::new("/sys/fs/cgroup/unified").join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Innermost first; a directory is removable once no process is in it.
        let mut at = Some(self.0.as_path());
        while let Some(d) = at.filter(|d| d.starts_with("/sys/fs/cgroup/unified/pipetrace-test")) {
            let _ = std::fs::remove_dir(d);
            at = d.parent();
        }
    }
}

/// A traced shell moves itself into `cg`, then runs `sleep` there: the sleep's span.
fn sleep_in(cg: &Cgroup) -> RecvSpan {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && /bin/sleep 0.2; true",
        cg.0.display()
    );
    let (spans, o) = run_script(dir.path(), &script);
    assert!(o.status.success(), "{}: {}", cg.0.display(), stderr(&o));
    let sleep = tools(&spans, "sleep");
    assert_eq!(sleep.len(), 1, "{}: {spans:?}", cg.0.display());
    sleep[0].clone()
}

#[test]
fn cgroup_layouts_of_docker_containerd_crio_and_kubernetes_map_to_their_containers_and_pods() {
    let id = "a".repeat(32) + &"0123456789abcdef".repeat(2);
    let uid = "0c7a3f5e-8b1d-4c2e-9f00-1234567890ab";
    let cases = [
        (format!("docker/{id}"), Some("docker"), None),
        (
            format!("system.slice/docker-{id}.scope"),
            Some("docker"),
            None,
        ),
        (
            format!("system.slice/cri-containerd-{id}.scope"),
            Some("containerd"),
            None,
        ),
        (format!("system.slice/crio-{id}.scope"), Some("cri-o"), None),
        (
            format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
                uid.replace('-', "_")
            ),
            Some("containerd"),
            Some(uid),
        ),
        (
            format!("kubepods/besteffort/pod{uid}/{id}"),
            None,
            Some(uid),
        ),
    ];
    // What the kubelet leaves on a node: a link to each container's log, named after it.
    std::fs::create_dir_all("/var/log/containers").unwrap();
    let link = Path::new("/var/log/containers").join(format!("align-7f9c_rnaseq_bwa-mem-{id}.log"));
    std::fs::write(&link, "").unwrap();
    for (layout, runtime, pod) in cases {
        let cg = Cgroup::new(&format!("pipetrace-test/{layout}"));
        let s = sleep_in(&cg);
        assert_eq!(s.str(attr::CONTAINER_ID), id, "{layout}: {s:?}");
        assert_eq!(
            s.attr(attr::CONTAINER_RUNTIME).map(|v| v.str().to_string()),
            runtime.map(str::to_string),
            "{layout}"
        );
        assert_eq!(
            s.attr(attr::K8S_POD_UID).map(|v| v.str().to_string()),
            pod.map(str::to_string),
            "{layout}"
        );
        if pod.is_some() {
            assert_eq!(s.str(attr::K8S_NAMESPACE_NAME), "rnaseq", "{layout}");
            assert_eq!(s.str(attr::K8S_POD_NAME), "align-7f9c", "{layout}");
            assert_eq!(s.str(attr::K8S_CONTAINER_NAME), "bwa-mem", "{layout}");
        } else {
            assert!(
                s.attr(attr::K8S_POD_NAME).is_none(),
                "{layout}: not a pod's"
            );
        }
        drop(cg);
    }
    let _ = std::fs::remove_file(&link);
}

/// Slurm's cgroup v2 layout (slurmstepd.scope/job_<j>/step_<s>/user/task_<t>), made by the
/// test: the step's tools carry the job, step and task, and no container.
#[test]
fn a_slurm_steps_cgroup_names_the_job_step_and_task() {
    let cg =
        Cgroup::new("pipetrace-test/system.slice/slurmstepd.scope/job_4242/step_0/user/task_3");
    let s = sleep_in(&cg);
    assert_eq!(s.str(attr::SLURM_JOB_ID), "4242", "{s:?}");
    assert_eq!(s.str(attr::SLURM_STEP_ID), "0");
    assert_eq!(s.int(attr::SLURM_TASK_ID), Some(3));
    assert!(s.attr(attr::CONTAINER_ID).is_none(), "{s:?}");
}

/// Removes the cgroup a test named as podman's `--cgroup-parent`, in every hierarchy, once
/// its containers are gone.
struct CgroupParent(String);

impl Drop for CgroupParent {
    fn drop(&mut self) {
        let Ok(dirs) = std::fs::read_dir("/sys/fs/cgroup") else {
            return;
        };
        for h in dirs.flatten() {
            let parent = h.path().join(&self.0);
            if let Ok(children) = std::fs::read_dir(&parent) {
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
            let _ = std::fs::remove_dir(&parent);
        }
    }
}

/// Runs a BusyBox container under `parent` (a cgroup of the test's naming, as a pod's):
/// a marked shell that sleeps and reads; its id.
fn podman_in(rootfs: &Path, parent: &str, cidfile: &Path) -> String {
    let o = std::process::Command::new("podman")
        .args(PODMAN_RUN)
        .arg(format!("--cgroup-parent=/{parent}"))
        .arg("--cidfile")
        .arg(cidfile)
        .arg("--rootfs")
        .arg(rootfs)
        .args([
            "/bin/sh",
            "-c",
            "sleep 0.5; cat /proc/self/cgroup >/dev/null; true",
        ])
        .arg("pipetrace-sidecar-test")
        .output()
        .unwrap();
    assert!(o.status.success(), "podman: {}", stderr(&o));
    container_id(cidfile)
}

#[test]
fn a_sidecar_scoped_to_one_pods_cgroup_exports_nothing_of_a_container_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    busybox_rootfs(&rootfs);
    let pid = std::process::id();
    let (mine, other) = (
        CgroupParent(format!("pipetrace-scope-mine-{pid}")),
        CgroupParent(format!("pipetrace-scope-other-{pid}")),
    );
    let cfg = dir.path().join("sidecar.yaml");
    std::fs::write(
        &cfg,
        format!(
            "probes:\n  scope_cgroup: /{}\nattribution:\n  run_rules:\n    \
             - match: {{ argv: 'pipetrace-sidecar-test' }}\n      name: sidecar\n",
            mine.0
        ),
    )
    .unwrap();
    let out = dir.path().join("sidecar.otlp.jsonl");
    let agent =
        pipetrace_e2e::Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    // Side by side: the other container runs while the watched one does.
    let other_cid = dir.path().join("other.cid");
    let (root, other_root) = (rootfs.clone(), rootfs.clone());
    let name = other.0.clone();
    let beside = std::thread::spawn(move || podman_in(&other_root, &name, &other_cid));
    let mine_id = podman_in(&root, &mine.0, &dir.path().join("mine.cid"));
    let other_id = beside.join().unwrap();
    pipetrace_e2e::wait_for_run_where(&out, "the watched container's run", |s| {
        s.str(attr::CONTAINER_ID) == mine_id
    });
    let report = agent.stop();
    let spans = pipetrace_e2e::read_jsonl(&out);
    for tool in ["sleep", "cat"] {
        let found = tools(&spans, tool);
        assert_eq!(
            found.len(),
            1,
            "{tool} of the watched container only: {spans:?}"
        );
        assert_eq!(found[0].str(attr::CONTAINER_ID), mine_id, "{:?}", found[0]);
    }
    let run = spans
        .iter()
        .find(|s| s.is_run())
        .expect("the watched container's run");
    assert_eq!(run.str(attr::CONTAINER_ID), mine_id, "{run:?}");
    // Nothing of the other container, nor of the host's podman client or runtime.
    for s in &spans {
        assert_ne!(s.str(attr::CONTAINER_ID), other_id, "{s:?}");
        assert!(
            s.attr(attr::CONTAINER_ID).is_some(),
            "a host process: {s:?} ({report})"
        );
    }
}
