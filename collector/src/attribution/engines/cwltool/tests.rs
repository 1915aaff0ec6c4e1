//! Processes named by the step they run, as cwltool names its jobs.
use super::*;

fn step(id: &str, base: &[&str], literals: &[&str]) -> Step {
    Step {
        id: id.into(),
        base: base.iter().map(|s| s.to_string()).collect(),
        literals: literals.iter().map(|s| s.to_string()).collect(),
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

fn adapter(steps: Vec<Step>) -> Cwltool {
    Cwltool {
        workflow: "wf.cwl".into(),
        key: "k".into(),
        document: Some(Document { steps, tool: None }),
        instances: HashMap::new(),
        named: HashMap::new(),
    }
}

#[test]
fn steps_by_command_and_scatter_instances_numbered() {
    let mut a = adapter(vec![
        step("scat", &["sh", "-c"], &["sleep 1; echo \"$0\""]),
        step("shout", &["sh", "-c"], &["echo loud"]),
        step("sub/first", &["printf"], &["%s\\n"]),
        step("sub/second", &["wc", "-c"], &[]),
        step("count", &["wc"], &[]),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    assert_eq!(
        name(&["sh", "-c", "sleep 1; echo \"$0\"", "alpha"]).as_deref(),
        Some("scat")
    );
    assert_eq!(name(&["sh", "-c", "echo loud"]).as_deref(), Some("shout"));
    assert_eq!(
        name(&["/usr/bin/sh", "-c", "sleep 1; echo \"$0\"", "beta"]).as_deref(),
        Some("scat_2")
    );
    assert_eq!(
        name(&["sh", "-c", "sleep 1; echo \"$0\"", "gamma"]).as_deref(),
        Some("scat_3")
    );
    assert_eq!(
        name(&["printf", "%s\\n", "hello"]).as_deref(),
        Some("sub/first")
    );
    assert_eq!(
        name(&["wc", "-c", "/tmp/x/first.txt"]).as_deref(),
        Some("sub/second"),
        "the longer baseCommand"
    );
    assert_eq!(name(&["wc", "/tmp/y"]).as_deref(), Some("count"));
    assert_eq!(
        name(&[
            "docker",
            "run",
            "-i",
            "--rm",
            "debian:12",
            "printf",
            "%s\\n",
            "x"
        ])
        .as_deref(),
        Some("sub/first_2"),
        "inside a container the command follows the image"
    );
    assert_eq!(name(&["samtools", "index"]), None);
}

#[test]
fn javascript_and_container_queries_are_helpers() {
    let mut a = adapter(vec![]);
    let p = crate::tree::Proc::in_test(
        ProcKey {
            pid: 9,
            start_ticks: 9,
        },
        1,
    );
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    for words in [
        &["nodejs", "--eval", "process.stdout.write('t')"][..],
        &["nodejs", "-v"],
        &["node"],
        &["docker", "inspect", "x"],
    ] {
        let image = Image {
            path: format!("/usr/bin/{}", words[0]),
            argv: argv(words),
            ..Default::default()
        };
        assert_eq!(a.classify(&p, &image, place), Class::Helper, "{words:?}");
    }
    let image = Image {
        path: "/usr/bin/sort".into(),
        argv: argv(&["sort"]),
        ..Default::default()
    };
    assert_eq!(a.classify(&p, &image, place), Class::Task);
}

#[test]
fn the_document_argument_is_found_among_options() {
    let v = argv(&[
        "cwltool",
        "--outdir",
        "x.cwl",
        "--no-container",
        "wf.cwl#main",
        "job.yml",
    ]);
    assert_eq!(document_arg(&v), Some("wf.cwl#main"));
}

#[test]
fn cwltool_is_recognised_under_its_names() {
    let image = |argv: &[&str]| Image {
        path: "/usr/bin/python3".into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let enabled = ["cwltool".to_string()];
    for argv in [
        &["/usr/bin/python3", "/usr/bin/cwltool", "wf.cwl"][..],
        &["/usr/bin/python3", "/usr/bin/cwl-runner", "wf.cwl"],
        &["python3", "-m", "cwltool", "wf.cwl"],
    ] {
        let found = crate::attribution::engines::detect(&enabled, &image(argv));
        assert_eq!(found.map(|e| e.name), Some("cwltool"), "{argv:?}");
    }
}
