//! A container as an entity of its own: a real Snakemake task runs a real Podman container;
//! the task span carries the container's start and end as events, and the end event rolls
//! up exactly the container's processes that the task's tool spans show.
use pipetrace_e2e::{
    pipetrace,
    podman::{PODMAN_RUN, busybox_rootfs, container_id},
    read_jsonl,
    spans::{RecvEvent, RecvSpan, Trace, Val},
    stderr,
};
use pipetrace_semconv::{attr, event};

fn events<'a>(s: &'a RecvSpan, name: &str) -> Vec<&'a RecvEvent> {
    s.events.iter().filter(|e| e.name == name).collect()
}

fn int(e: &RecvEvent, k: &str) -> i64 {
    match e.attrs.get(k) {
        Some(Val::Int(i)) => *i,
        other => panic!("{k}: {other:?}"),
    }
}

fn num(e: &RecvEvent, k: &str) -> f64 {
    match e.attrs.get(k) {
        Some(Val::Double(d)) => *d,
        other => panic!("{k}: {other:?}"),
    }
}

#[test]
fn a_tasks_container_starts_and_ends_as_events_with_its_processes_rolled_up() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    busybox_rootfs(&rootfs);
    let cidfile = dir.path().join("cid");
    let name = format!("pipetrace-life-{}", std::process::id());
    let podman = format!(
        "podman {} --name {name} --cidfile {} --rootfs {} /bin/sh -c 'sleep 0.4; cat /proc/self/cgroup >/dev/null'",
        PODMAN_RUN.join(" "),
        cidfile.display(),
        rootfs.display()
    );
    let snakefile = format!(
        "rule all:\n    input: \"boxed.done\", \"plain.done\"\n\n\
         rule boxed:\n    output: \"boxed.done\"\n    shell: \"{podman} && touch {{output}}\"\n\n\
         rule plain:\n    output: \"plain.done\"\n    shell: \"sleep 0.2 && touch {{output}}\"\n"
    );
    std::fs::write(dir.path().join("Snakefile"), snakefile).unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["run", "--no-summary", "--output"])
        .arg(&out)
        .args(["--", "snakemake", "--cores", "1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let id = container_id(&cidfile);
    let spans = read_jsonl(&out);
    let trace = Trace::new(&spans);
    let task = |n: &str| {
        *trace
            .tasks()
            .iter()
            .find(|t| t.str(attr::CICD_PIPELINE_TASK_NAME) == n)
            .unwrap_or_else(|| panic!("task {n}: {spans:#?}"))
    };
    let boxed = task("boxed");

    let starts = events(boxed, event::CONTAINER_START);
    let ends = events(boxed, event::CONTAINER_END);
    assert_eq!((starts.len(), ends.len()), (1, 1), "{:#?}", boxed.events);
    let (start, end) = (starts[0], ends[0]);
    assert_eq!(start.attrs[attr::CONTAINER_ID].str(), id);
    assert_eq!(end.attrs[attr::CONTAINER_ID].str(), id);
    assert_eq!(start.attrs[attr::CONTAINER_NAME].str(), name);
    assert_eq!(start.attrs[attr::CONTAINER_RUNTIME].str(), "podman");

    // The task's tools in the container, as their own spans show them.
    let inside: Vec<&RecvSpan> = trace
        .tools()
        .into_iter()
        .filter(|t| {
            t.str(attr::CONTAINER_ID) == id
                && trace.task_of(t).map(|k| &k.span_id) == Some(&boxed.span_id)
        })
        .collect();
    assert!(
        inside.iter().any(|t| t.str(attr::TOOL_NAME) == "sleep")
            && inside.iter().any(|t| t.str(attr::TOOL_NAME) == "cat"),
        "{inside:#?}"
    );
    assert_eq!(int(end, attr::USAGE_PROCESSES), inside.len() as i64);
    let first = inside.iter().map(|t| t.start).min().unwrap();
    let last = inside.iter().map(|t| t.end).max().unwrap();
    assert_eq!((start.time, end.time), (first, last));
    let cpu: f64 = inside
        .iter()
        .filter_map(|t| t.num(attr::CPU_USER_TIME))
        .sum();
    assert!((num(end, attr::CPU_USER_TIME) - cpu).abs() < 1e-6, "{cpu}");
    let peak = inside
        .iter()
        .filter_map(|t| t.int(attr::MEMORY_PEAK))
        .max()
        .unwrap();
    assert!(int(end, attr::MEMORY_PEAK) >= peak);

    // A task on the host has no container to tell of; nor has the podman client.
    let plain = task("plain");
    assert!(events(plain, event::CONTAINER_START).is_empty());
    let client = inside.iter().all(|t| t.str(attr::TOOL_NAME) != "podman");
    assert!(client, "the client runs on the host");
}
