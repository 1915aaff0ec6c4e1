//! Every documented example runs: each `pipetrace` line of README.md, docs/*.md and every
//! command's `--help` is run here, in a folder holding the demo pipeline, its trace under
//! every file name the examples give and a CWL workflow's, and must succeed. The lines that
//! need what a test folder cannot hold (a node's agent, the reader's collector, an installed
//! package's files) are listed below with the test that runs their like; a new example is one
//! or the other, or this fails.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Output,
};

use pipetrace_e2e::{
    cwl_workflow, demo_pipeline,
    examples::{argv_of, doc_examples, env_of, help_examples},
    pipetrace, stderr,
};

/// Commands whose examples need a running agent, a backend or a whole demo of their own.
const NOT_HERE: &[(&str, &str)] = &[
    (
        "agent",
        "a node's agent: one_agent, restart and the agent's tests run it",
    ),
    ("top", "the node's agent running: top.rs"),
    ("status", "the node's agent running: top.rs"),
    ("send", "an endpoint that failed: delivery.rs"),
    (
        "demo",
        "its own folder and a whole run: end_snapshots.rs and report_page.rs",
    ),
];

/// Why a documented line does not run here, if it does not.
fn not_here(argv: &[String], env: &[(String, String)]) -> Option<&'static str> {
    let sub = subcommand(argv)?;
    if let Some((_, why)) = NOT_HERE.iter().find(|(c, _)| *c == sub) {
        return Some(why);
    }
    let endpoint = argv.iter().any(|a| a == "--endpoint")
        || env.iter().any(|(k, _)| k.starts_with("OTEL_EXPORTER_OTLP"));
    if sub == "run" && endpoint {
        return Some("the reader's collector: jaeger.rs and delivery.rs send over OTLP");
    }
    if argv.iter().any(|a| a.starts_with("/etc/")) {
        return Some("the installed package's files: dist.rs installs it");
    }
    if (argv.iter()).any(|a| a.starts_with('/') && !Path::new(a).exists()) {
        return Some("a folder of the reader's");
    }
    let run_ids = argv.iter().filter(|a| a.len() == 12 && is_hex(a)).count();
    if run_ids > 0 {
        return Some("run ids the reader's runs were kept under: compare.rs");
    }
    None
}

fn is_hex(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_hexdigit())
}

/// The command of a `pipetrace …` line, past the global options.
fn subcommand(argv: &[String]) -> Option<&str> {
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        match w.as_str() {
            "-c" | "--config" | "-o" | "--output" | "--endpoint" | "--protocol"
            | "--service-name" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => return Some(w),
        }
    }
    None
}

/// The folder the examples run in: the demo pipeline traced, its trace under each name the
/// examples give, a file of four runs (`agent.otlp.jsonl#3`), a CWL workflow traced.
struct Folder {
    dir: tempfile::TempDir,
    demo_trace: PathBuf,
    /// Four runs of one small pipeline (`rnaseq`), in one file, and the last alone: its
    /// usual is the three before.
    runs: PathBuf,
    last: PathBuf,
}

/// A small pipeline of two rules, run again whole each time.
const RNASEQ: &str = "rule all:\n    input: \"b.txt\"\n\nrule a:\n    output: \"a.txt\"\n    shell: \"echo a > {output}\"\n\nrule b:\n    input: \"a.txt\"\n    output: \"b.txt\"\n    shell: \"cp {input} {output}\"\n";

impl Folder {
    fn new() -> Self {
        let dir = demo_pipeline();
        let demo_trace = dir.path().join("demo.otlp.jsonl");
        let o = pipetrace()
            .env("PIPETRACE_FILES__ENABLED", "true")
            .args(["run", "--no-summary", "-o"])
            .arg(&demo_trace)
            .args(["--", "snakemake", "--cores", "2"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "the demo: {}", stderr(&o));
        let rnaseq = dir.path().join("rnaseq");
        std::fs::create_dir(&rnaseq).unwrap();
        std::fs::write(rnaseq.join("Snakefile"), RNASEQ).unwrap();
        let (mut all, mut last) = (String::new(), PathBuf::new());
        for n in 0..4 {
            last = dir.path().join(format!("rnaseq-{n}.otlp.jsonl"));
            let o = pipetrace()
                .args(["run", "--no-summary", "-o"])
                .arg(&last)
                .args(["--", "snakemake", "--cores", "1", "--forceall"])
                .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path().join("state"))
                .current_dir(&rnaseq)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            all.push_str(&std::fs::read_to_string(&last).unwrap());
        }
        let runs = dir.path().join("rnaseq.otlp.jsonl");
        std::fs::write(&runs, all).unwrap();
        let align = dir.path().join("align.sh");
        std::fs::write(&align, "#!/bin/sh\necho aligned\n").unwrap();
        let o = std::process::Command::new("chmod")
            .arg("+x")
            .arg(&align)
            .output()
            .unwrap();
        assert!(o.status.success());
        let f = Folder {
            dir,
            demo_trace,
            runs,
            last,
        };
        f.cwl();
        f
    }

    /// The CWL workflow beside the demo, traced, with cwltool's outputs (`outputs.json`).
    fn cwl(&self) {
        let wf = cwl_workflow();
        copy_into(wf.path(), self.dir.path());
        let trace = self.dir.path().join("cwl.otlp.jsonl");
        let o = pipetrace()
            .env("PIPETRACE_FILES__ENABLED", "true")
            .args(["run", "--no-summary", "-o"])
            .arg(&trace)
            .args(["--", "cwltool", "--no-container", "--outdir", "results"])
            .args(["wf.cwl", "job.yml"])
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "cwltool: {}", stderr(&o));
        std::fs::write(self.dir.path().join("outputs.json"), &o.stdout).unwrap();
    }

    /// `argv` with its trace files there, as the docs mean them: a file a run is picked
    /// from (`#3`) holds four runs of one pipeline, a run set against its usual is the last
    /// of those, any other is the demo's trace (the docs' placeholders stand for it). A
    /// run's own `-o` file is its own, beside those.
    fn prepare(&self, argv: Vec<String>) -> Vec<String> {
        let usual = argv.iter().any(|a| a == "--usual" || a == "--pipeline");
        let run = subcommand(&argv) == Some("run");
        let mut out: Vec<String> = Vec::new();
        for w in argv {
            let w = match w.as_str() {
                "A" | "B" => format!("{w}.otlp.jsonl"),
                "pipetrace-<time>.otlp.jsonl" => "demo.otlp.jsonl".into(),
                "FILE" | "pipetrace.yaml" => "pipetrace.yaml".into(),
                _ if run && out.last().is_some_and(|o| o == "-o") => format!("ran-{w}"),
                _ => w,
            };
            let (file, picked) = match w.split_once('#') {
                Some((f, _)) => (f, true),
                None => (w.as_str(), false),
            };
            let at = self.dir.path().join(file);
            if file.ends_with(".otlp.jsonl") && !run {
                let from = match (picked, usual) {
                    (true, _) => &self.runs,
                    (false, true) => &self.last,
                    (false, false) => &self.demo_trace,
                };
                if at != *from {
                    std::fs::copy(from, &at).unwrap();
                }
            }
            out.push(w);
        }
        out
    }

    fn run(&self, argv: &[String], env: &[(String, String)]) -> Output {
        let mut c = pipetrace();
        c.args(&argv[1..]).current_dir(self.dir.path());
        for (k, v) in env {
            c.env(k, v);
        }
        c.env(
            "PIPETRACE_DIAGNOSIS__STATE_DIR",
            self.dir.path().join("state"),
        );
        c.output().unwrap()
    }
}

fn copy_into(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Every command's `--help` examples, from the binary itself.
fn all_help_examples() -> Vec<(String, String)> {
    let help = |args: &[&str]| {
        let o = pipetrace().args(args).arg("--help").output().unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let top = help(&[]);
    let mut out = help_examples("pipetrace", &top);
    let commands = (top.split("Commands:").nth(1).unwrap_or(""))
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect::<Vec<_>>();
    for c in commands {
        out.extend(help_examples(&c, &help(&[&c])));
    }
    out
}

#[test]
fn every_documented_example_runs_or_says_where_its_like_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut lines = all_help_examples();
    lines.extend(doc_examples(&root));
    let folder = Folder::new();
    // `config validate pipetrace.yaml` validates what `config print-default` writes.
    let o = folder.run(
        &["pipetrace".into(), "config".into(), "print-default".into()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(folder.dir.path().join("pipetrace.yaml"), &o.stdout).unwrap();
    let (mut ran, mut elsewhere, mut failed) = (0, BTreeSet::new(), Vec::new());
    for (place, line) in &lines {
        let Some(argv) = argv_of(line) else { continue };
        let env = env_of(line);
        if let Some(why) = not_here(&argv, &env) {
            elsewhere.insert(format!("{place}: {}: {why}", argv.join(" ")));
            continue;
        }
        let argv = folder.prepare(argv);
        let o = folder.run(&argv, &env);
        ran += 1;
        if !o.status.success() {
            failed.push(format!(
                "{place}: `{line}` exited {:?}:\n{}",
                o.status.code(),
                stderr(&o)
            ));
        }
    }
    eprintln!(
        "{ran} documented examples ran; {} run elsewhere:\n{}",
        elsewhere.len(),
        elsewhere.into_iter().collect::<Vec<_>>().join("\n")
    );
    assert!(
        failed.is_empty(),
        "{} of {ran} failed:\n{}",
        failed.len(),
        failed.join("\n\n")
    );
    assert!(ran >= 40, "{ran} ran");
}
