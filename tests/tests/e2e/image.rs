//! The agent's container image (scripts/image.sh, what `make image` runs) run for real with
//! podman, as deploy/ runs it: as the Helm chart's node agent (its DaemonSet translated flag
//! by flag into `podman run`) tracing a Snakemake pipeline on the host; as the sidecar of
//! deploy/sidecar/pod.yaml in a pod beside a pipeline's container (Debian's Snakemake in a
//! debootstrap'd image), exporting its own pod's run and nothing of a second pod;
//! refusing to start, saying why, in a pod's own PID namespace, where `pipetrace run` polls
//! /proc and `doctor` names the fix; and matching deploy/docker/Dockerfile. Judged by
//! Snakemake's own records. The images hold the binary under test (`pipetrace_bin()`), tagged
//! `localhost/pipetrace:e2e`; the debootstrap'd root filesystems are cached
//! (~/.cache/pipetrace-images), so only a fresh machine fetches Debian's packages.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    pipetrace_bin,
    receiver::Receiver,
    repo, require,
    snakemake::Records,
    spans::{RecvSpan, Val},
    stderr,
};
use pipetrace_semconv::attr;
use serde_yaml::Value as Yaml;

mod chart;
mod sidecar;
use chart::{args_of, env_flags, mount_flags, node_agent_run, read, security_flags, yaml};

/// The tag of the image of the binary under test (a debug build, unlike `make image`'s).
const AGENT_TAG: &str = "localhost/pipetrace:e2e";
const PIPELINE_TAG: &str = "localhost/pipetrace-pipeline:latest";
/// The node the chart's `NODE_NAME` (the downward API's `spec.nodeName`) names.
const NODE: &str = "e2e-node";

/// podman as the tests run it: runc and the cgroupfs manager (crun fails on this host's
/// hybrid cgroups), and containers' open-files and process limits within this host's hard
/// limits (podman's defaults are above them; a pod's infra container takes no `--ulimit`).
fn podman() -> Command {
    static CONF: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let conf = CONF.get_or_init(|| {
        // One file for every test process: written beside, then moved in place.
        let p = std::env::temp_dir().join("pipetrace-e2e.containers.conf");
        let part = p.with_extension(format!("{}", std::process::id()));
        let text =
            "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n";
        std::fs::write(&part, text).unwrap();
        std::fs::rename(&part, &p).unwrap();
        p
    });
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", conf);
    c.args(["--cgroup-manager=cgroupfs", "--runtime", "runc"]);
    c
}

fn output(c: &mut Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("start {:?}: {e}", c.get_program()))
}

/// `podman run` arguments up to the container's own: never pulling.
fn podman_run(more: &[&str]) -> Vec<String> {
    let mut run = vec!["run".to_string(), "--pull=never".to_string()];
    run.extend(more.iter().map(|a| a.to_string()));
    run
}

/// Runs podman with `args`; its stdout, trimmed, or a panic with its stderr.
fn podman_ok(args: &[&str]) -> String {
    let o = output(podman().args(args));
    assert!(o.status.success(), "podman {args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// scripts/image.sh ARGS (what `make image` runs); the tag it built.
fn build_image(args: &[&str]) -> String {
    require("podman");
    require("debootstrap");
    let start = Instant::now();
    let o = output(Command::new(repo("scripts/image.sh")).args(args));
    assert!(
        o.status.success(),
        "scripts/image.sh {args:?}:\n{}",
        stderr(&o)
    );
    eprintln!(
        "scripts/image.sh {args:?}: {:.1} s\n{}",
        start.elapsed().as_secs_f64(),
        stderr(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .last()
        .expect("the script prints the tag")
        .to_string()
}

fn agent_image() -> String {
    let bin = pipetrace_bin();
    build_image(&["agent", bin.to_str().unwrap(), AGENT_TAG])
}

fn pipeline_image() -> String {
    build_image(&["pipeline", PIPELINE_TAG])
}

/// Containers and pods of the test, removed when it ends however it ends.
#[derive(Default)]
struct Cleanup {
    containers: Vec<String>,
    pods: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = podman().args(["rm", "-f", "-t", "2", c]).output();
        }
        for p in &self.pods {
            let _ = podman().args(["pod", "rm", "-f", "-t", "2", p]).output();
        }
    }
}

/// Until the container's log says the agent watches; panics with its log if it exits or
/// takes more than 60 s.
fn wait_watching(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = output(podman().args(["logs", name]));
        let log = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        if log.contains("pipetrace agent watching") {
            return;
        }
        let state = podman_ok(&["inspect", "--format", "{{.State.Status}}", name]);
        assert!(
            state == "running" || state == "created" || state == "configured",
            "the agent container {name} is {state}:\n{log}"
        );
        assert!(
            Instant::now() < deadline,
            "the agent never said it was watching:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// SIGTERM, as the kubelet stops it; asserts a clean exit. Its log.
fn stop_agent(name: &str) -> String {
    podman_ok(&["stop", "-t", "30", name]);
    let code = podman_ok(&["inspect", "--format", "{{.State.ExitCode}}", name]);
    let o = output(podman().args(["logs", name]));
    let log = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(code, "0", "the agent exits cleanly on SIGTERM:\n{log}");
    log
}

/// A small Snakemake pipeline over `samples`: rules with wildcards, shell commands of
/// coreutils.
fn snakefile(samples: &[&str]) -> String {
    format!(
        r#"SAMPLES = {samples:?}

rule all:
    input: expand("counted/{{s}}.txt", s=SAMPLES)

rule make:
    output: "raw/{{s}}.txt"
    shell: "seq 1 20000 > {{output}} && sleep 0.3"

rule count:
    input: "raw/{{s}}.txt"
    output: "counted/{{s}}.txt"
    shell: "sort -n {{input}} | wc -l > {{output}}"
"#
    )
}

/// The task spans' (rule, wildcards), sorted, beside Snakemake's own records of the run in
/// `workdir` (its log's job blocks of rules that left metadata records).
fn assert_tasks_as_snakemake_names_them(spans: &[RecvSpan], workdir: &Path) {
    let records = Records::read(workdir);
    let expected = records.attempts();
    assert!(
        !expected.is_empty(),
        "Snakemake recorded no job: {records:?}"
    );
    let mut tasks: Vec<(String, String)> = spans
        .iter()
        .filter(|s| s.is_task())
        .map(|s| {
            (
                s.str(attr::CICD_PIPELINE_TASK_NAME).to_string(),
                s.str(attr::TASK_WILDCARDS).to_string(),
            )
        })
        .collect();
    tasks.sort();
    assert_eq!(tasks, expected, "tasks against Snakemake's records");
    for s in spans.iter().filter(|s| s.is_tool()) {
        assert_eq!(s.str(attr::COLLECTION_MODE), "ebpf", "{s:?}");
    }
    for tool in ["seq", "sort", "wc"] {
        assert!(
            spans
                .iter()
                .any(|s| s.is_tool() && s.str(attr::TOOL_NAME) == tool),
            "no {tool} span: {spans:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The Helm chart's DaemonSet, rendered with its default values, as `podman run` flags.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_as_the_charts_node_agent_traces_a_snakemake_pipeline_on_the_host() {
    let rx = Receiver::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::default();
    let name = format!("pipetrace-node-{}", std::process::id());
    // The node's folder for pipelines (the chart's pipelineDir), one run's folder in it.
    let pipelines = tempfile::tempdir().unwrap();
    let run_name = format!("rnaseq-{}", std::process::id());
    let dir = pipelines.path().join(&run_name);
    std::fs::create_dir_all(&dir).unwrap();
    let run = node_agent_run(&rx, scratch.path(), &name, pipelines.path());
    cleanup.containers.push(name.clone());
    let args: Vec<&str> = run.iter().map(String::as_str).collect();
    podman_ok(&args);
    wait_watching(&name);
    // Exactly the chart's capabilities, as the kernel holds them for the agent.
    let pid = podman_ok(&["inspect", "--format", "{{.State.Pid}}", &name]);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let eff = (status.lines())
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    // CAP_DAC_READ_SEARCH 2, CAP_SYS_PTRACE 19, CAP_PERFMON 38, CAP_BPF 39.
    assert_eq!(
        eff,
        (1 << 2) | (1 << 19) | (1 << 38) | (1 << 39),
        "{status}"
    );

    std::fs::write(dir.join("Snakefile"), snakefile(&["A", "B"])).unwrap();
    let o = output(
        Command::new("/usr/bin/snakemake")
            .args(["--cores", "2"])
            .current_dir(&dir),
    );
    assert!(o.status.success(), "snakemake: {}", stderr(&o));
    let spans = rx.run_trace(&run_name, Duration::from_secs(30)).await;
    let log = stop_agent(&name);
    assert_tasks_as_snakemake_names_them(&spans, &dir);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(
        run.resource.get("k8s.node.name"),
        Some(&Val::Str(NODE.into())),
        "the chart's OTEL_RESOURCE_ATTRIBUTES: {:?}\n{log}",
        run.resource
    );
}

/// deploy/docker/Dockerfile builds the same image where a registry is reachable: the
/// image.sh image has its final stage's entrypoint, command, user, working directory and
/// binary path, and the folders it makes.
#[test]
fn the_image_is_the_one_the_dockerfile_describes() {
    let image = agent_image();
    let dockerfile = read("deploy/docker/Dockerfile");
    let last_stage = dockerfile.rsplit("\nFROM ").next().unwrap();
    let instr = |name: &str| -> String {
        let prefix = format!("{name} ");
        let line = (last_stage.lines())
            .filter_map(|l| l.strip_prefix(&prefix))
            .next_back()
            .unwrap_or_else(|| panic!("the Dockerfile's last stage has no {name}"));
        line.trim().to_string()
    };
    let inspect = |format: &str| podman_ok(&["image", "inspect", "--format", format, &image]);
    let json = |text: &str| -> Vec<String> {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    assert_eq!(
        json(&inspect("{{json .Config.Entrypoint}}")),
        json(&instr("ENTRYPOINT"))
    );
    assert_eq!(json(&inspect("{{json .Config.Cmd}}")), json(&instr("CMD")));
    assert_eq!(inspect("{{.Config.User}}"), instr("USER"));
    assert_eq!(inspect("{{.Config.WorkingDir}}"), instr("WORKDIR"));
    let copy = instr("COPY --from=build");
    let bin = copy.split_whitespace().last().unwrap();
    assert_eq!(json(&instr("ENTRYPOINT"))[0], bin);
    let dirs = instr("RUN mkdir -p");
    let mut check: Vec<&str> = vec!["run", "--rm", "--pull=never", "--network=none"];
    check.extend(["--entrypoint", "/bin/sh", &image, "-c"]);
    let script = format!(
        "test -x {bin} && for d in {dirs}; do test -d $d || exit 1; done && {bin} --version"
    );
    check.push(&script);
    let version = podman_ok(&check);
    let ours = output(Command::new(pipetrace_bin()).arg("--version"));
    assert_eq!(version, String::from_utf8_lossy(&ours.stdout).trim());
    // Both install the same Debian packages besides the base system (image.sh builds
    // its root with scripts/rootfs.sh).
    let rootfs_sh = read("scripts/rootfs.sh");
    assert!(
        rootfs_sh.contains("AGENT_PACKAGES=ca-certificates\n"),
        "scripts/rootfs.sh"
    );
    assert!(dockerfile.contains("--no-install-recommends ca-certificates "));
}

/// `pipetrace run` in a container with a PID namespace of its own: the probes' host PIDs
/// name nothing there (measured before: such a run exported no span at all, silently). It
/// says so and polls its namespace's /proc, which sees the command's processes; with
/// `probes.strict` it refuses instead.
#[test]
fn pipetrace_run_in_a_containers_own_pid_namespace_polls_and_says_why() {
    let image = agent_image();
    let out = tempfile::tempdir().unwrap();
    let volume = format!("-v={}:/out", out.path().display());
    let caps = [
        "--cap-drop=all",
        "--cap-add=CAP_BPF",
        "--cap-add=CAP_PERFMON",
        "--cap-add=CAP_SYS_PTRACE",
        "--cap-add=CAP_DAC_READ_SEARCH",
        "--security-opt=seccomp=unconfined",
        "-v=/sys/kernel/btf:/sys/kernel/btf:ro",
        "-v=/sys/kernel/tracing:/sys/kernel/tracing:ro",
    ];
    let run = |strict: &str| {
        let mut args = podman_run(&["--rm", "--network=none", &volume]);
        args.extend(caps.iter().map(|c| c.to_string()));
        args.push(format!("-e=PIPETRACE_PROBES__STRICT={strict}"));
        args.push(image.clone());
        args.extend(
            [
                "run",
                "--no-summary",
                "-o",
                "/out/t.otlp.jsonl",
                "--",
                "sh",
                "-c",
            ]
            .map(String::from),
        );
        args.push("sleep 0.6; true".into());
        let o = output(podman().args(&args));
        let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        (o.status.success(), said)
    };
    let (ok, said) = run("false");
    assert!(ok, "{said}");
    assert!(said.contains("PID namespace of its own"), "{said}");
    assert!(said.contains("polling /proc"), "{said}");
    let spans = pipetrace_e2e::read_jsonl(&out.path().join("t.otlp.jsonl"));
    // Polled, the sleep is a tool, or the task itself when the shell was not seen first.
    let sleep = (spans.iter())
        .find(|s| !s.is_run() && s.name == "sleep")
        .unwrap_or_else(|| panic!("no sleep span: {spans:?}"));
    assert_eq!(sleep.str(attr::COLLECTION_MODE), "procfs", "{sleep:?}");

    let (ok, said) = run("true");
    assert!(!ok, "with probes.strict it ran:\n{said}");
    assert!(
        said.contains("--pid=host") && said.contains("probes.strict"),
        "{said}"
    );

    // `pipetrace doctor` says so too, and how to fix it.
    let mut args = podman_run(&["--rm", "--network=none"]);
    args.extend(caps.iter().map(|c| c.to_string()));
    args.extend([image.clone(), "doctor".into()]);
    let o = output(podman().args(&args));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{said}");
    let line = (said.lines())
        .find(|l| l.contains("PID namespace"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(line.contains("FAIL"), "{said}");
    assert!(said.contains("hostPID: true"), "{said}");
}
