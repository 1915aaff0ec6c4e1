//! Accounting benchmark: one Snakemake pipeline measured three ways at once, printed side by
//! side. Asserts nothing.
//!
//!     make bench-accounting   (or: cargo build --release -p pipetrace -p pipetrace-e2e &&
//!                              ./target/release/bench-accounting)
//!
//! Each rule's command runs under `rusage-of`, which reaps it with wait4: the kernel's own
//! totals for the command and every process it waited for (the truth). Each rule also has
//! Snakemake's `benchmark:` directive (psutil samples every 0.5 s, then every 30 s). And
//! the whole run is under `pipetrace run`. pipetrace's task figures also hold the job's bash
//! and the rusage-of wrapper: a few milliseconds more than the truth.
use std::{collections::BTreeMap, path::Path};

use pipetrace_e2e::{pipetrace, read_jsonl, spans::RecvSpan};
use pipetrace_semconv::attr;

const RULES: [(&str, &str); 4] = [
    ("cpu_burner", "{w} burn 1500"),
    ("memory_spike", "{w} alloc 400"),
    (
        "many_short",
        "i=0; while [ $i -lt 300 ]; do {w} short; i=$((i+1)); done",
    ),
    ("writer", "{w} write out.bin 104857600"),
];

fn sibling(name: &str) -> String {
    let exe = std::env::current_exe().expect("own path");
    exe.with_file_name(name).display().to_string()
}

fn snakefile(workload: &str, rusage_of: &str) -> String {
    let mut s = String::from("rule all:\n    input:");
    for (r, _) in RULES {
        s.push_str(&format!(" \"done/{r}\","));
    }
    s.push('\n');
    for (r, cmd) in RULES {
        let cmd = cmd.replace("{w}", workload);
        s.push_str(&format!(
            "\nrule {r}:\n    output: \"done/{r}\"\n    benchmark: \"bench/{r}.tsv\"\n    \
             shell: \"{rusage_of} truth/{r}.json -- sh -c '{cmd}' && touch {{output}}\"\n"
        ));
    }
    s
}

/// Snakemake's benchmark TSV as column -> value.
fn tsv(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    let (Some(head), Some(row)) = (lines.next(), lines.next()) else {
        return BTreeMap::new();
    };
    head.split('\t')
        .map(str::to_string)
        .zip(row.split('\t').map(str::to_string))
        .collect()
}

fn cpu(s: &RecvSpan) -> f64 {
    s.num(attr::CPU_USER_TIME).unwrap_or(0.0) + s.num(attr::CPU_SYSTEM_TIME).unwrap_or(0.0)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spans = run(dir.path());
    println!(
        "{:<13} | {:>8} {:>9} {:>9} | {:>8} {:>9} {:>9} | {:>8} {:>9} {:>9} {:>9} {:>6}",
        "rule",
        "cpu s",
        "maxRSS",
        "written",
        "cpu s",
        "max_rss",
        "io_out",
        "cpu s",
        "tool max",
        "task pk",
        "written",
        "procs"
    );
    println!(
        "{:<13} | {:^28} | {:^28} | {:^49}",
        "", "kernel rusage (wait4)", "Snakemake benchmark:", "pipetrace (kernel, at exit)"
    );
    for (rule, _) in RULES {
        row(dir.path(), &spans, rule);
    }
    println!(
        "\nMemory in MiB. maxRSS (wait4) is the largest single process; pipetrace's tool max is \
         the same figure, its task peak the highest sum of concurrent processes' peaks. \
         Snakemake's figures are psutil samples of the processes alive at each sample: '-' or \
         NA where no sample caught the job."
    );
}

/// Runs the pipeline in `dir` under `pipetrace run`: its spans.
fn run(dir: &Path) -> Vec<RecvSpan> {
    let (workload, rusage_of) = (sibling("workload"), sibling("rusage-of"));
    std::fs::write(dir.join("Snakefile"), snakefile(&workload, &rusage_of)).unwrap();
    let out = dir.join("trace.otlp.jsonl");
    let st = pipetrace()
        .arg("run")
        .arg("--output")
        .arg(&out)
        .args(["--", "snakemake", "--cores", "2", "--quiet"])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run pipetrace");
    assert!(
        st.success(),
        "the pipeline failed: run it by hand in {}",
        dir.display()
    );
    read_jsonl(&out)
}

/// One rule's row: the kernel's rusage, Snakemake's benchmark and pipetrace's figures.
fn row(dir: &Path, spans: &[RecvSpan], rule: &str) {
    let mib = 1048576.0;
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("truth/{rule}.json")))
            .unwrap_or_else(|_| "{}".into()),
    )
    .unwrap_or_default();
    let t = |k: &str| truth[k].as_f64().unwrap_or(f64::NAN);
    let sm = tsv(&dir.join(format!("bench/{rule}.tsv")));
    let s = |k: &str| sm.get(k).cloned().unwrap_or_else(|| "-".into());
    let task = spans
        .iter()
        .find(|x| x.is_task() && x.str(attr::CICD_PIPELINE_TASK_NAME) == rule);
    let tool_max = spans
        .iter()
        .filter(|x| x.is_tool())
        .filter(|x| task.is_some_and(|t| task_of(spans, x).map(|k| &k.span_id) == Some(&t.span_id)))
        .filter_map(|x| x.num(attr::MEMORY_PEAK))
        .fold(0.0, f64::max);
    let (pcpu, ppeak, pwr, procs) = task.map_or((f64::NAN, f64::NAN, f64::NAN, 0), |x| {
        (
            cpu(x),
            x.num(attr::MEMORY_PEAK).unwrap_or(f64::NAN),
            x.num(attr::DISK_WRITE_BYTES).unwrap_or(f64::NAN),
            x.int(attr::USAGE_PROCESSES).unwrap_or(0),
        )
    });
    println!(
        "{:<13} | {:>8.3} {:>9.1} {:>9.1} | {:>8} {:>9} {:>9} | {:>8.3} {:>9.1} {:>9.1} {:>9.1} {:>6}",
        rule,
        t("user_s") + t("system_s"),
        t("maxrss_kib") / 1024.0,
        t("oublock") * 512.0 / mib,
        s("cpu_time"),
        s("max_rss"),
        s("io_out"),
        pcpu,
        tool_max / mib,
        ppeak / mib,
        pwr / mib,
        procs
    );
}

fn task_of<'a>(spans: &'a [RecvSpan], s: &RecvSpan) -> Option<&'a RecvSpan> {
    let mut cur = s.parent.as_ref();
    while let Some(id) = cur {
        let p = spans.iter().find(|x| &x.span_id == id)?;
        if p.is_task() {
            return Some(p);
        }
        cur = p.parent.as_ref();
    }
    None
}
