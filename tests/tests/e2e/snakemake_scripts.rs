//! Snakemake deletes each `script:` job's script when the job ends, which can be before the
//! agent sees the job start; the host keeps a copy as Snakemake writes it. On Snakemake 7
//! and 9, every job of a script rule (wildcards, two jobs at a time) leaves a copy that
//! names the outputs Snakemake's own metadata gives that job, after the script is gone.
use std::{path::Path, process::Command};

use pipetrace_e2e::snakemake::{Version, metadata};
use pipetrace_host::this_machine;

const SNAKEFILE: &str = r#"
rule all:
    input: expand("out/{s}.txt", s=["a", "b", "c", "d"])

rule stats:
    output: "out/{s}.txt"
    script: "scripts/stats.py"
"#;

/// Each job writes the path Python was told to run: Snakemake's temporary copy of the
/// script (its `__file__` is the original's).
const SCRIPT: &str = "import sys\nopen(snakemake.output[0], 'w').write(sys.argv[0])\n";

fn each_jobs_script_is_kept(v: Version) {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    std::fs::write(w.join("Snakefile"), SNAKEFILE).unwrap();
    std::fs::create_dir(w.join("scripts")).unwrap();
    std::fs::write(w.join("scripts/stats.py"), SCRIPT).unwrap();
    // Asked for as a run's first job is seen, when `.snakemake` exists and `scripts` may not.
    std::fs::create_dir(w.join(".snakemake")).unwrap();
    let host = this_machine();
    host.keep_written(&w.join(".snakemake/scripts"));
    let status = Command::new(v.program())
        .args(["-c2", "--quiet"])
        .current_dir(w)
        .status()
        .expect("snakemake");
    assert!(status.success(), "{v:?}: {status:?}");
    let jobs: Vec<String> = (metadata(w).into_iter())
        .filter(|(_, record)| record["rule"] == "stats")
        .map(|(output, _)| output)
        .collect();
    assert_eq!(
        jobs.len(),
        4,
        "{v:?}: Snakemake's records of the script jobs"
    );
    for output in jobs {
        let ran = std::fs::read_to_string(w.join(&output)).unwrap();
        let script = Path::new(ran.trim());
        assert!(
            script.to_string_lossy().contains(".snakemake/scripts/tmp"),
            "{v:?}: {output} was written by {ran}"
        );
        assert!(!w.join(script).exists(), "{v:?}: Snakemake deleted {ran}");
        let name = script.file_name().unwrap();
        let copy = host
            .kept(name)
            .unwrap_or_else(|| panic!("{v:?}: no copy of {ran}, the script of {output}"));
        let text = String::from_utf8_lossy(&copy);
        assert!(
            text.contains(&output),
            "{v:?}: the copy of {ran} does not name {output}"
        );
    }
}

#[test]
fn on_snakemake_7() {
    each_jobs_script_is_kept(Version::Seven);
}

#[test]
fn on_snakemake_9() {
    each_jobs_script_is_kept(Version::Nine);
}
