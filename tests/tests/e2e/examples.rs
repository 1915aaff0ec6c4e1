//! Every documented example runs or is listed with why: each shell line of README.md's and
//! docs/*.md's code blocks (a quote's lines, `sh -c '…'` over several, as one) and of every
//! command's `--help`, however deep (`config show --help`), is run here, in a folder holding
//! the demo pipeline, its trace under every file name the examples give and a CWL
//! workflow's, and must succeed. The lines that need what a test folder cannot hold (a
//! node's agent, the reader's collector, an installed package's files) and those that are not
//! pipetrace's (`make`, `sudo`, Docker, an engine run with what `suggest` wrote) are listed
//! below with the test that runs their like. A new line is one or the other, or this fails,
//! and the counts are exact.
use std::{
    path::{Path, PathBuf},
    process::Output,
};

use pipetrace_e2e::{
    cwl_workflow, demo_pipeline,
    examples::{argv_of, doc_examples, env_of, help_examples},
    pipetrace, stderr,
};

/// The counts of the documented lines, exact: a line added, dropped or moved from one kind
/// to the other changes one (say so here).
const HELP_LINES: usize = 43;
const DOC_LINES: usize = 77;
const RAN: usize = 58;
const LISTED: usize = 62;

/// Documented lines that are not pipetrace's, by how they start, and where their like runs.
const NOT_PIPETRACE: &[(&str, &str)] = &[
    ("#", "a comment"),
    (
        "make ",
        "a make target, which installs and builds on this machine: CI runs make test; \
         stack.rs runs make stack's script and its setup, dist.rs what make dist packages",
    ),
    (
        "cargo build",
        "the build these tests run on (make test builds it)",
    ),
    (
        "sudo apt install ./target/dist/",
        "installs the package on this machine: dist.rs installs it in a clean Debian root",
    ),
    (
        "sudo tar -xzf pipetrace-",
        "installs the tarball on this machine: dist.rs unpacks it and checks its files",
    ),
    (
        "sudoedit /etc/pipetrace/",
        "edits this machine's configuration: dist.rs checks the installed one",
    ),
    (
        "sudo cp /usr/share/doc/pipetrace/",
        "changes this machine's sysctl settings: dist.rs checks the package ships the file",
    ),
    (
        "sudo sysctl",
        "changes this machine's kernel settings: least_privilege.rs runs with them as found",
    ),
    (
        "sudo systemctl",
        "this machine's systemd: dist.rs checks the unit with systemd-analyze",
    ),
    (
        "docker ",
        "Docker, which these machines have not: deploy.rs checks the compose stack's files",
    ),
    (
        "rocrate-validator ",
        "the RO-Crate validator: provenance.rs validates every crate with it",
    ),
    (
        "snakemake --profile profile ",
        "Snakemake with the profile suggest wrote: suggest.rs, snakemake_*_applies_the_suggested_profile",
    ),
    (
        "nextflow run main.nf -c suggested.config",
        "Nextflow with the config suggest wrote: suggest.rs, nextflow_applies_the_suggested_config_and_asks_less",
    ),
    (
        "cwltool --overrides overrides.yml ",
        "cwltool with the overrides suggest wrote: suggest.rs, cwltool_applies_the_suggested_overrides",
    ),
];

/// The folder a guest kernel's run writes to (docs/kernels.md): here, a folder of the test's.
const GUEST_OUT: &str = "/out/";

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
    let elsewhere = |a: &str| a.starts_with('/') && !a.starts_with(GUEST_OUT);
    if (argv.iter()).any(|a| elsewhere(a) && !Path::new(a).exists()) {
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
        let guest = format!("{}/out/", self.dir.path().display());
        std::fs::create_dir_all(&guest).unwrap();
        for w in argv {
            let w = w.replace(GUEST_OUT, &guest);
            let w = match w.as_str() {
                "A" | "B" => format!("{w}.otlp.jsonl"),
                "pipetrace-<time>.otlp.jsonl" => "demo.otlp.jsonl".into(),
                "FILE" | "pipetrace.yaml" | "my.yaml" => "pipetrace.yaml".into(),
                _ if run && out.last().is_some_and(|o| o == "-o") && !w.starts_with('/') => {
                    format!("ran-{w}")
                }
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
        // The test's own programs (the guest's `workload` and `rusage-of`) on PATH.
        let bins = Path::new(env!("CARGO_BIN_EXE_workload")).parent().unwrap();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let paths = std::iter::once(bins.to_path_buf()).chain(std::env::split_paths(&path));
        c.env("PATH", std::env::join_paths(paths).unwrap());
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

/// The `Examples:` of `pipetrace ARGS --help` and of every command under it, however deep.
fn help_examples_under(args: &[&str], out: &mut Vec<(String, String)>) {
    let o = pipetrace().args(args).arg("--help").output().unwrap();
    assert!(o.status.success(), "{args:?} --help: {}", stderr(&o));
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    let place = std::iter::once("pipetrace")
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    out.extend(help_examples(&place, &help));
    for c in commands(&help) {
        let under: Vec<&str> = args.iter().copied().chain([c]).collect();
        help_examples_under(&under, out);
    }
}

/// The commands a help text lists (`Commands:`), but `help`.
fn commands(help: &str) -> Vec<&str> {
    (help.split("Commands:").nth(1).unwrap_or(""))
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect()
}

/// What the test does with a documented line: runs it (its words and environment), or lists
/// it with where its like runs; an error for a line that is neither.
enum Fate {
    Run(Vec<String>, Vec<(String, String)>),
    Listed(&'static str),
}

fn fate(line: &str) -> Result<Fate, String> {
    let shell = line.trim().trim_start_matches("$ ");
    if shell.starts_with('#') {
        return Ok(Fate::Listed("a comment"));
    }
    if let Some(argv) = argv_of(line) {
        let env = env_of(line);
        return Ok(match not_here(&argv, &env) {
            Some(why) => Fate::Listed(why),
            None => Fate::Run(argv, env),
        });
    }
    (NOT_PIPETRACE.iter())
        .find(|(start, _)| shell.starts_with(start))
        .map(|(_, why)| Fate::Listed(why))
        .ok_or_else(|| format!("`{line}` is neither run nor listed: list it in NOT_PIPETRACE"))
}

#[test]
fn every_documented_example_runs_or_says_where_its_like_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut lines = Vec::new();
    help_examples_under(&[], &mut lines);
    let helps = lines.len();
    lines.extend(doc_examples(&root));
    let folder = Folder::new();
    // `config validate pipetrace.yaml` validates what `config print-default` writes.
    let o = folder.run(
        &["pipetrace".into(), "config".into(), "print-default".into()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(folder.dir.path().join("pipetrace.yaml"), &o.stdout).unwrap();
    let (mut ran, mut listed, mut unknown, mut failed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (place, line) in &lines {
        let (argv, env) = match fate(line) {
            Ok(Fate::Run(argv, env)) => (argv, env),
            Ok(Fate::Listed(why)) => {
                listed.push(format!("{place}: {}: {why}", line.trim()));
                continue;
            }
            Err(e) => {
                unknown.push(format!("{place}: {e}"));
                continue;
            }
        };
        let argv = folder.prepare(argv);
        let o = folder.run(&argv, &env);
        ran.push((place.as_str(), line.as_str()));
        if !o.status.success() {
            failed.push(format!(
                "{place}: `{line}` exited {:?}:\n{}",
                o.status.code(),
                stderr(&o)
            ));
        }
    }
    eprintln!(
        "{} documented lines ran; {} are listed, not run here:\n{}",
        ran.len(),
        listed.len(),
        listed.join("\n")
    );
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        ran.len(),
        failed.join("\n\n")
    );
    // Nested commands' help is read, and a quote's lines are one command.
    assert!(
        ran.iter()
            .any(|(p, _)| *p == "pipetrace config show --help")
    );
    assert!(
        ran.iter()
            .any(|(p, l)| *p == "kernels.md" && l.contains("sh -c \"exit 3\""))
    );
    assert_eq!(
        (helps, lines.len() - helps, ran.len(), listed.len()),
        (HELP_LINES, DOC_LINES, RAN, LISTED),
        "help lines, doc lines, ran, listed"
    );
}

#[test]
fn a_documented_line_is_run_listed_or_refused() {
    let run = |l: &str| matches!(fate(l), Ok(Fate::Run(..)));
    let listed = |l: &str| matches!(fate(l), Ok(Fate::Listed(_)));
    assert!(run("pipetrace report run.otlp.jsonl --json | jq ."));
    assert!(run(
        "PIPETRACE_FILES__ENABLED=true pipetrace run -o r.otlp.jsonl -- true"
    ));
    assert!(run(
        "pipetrace run -o /out/t.otlp.jsonl -- sh -c '\n  sh -c \"exit 3\"\n  exit 0'"
    ));
    assert!(listed("pipetrace agent") && listed("# a comment") && listed("make demo"));
    assert!(listed(
        "pipetrace config validate /etc/pipetrace/config.yaml"
    ));
    assert!(
        fate("rm -rf results").is_err(),
        "a line of no known kind fails"
    );
}
