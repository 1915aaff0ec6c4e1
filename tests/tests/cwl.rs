//! Debian's cwltool running a two-step CWL workflow (sort, then wc) under the real probes:
//! each step is a task named by its step id, read from the workflow the run was given.
use pipetrace_e2e::{pipetrace, read_jsonl, spans::Trace, stderr};

#[test]
fn cwltool_workflow_steps_are_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let wf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/cwl/wf.cwl");
    std::fs::copy(&wf, dir.path().join("wf.cwl")).unwrap();
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").unwrap();
    std::fs::write(
        dir.path().join("job.yml"),
        "text: {class: File, path: in.txt}\n",
    )
    .unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .args([
            "cwltool",
            "--no-container",
            "--outdir",
            "results",
            "wf.cwl",
            "job.yml",
        ])
        .current_dir(dir.path())
        .output()
        .expect("run pipetrace");
    assert!(o.status.success(), "{}", stderr(&o));
    let counted = std::fs::read_to_string(dir.path().join("results/count.txt")).unwrap();
    assert!(
        counted.trim().starts_with('3'),
        "the workflow really ran: {counted}"
    );

    let spans = read_jsonl(&out);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    t.assert_names_registered(&[]);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.str("pipetrace.run.engine"), "cwltool");
    assert_eq!(run.str("cicd.pipeline.name"), "wf.cwl");
    // A task per step, named by the step id the workflow gives it.
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&wf).unwrap()).unwrap();
    let mut steps: Vec<&str> = doc["steps"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    let mut tasks: Vec<_> = t
        .tasks()
        .iter()
        .map(|s| s.str("cicd.pipeline.task.name"))
        .collect();
    steps.sort();
    tasks.sort();
    assert_eq!(tasks, steps);
    let sort = t
        .tools()
        .into_iter()
        .find(|s| s.str("pipetrace.tool.name") == "sort")
        .unwrap();
    assert!(
        sort.str("process.command_line").contains("in.txt"),
        "{}",
        sort.str("process.command_line")
    );
    assert_eq!(
        t.task_of(sort).map(|s| s.str("cicd.pipeline.task.name")),
        Some("sort")
    );
}
