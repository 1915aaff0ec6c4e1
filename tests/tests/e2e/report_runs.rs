//! `pipetrace report` on an agent's file: one section per run, each with its own tasks,
//! in the table and in the HTML page.
use pipetrace_e2e::{own_agent, pipetrace, stderr};

#[test]
fn a_report_of_an_agents_file_has_one_section_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(
        dir.path(),
        "agent",
        // No engine: the agent watches the whole host, where other tests run Snakemake.
        "attribution:\n  engines: []\n  run_rules:\n\
         \x20   - match: { argv: 'pipetrace-report-first' }\n      name: first\n\
         \x20   - match: { argv: 'pipetrace-report-second' }\n      name: second\n",
    );
    for (marker, tool) in [
        ("first", "gzip -c /etc/services"),
        ("second", "sort /etc/services"),
    ] {
        let script = format!("{tool} > /dev/null; : pipetrace-report-{marker}");
        let st = std::process::Command::new("bash")
            .args(["-c", &script, &format!("pipetrace-report-{marker}")])
            .status()
            .unwrap();
        assert!(st.success());
    }
    pipetrace_e2e::wait_for_runs(&out, &["first", "second"]);
    agent.stop();
    let html = dir.path().join("r.html");
    let o = pipetrace()
        .arg("report")
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    let (first, second) = (table.find("run first"), table.find("run second"));
    let (first, second) = (first.expect(&table), second.expect(&table));
    assert!(first < second, "in the order they ran: {table}");
    let (gzip, sort) = (
        table.find("gzip").expect(&table),
        table.find("sort").expect(&table),
    );
    assert!(first < gzip && gzip < second && second < sort, "{table}");
    // One section per run: the agent watches the whole host, where other tests' Slurm jobs
    // (runs of their own) may come and go meanwhile; these two runs are judged.
    let page = std::fs::read_to_string(&html).unwrap();
    let sections: Vec<&str> = page.split("<section id=\"run-").skip(1).collect();
    let of = |run: &str| {
        let mine: Vec<&&str> = (sections.iter())
            .filter(|s| s.contains(&format!("\"><h1>run {run}</h1>")))
            .collect();
        assert_eq!(mine.len(), 1, "one section of run {run}: {page}");
        *mine[0]
    };
    // Each listed in the page's index, linked to its own section.
    for run in ["first", "second"] {
        assert!(
            page.contains(&format!("\">run {run}</a> ")),
            "no index entry of {run}"
        );
    }
    assert!(
        of("first").contains(">gzip<") && !of("first").contains(">sort<"),
        "{page}"
    );
    assert!(
        of("second").contains(">sort<") && !of("second").contains(">gzip<"),
        "{page}"
    );
}

/// A workflow of two rules under `pipetrace run`, traced into `out` (tasks for suggest).
fn traced_workflow(wf: &std::path::Path, out: &std::path::Path) {
    std::fs::create_dir_all(wf).unwrap();
    std::fs::write(
        wf.join("Snakefile"),
        "rule all:\n    input: 'b.txt'\n\
         rule a:\n    output: 'a.txt'\n    shell: 'seq 1 1000 > {output}'\n\
         rule b:\n    input: 'a.txt'\n    output: 'b.txt'\n    shell: 'sort {input} > {output}'\n",
    )
    .unwrap();
    let o = pipetrace()
        .args(["run", "--no-summary", "-o"])
        .arg(out)
        .args(["--", "snakemake", "-c1", "--forceall"])
        .current_dir(wf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The trace ids of the runs in a trace file, in its order.
fn run_ids(path: &std::path::Path) -> Vec<String> {
    let spans = pipetrace_e2e::read_jsonl(path);
    (spans.iter().filter(|s| s.is_run()))
        .map(|s| s.trace_id.clone())
        .collect()
}

/// The lines of `stderr` that warn of `line` (byte `at`) of `file`.
fn warnings_of(stderr: &str, file: &str, line: usize, at: usize) -> usize {
    let named = format!("{file} line {line} (byte {at})");
    stderr.lines().filter(|l| l.contains(&named)).count()
}

/// Two complete runs, a garbage line between them (bytes no UTF-8 either) and a third run's
/// line cut short at the end, as a crash or a copy under way leaves it: report, compare and
/// suggest each read both runs and warn once of each bad line, naming file, line and byte.
#[test]
fn report_compare_and_suggest_read_every_complete_run_of_a_torn_file() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("a.otlp.jsonl"),
        dir.path().join("b.otlp.jsonl"),
    );
    traced_workflow(&dir.path().join("wf-a"), &a);
    traced_workflow(&dir.path().join("wf-b"), &b);
    let (a_text, b_text) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let garbage = b"\x00\xff garbage, not a request \xfe\n";
    let mut torn = a_text.clone();
    let garbage_at = torn.len();
    torn.extend_from_slice(garbage);
    torn.extend_from_slice(&b_text);
    let cut_at = torn.len();
    torn.extend_from_slice(&a_text[..a_text.len() / 2]);
    let file = dir.path().join("torn.otlp.jsonl");
    std::fs::write(&file, &torn).unwrap();
    let lines_before = |at: usize| 1 + torn[..at].iter().filter(|b| **b == b'\n').count();
    let f = file.to_str().unwrap();
    let bad = [
        (lines_before(garbage_at), garbage_at),
        (lines_before(cut_at), cut_at),
    ];
    let ids: Vec<String> = [run_ids(&a), run_ids(&b)].concat();
    assert_eq!(ids.len(), 2, "one run in each: {ids:?}");
    let second = format!("{f}#2");
    let cases: [&[&str]; 3] = [
        &["report", f, "--html", "/dev/null"],
        &["compare", a.to_str().unwrap(), &second, "--json"],
        &["suggest", f, "--format", "table"],
    ];
    for args in cases {
        let o = pipetrace().args(args).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        for (line, at) in bad {
            let n = warnings_of(&err, f, line, at);
            assert_eq!(
                n, 1,
                "{args:?}: one warning of line {line} (byte {at}): {err}"
            );
        }
        match args[0] {
            "report" => (ids.iter()).for_each(|id| assert!(out.contains(id), "{id}: {out}")),
            "suggest" => assert!(out.contains("from 2 runs"), "both runs: {out}"),
            _ => {
                let c: serde_json::Value = serde_json::from_str(&out).expect(&out);
                assert!(c["moved"].is_array(), "the two runs compared: {c}");
            }
        }
    }
    // Nothing whole at all: said as such, with where the torn line is, not taken for a
    // metrics file; an empty file is said to be empty.
    let only = dir.path().join("only.otlp.jsonl");
    std::fs::write(&only, &a_text[..a_text.len() / 2]).unwrap();
    let o = pipetrace().arg("report").arg(&only).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds no complete trace request: line 1 (byte 0)"),
        "{err}"
    );
    assert!(!err.contains("metrics"), "{err}");
    std::fs::write(&only, "").unwrap();
    let o = pipetrace().arg("report").arg(&only).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("only.otlp.jsonl is empty"),
        "{}",
        stderr(&o)
    );
}

/// A trace file an agent appends to while `report` reads it: each report reads every run
/// whole before its start, and a line still being written is at most one warning.
#[test]
fn a_file_being_appended_while_report_reads_it_gives_every_complete_run() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.otlp.jsonl");
    traced_workflow(&dir.path().join("wf"), &one);
    let text = std::fs::read_to_string(&one).unwrap();
    let id = run_ids(&one).remove(0);
    let file = dir.path().join("agent.otlp.jsonl");
    std::fs::write(&file, &text).unwrap();
    // Each copy a run of its own (its trace id changed), written a half-line at a time.
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let writer = {
        let (file, written) = (file.clone(), written.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&file)
                .unwrap();
            for k in 1..=200u32 {
                let copy = text.replace(&id, &format!("{k:08x}{}", &id[8..]));
                for line in copy.split_inclusive('\n') {
                    let (head, tail) = line.split_at(line.len() / 2);
                    f.write_all(head.as_bytes()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    f.write_all(tail.as_bytes()).unwrap();
                }
                written.store(k as usize + 1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    let mut reports = 0;
    while !writer.is_finished() || reports == 0 {
        let whole = written.load(std::sync::atomic::Ordering::SeqCst);
        let o = pipetrace()
            .args([
                "report",
                file.to_str().unwrap(),
                "--json",
                "--html",
                "/dev/null",
            ])
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let runs = json["runs"].as_array().unwrap();
        let named = runs.iter().filter(|r| r["name"].is_string()).count();
        assert!(
            named >= whole,
            "{named} runs read, {whole} were whole: {err}"
        );
        let warned = err
            .lines()
            .filter(|l| l.contains("is not a whole OTLP"))
            .count();
        assert!(warned <= 1, "at most the line being written: {err}");
        reports += 1;
    }
    writer.join().unwrap();
}
