//! Nesting as the kernel ran it: a process forked by a shell child before that child execs
//! belongs under the program the child became. bash expands a here-document's command
//! substitutions in the child it forks for `cat` (nf-core modules write their
//! `versions.yml` so: `cat <<-END_VERSIONS … $(bwa 2>&1 | sed …)`).
use pipetrace_e2e::{run_shell, spans::RecvSpan, stderr};

#[test]
fn a_here_documents_substitutions_hang_under_its_cat() {
    let dir = tempfile::tempdir().unwrap();
    // A task script (bash inner.sh) of several commands, as Nextflow's .command.sh is.
    let inner = "seq 1 3 > /dev/null\ncat <<-END_VERSIONS > versions.yml\n\
                 \tv: $(seq 5 | sed -n 2p)\nEND_VERSIONS\n";
    std::fs::write(dir.path().join("inner.sh"), inner).unwrap();
    for round in 0..5 {
        // Each round its own trace file (run_shell appends to one).
        let _ = std::fs::remove_file(dir.path().join("t.otlp.jsonl"));
        let d = dir.path().display();
        let script = format!("cd {d} && bash inner.sh; true");
        let (spans, o) = run_shell(dir.path(), "bash", &script, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = std::fs::read_to_string(dir.path().join("versions.yml")).unwrap();
        assert_eq!(v.trim(), "v: 2", "the here-document ran");
        let named = |n: &str| -> Vec<&RecvSpan> {
            (spans.iter())
                .filter(|s| s.is_tool() && s.str("pipetrace.tool.name") == n)
                .collect()
        };
        let cat = named("cat");
        assert_eq!(cat.len(), 1, "round {round}: {spans:?}");
        let sed = named("sed");
        assert_eq!(sed.len(), 1, "round {round}: {spans:?}");
        assert_eq!(
            sed[0].parent.as_deref(),
            Some(cat[0].span_id.as_str()),
            "round {round}: sed under the cat its shell child became"
        );
        let seqs = named("seq");
        let under_cat = (seqs.iter())
            .filter(|s| s.parent.as_deref() == Some(cat[0].span_id.as_str()))
            .count();
        assert_eq!((seqs.len(), under_cat), (2, 1), "round {round}: {seqs:?}");
    }
}

/// nf-core's shape: each ALIGN task writes its versions.yml from a here-document whose
/// substitutions run the tools (`$(… | sed …)`), four tasks at once.
const NF_CORE_SHAPED: &str = r#"
process ALIGN {
    tag "${id}"
    input:
    val id
    output:
    path 'versions.yml'
    script:
    """
    seq 1 20000 | sort -n > sorted.txt
    cat <<-END_VERSIONS > versions.yml
    "${task.process}":
        sort: \$(sort --version 2>&1 | head -n 1 | sed 's/^.* //')
    END_VERSIONS
    """
}

workflow {
    ALIGN(Channel.of('a', 'b', 'c', 'd'))
}
"#;

#[test]
fn the_real_nextflows_versions_here_documents_hang_under_their_cat() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.nf"), NF_CORE_SHAPED).unwrap();
    std::fs::write(
        dir.path().join("nextflow.config"),
        "executor {\n    cpus = 8\n}\n",
    )
    .unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace_e2e::pipetrace()
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(pipetrace_e2e::nextflow::launcher())
        .args(["run", "main.nf"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = pipetrace_e2e::read_jsonl(&out);
    let tasks: Vec<&RecvSpan> = spans.iter().filter(|s| s.is_task()).collect();
    assert_eq!(tasks.len(), 4, "{}", stderr(&o));
    let by_id: std::collections::HashMap<&str, &RecvSpan> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let parent_name = |s: &RecvSpan| {
        let p = s.parent.as_deref().and_then(|p| by_id.get(p));
        p.map(|p| p.str("pipetrace.tool.name").to_string())
    };
    let tools = |n: &str| -> Vec<&RecvSpan> {
        (spans.iter())
            .filter(|s| s.is_tool() && s.str("pipetrace.tool.name") == n)
            .collect()
    };
    let (heads, seds) = (tools("head"), tools("sed"));
    assert_eq!((heads.len(), seds.len()), (4, 4), "one of each per task");
    for s in heads.iter().chain(&seds) {
        assert_eq!(parent_name(s).as_deref(), Some("cat"), "{s:?}");
    }
    // The versions were written: the here-document ran as it does without pipetrace.
    let versions = (std::fs::read_dir(dir.path().join("work"))
        .unwrap()
        .flatten())
    .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
    .filter(|t| t.path().join("versions.yml").exists())
    .count();
    assert_eq!(versions, 4);
}
