//! The real Nextflow: the release tests/nextflow/pom.xml pins, from Maven Central
//! (scripts/nextflow.sh copies it and writes a launcher: `make nextflow`, a step of
//! `make test`), run offline with no plugins.
use std::path::PathBuf;

/// The version tests/nextflow/pom.xml pins: the newest whose dependencies Maven Central
/// serves whole (25.x needs artifacts it lacks: docs/engines.md).
pub const VERSION: &str = "24.10.0";

/// The launcher scripts/nextflow.sh wrote: a script named `nextflow` that execs the JVM,
/// as Nextflow's own launcher does.
pub fn launcher() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPETRACE_NEXTFLOW") {
        return p.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache"),
        PathBuf::from,
    );
    let path = cache.join(format!("pipetrace/nextflow-{VERSION}/nextflow"));
    assert!(
        path.exists(),
        "Nextflow {VERSION} is not set up: run `make nextflow` (scripts/nextflow.sh)"
    );
    path
}

/// A pipeline of three tasks, one inside nested workflows (`NFCORE:QC:SORT_LINES`), each
/// running past a few of the task-metrics sampler's ticks (its first, then one a second); with
/// `--broken true` a fourth, `NFCORE:QC:BROKEN`, fails (sort of a missing file). Reads
/// `in.txt` in the launch directory.
pub const QC_PIPELINE: &str = r#"params.broken = false
process SORT_LINES {
    tag "${id}"
    input:
    tuple val(id), path('in.txt')
    output:
    path 'out.txt'
    script:
    """
    sleep 1.2; sort -r in.txt > out.txt
    """
}

process COUNT {
    tag "${id}"
    input:
    tuple val(id), path('in.txt')
    output:
    path 'out.txt'
    script:
    """
    sleep 1.2; wc -l in.txt > out.txt
    """
}

process MULTIQC {
    input:
    path 'in.txt'
    output:
    path 'out.txt'
    script:
    """
    sleep 1.2; cat in.txt | tr a-z A-Z > out.txt
    """
}

process BROKEN {
    tag "${id}"
    input:
    val id
    output:
    path 'out.txt'
    script:
    """
    sleep 0.5; sort missing.txt > out.txt
    """
}

workflow QC {
    take:
    samples
    main:
    SORT_LINES(samples)
    if (params.broken) {
        BROKEN('sample_c')
    }
}

workflow NFCORE {
    QC(Channel.of(['sample_a', file('in.txt')]))
}

workflow {
    NFCORE()
    COUNT(Channel.of(['sample_b', file('in.txt')]))
    MULTIQC(file('in.txt'))
}
"#;
