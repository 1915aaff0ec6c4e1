//! `pipetrace demo`: the bundled Snakemake pipeline, traced. The main job on an embedded
//! default: no config, no endpoint; the trace goes to a file and the terminal.
use std::path::Path;

use anyhow::Context;
use pipetrace_config::Config;

const FILES: [(&str, &str); 4] = [
    ("Snakefile", include_str!("../../demo/Snakefile")),
    (
        "scripts/make_reference.py",
        include_str!("../../demo/scripts/make_reference.py"),
    ),
    (
        "scripts/simulate_reads.py",
        include_str!("../../demo/scripts/simulate_reads.py"),
    ),
    (
        "scripts/summarize.py",
        include_str!("../../demo/scripts/summarize.py"),
    ),
];

/// Writes the demo pipeline into `dir` (a fresh copy each time: results are removed).
pub(crate) fn write_demo(dir: &Path) -> std::io::Result<()> {
    if dir.join("Snakefile").exists() {
        for sub in [
            "ref",
            "reads",
            "aligned",
            "stats",
            "report.txt",
            ".snakemake",
        ] {
            let p = dir.join(sub);
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
    for (name, text) in FILES {
        let path = dir.join(name);
        pipetrace_export::export::paths::write_creating(&path, text)
            .map_err(std::io::Error::other)?;
    }
    Ok(())
}

fn missing_tools() -> Vec<&'static str> {
    ["snakemake", "bwa", "samtools", "python3"]
        .into_iter()
        .filter(|t| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            !std::env::split_paths(&path).any(|d| d.join(t).is_file())
        })
        .collect()
}

pub(crate) async fn run(mut cfg: Config, dir: &Path, summary: bool) -> anyhow::Result<i32> {
    let missing = missing_tools();
    if !missing.is_empty() {
        anyhow::bail!(
            "the demo needs {}: run scripts/setup.sh, or apt-get install snakemake bwa samtools",
            missing.join(", ")
        );
    }
    write_demo(dir).with_context(|| format!("writing the demo pipeline to {}", dir.display()))?;
    if cfg.export.file.is_none() && cfg.export.otlp.traces_endpoint().is_none() {
        cfg.export.file = Some(dir.join("trace.otlp.jsonl"));
        let _ = std::fs::remove_file(dir.join("trace.otlp.jsonl"));
    }
    say!(
        "pipetrace demo: tracing `snakemake --cores 2` in {}",
        dir.display()
    );
    let argv: Vec<String> = ["snakemake", "--cores", "2"].map(String::from).to_vec();
    let how = super::run::How {
        summary,
        keep_running: false,
        stop_grace: super::stop::TERM_GRACE,
        machines: false,
    };
    super::run::run(&cfg, &argv, Some(dir), how).await
}
