//! deploy/sidecar/pod.yaml as podman pods: the sidecar exports its own pod's run and nothing
//! of a pod beside it, and refuses to start, saying why, in a pod's own PID namespace.
use super::*;

/// The ConfigMaps and the Pod of deploy/sidecar/pod.yaml.
fn sidecar_manifest() -> (BTreeMap<String, BTreeMap<String, String>>, Yaml) {
    let text = read("deploy/sidecar/pod.yaml");
    let mut maps = BTreeMap::new();
    let mut pod = None;
    for doc in text.split("\n---\n") {
        let v = yaml("deploy/sidecar/pod.yaml", doc);
        match v["kind"].as_str() {
            Some("ConfigMap") => {
                let data: BTreeMap<String, String> =
                    serde_yaml::from_value(v["data"].clone()).unwrap();
                maps.insert(v["metadata"]["name"].as_str().unwrap().to_string(), data);
            }
            Some("Pod") => pod = Some(v),
            other => panic!("pod.yaml: a {other:?}"),
        }
    }
    (maps, pod.expect("pod.yaml has a Pod"))
}

/// A podman pod as the manifest's Pod asks (hostPID: the pod's PID namespace, shared by its
/// containers, is the host's; `--pid=host` alone leaves each container one of its own), or
/// with a PID namespace of its own shared by its containers (`shareProcessNamespace`) when
/// `host_pid` is false. Host network: the test's receiver is on the host's loopback. The
/// infra container is the pipeline image sleeping (no pause image can be pulled here).
fn pod_create(name: &str, host_pid: bool, cleanup: &mut Cleanup) {
    let pipeline = pipeline_image();
    let mut args = vec!["pod", "create", "--name", name, "--share=pid,net,uts,ipc"];
    if host_pid {
        args.push("--pid=host");
    }
    args.extend([
        "--network=host",
        "--infra-image",
        &pipeline,
        "--infra-command",
        "sleep infinity",
    ]);
    podman_ok(&args);
    cleanup.pods.push(name.to_string());
}

fn container<'a>(pod: &'a Yaml, name: &str) -> &'a Yaml {
    let spec = &pod["spec"];
    (spec["initContainers"].as_sequence().into_iter().flatten())
        .chain(spec["containers"].as_sequence().into_iter().flatten())
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("pod.yaml has no container {name}"))
}

/// Starts the manifest's sidecar in pod `pod_name`, exporting to `rx`; its container name.
fn start_sidecar(
    rx: &Receiver,
    pod_name: &str,
    manifest: &(BTreeMap<String, BTreeMap<String, String>>, Yaml),
    scratch: &Path,
) -> String {
    let (maps, pod) = manifest;
    let sidecar = container(pod, "pipetrace");
    let name = format!("{pod_name}-pipetrace");
    let mut run = podman_run(&["-d"]);
    run.push(format!("--pod={pod_name}"));
    run.push(format!("--name={name}"));
    run.extend(security_flags(&sidecar["securityContext"]));
    run.extend(mount_flags(sidecar, &pod["spec"]["volumes"], maps, scratch));
    run.extend(env_flags(sidecar, |n| {
        (n == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| rx.grpc_url())
    }));
    run.push(agent_image());
    run.extend(args_of(sidecar));
    let args: Vec<&str> = run.iter().map(String::as_str).collect();
    podman_ok(&args);
    name
}

/// Runs the manifest's pipeline container in `pod_name` until it exits, with `scratch`'s
/// emptyDir volumes (the `work` folder holding the Snakefile, as the pod's init step would
/// put it there); its container id.
fn run_pipeline(pod_name: &str, pod: &Yaml, scratch: &Path) -> String {
    let pipeline = container(pod, "pipeline");
    let cidfile = scratch.join(format!("{pod_name}.cid"));
    let mut run = podman_run(&[]);
    run.push(format!("--pod={pod_name}"));
    run.push(format!("--name={pod_name}-pipeline"));
    run.push(format!("--cidfile={}", cidfile.display()));
    run.extend(mount_flags(
        pipeline,
        &pod["spec"]["volumes"],
        &BTreeMap::new(),
        scratch,
    ));
    run.push(pipeline_image());
    for a in pipeline["command"].as_sequence().expect("command") {
        run.push(a.as_str().unwrap().to_string());
    }
    let args: Vec<&str> = run.iter().map(String::as_str).collect();
    podman_ok(&args);
    pipetrace_e2e::podman::container_id(&cidfile)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_exports_its_own_pods_pipeline_and_nothing_of_the_pod_beside_it() {
    let rx = Receiver::start().await;
    let manifest = sidecar_manifest();
    let pod = manifest.1.clone();
    assert_eq!(pod["spec"]["hostPID"].as_bool(), Some(true), "{pod:?}");
    let mut cleanup = Cleanup::default();
    let id = std::process::id();
    let (mine, other) = (
        format!("pipetrace-mine-{id}"),
        format!("pipetrace-other-{id}"),
    );
    let (mine_dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, samples) in [(&mine_dir, ["A", "B"]), (&other_dir, ["C", "D"])] {
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::write(dir.path().join("work/Snakefile"), snakefile(&samples)).unwrap();
    }
    pod_create(&mine, true, &mut cleanup);
    pod_create(&other, true, &mut cleanup);
    let sidecar = start_sidecar(&rx, &mine, &manifest, mine_dir.path());
    cleanup.containers.push(sidecar.clone());
    wait_watching(&sidecar);
    // Side by side: the other pod's pipeline runs while this one's does.
    let (other_name, other_pod, other_scratch) =
        (other.clone(), pod.clone(), other_dir.path().to_path_buf());
    let beside = std::thread::spawn(move || run_pipeline(&other_name, &other_pod, &other_scratch));
    let mine_id = run_pipeline(&mine, &pod, mine_dir.path());
    let other_id = beside.join().unwrap();
    // The pipeline's container is done: the kubelet stops the sidecar (SIGTERM).
    rx.run_trace("work", Duration::from_secs(30)).await;
    let log = stop_agent(&sidecar);
    let all = rx.spans();
    let runs: Vec<&RecvSpan> = all.iter().filter(|s| s.is_run()).collect();
    assert_eq!(runs.len(), 1, "one run, this pod's: {runs:?}\n{log}");
    // Every tool ran in this pod's pipeline container; no span names the other pod's.
    for s in &all {
        let id = s.str(attr::CONTAINER_ID);
        assert_ne!(id, other_id, "of the other pod: {s:?}");
        if s.is_tool() {
            assert_eq!(id, mine_id, "a tool not of this pod's pipeline: {s:?}");
        }
    }
    assert_tasks_as_snakemake_names_them(&all, &mine_dir.path().join("work"));
    // The other pod's pipeline ran, and its records say so.
    let theirs = Records::read(&other_dir.path().join("work")).attempts();
    assert!(theirs.iter().any(|(_, w)| w == "s=C"), "{theirs:?}");
}

/// A pod with a PID namespace of its own shared by its containers (Kubernetes'
/// `shareProcessNamespace` without `hostPID`): the kernel's PIDs are the host's, which the
/// agent's /proc cannot see. Measured before the refusal: the sidecar loaded its probes, took
/// 144 events of its pod's Snakemake run and exported nothing. It now refuses, saying how
/// to run it.
#[test]
fn in_a_pods_own_pid_namespace_the_agent_refuses_to_start_and_says_why() {
    let manifest = sidecar_manifest();
    let mut cleanup = Cleanup::default();
    let name = format!("pipetrace-ownpid-{}", std::process::id());
    let scratch = tempfile::tempdir().unwrap();
    pod_create(&name, false, &mut cleanup);
    // The pod's containers share a PID namespace that is not the host's.
    let ns = |extra: &[&str]| {
        let mut args = podman_run(&["--rm", "--entrypoint", "/bin/readlink"]);
        args.extend(extra.iter().map(|a| a.to_string()));
        args.extend([agent_image(), "/proc/self/ns/pid".to_string()]);
        podman_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (in_pod, host) = (ns(&["--pod", &name]), ns(&["--pid=host"]));
    assert_eq!(host, "pid:[4026531836]");
    assert_ne!(in_pod, host);
    let rx_url = "http://127.0.0.1:1";
    let (maps, pod) = &manifest;
    let sidecar = container(pod, "pipetrace");
    let cname = format!("{name}-pipetrace");
    cleanup.containers.push(cname.clone());
    let mut run = podman_run(&[]);
    run.push(format!("--pod={name}"));
    run.push(format!("--name={cname}"));
    run.extend(security_flags(&sidecar["securityContext"]));
    run.extend(mount_flags(
        sidecar,
        &pod["spec"]["volumes"],
        maps,
        scratch.path(),
    ));
    run.extend(env_flags(sidecar, |n| {
        (n == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| rx_url.to_string())
    }));
    run.push(agent_image());
    run.extend(args_of(sidecar));
    let args: Vec<&str> = run.iter().map(String::as_str).collect();
    let start = Instant::now();
    let o = output(podman().args(&args));
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        !o.status.success(),
        "the agent ran in a PID namespace of its own:\n{said}"
    );
    assert!(start.elapsed() < Duration::from_secs(30), "{said}");
    for needle in [
        "PID namespace of its own",
        "host PIDs",
        "hostPID: true",
        "--pid=host",
    ] {
        assert!(said.contains(needle), "{needle}: {said}");
    }
    assert!(!said.contains("pipetrace agent watching"), "{said}");
}
