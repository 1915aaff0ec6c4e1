//! Seen in a real backend: pipetrace's traces sent to Jaeger v2 (its in-memory store) over
//! OTLP/gRPC and OTLP/HTTP, and judged by what Jaeger's query API gives back, against the
//! trace file pipetrace wrote beside it: the demo Snakemake pipeline, a CWL workflow, a
//! real Nextflow run, a plain script with a failing tool, an OOM kill, and spans over mutual
//! TLS.
use std::{collections::BTreeSet, path::Path};

use pipetrace_e2e::{
    cgroup::MemoryCgroup,
    demo_pipeline,
    jaeger::{
        Jaeger, field, log_named, one_trace, read_back, run_into, run_into_with, tag, written,
    },
    nextflow,
    podman::{PODMAN_RUN, busybox_rootfs, container_id},
    tls::Certs,
};
use pipetrace_semconv::{attr, event};
use serde_json::Value;

#[test]
fn the_demo_pipeline_read_back_from_jaeger_is_the_tree_pipetrace_wrote() {
    let jaeger = Jaeger::start();
    let dir = demo_pipeline();
    let argv = ["snakemake", "--cores", "2"];
    let spans = run_into(dir.path(), &jaeger.grpc_url(), "grpc", &argv);
    assert!(spans.len() > 10, "the demo's spans: {}", spans.len());
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans), "ids, parents and names");
    // Task names are Jaeger's operations for the pipeline's service.
    let process = jaeger.process_of(&trace, &got[0]);
    let service = process["serviceName"].as_str().expect("a service");
    let ops = jaeger
        .get(&format!("/api/services/{service}/operations"))
        .unwrap();
    // Names, or (in newer versions) objects with a name.
    let ops: BTreeSet<&str> = (ops["data"].as_array().unwrap().iter())
        .filter_map(|o| o.as_str().or(o["name"].as_str()))
        .collect();
    let tasks = spans
        .iter()
        .filter(|s| !s.str(attr::CICD_PIPELINE_TASK_NAME).is_empty());
    for task in tasks {
        assert!(ops.contains(task.name.as_str()), "{} in {ops:?}", task.name);
    }
    // The resource, where Jaeger keeps it: the process's tags.
    let host = process["tags"].as_array().unwrap().iter();
    let host: Vec<_> = host.filter(|t| t["key"] == "host.name").collect();
    let want = spans[0]
        .resource
        .get("host.name")
        .map(|v| v.str().to_string());
    assert_eq!(host.len(), 1, "host.name in {process}");
    assert_eq!(want.as_deref(), host[0]["value"].as_str(), "{process}");
}

#[test]
fn a_failing_tool_reads_back_as_an_error_with_its_events_over_otlp_http() {
    let jaeger = Jaeger::start();
    let dir = tempfile::tempdir().unwrap();
    let argv = ["sh", "-c", "echo fine; ls /no/such/file; exit 3"];
    // A signal's own endpoint is the full URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
    let url = format!("{}/v1/traces", jaeger.http_url());
    let spans = run_into(dir.path(), &url, "http/protobuf", &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans));
    let failed: Vec<_> = spans.iter().filter(|s| s.status == 2).collect();
    assert!(
        failed.iter().any(|s| s.name.contains("ls")),
        "the failing ls is an error in the file: {:?}",
        spans
            .iter()
            .map(|s| (&s.name, s.status))
            .collect::<Vec<_>>()
    );
    for want in &spans {
        let span = got
            .iter()
            .find(|g| g["spanID"] == want.span_id.as_str())
            .unwrap();
        let error = tag(span, "otel.status_code").and_then(Value::as_str) == Some("ERROR");
        assert_eq!(error, want.status == 2, "{}: {span}", want.name);
        // Span events are Jaeger's logs, each with its name as `event`.
        let logs = span["logs"].as_array().map_or(0, Vec::len);
        assert_eq!(logs, want.events.len(), "{}'s events: {span}", want.name);
        for e in &want.events {
            assert!(
                log_named(span, &e.name).is_some(),
                "{} has event {} in Jaeger: {span}",
                want.name,
                e.name
            );
        }
    }
}

#[test]
fn a_cwl_workflow_read_back_from_jaeger_is_the_tree_pipetrace_wrote() {
    let jaeger = Jaeger::start();
    let dir = pipetrace_e2e::cwl_workflow();
    let argv = [
        "cwltool",
        "--no-container",
        "--outdir",
        "results",
        "wf.cwl",
        "job.yml",
    ];
    let spans = run_into(dir.path(), &jaeger.grpc_url(), "grpc", &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans));
    let steps: BTreeSet<&str> = (spans.iter())
        .filter(|s| !s.str(attr::CICD_PIPELINE_TASK_NAME).is_empty())
        .map(|s| s.name.as_str())
        .collect();
    assert!(
        steps.len() >= 2,
        "the workflow's two steps as tasks: {steps:?}"
    );
}

#[test]
fn an_oom_kill_reads_back_as_an_error_with_its_event_on_the_tool() {
    let limit = 64 * 1048576;
    let cg = MemoryCgroup::new(limit);
    let jaeger = Jaeger::start();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && {} alloc 256; true",
        cg.0.display(),
        env!("CARGO_BIN_EXE_workload")
    );
    let argv = ["sh", "-c", script.as_str()];
    let spans = run_into(dir.path(), &jaeger.grpc_url(), "grpc", &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    let tool = spans
        .iter()
        .find(|s| s.name == "workload")
        .expect("the tool");
    assert_eq!(tool.status, 2, "killed: {}", tool.status_message);
    let span = got
        .iter()
        .find(|g| g["spanID"] == tool.span_id.as_str())
        .unwrap();
    assert_eq!(
        tag(span, "otel.status_code").and_then(Value::as_str),
        Some("ERROR")
    );
    let message = tag(span, "otel.status_description").and_then(Value::as_str);
    assert_eq!(message, Some(tool.status_message.as_str()), "{span}");
    let oom = log_named(span, event::OOM_KILL)
        .unwrap_or_else(|| panic!("the OOM event on the tool in Jaeger: {span}"));
    let limit_field = field(oom, attr::MEMORY_LIMIT);
    assert_eq!(limit_field, Some(&Value::from(limit as i64)), "{oom}");
    // The run's judgement is in the backend too: the OOM kill first, naming its job.
    let run = spans.iter().find(|s| s.is_run()).expect("the run span");
    let run = got
        .iter()
        .find(|g| g["spanID"] == run.span_id.as_str())
        .unwrap();
    let finding = log_named(run, event::FINDING)
        .unwrap_or_else(|| panic!("the run's findings in Jaeger: {run}"));
    let kind = field(finding, attr::FINDING_KIND).and_then(Value::as_str);
    assert_eq!(kind, Some("oom"), "{finding}");
    let job = field(finding, attr::FINDING_SPAN_ID).and_then(Value::as_str);
    let task = spans.iter().find(|s| Some(s.span_id.as_str()) == job);
    assert!(task.is_some_and(|t| t.is_task()), "{finding}");
    let text = field(finding, attr::FINDING_TEXT).and_then(Value::as_str);
    assert!(
        text.is_some_and(|t| t.starts_with("killed by the OOM killer")),
        "{finding}"
    );
}

#[test]
fn over_mutual_tls_every_span_reaches_jaeger() {
    let certs = Certs::new();
    let jaeger = Jaeger::start_with_tls(&certs);
    let dir = tempfile::tempdir().unwrap();
    let path = |p: &std::path::PathBuf| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (
        path(&certs.ca),
        path(&certs.client_cert),
        path(&certs.client_key),
    );
    let env = [
        ("PIPETRACE_EXPORT__OTLP__TRACES__CERTIFICATE", ca.as_str()),
        (
            "PIPETRACE_EXPORT__OTLP__TRACES__CLIENT_CERTIFICATE",
            cert.as_str(),
        ),
        ("PIPETRACE_EXPORT__OTLP__TRACES__CLIENT_KEY", key.as_str()),
    ];
    let url = format!("https://127.0.0.1:{}", jaeger.otlp_grpc);
    let argv = ["sh", "-c", "sort /etc/hostname | wc -l"];
    let spans = run_into_with(dir.path(), &url, "grpc", &env, &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans));
}

/// Two Nextflow processes, the second fed by the first.
const NEXTFLOW_PIPELINE: &str = r#"
process SPLIT {
    tag "${id}"
    input:
    val id
    output:
    path 'words.txt'
    script:
    """
    echo pear apple fig | tr ' ' '\n' > words.txt
    """
}

process SORT {
    input:
    path 'words.txt'
    script:
    """
    sort words.txt | head -1
    """
}

workflow {
    SORT(SPLIT('fruit'))
}
"#;

#[test]
fn a_real_nextflow_run_read_back_from_jaeger_is_the_tree_pipetrace_wrote() {
    let jaeger = Jaeger::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.nf"), NEXTFLOW_PIPELINE).unwrap();
    let launcher = nextflow::launcher();
    let argv = [launcher.to_str().unwrap(), "run", "main.nf"];
    let spans = run_into(dir.path(), &jaeger.grpc_url(), "grpc", &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans));
    // The tasks, as Nextflow's work directories name them, are in Jaeger under the run.
    let tasks: BTreeSet<&str> = (got.iter())
        .filter(|s| tag(s, attr::CICD_PIPELINE_TASK_NAME).is_some())
        .map(|s| s["operationName"].as_str().unwrap())
        .collect();
    let headers: BTreeSet<String> = (nextflow_headers(&dir.path().join("work")))
        .into_iter()
        .collect();
    assert_eq!(
        tasks,
        headers.iter().map(String::as_str).collect(),
        "the .command.run headers"
    );
}

/// The task names the `.command.run` headers of a Nextflow work directory give.
fn nextflow_headers(work: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in std::fs::read_dir(work).unwrap().flatten() {
        for task in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(task.path().join(".command.run")).unwrap();
            let name = text.lines().find_map(|l| l.strip_prefix("### name: "));
            out.push(name.expect("a header").trim_matches('\'').to_string());
        }
    }
    out
}

/// A tool in a podman container: Jaeger keeps the container as the span's tags (container.*
/// is per process: one agent's resource is its host), the pipeline on the run span, and the
/// host and a resource attribute given by `OTEL_RESOURCE_ATTRIBUTES` as its process's tags.
#[test]
fn a_containers_tools_read_back_with_its_id_and_name_and_the_resource_on_the_process() {
    let jaeger = Jaeger::start();
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    busybox_rootfs(&rootfs);
    let cidfile = dir.path().join("cid");
    let name = format!("pipetrace-jaeger-{}", std::process::id());
    let (cid, root) = (cidfile.to_str().unwrap(), rootfs.to_str().unwrap());
    let mut argv = vec!["podman"];
    argv.extend(PODMAN_RUN);
    argv.extend(["--name", &name, "--cidfile", cid, "--rootfs", root]);
    argv.extend([
        "/bin/sh",
        "-c",
        "sleep 0.3; cat /proc/self/cgroup >/dev/null",
    ]);
    let env = [(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment.name=test",
    )];
    let spans = run_into_with(dir.path(), &jaeger.grpc_url(), "grpc", &env, &argv);
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans));
    let id = container_id(&cidfile);
    for tool in ["sleep", "cat"] {
        let span = (got.iter())
            .find(|s| s["operationName"] == tool && tag(s, attr::TOOL_NAME).is_some())
            .unwrap_or_else(|| panic!("{tool} in Jaeger"));
        assert_eq!(
            tag(span, attr::CONTAINER_ID),
            Some(&Value::from(id.as_str())),
            "{span}"
        );
        assert_eq!(
            tag(span, attr::CONTAINER_NAME),
            Some(&Value::from(name.as_str()))
        );
    }
    let run = got
        .iter()
        .find(|s| tag(s, attr::CICD_PIPELINE_NAME).is_some())
        .expect("run");
    assert_eq!(
        tag(run, attr::CICD_PIPELINE_NAME),
        Some(&Value::from("podman")),
        "{run}"
    );
    let process = jaeger.process_of(&trace, run);
    let tags = process["tags"].as_array().unwrap();
    let env = tags
        .iter()
        .find(|t| t["key"] == "deployment.environment.name");
    assert_eq!(
        env.map(|t| &t["value"]),
        Some(&Value::from("test")),
        "{process}"
    );
    assert!(tags.iter().any(|t| t["key"] == "host.name"), "{process}");
}

/// Compressed OTLP, as a collector decodes it: gzip and zstd over HTTP, gzip and zstd over
/// gRPC, each run read back whole.
#[test]
fn compressed_requests_read_back_from_jaeger() {
    let jaeger = Jaeger::start();
    let http = format!("{}/v1/traces", jaeger.http_url());
    let grpc = jaeger.grpc_url();
    for (url, protocol) in [(&http, "http/protobuf"), (&grpc, "grpc")] {
        for compression in ["gzip", "zstd"] {
            let dir = tempfile::tempdir().unwrap();
            let env = [("PIPETRACE_EXPORT__OTLP__COMPRESSION", compression)];
            let argv = ["sh", "-c", "echo a | wc -c"];
            let spans = run_into_with(dir.path(), url, protocol, &env, &argv);
            let trace = one_trace(&spans);
            let got = jaeger.trace(&trace, spans.len());
            assert_eq!(read_back(&got), written(&spans), "{protocol} {compression}");
        }
    }
}
