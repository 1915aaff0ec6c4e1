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
        given: HashSet::new(),
        last: HashMap::new(),
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
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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
        elements: vec![["one", "two", "three", "four"].map(String::from).to_vec()],
        ..echo("make_each", &["one", "two", "three", "four"], true)
    };
    let mut a = adapter(vec![each]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
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

/// A process cwltool started itself, as classify sees it.
fn child_of_the_root() -> (crate::tree::Proc, Place) {
    let key = ProcKey {
        pid: 9,
        start_ticks: 9,
    };
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    (crate::tree::Proc::in_test(key, 1), place)
}

#[test]
fn javascript_and_container_queries_are_helpers() {
    let mut a = adapter(vec![]);
    let (p, place) = child_of_the_root();
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

/// A step whose command is `node script.js` is a task of that step; the engine's own
/// `node --eval CODE` and `node -v` stay helpers unless a step spells them.
#[test]
fn a_step_that_runs_node_is_a_task_not_the_javascript_engine() {
    let mut a = adapter(vec![
        step("greet", &["node", "greet.js"], &[]),
        step("probe", &["nodejs"], &["-v"]),
    ]);
    let (p, place) = child_of_the_root();
    let image = |words: &[&str]| Image {
        path: format!("/usr/bin/{}", words[0]),
        argv: argv(words),
        ..Default::default()
    };
    let greet = image(&["node", "greet.js", "world"]);
    assert_eq!(a.classify(&p, &greet, place), Class::Task);
    assert_eq!(a.named[&p.key].name, "greet");
    let probe = image(&["nodejs", "-v"]);
    assert_eq!(
        a.classify(&p, &probe, place),
        Class::Task,
        "a step spells it"
    );
    for engine in [
        &["nodejs", "--eval", "process.stdout.write('t')"][..],
        &["node", "--eval", "\"use strict\";"],
        &["node", "-v"],
        &["node"],
    ] {
        let class = a.classify(&p, &image(engine), place);
        assert_eq!(class, Class::Helper, "{engine:?}");
    }
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
    let names = ["cwltool".to_string()];
    let enabled = crate::attribution::engines::Enabled::from_config(Some(&names)).unwrap();
    for argv in [
        &["/usr/bin/python3", "/usr/bin/cwltool", "wf.cwl"][..],
        &["/usr/bin/python3", "/usr/bin/cwl-runner", "wf.cwl"],
        &["python3", "-m", "cwltool", "wf.cwl"],
    ] {
        let found = enabled.detect(&image(argv));
        assert_eq!(found.map(|e| e.kind), Some(super::KIND), "{argv:?}");
    }
}

/// `printf '%s-%s\n' X Y` scattered over xs and ys.
fn pair(id: &str, cross: bool) -> Step {
    let (xs, ys) = (["p", "q", "r"], ["k", "l", "m"]);
    Step {
        elements: vec![xs.map(String::from).to_vec(), ys.map(String::from).to_vec()],
        cross,
        ..echo(id, &["p", "q", "r", "k", "l", "m"], true)
    }
}

#[test]
fn crossproduct_jobs_are_numbered_by_combination() {
    // cwltool makes a crossproduct's jobs with the first input's elements slowest.
    let mut a = adapter(vec![pair("flat", true)]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    assert_eq!(name(&["echo", "q", "l"]).as_deref(), Some("flat_5"));
    assert_eq!(name(&["echo", "p", "m"]).as_deref(), Some("flat_3"));
    assert_eq!(name(&["echo", "p", "k"]).as_deref(), Some("flat"));
    assert_eq!(name(&["echo", "r", "k"]).as_deref(), Some("flat_7"));
}

#[test]
fn a_dotproduct_takes_no_job_of_mixed_positions() {
    // `dot` and `flat` run the same tool on the same inputs: `p l` is only flat's.
    let mut a = adapter(vec![pair("dot", false), pair("flat", true)]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    let names = [
        ["echo", "p", "k"],
        ["echo", "q", "l"],
        ["echo", "r", "m"],
        ["echo", "p", "k"],
        ["echo", "p", "l"],
    ]
    .map(|w| name(&w).unwrap());
    assert_eq!(names, ["dot", "dot_2", "dot_3", "flat", "flat_2"]);
}

#[test]
fn sub_workflow_instances_are_told_apart_by_what_ran_before() {
    // top.cwl runs mid.cwl as `first` (on alpha) and `second` (on bravo); cwltool ran
    // `second` first. Their `rev` steps differ only by whose `say` has run.
    let rev = |id: &str, after: &str| Step {
        after: vec![after.into()],
        ..step(id, &["rev"], &[])
    };
    let mut a = adapter(vec![
        echo("first/deep/say", &["alpha"], false),
        rev("first/deep/reverse", "first/deep/say"),
        Step {
            after: vec!["first/deep".into()],
            ..step("first/tally", &["wc", "-c"], &[])
        },
        echo("second/deep/say", &["bravo"], false),
        rev("second/deep/reverse", "second/deep/say"),
        Step {
            after: vec!["second/deep".into()],
            ..step("second/tally", &["wc", "-c"], &[])
        },
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    let names = [
        &["echo", "bravo"][..],
        &["rev", "/tmp/a/stg1/echoed.txt"],
        &["wc", "-c", "/tmp/b/stg2/reversed.txt"],
        &["echo", "alpha"],
        &["rev", "/tmp/c/stg3/echoed.txt"],
    ]
    .map(|w| name(w).unwrap());
    assert_eq!(
        names,
        [
            "second/deep/say",
            "second/deep/reverse",
            "second/tally",
            "first/deep/say",
            "first/deep/reverse"
        ]
    );
}

#[test]
fn of_steps_that_read_alike_the_one_whose_input_was_made_last() {
    // `direct` and `first/say` both run `echo alpha`; `direct` ran first and took the
    // name `first/say` (the first in the document). `second`'s rev reads an upstream file
    // of the same name as `first`'s: the step whose upstream started last is taken.
    let rev = |id: &str, after: &str| Step {
        after: vec![after.into()],
        ..step(id, &["rev"], &[])
    };
    let mut a = adapter(vec![
        echo("first/say", &["alpha"], false),
        rev("first/reverse", "first/say"),
        echo("second/say", &["bravo"], false),
        rev("second/reverse", "second/say"),
        echo("direct", &["alpha"], false),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    let names = [
        &["echo", "alpha"][..],
        &["echo", "bravo"],
        &["rev", "/tmp/a/stg1/echoed.txt"],
    ]
    .map(|w| name(w).unwrap());
    assert_eq!(names, ["first/say", "second/say", "second/reverse"]);
}

#[test]
fn a_guess_that_spent_an_upstream_name_does_not_number_a_step() {
    // `direct` comes first in a packed document: `first/say`'s `echo alpha` was named
    // `direct`, so `first/say` has not started when `first/reverse` does; the other
    // `reverse` already ran. Not `second/reverse_2`.
    let rev = |id: &str, after: &str| Step {
        after: vec![after.into()],
        ..step(id, &["rev"], &[])
    };
    let mut a = adapter(vec![
        echo("direct", &["alpha"], false),
        echo("first/say", &["alpha"], false),
        rev("first/reverse", "first/say"),
        echo("second/say", &["bravo"], false),
        rev("second/reverse", "second/say"),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    let names = [
        &["echo", "bravo"][..],
        &["rev", "/tmp/a/stg1/echoed.txt"],
        &["echo", "alpha"],
        &["rev", "/tmp/b/stg2/echoed.txt"],
    ]
    .map(|w| name(w).unwrap());
    assert_eq!(
        names,
        ["second/say", "second/reverse", "direct", "first/reverse"]
    );
}

/// Tools of one `baseCommand` whose whole command is an expression of the same input: told
/// apart by the text their expressions make, whatever order they start in.
#[test]
fn tools_of_one_base_command_are_told_apart_by_their_expressions() {
    let bash = |id: &str, hints: &[&str]| Step {
        bound: vec!["in.txt".into()],
        hints: hints.iter().map(|h| h.to_string()).collect(),
        ..step(id, &["bash", "-c"], &[])
    };
    let mut a = adapter(vec![
        bash("tally", &["sort", "| uniq -c"]),
        bash("sorted", &["sort"]),
        bash("count", &["wc -l"]),
    ]);
    let mut name = |line: &str| {
        a.step_of(&argv(&["bash", "-c", line]), None)
            .map(|i| i.name)
    };
    assert_eq!(name("wc -l /tmp/a/in.txt").as_deref(), Some("count"));
    assert_eq!(name("sort /tmp/b/in.txt").as_deref(), Some("sorted"));
    assert_eq!(
        name("sort /tmp/c/in.txt | uniq -c").as_deref(),
        Some("tally"),
        "every hint it holds"
    );
}

/// Tools of one `baseCommand` that differ by their inputs' prefixes (`sort -n` and
/// `sort -k 1 -r`, flags with defaults): told apart by the prefixes on the line.
#[test]
fn tools_of_one_base_command_are_told_apart_by_their_prefixes() {
    let sort = |id: &str, prefixes: &[&str]| Step {
        bound: vec!["in.txt".into()],
        prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        ..step(id, &["sort"], &[])
    };
    let mut a = adapter(vec![
        sort("by-number", &["-n"]),
        sort("reversed", &["-k", "-r"]),
        sort("output", &["--output="]),
    ]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    assert_eq!(
        name(&["sort", "-k", "1", "-r", "/tmp/a/in.txt"]).as_deref(),
        Some("reversed")
    );
    assert_eq!(
        name(&["sort", "--output=o.txt", "/tmp/c/in.txt"]).as_deref(),
        Some("output"),
        "a prefix joined to its value"
    );
    assert_eq!(
        name(&["sort", "-n", "/tmp/b/in.txt"]).as_deref(),
        Some("by-number")
    );
}

/// A step that scatters over files and one whose input an expression picks from them
/// (`valueFrom: $(self[1])`, no value known) run the very same line for that element:
/// whichever starts first, the two names go once each (cwltool gives each job one name).
#[test]
fn the_same_line_of_a_scatter_and_a_step_of_unknown_input_takes_each_name_once() {
    let each = Step {
        elements: vec![["a.fq", "b.fq"].map(String::from).to_vec()],
        ..echo("each", &["a.fq", "b.fq"], true)
    };
    let mut a = adapter(vec![each, echo("pick", &[], false)]);
    let mut name = |w: &[&str]| a.step_of(&argv(w), None).map(|i| i.name);
    let mut names = vec![
        name(&["echo", "/tmp/x/a.fq"]),
        name(&["echo", "/tmp/y/b.fq"]),
        name(&["echo", "/tmp/z/b.fq"]),
    ];
    names.sort();
    let want = ["each", "each_2", "pick"];
    assert_eq!(names, want.map(|n| Some(n.to_string())));
}

/// A step with a `stderr` file names it, in the job's output directory (the process's
/// working directory), as the task's log; the engine asks for that directory then.
#[test]
fn a_steps_stderr_file_in_its_job_directory_is_its_log() {
    let bad = Step {
        stderr: Some("bad.err".into()),
        ..step("bad", &["sh", "-c"], &["exit 3"])
    };
    let mut a = adapter(vec![bad, step("count", &["wc"], &[])]);
    assert!(a.needs_cwd(&argv(&["sh"])));
    let job = Path::new("/tmp/rt69kfyg");
    let info = a
        .step_of(&argv(&["sh", "-c", "exit 3"]), Some(job))
        .unwrap();
    assert_eq!(info.logs, ["/tmp/rt69kfyg/bad.err"]);
    let info = a.step_of(&argv(&["wc"]), Some(job)).unwrap();
    assert!(info.logs.is_empty(), "{:?}", info.logs);
    assert!(!adapter(vec![step("count", &["wc"], &[])]).needs_cwd(&argv(&["wc"])));
}
