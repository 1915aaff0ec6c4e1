//! Processes named by the step they run, as cwltool names its jobs.
use super::*;

fn step(id: &str, base: &[&str], literals: &[&str]) -> Step {
    Step {
        id: id.into(),
        base: base.iter().map(|s| s.to_string()).collect(),
        literals: literals.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A step of the tool `echo` whose inputs are bound to `values`.
fn echo(id: &str, values: &[&str], scatters: bool) -> Step {
    Step {
        bound: values.iter().map(|s| s.to_string()).collect(),
        scatters,
        ..step(id, &["echo"], &[])
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
fn steps_of_one_tool_are_told_apart_by_their_inputs() {
    // twoecho.cwl: `greet` and `farewell` both run make.cwl, on w1=hello and w2=goodbye.
    let mut a = adapter(vec![
        echo("greet", &["hello"], false),
        echo("farewell", &["goodbye"], false),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    assert_eq!(name(&["echo", "goodbye"]).as_deref(), Some("farewell"));
    assert_eq!(name(&["echo", "hello"]).as_deref(), Some("greet"));
}

#[test]
fn staged_files_tell_steps_apart_by_the_step_that_wrote_them() {
    // `after` counts before's made.txt; `inner/count_it` counts upper_it's upper.txt.
    let wc = |id: &str, file: &str| Step {
        bound: vec![file.into()],
        ..step(id, &["wc", "-l"], &[])
    };
    let mut a = adapter(vec![
        wc("after", "made.txt"),
        wc("inner/count_it", "upper.txt"),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    assert_eq!(
        name(&["wc", "-l", "/tmp/a/stg1/upper.txt"]).as_deref(),
        Some("inner/count_it")
    );
    assert_eq!(
        name(&["wc", "-l", "/tmp/b/stg2/made.txt"]).as_deref(),
        Some("after")
    );
}

#[test]
fn only_steps_that_scatter_are_numbered() {
    // `before` and `inner/make_it` both run `echo hello`: each step once, never `before_2`.
    let mut a = adapter(vec![
        echo("before", &["hello"], false),
        echo("each", &["one", "two"], true),
        echo("inner/make_it", &["hello"], false),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    let mut names = vec![
        name(&["echo", "hello"]),
        name(&["echo", "two"]),
        name(&["echo", "hello"]),
        name(&["echo", "one"]),
    ];
    names.sort();
    let want = ["before", "each", "each_2", "inner/make_it"];
    assert_eq!(names, want.map(|n| Some(n.to_string())));
}

#[test]
fn scatter_jobs_are_numbered_by_their_element_not_their_start() {
    // `--parallel` starts the jobs in any order; cwltool numbers them by element.
    let each = Step {
        elements: ["one", "two", "three", "four"].map(String::from).to_vec(),
        ..echo("make_each", &["one", "two", "three", "four"], true)
    };
    let mut a = adapter(vec![each]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    assert_eq!(name(&["echo", "four"]).as_deref(), Some("make_each_4"));
    assert_eq!(name(&["echo", "one"]).as_deref(), Some("make_each"));
    assert_eq!(name(&["echo", "three"]).as_deref(), Some("make_each_3"));
}

#[test]
fn shell_command_steps_are_named_by_the_pieces_of_their_line() {
    let piped = Step {
        shell: Some(vec!["cat".into(), "| tr a-z A-Z | wc -c".into()]),
        ..step("piped", &[], &[])
    };
    let mut a = adapter(vec![echo("make_it", &["hello"], false), piped]);
    let mut name = |w: &[&str]| a.step_of(&argv(w)).map(|i| i.name);
    assert_eq!(
        name(&["/bin/sh", "-c", "cat /tmp/x/made.txt | tr a-z A-Z | wc -c"]).as_deref(),
        Some("piped")
    );
    assert_eq!(
        name(&["/bin/sh", "-c", "wc -c | cat"]),
        None,
        "pieces in order"
    );
    assert_eq!(name(&["/bin/sh", "-c", "cat x"]), None, "every piece");
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
