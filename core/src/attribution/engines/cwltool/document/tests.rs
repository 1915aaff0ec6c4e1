//! Documents in the forms cwltool accepts: steps as a map or a list, `run` as a file, inline
//! or a `#id` of a packed `$graph`, sub-workflows, a lone tool.
use super::*;
use crate::disk_host::DiskHost;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

const ECHO: &str = "cwlVersion: v1.2\nclass: CommandLineTool\nbaseCommand: [sh, -c]\narguments: ['sleep 1; echo \"$0\"', $(inputs.x)]\ninputs: {}\noutputs: {}\n";

#[test]
fn steps_files_inline_tools_and_sub_workflows() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "echo-tool.cwl", ECHO);
    write(
        dir.path(),
        "sub.cwl",
        "class: Workflow\nsteps:\n  first:\n    run:\n      class: CommandLineTool\n      baseCommand: printf\n    in: {}\n    out: []\n  calc:\n    run:\n      class: ExpressionTool\n      expression: $({})\n",
    );
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\nsteps:\n  - id: scat\n    run: echo-tool.cwl\n  - id: sub\n    run: sub.cwl\n",
    );
    let doc = load(&DiskHost::default(), "wf.cwl", dir.path(), &[]).unwrap();
    let ids: Vec<_> = doc.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["scat", "sub/first"],
        "expression tools run no process"
    );
    assert_eq!(doc.steps[0].base, ["sh", "-c"]);
    assert_eq!(
        doc.steps[0].literals,
        ["sleep 1; echo \"$0\""],
        "expressions are not literals"
    );
    assert_eq!(doc.tool, None);
}

#[test]
fn packed_graphs_and_lone_tools() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "packed.cwl",
        r##"{"cwlVersion": "v1.2", "$graph": [
          {"id": "#wc.cwl", "class": "CommandLineTool", "baseCommand": ["wc", "-l"]},
          {"id": "#main", "class": "Workflow", "steps": [
            {"id": "#main/count", "run": "#wc.cwl"}]}]}"##,
    );
    let doc = load(&DiskHost::default(), "packed.cwl#main", dir.path(), &[]).unwrap();
    assert_eq!(doc.steps.len(), 1);
    assert_eq!(
        (doc.steps[0].id.as_str(), doc.steps[0].base.as_slice()),
        ("count", &["wc".to_string(), "-l".to_string()][..])
    );
    assert_eq!(
        load(&DiskHost::default(), "packed.cwl", dir.path(), &[])
            .unwrap()
            .steps
            .len(),
        1,
        "#main by default"
    );
    write(dir.path(), "echo-tool.cwl", ECHO);
    let tool = load(&DiskHost::default(), "echo-tool.cwl", dir.path(), &[]).unwrap();
    assert_eq!(
        (tool.tool.as_deref(), tool.steps.len()),
        (Some("echo-tool.cwl"), 1)
    );
    assert_eq!(tool.steps[0].base, ["sh", "-c"], "its own command");
    assert!(load(&DiskHost::default(), "missing.cwl", dir.path(), &[]).is_none());
}

const MAKE: &str = "class: CommandLineTool\nbaseCommand: echo\ninputs:\n  word: {type: string, inputBinding: {position: 1}}\nstdout: made.txt\noutputs:\n  out: {type: stdout}\n";
const COUNT: &str = "class: CommandLineTool\nbaseCommand: [wc, -l]\ninputs: {inp: File}\nstdout: count.txt\noutputs: {out: stdout}\n";

fn bound<'d>(doc: &'d Document, id: &str) -> &'d [String] {
    let step = doc.steps.iter().find(|s| s.id == id);
    &step.unwrap_or_else(|| panic!("{id} in {doc:?}")).bound
}

#[test]
fn inputs_bound_from_the_job_file_defaults_and_upstream_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "make.cwl", MAKE);
    write(dir.path(), "count.cwl", COUNT);
    write(
        dir.path(),
        "three.cwl",
        "class: Workflow\ninputs: {word: string}\nsteps:\n  make_it: {run: make.cwl, in: {word: word}, out: [out]}\n  count_it: {run: count.cwl, in: {inp: make_it/out}, out: [out]}\n",
    );
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\ninputs:\n  w1: string\n  w2: {type: string, default: goodbye}\nsteps:\n  greet: {run: make.cwl, in: {word: w1}, out: [out]}\n  farewell:\n    run: make.cwl\n    in: [{id: word, source: w2}]\n  fixed: {run: make.cwl, in: {word: {default: hi}}}\n  each: {run: make.cwl, scatter: word, in: {word: {valueFrom: lit}}}\n  many: {run: make.cwl, scatter: [word], in: {word: {default: [b, a]}}}\n  inner: {run: three.cwl, scatter: word, in: {word: w1}}\n",
    );
    write(dir.path(), "job.yml", "w1: hello\n");
    let doc = load(
        &DiskHost::default(),
        "wf.cwl",
        dir.path(),
        &["job.yml".into()],
    )
    .unwrap();
    assert_eq!(bound(&doc, "greet"), ["hello"], "from the job file");
    assert_eq!(bound(&doc, "farewell"), ["goodbye"], "the input's default");
    assert_eq!(bound(&doc, "fixed"), ["hi"], "the step's default");
    assert_eq!(bound(&doc, "each"), ["lit"], "a literal valueFrom");
    assert_eq!(
        bound(&doc, "inner/make_it"),
        ["hello"],
        "through a sub-workflow"
    );
    assert_eq!(
        bound(&doc, "inner/count_it"),
        ["made.txt"],
        "an upstream stdout"
    );
    let scatters: Vec<_> = doc
        .steps
        .iter()
        .filter(|s| s.scatters)
        .map(|s| &s.id)
        .collect();
    assert_eq!(
        scatters,
        ["each", "many", "inner/make_it", "inner/count_it"]
    );
    let many = doc.steps.iter().find(|s| s.id == "many").unwrap();
    assert_eq!(
        many.elements,
        [["b", "a"]],
        "the scattered input's elements, in order"
    );
    let given = load(
        &DiskHost::default(),
        "wf.cwl",
        dir.path(),
        &["--w1".into(), "hey".into()],
    )
    .unwrap();
    assert_eq!(
        bound(&given, "greet"),
        ["hey"],
        "an input given as an option"
    );
}

#[test]
fn shell_command_steps_keep_the_pieces_around_expressions() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\nsteps:\n  piped:\n    run:\n      class: CommandLineTool\n      requirements: {ShellCommandRequirement: {}}\n      arguments:\n        - {valueFrom: 'cat $(inputs.inp.path) | tr a-z A-Z | wc -c', shellQuote: false}\n        - '${ return f(inputs.x) }'\n        - 'echo $HOME'\n  plain: {run: {class: CommandLineTool, baseCommand: ls}}\n",
    );
    let doc = load(&DiskHost::default(), "wf.cwl", dir.path(), &[]).unwrap();
    assert_eq!(
        doc.steps[0].shell.as_deref(),
        Some(&["cat", "| tr a-z A-Z | wc -c", "echo $", "HOME"].map(String::from)[..])
    );
    assert_eq!(doc.steps[1].shell, None);
}

/// What an expression argument's value likely holds: the text around a parameter reference,
/// a JavaScript string's text, a template literal's text around its `${...}`; not the
/// literal arguments (matched as words), nor one character.
#[test]
fn expression_arguments_hint_at_the_text_of_their_values() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "tool.cwl",
        r#"class: CommandLineTool
baseCommand: [bash, -c]
arguments:
  - "wc -l $(inputs.f.path)"
  - valueFrom: $("sort " + inputs.f.path + ' | uniq -c')
  - valueFrom: '${ return `cat ${inputs.f.path} | tr a-z A-Z` + "/"; }'
  - valueFrom: $(inputs.f.basename.replace("	", "_"))
  - --literal
"#,
    );
    let doc = load(&DiskHost::default(), "tool.cwl", dir.path(), &[]).unwrap();
    let hints = ["wc -l", "sort", "| uniq -c", "cat", "| tr a-z A-Z"];
    assert_eq!(doc.steps[0].hints, hints.map(String::from));
}

/// The prefixes of the inputs that have a value: bound by the step, else by a default that
/// is not `false`.
#[test]
fn prefixes_of_inputs_with_a_value() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "sort.cwl",
        r#"class: CommandLineTool
baseCommand: sort
inputs:
  numeric: {type: boolean, default: true, inputBinding: {prefix: -n}}
  off: {type: boolean, default: false, inputBinding: {prefix: -x}}
  key: {type: int, default: 1, inputBinding: {prefix: -k}}
  f: {type: File, inputBinding: {prefix: --in}}
  g: {type: "File?", inputBinding: {prefix: -g}}
  plain: {type: int, default: 3, inputBinding: {position: 1}}
"#,
    );
    let steps = "inputs: {data: File}\nsteps:\n  sorting:\n    in: {f: data}\n    \
                 run: sort.cwl\n  flagged:\n    in: {f: data, numeric: {default: false}, \
                 off: {default: true}}\n    run: sort.cwl\n  sourced:\n    \
                 in: {f: data, off: flag}\n    run: sort.cwl\n";
    write(dir.path(), "wf.cwl", &format!("class: Workflow\n{steps}"));
    write(dir.path(), "job.yml", "data: {class: File, path: d.txt}");
    let doc = load(
        &DiskHost::default(),
        "wf.cwl",
        dir.path(),
        &["job.yml".into()],
    )
    .unwrap();
    assert_eq!(doc.steps[0].prefixes, ["-n", "-k", "--in"]);
    assert_eq!(
        doc.steps[1].prefixes,
        ["-x", "-k", "--in"],
        "flags the step sets"
    );
    assert_eq!(
        doc.steps[2].prefixes,
        ["-n", "-x", "-k", "--in"],
        "a flag read from an input not given may be set"
    );
}

#[test]
fn steps_know_what_they_read_from_and_how_they_scatter() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "make.cwl", MAKE);
    write(dir.path(), "count.cwl", COUNT);
    write(
        dir.path(),
        "mid.cwl",
        "class: Workflow\ninputs: {word: string}\nsteps:\n  make_it: {run: make.cwl, in: {word: word}, out: [out]}\n  count_it: {run: count.cwl, in: {inp: make_it/out}, out: [out]}\n",
    );
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\ninputs: {xs: 'string[]', ys: 'string[]'}\nsteps:\n  first: {run: mid.cwl, in: {word: {default: a}}, out: [out]}\n  then: {run: mid.cwl, in: {word: {source: '#main/first/out'}}, out: [out]}\n  cross: {run: make.cwl, scatter: [x, y], scatterMethod: flat_crossproduct, in: {x: xs, y: ys}}\n  dot: {run: make.cwl, scatter: [x, y], scatterMethod: dotproduct, in: {x: xs, y: ys}}\n",
    );
    write(dir.path(), "job.yml", "xs: [p, q]\nys: [k, l, m]\n");
    let doc = load(
        &DiskHost::default(),
        "wf.cwl",
        dir.path(),
        &["job.yml".into()],
    )
    .unwrap();
    let after = |id: &str| &doc.steps.iter().find(|s| s.id == id).unwrap().after;
    assert!(after("first/make_it").is_empty());
    assert_eq!(after("first/count_it"), &["first/make_it"]);
    assert_eq!(
        after("then/make_it"),
        &["first"],
        "a sub-workflow step's inputs"
    );
    assert_eq!(after("then/count_it"), &["first", "then/make_it"]);
    let cross = doc.steps.iter().find(|s| s.id == "cross").unwrap();
    assert_eq!(cross.elements, [vec!["p", "q"], vec!["k", "l", "m"]]);
    assert!(cross.cross);
    assert!(!doc.steps.iter().find(|s| s.id == "dot").unwrap().cross);
}

#[test]
fn a_lone_tool_is_named_as_cwltool_names_its_job() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "rev.cwl",
        "class: CommandLineTool\nbaseCommand: rev\n",
    );
    write(
        dir.path(),
        "rev-id.cwl",
        "class: CommandLineTool\nid: reverser\nbaseCommand: rev\n",
    );
    let tool = |f: &str| load(&DiskHost::default(), f, dir.path(), &[]).unwrap().tool;
    assert_eq!(
        tool("rev.cwl").as_deref(),
        Some("rev.cwl"),
        "its file's name"
    );
    assert_eq!(tool("rev-id.cwl").as_deref(), Some("reverser"), "its id");
}

/// Records (values of a SchemaDefRequirement type): one bound to a step gives the values of
/// its fields; an array of them scattered over gives one element per record, by its file
/// (staged under its name), else its first field.
#[test]
fn records_bind_their_fields_and_each_is_one_element_of_a_scatter() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "make.cwl", MAKE);
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\ninputs: {samples: 'Any[]', best: Any, tags: 'Any[]'}\nsteps:\n  each: {run: make.cwl, scatter: word, in: {word: samples}}\n  one: {run: make.cwl, in: {word: best}}\n  tagged: {run: make.cwl, scatter: word, in: {word: tags}}\n",
    );
    write(
        dir.path(),
        "job.yml",
        "samples:\n  - {name: s1, reads: {class: File, path: in/a.fq}}\n  - {name: s2, reads: {class: File, path: b.fq}}\nbest: {name: top, reads: {class: File, path: b.fq}}\ntags: [{k: x, n: 1}, {k: y, n: 2}]\n",
    );
    let doc = load(
        &DiskHost::default(),
        "wf.cwl",
        dir.path(),
        &["job.yml".into()],
    )
    .unwrap();
    let step = |id: &str| doc.steps.iter().find(|s| s.id == id).unwrap();
    assert_eq!(step("each").elements, [["a.fq", "b.fq"]]);
    assert_eq!(step("tagged").elements, [["x", "y"]]);
    assert_eq!(bound(&doc, "one"), ["top", "b.fq"]);
}

#[test]
fn a_steps_resource_requirement_is_what_it_asked_for_in_cores_and_mebibytes() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\nsteps:\n  listed:\n    run:\n      class: CommandLineTool\n      baseCommand: sort\n      requirements:\n        - class: ResourceRequirement\n          coresMin: 2\n          ramMin: 1024\n        - class: ToolTimeLimit\n          timelimit: 600\n    in: {}\n    out: []\n  mapped:\n    run:\n      class: CommandLineTool\n      baseCommand: gzip\n      hints:\n        ResourceRequirement: {coresMin: 1.5, ramMin: $(inputs.n)}\n    in: {}\n    out: []\n  overridden:\n    requirements:\n      ResourceRequirement: {ramMin: 100}\n    run:\n      class: CommandLineTool\n      baseCommand: wc\n      requirements: {ResourceRequirement: {ramMin: 4000}}\n    in: {}\n    out: []\n  plain:\n    run:\n      class: CommandLineTool\n      baseCommand: cat\n    in: {}\n    out: []\n",
    );
    let doc = load(&DiskHost::default(), "wf.cwl", dir.path(), &[]).unwrap();
    let asked: Vec<_> = (doc.steps.iter())
        .map(|s| (s.id.as_str(), s.cores, s.ram_bytes))
        .collect();
    assert_eq!(
        asked,
        [
            ("listed", Some(2), Some(1024 << 20)),
            // An expression is no number: not read.
            ("mapped", Some(2), None),
            ("overridden", None, Some(100 << 20)),
            ("plain", None, None),
        ]
    );
    // ToolTimeLimit's timelimit counts seconds.
    let times: Vec<_> = doc.steps.iter().map(|s| s.time_limit_s).collect();
    assert_eq!(times, [Some(600), None, None, None]);
}

/// A tool's literal `stderr` is where cwltool sends its command's stderr; an expression's
/// file name is known only to cwltool.
#[test]
fn a_tools_literal_stderr_file_is_kept_and_an_expression_is_not() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "wf.cwl",
        "class: Workflow\nsteps:\n  bad:\n    run:\n      class: CommandLineTool\n      baseCommand: [sh, -c, 'exit 3']\n      stderr: bad.err\n  named:\n    run:\n      class: CommandLineTool\n      baseCommand: [wc]\n      stderr: $(inputs.x).err\n",
    );
    let doc = load(&DiskHost::default(), "wf.cwl", dir.path(), &[]).unwrap();
    let stderr: Vec<_> = doc.steps.iter().map(|s| s.stderr.as_deref()).collect();
    assert_eq!(stderr, [Some("bad.err"), None]);
}
