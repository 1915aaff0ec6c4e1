//! One judgement, every view: a real Snakemake run of 481 jobs (240 samples × `make` and
//! `filter`, and a `merge`) whose three `filter` jobs that exit 3 and one OOM-killed in a
//! 200 MiB cgroup start after every `make` job, among the last. The terminal's end names
//! each of them by its job in at most 40 lines; the page's findings, `report --json` and
//! `report --fail-on` say the same, judged against Snakemake's own log.
use std::{collections::BTreeSet, path::Path};

use pipetrace_e2e::{cgroup::MemoryCgroup, pipetrace, snakemake, stderr};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

/// The failing samples: three exit 3, the last is OOM-killed.
const EXITS: [&str; 3] = ["S237", "S238", "S239"];
const OOM: &str = "S236";

fn snakefile(cg: &Path) -> String {
    format!(
        r#"SAMPLES = [f"S{{i:03d}}" for i in range(240)]
LATE = {late:?}

rule all:
    input: expand("filtered/{{s}}.txt", s=SAMPLES), "merged.txt"

rule make:
    output: "made/{{s}}.txt"
    shell: "echo {{wildcards.s}} > {{output}}"

# The failing jobs wait for every `make`: they start among the last.
rule filter:
    input: lambda w: expand("made/{{s}}.txt", s=SAMPLES) if w.s in LATE else f"made/{{w.s}}.txt"
    output: "filtered/{{s}}.txt"
    shell:
        "case {{wildcards.s}} in "
        "{oom}) echo $$ > {cg}/cgroup.procs && {w} alloc 400 ;; "
        "{e0}|{e1}|{e2}) echo 'filter: {{wildcards.s}} has no reads' >&2; exit 3 ;; "
        "esac; cp made/{{wildcards.s}}.txt {{output}}"

rule merge:
    input: expand("made/{{s}}.txt", s=SAMPLES)
    output: "merged.txt"
    threads: 2
    resources: mem_mb=4000, runtime=5
    shell: "cat {{input}} > {{output}}"
"#,
        late = [OOM, EXITS[0], EXITS[1], EXITS[2]],
        oom = OOM,
        e0 = EXITS[0],
        e1 = EXITS[1],
        e2 = EXITS[2],
        cg = cg.display(),
        w = WORKLOAD,
    )
}

/// The `filter` samples Snakemake's own log says failed (`Error in rule filter:` and the
/// job's `output: filtered/S237.txt` under it).
fn failed_in_log(dir: &Path) -> BTreeSet<String> {
    let log = std::fs::read_to_string(snakemake::newest_log(dir)).unwrap();
    let mut failed = BTreeSet::new();
    let mut in_error = false;
    for line in log.lines() {
        if line.starts_with("Error in rule ") {
            in_error = line == "Error in rule filter:";
        } else if in_error && let Some(o) = line.trim().strip_prefix("output: filtered/") {
            failed.insert(o.trim_end_matches(".txt").to_string());
            in_error = false;
        }
    }
    failed
}

/// From the findings' first line to the end: what pipetrace printed of the run.
fn end_of(text: &str) -> &str {
    let at = text.rfind("pipetrace: findings").expect(text);
    &text[at..]
}

/// The findings' lines of a run's end: up to the first blank line.
fn findings_block(text: &str) -> Vec<&str> {
    end_of(text).lines().take_while(|l| !l.is_empty()).collect()
}

#[test]
fn a_481_job_run_names_every_failure_in_40_lines_and_every_view_says_the_same() {
    let cg = MemoryCgroup::new(200 << 20);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Snakefile"), snakefile(&cg.0)).unwrap();
    let out = dir.path().join("big.otlp.jsonl");
    let state = dir.path().join("state");
    let o = pipetrace()
        .arg("-o")
        .arg(&out)
        .args(["run", "--", "snakemake", "--cores", "2", "--keep-going"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    let mut failed = failed_in_log(dir.path());
    assert_eq!(failed.len(), 4, "Snakemake's log: {failed:?}");
    let end = end_of(&said);
    let lines = end.lines().count();
    assert!(lines <= 40, "{lines} lines:\n{end}");
    // The terminal: each failure by its job, the OOM kill first with its limit.
    let oom = format!("OOM-KILLED filter s={OOM}: killed by the OOM killer at a peak of ");
    assert!(
        end.starts_with(&format!(
            "pipetrace: findings, most serious first:\n  {oom}"
        )),
        "{end}"
    );
    assert!(end.contains("over its limit of 200 MiB"), "{end}");
    // No `log:` of their own: Snakemake's log of the run is where to read why.
    for s in EXITS {
        let line = format!(
            "FAILED     filter s={s}: failed: task filter exited with code 3; the run's log: \
             .snakemake/log/"
        );
        assert!(end.contains(&line), "no {line} in:\n{end}");
    }
    assert!(end.contains("├─ make ×240  ok  median "), "{end}");
    assert!(
        end.contains("├─ filter ×240  236 ok, 4 FAILED  median "),
        "{end}"
    );
    // `report FILE` on the terminal: the same findings, line for line.
    let text = pipetrace().arg("report").arg(&out).output().unwrap();
    assert!(text.status.success(), "{}", stderr(&text));
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert_eq!(findings_block(&text), findings_block(&said), "{text}");
    // report --json: the same findings, every job, and the gate.
    let json = pipetrace()
        .args(["report", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(json.status.success(), "{}", stderr(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let run = &v["runs"][0];
    let findings = run["findings"].as_array().unwrap();
    let of_kind = |kind: &str| -> BTreeSet<String> {
        (findings.iter())
            .filter(|f| f["kind"] == kind)
            .map(|f| {
                f["job"]["tag"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("s=")
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        of_kind("oom"),
        BTreeSet::from([OOM.to_string()]),
        "{findings:?}"
    );
    assert_eq!(
        findings[0]["limit_bytes"],
        200.0 * 1048576.0,
        "{:?}",
        findings[0]
    );
    failed.remove(OOM);
    assert_eq!(of_kind("failed"), failed, "{findings:?}");
    on_the_run_span(&out, findings);
    let jobs = run["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 481, "one row per job");
    // merge's `runtime=5` (minutes), as the page's "% of the time asked" reads it.
    let merge = jobs.iter().find(|j| j["task"] == "merge").unwrap();
    assert_eq!(merge["time_asked_seconds"], 300.0, "{merge}");
    let log = (findings.iter())
        .find(|f| f["kind"] == "failed")
        .and_then(|f| f["logs"][0].as_str())
        .unwrap();
    assert!(
        dir.path().join(log).is_file(),
        "the run's log {log} is there"
    );
    let not_ok = jobs.iter().filter(|j| j["status"] != "ok").count();
    assert_eq!(not_ok, 4);
    // Each finding's sentence is the terminal's, word for word.
    for f in findings
        .iter()
        .filter(|f| f["kind"] == "oom" || f["kind"] == "failed")
    {
        let line = format!(
            "{}: {}",
            f["job"]["label"].as_str().unwrap(),
            f["text"].as_str().unwrap()
        );
        assert!(end.contains(&line), "the terminal lacks {line}:\n{end}");
    }
    // The page: the same findings, in the same order (photographed wide, narrow and dark into
    // target/report-screenshots/big*.png for a person to look at).
    let page_path = dir.path().join("big.report.html");
    crate::report_page::screenshots(&page_path, "big");
    // On a phone nothing reaches past the screen's edge, and the 481 rows scroll under their
    // header; on a wide screen every column is in sight.
    crate::report_page::fits_400(&page_path);
    crate::report_page::header_stays(&page_path, (400, 800), false);
    crate::report_page::header_stays(&page_path, (1280, 900), true);
    let page = std::fs::read_to_string(&page_path).unwrap();
    let listed: Vec<&str> = page.split("<li class=\"").skip(1).collect();
    for (f, li) in findings.iter().zip(&listed) {
        let label = f["job"]["label"].as_str().unwrap();
        assert!(li.contains(&format!(">{label}</a>")), "{li} is not {f}");
    }
    // One ask per task: report --json's, the terminal's table, the page's "ask next time"
    // and `suggest`'s.
    let suggested = pipetrace()
        .args(["suggest", "--format", "json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(suggested.status.success(), "{}", stderr(&suggested));
    let suggested: Vec<serde_json::Value> = serde_json::from_slice(&suggested.stdout).unwrap();
    let asked = page
        .split("<h2 id=\"asked\">")
        .nth(1)
        .expect("the page's asks");
    let asks = run["asks"].as_array().unwrap();
    assert_eq!(
        asks.len(),
        3,
        "make, filter and merge asked threads: {asks:?}"
    );
    for a in asks {
        let task = a["task"].as_str().unwrap();
        let s = (suggested.iter())
            .find(|s| s["task"] == task)
            .unwrap_or_else(|| panic!("suggest lacks {task}: {suggested:?}"));
        assert_eq!(
            (&s["cpus"], &s["memory_bytes"]),
            (&a["cpus"], &a["memory_bytes"]),
            "{task}"
        );
        let next = a["next_time"].as_str().unwrap();
        let row = (end.lines())
            .find(|l| l.starts_with(&format!("{task} ")) && l.contains(" MiB "))
            .unwrap_or_else(|| panic!("no table row of {task}:\n{end}"));
        assert!(row.ends_with(&format!("  {next}")), "{row} is not {next}");
        let cell = match next {
            "as now" => "<td class=\"l\">as now</td></tr>".to_string(),
            n => format!("<td class=\"l\"><code>{n}</code></td></tr>"),
        };
        let on_page = (asked.split("<tr><td>").skip(1))
            .find(|r| r.starts_with(&format!("{task}</td>")))
            .unwrap_or_else(|| panic!("the page's asks lack {task}"));
        assert!(on_page.contains(&cell), "{on_page} is not {cell}");
    }
    // The OOM-killed task asks for memory next time, in Snakemake's mem_mb, everywhere.
    let filter = asks.iter().find(|a| a["task"] == "filter").unwrap();
    assert!(
        filter["next_time"].as_str().unwrap().contains("mem_mb: "),
        "{filter}"
    );
    // The merge's threads: 2 for a single-threaded step, and mem_mb=4000 are Snakemake's
    // mem_mib=3815: 3815 MiB asked.
    let merge = asks.iter().find(|a| a["task"] == "merge").unwrap();
    assert_eq!(merge["memory_asked_bytes"], 3815.0 * 1048576.0, "{merge}");
    assert_eq!(merge["cpus_asked"], 2.0, "{merge}");
    assert_eq!(merge["cpus"], 1, "{merge}");
    let gate = |kinds: &str| {
        let o = pipetrace()
            .args(["report", "--fail-on", kinds, "--html"])
            .arg(dir.path().join("again.html"))
            .arg(&out)
            .output()
            .unwrap();
        (o.status.code(), stderr(&o))
    };
    let (code, said) = gate("oom");
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("1 finding(s) of the kinds --fail-on names (oom)"),
        "{said}"
    );
    assert_eq!(gate("failed").0, Some(3), "failed counts the OOM kill too");
    assert_eq!(gate("stalled,uncertain").0, Some(0));
    let (code, said) = gate("nonsense");
    assert_eq!(code, Some(2), "{said}");
}

/// The run span as exported carries the findings `report --json` gives, in its order and
/// words, each naming its job's task span in the trace: what a backend holds is the answer.
fn on_the_run_span(out: &Path, findings: &[serde_json::Value]) {
    let spans = pipetrace_e2e::read_jsonl(out);
    let run = spans.iter().find(|s| s.is_run()).expect("a run span");
    let events: Vec<_> = (run.events.iter())
        .filter(|e| e.name == "pipetrace.finding")
        .collect();
    assert_eq!(
        run.int("pipetrace.run.findings"),
        Some(findings.len() as i64)
    );
    assert_eq!(events.len(), findings.len().min(32), "{events:?}");
    for (e, f) in events.iter().zip(findings) {
        let said = |k: &str| e.attrs.get(k).map(|v| v.str().to_string());
        assert_eq!(
            said("pipetrace.finding.kind").as_deref(),
            f["kind"].as_str()
        );
        assert_eq!(
            said("pipetrace.finding.text").as_deref(),
            f["text"].as_str()
        );
        assert_eq!(
            said("pipetrace.finding.job").as_deref(),
            f["job"]["label"].as_str()
        );
        let id = said("pipetrace.finding.span_id").unwrap_or_default();
        assert_eq!(Some(id.as_str()), f["job"]["span_id"].as_str());
        assert!(
            spans.iter().any(|s| s.span_id == id && s.is_task()),
            "{id} is no task span of the trace"
        );
    }
}

/// A failed job's finding names its own log as the engine records it (a Snakemake `log:`
/// file) on the terminal, the page and in `report --json`; its last lines show there only
/// where `report.failure_log_lines` asks, and never go into the trace.
#[test]
fn a_failures_finding_names_its_log_and_shows_its_last_lines_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let snakefile = r#"rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    log: "logs/a.log"
    shell: "sh fail.sh 2> {log}"

rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cp {input} {output}"
"#;
    std::fs::write(dir.path().join("Snakefile"), snakefile).unwrap();
    // What the job says is in no command line: only its log holds it.
    let script =
        "echo reading reads >&2\necho 'a: sample S1 has no reads, password=hunter2' >&2\nexit 3\n";
    std::fs::write(dir.path().join("fail.sh"), script).unwrap();
    let run = |lines: &str, name: &str| {
        let out = dir.path().join(format!("{name}.otlp.jsonl"));
        let o = pipetrace()
            .arg("-o")
            .arg(&out)
            .args(["run", "--", "snakemake", "--cores", "1", "--forceall"])
            .env("PIPETRACE_REPORT__FAILURE_LOG_LINES", lines)
            .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path().join("state"))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        (out, stderr(&o))
    };
    let (out, said) = run("0", "quiet");
    let end = end_of(&said);
    let named = "FAILED     a: failed: task a exited with code 3 (fail.sh exited with code 3); \
                 its log: logs/a.log";
    assert!(end.contains(named), "{end}");
    assert!(!end.contains("│ "), "no log line unless asked: {end}");
    let (out_with, said) = run("2", "tail");
    let end = end_of(&said);
    assert!(end.contains(named), "{end}");
    assert!(
        end.contains("│ a: sample S1 has no reads, password="),
        "{end}"
    );
    assert!(
        !end.contains("hunter2"),
        "redacted as command lines are: {end}"
    );
    let page = std::fs::read_to_string(dir.path().join("tail.report.html")).unwrap();
    let pre = "<pre class=\"log\">reading reads\na: sample S1 has no reads, password=";
    assert!(page.contains(pre), "the page");
    for file in [&out, &out_with] {
        let trace = std::fs::read_to_string(file).unwrap();
        assert!(!trace.contains("has no reads"), "never in the trace");
        assert!(trace.contains("logs/a.log"), "the log's path is");
    }
    let json = pipetrace()
        .args(["report", "--json"])
        .arg(&out_with)
        .env("PIPETRACE_REPORT__FAILURE_LOG_LINES", "1")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let f = &v["runs"][0]["findings"][0];
    assert_eq!(f["logs"], serde_json::json!(["logs/a.log"]), "{f}");
    let tail = f["log_tail"].as_array().expect("log_tail");
    assert_eq!(tail.len(), 1, "{f}");
    assert!(
        tail[0]
            .as_str()
            .unwrap()
            .starts_with("a: sample S1 has no reads"),
        "{f}"
    );
}

/// A job that asks Snakemake for 2 threads and runs one is judged `single-threaded` (on a
/// busy host too: runnable time counts the waits for a CPU), and every view asks for 1
/// thread next time; a job that uses its 2 is left as it is.
#[test]
fn a_single_threaded_job_given_two_threads_is_said_so_and_asked_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let snakefile = format!(
        r#"rule all:
    input: "one.done", "two.done"

rule one:
    output: "one.done"
    threads: 2
    shell: "{w} burn 1500 && touch {{output}}"

rule two:
    output: "two.done"
    threads: 2
    shell: "{w} threads 2 1500 && touch {{output}}"
"#,
        w = WORKLOAD
    );
    std::fs::write(dir.path().join("Snakefile"), snakefile).unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .arg("-o")
        .arg(&out)
        .args(["run", "--", "snakemake", "--cores", "2"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path().join("state"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = stderr(&o);
    assert!(o.status.success(), "{said}");
    let spans = pipetrace_e2e::read_jsonl(&out);
    let task = |name: &str| {
        (spans.iter())
            .find(|s| s.is_task() && s.str("cicd.pipeline.task.name") == name)
            .unwrap_or_else(|| panic!("no task {name}"))
    };
    let one = task("one");
    assert_eq!(
        one.str("pipetrace.bottleneck"),
        "single-threaded",
        "{}",
        one.str("pipetrace.bottleneck.reason")
    );
    assert_ne!(task("two").str("pipetrace.bottleneck"), "single-threaded");
    let row = |name: &str| {
        (said.lines())
            .find(|l| l.starts_with(&format!("{name} ")) && l.contains(" MiB "))
            .unwrap_or_else(|| panic!("no row of {name}: {said}"))
            .to_string()
    };
    assert!(
        row("one").contains("single-threaded") && row("one").ends_with("  threads: 1"),
        "{}",
        row("one")
    );
    assert!(row("two").ends_with("  as now"), "{}", row("two"));
}

/// A cwltool step whose tool names its `stderr` file: the failure names that file in the
/// job's output directory, on the terminal and in `report --json`. cwltool deletes the
/// directory at the run's end unless told `--leave-tmpdir`; told so, the file is there and
/// its last lines show where asked. (The directory is the step's working directory, read
/// as it execs: a step that ends before the loop looks, in a millisecond, names none.)
#[test]
fn a_failed_cwltool_steps_finding_names_its_stderr_file() {
    let dir = tempfile::tempdir().unwrap();
    let wf = "cwlVersion: v1.2
class: Workflow
inputs: []
outputs: []
steps:
  bad:
    run:
      class: CommandLineTool
      baseCommand: [sh, -c, 'echo the step says why >&2; sleep 0.5; exit 3']
      stderr: bad.err
      inputs: []
      outputs: []
    in: []
    out: []
";
    std::fs::write(dir.path().join("wf.cwl"), wf).unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = dir.path().join("cwl.otlp.jsonl");
    let o = pipetrace()
        .arg("-o")
        .arg(&out)
        .args(["run", "--", "cwltool", "--no-container", "--leave-tmpdir"])
        .arg("--tmp-outdir-prefix")
        .arg(format!("{}/", tmp.display()))
        .arg("wf.cwl")
        .env("PIPETRACE_REPORT__FAILURE_LOG_LINES", "2")
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path().join("state"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = stderr(&o);
    // cwltool's own line: `[job bad] /tmp/x/tmp/abc$ sh ... 2> /tmp/x/tmp/abc/bad.err`.
    let file = (said.lines())
        .find_map(|l| l.split(" 2> ").nth(1))
        .unwrap_or_else(|| panic!("cwltool names the step's stderr file:\n{said}"))
        .trim()
        .to_string();
    assert!(file.ends_with("/bad.err"), "{file}");
    let end = end_of(&said);
    let named = format!("FAILED     bad: failed: task bad exited with code 3; its log: {file}");
    assert!(end.contains(&named), "no {named} in:\n{end}");
    assert!(end.contains("│ the step says why"), "{end}");
    let json = pipetrace()
        .args(["report", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let f = &v["runs"][0]["findings"][0];
    assert_eq!(f["logs"], serde_json::json!([file]), "{f}");
}
