//! The crate's JSON-LD shape, from a run made here (the validator judges real ones in the
//! e2e tests).
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{
    facts::{FileFacts, Package, Software},
    jsonld::{Crate, Parameter},
    model::{Run, Task},
    records::Job,
    vocab::{Language, TERMS, UNDECLARED_INPUT, file_id, iso},
};

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

fn task(id: &str, step: &str, reads: &[&str], writes: &[&str]) -> Task {
    Task {
        id: id.into(),
        step: step.into(),
        label: format!("{step} (sample=A)"),
        command_line: format!("bash -c '{step}'"),
        start: 1_700_000_000_000_000_000,
        end: 1_700_000_001_500_000_000,
        parameters: vec![("sample".into(), "A".into())],
        reads: set(reads),
        writes: set(writes),
        programs: set(&["/usr/bin/bwa"]),
        ..Task::default()
    }
}

/// A run of two tasks: `align` read its declared FASTQ and an index file it did not
/// declare; `stats` declared an input its tools never opened.
fn crate_json() -> Value {
    let run = Run {
        name: "demo".into(),
        engine: "snakemake".into(),
        command_line: "/usr/bin/python3 /usr/bin/snakemake -c2".into(),
        start: 1_700_000_000_000_000_000,
        end: 1_700_000_009_000_000_000,
        user: Some("ana".into()),
        tasks: vec![
            task("a1", "align", &["reads/A.fq", "ref.fa.bwt"], &["A.bam"]),
            task("s1", "stats", &[], &["A.txt", "/tmp/x/part.tmp"]),
        ],
        ..Run::default()
    };
    let align = Job {
        step: "align".into(),
        inputs: set(&["reads/A.fq"]),
        outputs: set(&["A.bam"]),
        ..Job::default()
    };
    let stats = Job {
        step: "stats".into(),
        inputs: set(&["A.bam"]),
        outputs: set(&["A.txt"]),
        ..Job::default()
    };
    let facts = |size| FileFacts { size, sha256: None };
    let files: BTreeMap<String, FileFacts> =
        ["Snakefile", "reads/A.fq", "ref.fa.bwt", "A.bam", "A.txt"]
            .iter()
            .enumerate()
            .map(|(i, p)| (file_id(p), facts(i as u64 + 10)))
            .collect();
    let bwa = Software {
        path: "/usr/bin/bwa".into(),
        package: Some(Package {
            name: "bwa".into(),
            version: "0.7.17".into(),
            url: "https://packages.debian.org/bwa".into(),
        }),
    };
    let engine = Software {
        path: "/usr/bin/snakemake".into(),
        package: Some(Package {
            name: "snakemake".into(),
            version: "7.21.0".into(),
            url: "https://packages.debian.org/snakemake".into(),
        }),
    };
    let krate = Crate {
        run: &run,
        workflow: "Snakefile",
        workflow_version: "v1".into(),
        language: Language::Snakemake,
        engine,
        jobs: BTreeMap::from([("a1".to_string(), &align), ("s1".to_string(), &stats)]),
        parameters: vec![Parameter {
            name: "min_quality".into(),
            value: "30".into(),
            kind: "Integer",
        }],
        files,
        programs: BTreeMap::from([("/usr/bin/bwa".to_string(), bwa)]),
        license: "CC-BY-4.0",
        publisher: Some("Lab"),
        publisher_url: Some("https://lab.example"),
        published: iso(1_700_000_010_000_000_000),
    };
    krate.json()
}

fn graph(json: &Value) -> BTreeMap<String, Value> {
    (json["@graph"].as_array().unwrap().iter())
        .map(|n| (n["@id"].as_str().unwrap().to_string(), n.clone()))
        .collect()
}

/// The ids a property refers to, one or many.
fn ids(node: &Value, key: &str) -> BTreeSet<String> {
    match &node[key] {
        Value::Array(v) => v
            .iter()
            .map(|x| x["@id"].as_str().unwrap().to_string())
            .collect(),
        Value::Object(o) => BTreeSet::from([o["@id"].as_str().unwrap().to_string()]),
        _ => BTreeSet::new(),
    }
}

fn types(node: &Value) -> BTreeSet<String> {
    match &node["@type"] {
        Value::Array(v) => v.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        Value::String(s) => BTreeSet::from([s.clone()]),
        _ => BTreeSet::new(),
    }
}

#[test]
fn the_root_conforms_to_the_three_run_crate_profiles_and_names_the_workflow() {
    let json = crate_json();
    let g = graph(&json);
    let root = &g["./"];
    let profiles = ids(root, "conformsTo");
    for p in ["process", "workflow", "provenance"] {
        let id = format!("https://w3id.org/ro/wfrun/{p}/0.5");
        assert!(profiles.contains(&id), "{profiles:?}");
        assert_eq!(g[&id]["@type"], "CreativeWork");
    }
    assert_eq!(ids(root, "mainEntity"), set(&["Snakefile"]));
    let wf = &g["Snakefile"];
    assert_eq!(
        types(wf),
        set(&[
            "File",
            "SoftwareSourceCode",
            "ComputationalWorkflow",
            "HowTo"
        ])
    );
    let lang = ids(wf, "programmingLanguage");
    assert_eq!(g[lang.first().unwrap()]["name"], "Snakemake");
    assert_eq!(ids(wf, "step"), set(&["#step-align", "#step-stats"]));
    // Every data entity is part of the root.
    for (id, node) in &g {
        if types(node).contains("File") {
            assert!(ids(root, "hasPart").contains(id), "{id}");
        }
    }
}

/// Programs whose package is known go by its page, the path as the fragment: an absolute
/// web address, as the Process Run Crate recommends.
const SNAKEMAKE: &str = "https://packages.debian.org/snakemake#/usr/bin/snakemake";
const BWA: &str = "https://packages.debian.org/bwa#/usr/bin/bwa";

#[test]
fn each_task_is_a_control_action_over_a_create_action_under_the_engines_organize_action() {
    let g = graph(&crate_json());
    let organize = &g["#orchestrate"];
    assert_eq!(ids(organize, "instrument"), set(&[SNAKEMAKE]));
    assert_eq!(g[SNAKEMAKE]["softwareVersion"], "7.21.0");
    assert_eq!(ids(organize, "result"), set(&["#run"]));
    assert_eq!(
        ids(organize, "object"),
        set(&["#control-a1", "#control-s1"])
    );
    let control = &g["#control-a1"];
    assert_eq!(types(control), set(&["ControlAction"]));
    assert_eq!(ids(control, "instrument"), set(&["#step-align"]));
    assert_eq!(ids(control, "object"), set(&["#task-a1"]));
    let action = &g["#task-a1"];
    let instruments = ids(action, "instrument");
    assert!(instruments.contains("#tool-align"), "{instruments:?}");
    assert!(instruments.contains(BWA), "{instruments:?}");
    assert_eq!(g[BWA]["softwareVersion"], "0.7.17");
    assert_eq!(g[BWA]["identifier"], "/usr/bin/bwa");
    assert_eq!(g["#step-align"]["workExample"]["@id"], "#tool-align");
    assert!(ids(&g["Snakefile"], "hasPart").contains("#tool-align"));
    assert_eq!(action["startTime"], "2023-11-14T22:13:20.000+00:00");
    assert_eq!(
        action["actionStatus"],
        "http://schema.org/CompletedActionStatus"
    );
    let wildcard = &g["#task-a1-sample"];
    assert!(ids(action, "object").contains("#task-a1-sample"));
    assert_eq!(
        (&wildcard["name"], &wildcard["value"]),
        (&"sample".into(), &"A".into())
    );
}

#[test]
fn declared_files_appear_whether_opened_or_not_and_undeclared_reads_are_marked() {
    let g = graph(&crate_json());
    let align = &g["#task-a1"];
    assert_eq!(
        ids(align, "object"),
        set(&["reads/A.fq", "ref.fa.bwt", "#task-a1-sample"])
    );
    assert_eq!(ids(align, UNDECLARED_INPUT), set(&["ref.fa.bwt"]));
    assert_eq!(ids(align, "result"), set(&["A.bam"]));
    // `stats` never opened its declared input: it is there all the same, and not marked.
    let stats = &g["#task-s1"];
    assert!(ids(stats, "object").contains("A.bam"));
    assert!(ids(stats, UNDECLARED_INPUT).is_empty());
    let file = &g["ref.fa.bwt"];
    assert_eq!(types(file), set(&["File"]));
    assert!(file["contentSize"].is_string());
}

#[test]
fn no_property_holds_a_single_element_array_and_no_contents_are_exported() {
    let json = crate_json();
    for node in json["@graph"].as_array().unwrap() {
        for (k, v) in node.as_object().unwrap() {
            assert!(
                !matches!(v, Value::Array(a) if a.len() == 1),
                "{}: {k}",
                node["@id"]
            );
        }
    }
    let text = json.to_string();
    assert!(!text.contains("\"text\""), "no file's text");
}

#[test]
fn paths_become_ids_relative_inside_and_file_uris_outside() {
    assert_eq!(file_id("aligned/A B.bam"), "aligned/A%20B.bam");
    assert_eq!(file_id("/data/ref#1.fa"), "file:///data/ref%231.fa");
}

#[test]
fn a_file_gone_at_the_end_is_named_by_its_path_as_no_data_entity() {
    let g = graph(&crate_json());
    let stats = &g["#task-s1"];
    let gone = "#gone:/tmp/x/part.tmp";
    assert!(ids(stats, "result").contains(gone), "{stats}");
    assert_eq!(types(&g[gone]), set(&["CreativeWork"]));
    assert_eq!(g[gone]["name"], "/tmp/x/part.tmp");
    assert!(!ids(&g["./"], "hasPart").contains(gone));
    // The run's results are files that are there.
    assert!(!ids(&g["#run"], "result").contains(gone));
}

#[test]
fn pipetraces_own_terms_are_full_uris_in_the_context_and_described_in_the_graph() {
    assert!(
        TERMS.starts_with("https://") && TERMS.ends_with("/terms#"),
        "{TERMS}"
    );
    let json = crate_json();
    let term = format!("{TERMS}{UNDECLARED_INPUT}");
    assert_eq!(json["@context"][1][UNDECLARED_INPUT]["@id"], term.as_str());
    assert_eq!(graph(&json)[&term]["@type"], "rdf:Property");
}

#[test]
fn the_engine_and_its_files_are_found_on_the_runs_command_line() {
    use super::{cwl_job_file, engine_program, workflow_file};
    let snakemake = "/usr/bin/python3 /usr/bin/snakemake --cores 2";
    assert_eq!(engine_program(snakemake, "snakemake"), "/usr/bin/snakemake");
    let cwltool = "/usr/bin/python3 /usr/bin/cwltool --outdir out wf.cwl job.yml";
    assert_eq!(cwl_job_file(cwltool).as_deref(), Some("job.yml"));
    assert_eq!(cwl_job_file("cwltool wf.cwl"), None);

    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(d.join("workflow")).unwrap();
    std::fs::write(d.join("workflow/Snakefile"), "rule all:\n").unwrap();
    std::fs::write(d.join("other.smk"), "rule all:\n").unwrap();
    let found = |cmd: &str| workflow_file(None, cmd, Language::Snakemake, &d);
    assert_eq!(found("snakemake -c1").unwrap(), "workflow/Snakefile");
    assert_eq!(found("snakemake -s other.smk -c1").unwrap(), "other.smk");
    let none = workflow_file(None, "cwltool x.cwl", Language::Cwl, &d).unwrap_err();
    assert!(none.contains("--workflow"), "{none}");
    // A --workflow given is taken, or refused when it is not there: never another file.
    let given = |f: &str| {
        workflow_file(
            Some(std::path::Path::new(f)),
            "snakemake",
            Language::Snakemake,
            &d,
        )
    };
    assert_eq!(given("other.smk").unwrap(), "other.smk");
    let e = given("missing.smk").unwrap_err();
    assert!(e.starts_with("--workflow missing.smk: no such file"), "{e}");
}

#[test]
fn the_workflows_value_inputs_are_formal_parameters_with_their_values_in_the_runs_object() {
    let g = graph(&crate_json());
    let param = "#param-value-min-quality";
    assert!(ids(&g["Snakefile"], "input").contains(param));
    assert_eq!(types(&g[param]), set(&["FormalParameter"]));
    assert_eq!(g[param]["additionalType"], "Integer");
    let value = ids(&g[param], "workExample").into_iter().next().unwrap();
    assert!(ids(&g["#run"], "object").contains(&value));
    assert_eq!(
        (&g[&value]["name"], &g[&value]["value"]),
        (&"min_quality".into(), &"30".into())
    );
    assert_eq!(ids(&g[&value], "exampleOfWork"), set(&[param]));
}
