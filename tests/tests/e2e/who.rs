//! Who ran it and who pays: every span of a run carries the real user that ran it (`user.id`,
//! `user.name` as the host's user database names it) and its cost centre (the configured
//! resource attribute, or the Slurm job's account), and `pipetrace report` totals cost by
//! both. Runs by two users (root and nobody) under one agent, judged by the user database
//! (`getent passwd`) and by the spans' own cost figures.
use std::{collections::BTreeMap, path::Path, process::Command};

use pipetrace_e2e::{
    Agent, pipetrace, read_jsonl, slurm_up,
    snapshot::{blocks_headed, normalize},
    spans::RecvSpan,
    stderr,
};
use pipetrace_semconv::attr;

/// (uid, name) of `user` as the host's user database has it.
fn passwd(user: &str) -> (String, String) {
    let o = Command::new("getent")
        .args(["passwd", user])
        .output()
        .unwrap();
    let line = String::from_utf8(o.stdout).unwrap();
    let f: Vec<&str> = line.trim().split(':').collect();
    (f[2].to_string(), f[0].to_string())
}

const CONFIG: &str = "cost:\n  prices:\n    default: { cpu_hour: 3.6, gib_hour: 0.01 }\n\
attribution:\n  engines: []\n  run_rules:\n\
\x20   - match: { argv: 'pipetrace-who-root' }\n      name: by-root\n\
\x20   - match: { argv: 'pipetrace-who-nobody' }\n      name: by-nobody\n";

/// Busy for a while: some CPU to put a price on.
const WORK: &str = "for i in $(seq 1 40); do gzip -c /etc/services > /dev/null; done; \
                    sha256sum /etc/services > /dev/null";

fn agent(dir: &Path, yaml: &str, env: &[(&str, &str)]) -> (Agent, std::path::PathBuf) {
    let cfg = dir.join("agent.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let out = dir.join("who.otlp.jsonl");
    let state = state.to_str().unwrap();
    let mut env = env.to_vec();
    env.push(("PIPETRACE_DIAGNOSIS__STATE_DIR", state));
    let args = ["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()];
    (Agent::start_with(&args, &env), out)
}

fn run_of<'a>(spans: &'a [RecvSpan], name: &str) -> &'a RecvSpan {
    (spans.iter())
        .find(|s| s.is_run() && s.str(attr::CICD_PIPELINE_NAME) == name)
        .unwrap_or_else(|| panic!("run {name}: {spans:?}"))
}

/// The report's row of `who` in its `by {what}` table: (runs, cost).
fn row(table: &str, what: &str, who: &str) -> (u64, f64) {
    let at = table.find(&format!("by {what}")).expect(table);
    let line = (table[at..].lines().skip(1))
        .take_while(|l| !l.trim().is_empty())
        .find(|l| l.split_whitespace().next() == Some(who))
        .unwrap_or_else(|| panic!("no {who} by {what}: {table}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[1].parse().unwrap(), f[4].parse().unwrap())
}

#[test]
fn every_span_carries_its_user_and_cost_centre_and_the_report_totals_by_them() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("OTEL_RESOURCE_ATTRIBUTES", "pipetrace.cost.centre=genomics")];
    let (agent, out) = agent(dir.path(), CONFIG, &env);
    let as_root = Command::new("bash")
        .args(["-c", WORK, "pipetrace-who-root"])
        .status()
        .unwrap();
    let as_nobody = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["bash", "-c", WORK, "pipetrace-who-nobody"])
        .current_dir("/")
        .status()
        .unwrap();
    assert!(as_root.success() && as_nobody.success());
    pipetrace_e2e::wait_for_runs(&out, &["by-root", "by-nobody"]);
    agent.stop();
    let spans = read_jsonl(&out);
    for (run, user) in [("by-root", "root"), ("by-nobody", "nobody")] {
        let (uid, name) = passwd(user);
        let trace = &run_of(&spans, run).trace_id;
        let mine: Vec<&RecvSpan> = spans.iter().filter(|s| &s.trace_id == trace).collect();
        assert!(mine.iter().any(|s| s.is_tool()), "{run}: {mine:?}");
        for s in mine {
            assert_eq!(s.str(attr::USER_ID), uid, "{run}: {s:?}");
            assert_eq!(s.str(attr::USER_NAME), name, "{run}: {s:?}");
            assert_eq!(s.str(attr::COST_CENTRE), "genomics", "{run}: {s:?}");
        }
    }
    // Totals as the runs' own spans add up (the agent watches the whole host: other tests'
    // Slurm jobs may be runs of this file too).
    let mut want: BTreeMap<(&str, &str), (u64, f64)> = BTreeMap::new();
    // A run's own span, and a part of a run on a node (a Slurm step): each of its own
    // processes, each with a cost.
    for r in spans.iter().filter(|s| s.attr(attr::RUN_ENGINE).is_some()) {
        let cost = r.num(attr::COST).expect("a price is configured");
        for key in [
            ("user", r.str(attr::USER_NAME)),
            ("cost centre", r.str(attr::COST_CENTRE)),
        ] {
            let e = want.entry(key).or_default();
            *e = (e.0 + u64::from(r.is_run()), e.1 + cost);
        }
    }
    let o = pipetrace().arg("report").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    // A table of one cost centre (or one user) is the run's own total again: left out.
    let centres = want
        .keys()
        .filter(|(what, _)| *what == "cost centre")
        .count();
    if centres == 1 {
        assert!(!table.contains("by cost centre"), "{table}");
        want.retain(|(what, _), _| *what != "cost centre");
    }
    for ((what, who), (runs, cost)) in &want {
        let (got_runs, got_cost) = row(&table, what, who);
        assert_eq!(got_runs, *runs, "{what} {who}: {table}");
        assert!(
            (got_cost - cost).abs() < 1e-4,
            "{what} {who}: {cost} in {table}"
        );
    }
    assert!(want[&("user", "nobody")].1 > 0.0, "nobody's run had a cost");
    // The terminal's report of this test's two runs, and its table by user, as reviewed
    // (other tests' runs in the file left out).
    let mine = blocks_headed(&table, &["run by-root ", "run by-nobody ", "by user"]);
    insta::assert_snapshot!("report_two_users", normalize(&mine, &[]));
    let page = std::fs::read_to_string(dir.path().join("who.report.html")).unwrap();
    assert!(
        page.contains("Cost by user and cost centre") && page.contains("<td>nobody</td>"),
        "the HTML report groups them too"
    );
}

#[test]
fn a_slurm_jobs_account_is_its_cost_centre() {
    slurm_up();
    let dir = tempfile::tempdir().unwrap();
    let yaml = "attribution:\n  run_rules:\n    - match: { argv: 'pipetrace-who-slurm' }\n      name: charged\n";
    let env = [(
        "OTEL_RESOURCE_ATTRIBUTES",
        "pipetrace.cost.centre=configured",
    )];
    let (agent, out) = agent(dir.path(), yaml, &env);
    let jobid = dir.path().join("jobid");
    let script = format!("echo $SLURM_JOB_ID > {}; sleep 0.5; true", jobid.display());
    let st = Command::new("srun")
        .args([
            "--account=lab-x",
            "-N1",
            "-n1",
            "sh",
            "-c",
            &script,
            "pipetrace-who-slurm",
        ])
        .status()
        .unwrap();
    assert!(st.success(), "srun");
    let job = std::fs::read_to_string(&jobid).unwrap().trim().to_string();
    pipetrace_e2e::wait_for_job(&out, &job);
    agent.stop();
    let spans = read_jsonl(&out);
    let sleep = (spans.iter())
        .find(|s| s.is_tool() && s.str(attr::SLURM_JOB_ID) == job && s.name == "sleep")
        .unwrap_or_else(|| panic!("the job's sleep: {spans:?}"));
    assert_eq!(
        sleep.str(attr::COST_CENTRE),
        "lab-x",
        "the account it ran under: {sleep:?}"
    );
    // A process outside any job keeps the configured one.
    let outside = (spans.iter()).find(|s| s.attr(attr::SLURM_JOB_ID).is_none() && s.is_tool());
    if let Some(s) = outside {
        assert_eq!(s.str(attr::COST_CENTRE), "configured", "{s:?}");
    }
}
