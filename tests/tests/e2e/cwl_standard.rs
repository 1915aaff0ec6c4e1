//! Workflows of the CWL standard's own examples that Debian ships with cwltool
//! (/usr/lib/python3/dist-packages/cwltool/tests/wf: revsort, count-lines1, a packed
//! `$graph` scatter, nested sub-workflows, a scattered sub-workflow), run by cwltool under
//! `pipetrace run` and under the agent. Each must end as it does without pipetrace, and its
//! tasks must be the jobs cwltool itself logged for that run (`[job NAME] DIR$ COMMAND`), by
//! step id (pipetrace nests sub-workflow steps as `parent/step` and numbers scatter
//! instances; cwltool's own numbering follows its shuffled job order, so bases are compared).
use std::{path::Path, time::Duration};

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Trace},
    stderr,
};

const SHIPPED: &str = "/usr/lib/python3/dist-packages/cwltool/tests/wf";

/// (document, job file): our own inputs only where the standard's example ships none.
const CASES: [(&str, Option<&str>); 5] = [
    ("revsort.cwl", Some("revsort-job.json")),
    ("count-lines1-wf.cwl", Some("wc-job.json")),
    ("scatter-wf4.cwl#main", Some("ours-scatter-wf4-job.json")),
    ("nested.cwl", None),
    ("scatter2.cwl", Some("scatter-job2.json")),
];

fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new("cp")
        .arg("-r")
        .arg(format!("{SHIPPED}/."))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(
        st.success(),
        "cwltool's example workflows are installed with Debian's cwltool"
    );
    std::fs::write(
        dir.path().join("ours-scatter-wf4-job.json"),
        r#"{"inp1": ["one", "two", "three"], "inp2": ["a", "b", "c"]}"#,
    )
    .unwrap();
    dir
}

fn cwltool_args(doc: &str, job: Option<&str>, outdir: &str) -> Vec<String> {
    let mut a = vec![
        "--no-container".to_string(),
        "--outdir".into(),
        outdir.into(),
        doc.into(),
    ];
    a.extend(job.map(str::to_string));
    a
}

/// The jobs that ran a command, as cwltool logged them: `[job NAME] DIR$ COMMAND`.
fn logged_jobs(log: &str) -> Vec<String> {
    let mut jobs: Vec<String> = log
        .lines()
        .filter_map(|l| {
            let rest = &l[l.find("[job ")? + 5..];
            let (name, after) = rest.split_once("] ")?;
            (after.starts_with('/') && after.contains("$ ")).then(|| base(name))
        })
        .collect();
    jobs.sort();
    jobs
}

/// A job's step without scatter numbering or sub-workflow nesting.
fn base(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once('_') {
        Some((b, n)) if n.parse::<u32>().is_ok() => b.to_string(),
        _ => last.to_string(),
    }
}

fn judge(what: &str, spans: &[RecvSpan], log: &str) {
    let t = Trace::new(spans);
    t.assert_well_formed();
    let mut tasks: Vec<String> = t
        .tasks()
        .iter()
        .map(|s| base(s.str("cicd.pipeline.task.name")))
        .collect();
    tasks.sort();
    let jobs = logged_jobs(log);
    assert!(!jobs.is_empty(), "{what}: cwltool logged its jobs: {log}");
    assert_eq!(tasks, jobs, "{what}: tasks against the jobs cwltool logged");
    pipetrace_e2e::spans::assert_no_false_flags(what, spans);
    for s in spans {
        assert!(
            !s.name.starts_with("node"),
            "{what}: the JavaScript engine is a span: {}",
            s.name
        );
    }
}

#[test]
fn the_standards_workflows_under_run() {
    let _load = pipetrace_e2e::CpuLoad::start();
    let dir = fixtures();
    for (i, (doc, job)) in CASES.iter().enumerate() {
        let plain = std::process::Command::new("cwltool")
            .args(cwltool_args(doc, *job, &format!("plain{i}")))
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = dir.path().join(format!("t{i}.otlp.jsonl"));
        let traced = pipetrace()
            .args(["-o", out.to_str().unwrap(), "run", "--", "cwltool"])
            .args(cwltool_args(doc, *job, &format!("traced{i}")))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            traced.status.code(),
            plain.status.code(),
            "{doc}: {}",
            stderr(&traced)
        );
        assert!(plain.status.success(), "{doc}: {}", stderr(&plain));
        let listing = |d: &str| {
            let mut v: Vec<_> = std::fs::read_dir(dir.path().join(d))
                .map(|r| r.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            v.sort();
            v
        };
        assert_eq!(
            listing(&format!("traced{i}")),
            listing(&format!("plain{i}")),
            "{doc}: same outputs"
        );
        judge(doc, &read_jsonl(&out), &stderr(&traced));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standards_workflows_under_the_agent() {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let dir = fixtures();
    for (i, (doc, job)) in CASES.iter().enumerate() {
        // A copy of the document under a name of this test's own, to find its run.
        let file = doc.split('#').next().unwrap();
        let mine = format!("t{}-{i}-{file}", std::process::id());
        std::fs::copy(dir.path().join(file), dir.path().join(&mine)).unwrap();
        let target = doc.replacen(file, &mine, 1);
        let o = std::process::Command::new("cwltool")
            .args(cwltool_args(&target, *job, &format!("agent{i}")))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{doc}: {}", stderr(&o));
        let spans = rx.run_trace(&mine, Duration::from_secs(30)).await;
        judge(doc, &spans, &stderr(&o));
    }
    agent.stop();
    let _ = Path::new(SHIPPED);
}
