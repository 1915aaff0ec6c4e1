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
