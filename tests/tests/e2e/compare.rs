//! `pipetrace compare`: a real Snakemake 7 workflow run twice under `pipetrace run`, the
//! second time with one job given far more data for gzip; the comparison must single out that
//! job (as Snakemake's own records name it) and gzip, and flag nothing else.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Output,
};

use pipetrace_e2e::{
    pipetrace,
    snakemake::{Records, metadata},
    stderr,
};

/// Numbers gzip packs per job; the big one is several seconds of CPU on any machine.
const SMALL: u64 = 100_000;
const BIG: u64 = 12_000_000;

/// Four rules over two samples; `--config big=S` gives sample S's `pack` job the big input.
fn snakefile() -> String {
    format!(
        "SAMPLES = ['A', 'B']\n\
         rule all:\n    input: expand('packed/{{s}}.gz', s=SAMPLES), 'summary.txt'\n\
         rule make:\n    output: 'data/{{s}}.txt'\n    shell: 'seq 1 20000 > {{output}}'\n\
         rule count:\n    input: 'data/{{s}}.txt'\n    output: 'counts/{{s}}.txt'\n\
         \x20   shell: 'wc -l < {{input}} > {{output}}'\n\
         rule pack:\n    input: 'data/{{s}}.txt'\n    output: 'packed/{{s}}.gz'\n\
         \x20   params: n=lambda w: {BIG} if config.get('big') == w.s else {SMALL}\n\
         \x20   shell: 'cat {{input}} > /dev/null; seq 1 {{params.n}} | gzip -9 > {{output}}'\n\
         rule summary:\n    input: expand('counts/{{s}}.txt', s=SAMPLES)\n    output: 'summary.txt'\n\
         \x20   shell: 'cat {{input}} > {{output}}'\n"
    )
}

/// One run of the workflow in `wf` under `pipetrace run`, its trace in `out`.
fn run(wf: &Path, out: &Path, extra: &[&str]) {
    let o = pipetrace()
        .arg("run")
        .arg("--output")
        .arg(out)
        .args(["--", "snakemake", "--cores", "1"])
        .args(extra)
        .current_dir(wf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

fn compare(args: &[&str]) -> Output {
    pipetrace().arg("compare").args(args).output().unwrap()
}

fn json_of(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A job's name as Snakemake's log gives it: its rule, and its wildcards if any.
fn name(rule: &str, wildcards: &str) -> String {
    match wildcards {
        "" => rule.to_string(),
        w => format!("{rule} ({w})"),
    }
}

/// The job names of the latest run, from Snakemake's log (the target rule `all` runs nothing).
fn job_names(records: &Records) -> BTreeSet<String> {
    (records.blocks.iter())
        .filter(|b| b.rule != "all")
        .map(|b| name(&b.rule, &b.wildcards))
        .collect()
}

/// The latest run's job names, and the one job whose recorded command packed the big input.
fn jobs_of(wf: &Path) -> (BTreeSet<String>, String) {
    let records = Records::read(wf);
    let jobs = job_names(&records);
    let big = (metadata(wf).into_iter())
        .find(|(_, m)| {
            m["shellcmd"]
                .as_str()
                .is_some_and(|c| c.contains(&format!(" {BIG} ")))
        })
        .map(|(output, _)| output)
        .expect("Snakemake's record of the big job");
    let block = (records.blocks.iter())
        .find(|b| b.outputs.contains(&big))
        .expect("the big job's block in the log");
    (jobs, name(&block.rule, &block.wildcards))
}

fn names(v: &serde_json::Value) -> Vec<String> {
    (v.as_array().unwrap().iter())
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Two runs and what Snakemake says of the second: its jobs and the slowed one.
struct Runs {
    _dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
    jobs: BTreeSet<String>,
    slowed: String,
}

fn two_runs() -> Runs {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(format!("compare-{}", std::process::id()));
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(wf.join("Snakefile"), snakefile()).unwrap();
    let (a, b) = (
        dir.path().join("a.otlp.jsonl"),
        dir.path().join("b.otlp.jsonl"),
    );
    run(&wf, &a, &[]);
    let jobs_a = job_names(&Records::read(&wf));
    run(&wf, &b, &["--forceall", "--config", "big=B"]);
    let (jobs, slowed) = jobs_of(&wf);
    assert_eq!(jobs_a, jobs, "the same jobs both times");
    Runs {
        _dir: dir,
        a,
        b,
        jobs,
        slowed,
    }
}

#[test]
fn the_slowed_task_and_the_tool_behind_it_stand_out_and_nothing_else_is_flagged() {
    let r = two_runs();
    let (a, b) = (r.a.to_str().unwrap(), r.b.to_str().unwrap());
    let html = r.a.with_file_name("compare.html");
    let c = json_of(&compare(&[
        a,
        b,
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]));
    let matched: BTreeSet<String> = (c["tasks"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        matched, r.jobs,
        "every job of Snakemake's log, matched: {c:#}"
    );
    assert!(names(&c["only_a"]).is_empty() && names(&c["only_b"]).is_empty());
    assert_eq!(names(&c["moved"]), [r.slowed.as_str()], "{c:#}");
    // Both runs by this test's user, as the user database names it: one run, every job.
    let me = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let me = String::from_utf8(me.stdout).unwrap().trim().to_string();
    for side in ["a", "b"] {
        let users = c[side]["who"]["users"].as_object().expect("by user");
        assert_eq!(users.keys().collect::<Vec<_>>(), [&me], "{c:#}");
        assert_eq!(users[&me]["runs"], 1);
        assert_eq!(users[&me]["tasks"], r.jobs.len(), "{c:#}");
        // Each side's machines (the shipped table): the cheapest for each task holds what
        // the task used at its peak, and the CPUs it kept busy.
        let fits = c["machines"][side]["tasks"].as_array().expect("machines");
        assert!(!fits.is_empty(), "{c:#}");
        for f in fits {
            let m = &f["cheapest"];
            let gib = m["memory_gib"].as_f64().unwrap() * (1u64 << 30) as f64;
            assert!(
                gib >= f["need"]["memory_peak_bytes"].as_f64().unwrap(),
                "{f:#}"
            );
            assert!(m["vcpus"].as_f64().unwrap() >= f["need"]["cpus_used"].as_f64().unwrap());
        }
    }
    let slowed = (c["tasks"].as_array().unwrap().iter())
        .find(|t| t["name"] == r.slowed.as_str())
        .unwrap();
    let moved: Vec<&str> = (slowed["figures"].as_array().unwrap().iter())
        .filter(|f| f["verdict"]["moved"] == true)
        .map(|f| f["metric"].as_str().unwrap())
        .collect();
    assert!(
        moved.contains(&"cpu") && moved.contains(&"wall"),
        "{slowed:#}"
    );
    let first = &slowed["tools"][0];
    assert_eq!(
        (first["name"].as_str(), first["change"].as_str()),
        (Some("gzip"), Some("slower")),
        "{slowed:#}"
    );
    // The other jobs' tools did not change beyond noise either.
    for t in c["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] != r.slowed.as_str())
    {
        let changed: Vec<&serde_json::Value> = (t["tools"].as_array().unwrap().iter())
            .filter(|x| x["change"] != "same")
            .collect();
        assert!(changed.is_empty(), "{t:#}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    let flagged: Vec<&str> = (page.split("<tr>"))
        .filter(|row| row.contains("<td class=\"moved\">"))
        .collect();
    let row = format!("<td class=\"moved\">{}</td>", r.slowed);
    assert!(flagged.len() == 1 && flagged[0].starts_with(&row), "{page}");
    // The table says the same; by run id (kept by `pipetrace run`) as by file.
    let ids = [
        c["a"]["trace"].as_str().unwrap(),
        c["b"]["trace"].as_str().unwrap(),
    ];
    let o = compare(&ids);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains(&format!("1 task(s) moved beyond noise: {}\n", r.slowed)),
        "{table}"
    );
    assert!(table.contains("  tool gzip slower: "), "{table}");
    // Against the usual of the pipeline (the first run, from the history): the same job.
    let usual = json_of(&compare(&[b, "--usual", "--json"]));
    assert_eq!(names(&usual["moved"]), [r.slowed.as_str()], "{usual:#}");
    assert!(
        usual["a"]["label"]
            .as_str()
            .unwrap()
            .starts_with("usual of ")
    );
    bad_input(&r);
}

/// Each mistake is refused with exit code 2 and a sentence saying what to give instead.
fn bad_input(r: &Runs) {
    let (a, b) = (r.a.to_str().unwrap(), r.b.to_str().unwrap());
    let says = |args: &[&str], what: &str| {
        let o = compare(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(what), "{args:?}: {}", stderr(&o));
    };
    let missing = r.a.with_file_name("missing.jsonl");
    says(&[missing.to_str().unwrap(), b], "no file `");
    let metrics = r.a.with_file_name("a.metrics.otlp.jsonl");
    says(&[metrics.to_str().unwrap(), b], "not its metrics file");
    says(
        &["0123456789abcdef0123", b],
        "no run `0123456789abcdef0123`",
    );
    let both = r.a.with_file_name("both.jsonl");
    let text = std::fs::read_to_string(a).unwrap() + &std::fs::read_to_string(b).unwrap();
    std::fs::write(&both, text).unwrap();
    says(&[both.to_str().unwrap(), a], "holds 2 runs; pick one as");
    let second = format!("{}#2", both.display());
    let c = json_of(&compare(&[a, &second, "--json"]));
    assert_eq!(names(&c["moved"]), [r.slowed.as_str()]);
    // A run without tasks has nothing in common with the pipeline's.
    let plain = r.a.with_file_name("plain.otlp.jsonl");
    let o = pipetrace()
        .args([
            "run",
            "--no-summary",
            "--output",
            plain.to_str().unwrap(),
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    says(&[plain.to_str().unwrap(), a], "no task in common");
    // A page that cannot be written (its folder cannot be made: none can under /proc) is a
    // failure (1, as `report`'s), said before any table.
    let nowhere = "/proc/pipetrace-no-such-folder/c.html";
    let o = compare(&[a, b, "--html", nowhere]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(nowhere), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "nothing printed before the failure");
}

/// The agent keeps the runs it sees too: two runs of the workflow under a node agent, then
/// compared by the run ids in its state directory.
#[test]
fn runs_an_agent_saw_are_compared_by_their_run_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = pipetrace_e2e::own_agent(dir.path(), "agent", "");
    let wf = dir
        .path()
        .join(format!("agent-compare-{}", std::process::id()));
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(wf.join("Snakefile"), snakefile()).unwrap();
    for extra in [&[][..], &["--forceall", "--config", "big=A"][..]] {
        let o = std::process::Command::new("snakemake")
            .args(["--cores", "1"])
            .args(extra)
            .current_dir(&wf)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (jobs, slowed) = jobs_of(&wf);
    let wf_name = wf.file_name().unwrap().to_string_lossy().to_string();
    let both = "both run spans";
    pipetrace_e2e::wait_until(std::time::Duration::from_secs(30), both, || {
        let spans = pipetrace_e2e::spans_so_far(&out);
        let named = |s: &&pipetrace_e2e::spans::RecvSpan| {
            s.is_run() && s.str(pipetrace_semconv::attr::CICD_PIPELINE_NAME) == wf_name
        };
        (spans.iter().filter(named).count() >= 2).then_some(())
    });
    agent.stop();
    let mut runs: Vec<(u64, String)> = (pipetrace_e2e::read_jsonl(&out).iter())
        .filter(|s| s.is_run() && s.str(pipetrace_semconv::attr::CICD_PIPELINE_NAME) == wf_name)
        .map(|s| (s.start, s.trace_id.clone()))
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let state = dir.path().join("agent-state");
    let o = pipetrace()
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
        .args(["compare", &runs[0].1, &runs[1].1, "--json"])
        .output()
        .unwrap();
    let c = json_of(&o);
    let matched: BTreeSet<String> = (c["tasks"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(matched, jobs, "{c:#}");
    assert_eq!(names(&c["moved"]), [slowed], "{c:#}");
}

/// Identical runs of a command whose task (`sleep`, by name) runs twice: against the usual of
/// its history (the median job of each earlier run), the run's two jobs meet it as their
/// mean job, and nothing moves.
#[test]
fn identical_runs_of_a_task_run_twice_move_nothing_against_their_usual() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let traced = |n: u32| {
        let out = dir.path().join(format!("r{n}.otlp.jsonl"));
        let o = pipetrace()
            .arg("-o")
            .arg(&out)
            .args(["run", "--", "sh", "-c", "sleep 1.5; sleep 1.5"])
            .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        out
    };
    for n in 1..=3 {
        traced(n);
    }
    let last = traced(4);
    let o = pipetrace()
        .args(["compare", last.to_str().unwrap(), "--usual", "--json"])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", &state)
        .output()
        .unwrap();
    let c = json_of(&o);
    assert_eq!(c["moved"], serde_json::json!([]), "{c:#}");
    let sleep = (c["tasks"].as_array().unwrap().iter())
        .find(|t| t["task"] == "sleep")
        .unwrap_or_else(|| panic!("no sleep: {c:#}"));
    assert_eq!(sleep["jobs"][1], 2, "two jobs of one name: {sleep:#}");
    let wall = (sleep["figures"].as_array().unwrap().iter())
        .find(|f| f["metric"] == "wall")
        .unwrap();
    let (a, b) = (wall["a"].as_f64().unwrap(), wall["b"].as_f64().unwrap());
    assert!(
        (a - 1.5).abs() < 0.3 && (b - a).abs() < 0.3,
        "{a} -> {b}: {sleep:#}"
    );
}
