//! Documents in the forms cwltool accepts: steps as a map or a list, `run` as a file, inline
//! or a `#id` of a packed `$graph`, sub-workflows, a lone tool.
use super::*;
use crate::host::LiveHost;

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
    let doc = load(&LiveHost, "wf.cwl", dir.path()).unwrap();
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
    let doc = load(&LiveHost, "packed.cwl#main", dir.path()).unwrap();
    assert_eq!(doc.steps.len(), 1);
    assert_eq!(
        (doc.steps[0].id.as_str(), doc.steps[0].base.as_slice()),
        ("count", &["wc".to_string(), "-l".to_string()][..])
    );
    assert_eq!(
        load(&LiveHost, "packed.cwl", dir.path())
            .unwrap()
            .steps
            .len(),
        1,
        "#main by default"
    );
    write(dir.path(), "echo-tool.cwl", ECHO);
    let tool = load(&LiveHost, "echo-tool.cwl", dir.path()).unwrap();
    assert_eq!(
        (tool.tool.as_deref(), tool.steps.len()),
        (Some("echo-tool"), 0)
    );
    assert!(load(&LiveHost, "missing.cwl", dir.path()).is_none());
}
