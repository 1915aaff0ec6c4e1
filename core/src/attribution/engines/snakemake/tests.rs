//! The adapter on records as Snakemake 7 and 9 write them (formats copied from real runs).
use std::{
    fs,
    path::Path,
    time::{Duration, SystemTime},
};

use base64::Engine as _;

use super::*;
use crate::{
    event::ProcKey,
    tree::{Exit, Proc},
};

mod interrupted;
mod reruns;
mod script_jobs;

fn write_record(dir: &Path, output: &str, rule: &str, shellcmd: Option<&str>, code: &str, t: f64) {
    let meta = dir.join(".snakemake/metadata");
    fs::create_dir_all(&meta).unwrap();
    let json = serde_json::json!({
        "rule": rule, "shellcmd": shellcmd, "code": code,
        "starttime": t, "endtime": t + 0.5, "incomplete": false,
    });
    let name = base64::engine::general_purpose::URL_SAFE.encode(output);
    fs::write(meta.join(name), json.to_string()).unwrap();
}

fn write_log(dir: &Path, text: &str) {
    fs::create_dir_all(dir.join(".snakemake/log")).unwrap();
    fs::write(
        dir.join(".snakemake/log/2026-11-23T015406.309867.snakemake.log"),
        text,
    )
    .unwrap();
}

fn job_proc(pid: u32, command: &str, code: u32) -> Proc {
    let image = Image {
        path: "/usr/bin/bash".into(),
        argv: ["/usr/bin/bash", "-c", command].map(String::from).to_vec(),
        ..Default::default()
    };
    let mut p = Proc::in_test(
        ProcKey {
            pid,
            start_ticks: 1,
        },
        1,
    );
    p.first_image = Some(image.clone());
    p.image = Some(image);
    p.exit = Some(Exit {
        time_ns: 2,
        status: code << 8,
    });
    p
}

fn at(t: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs_f64(t)
}

fn adapter(dir: &Path, argv: &[&str]) -> Box<dyn EngineRun> {
    adapter_on(dir, argv, crate::disk_host::shared())
}

fn adapter_on(dir: &Path, argv: &[&str], host: crate::port::SharedHost) -> Box<dyn EngineRun> {
    let image = Image {
        path: "/usr/bin/snakemake".into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: Some(dir.to_path_buf()),
        ..Default::default()
    };
    start(&image, at(1000.0), host)
}

fn resolve(a: &mut dyn EngineRun, procs: &[(Proc, f64)], overdue: bool) -> Vec<Option<TaskInfo>> {
    let ended: Vec<Ended> = procs
        .iter()
        .map(|(p, t)| Ended {
            proc: p,
            overdue,
            start: at(*t),
            end: at(t + 0.4),
        })
        .collect();
    a.resolve(&ended, false)
}

const V7_LOG: &str = "[Mon Nov 23 01:54:07 2026]\nrule gen:\n    output: data/a/x\n    jobid: 1\n    wildcards: s=a\n    resources: tmpdir=/tmp\n\n[Mon Nov 23 01:54:07 2026]\nrule gen:\n    output: data/b/x\n    jobid: 2\n    wildcards: s=b\n    threads: 2\n\n[Mon Nov 23 01:54:08 2026]\nFinished job 2.\n\n[Mon Nov 23 01:54:12 2026]\nrule fail:\n    output: fail.txt\n    jobid: 18\n\n[Mon Nov 23 01:54:12 2026]\nError in rule fail:\n    jobid: 18\n    output: fail.txt\n    shell:\n        echo failing; exit 3\n        (one of the commands exited with non-zero exit code; note that snakemake uses bash strict mode!)\n\n";

#[test]
fn jobs_are_named_by_their_exact_command_whatever_paths_they_name() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), V7_LOG);
    // `mkdir -p data/b && python3 ...` names data/a nowhere: paths would not tell.
    let command = |s: &str| format!("mkdir -p data/{s} && python3 gen.py {s} > data/{s}/x");
    write_record(
        dir.path(),
        "data/b/x",
        "gen",
        Some(&command("b")),
        "",
        1001.0,
    );
    let mut a = adapter(
        dir.path(),
        &["/usr/bin/python3", "/usr/bin/snakemake", "-c2"],
    );
    let b = job_proc(11, &format!("set -euo pipefail; {}", command("b")), 0);
    let a_job = job_proc(12, &format!("set -euo pipefail; {}", command("a")), 0);
    let failed = job_proc(13, "set -euo pipefail;  echo failing;   exit 3", 3);
    let got = resolve(
        a.as_mut(),
        &[(b, 1001.0), (a_job.clone(), 1001.1), (failed, 1002.0)],
        false,
    );
    let b = got[0].clone().expect("b's record is written");
    assert_eq!(
        (
            b.name.as_str(),
            b.wildcards.as_deref(),
            b.threads,
            b.run_id.as_str()
        ),
        ("gen", Some("s=b"), Some(2), "2")
    );
    assert_eq!(got[1], None, "a's record is not written yet: it waits");
    let failed = got[2]
        .clone()
        .expect("the log's error block has the command");
    assert_eq!(
        (failed.name.as_str(), failed.run_id.as_str()),
        ("fail", "18")
    );
    write_record(
        dir.path(),
        "data/a/x",
        "gen",
        Some(&command("a")),
        "",
        1001.1,
    );
    let got = resolve(a.as_mut(), &[(a_job, 1001.1)], false);
    assert_eq!(
        got[0].as_ref().and_then(|i| i.wildcards.as_deref()),
        Some("s=a")
    );
}

#[test]
fn identical_commands_go_to_the_record_that_started_nearest() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "");
    write_record(dir.path(), "x1", "one", Some("touch x"), "", 1001.0);
    write_record(dir.path(), "x2", "two", Some("touch x"), "", 1005.0);
    let mut a = adapter(dir.path(), &["snakemake", "-c1", "--quiet"]);
    let late = job_proc(21, "set -euo pipefail;  touch x", 0);
    let early = job_proc(22, "set -euo pipefail;  touch x", 0);
    let got = resolve(a.as_mut(), &[(late, 1005.0), (early, 1001.0)], false);
    let names: Vec<_> = got
        .iter()
        .map(|i| i.as_ref().map(|i| i.name.as_str()))
        .collect();
    assert_eq!(names, [Some("two"), Some("one")]);
}

#[test]
fn script_jobs_take_the_record_of_their_script() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &(block("plot", "plot.png", 1) + &block("summarize", "sum.txt", 2)),
    );
    write_record(
        dir.path(),
        "plot.png",
        "plot",
        None,
        "    script: \"scripts/plot.py\"\n",
        1001.0,
    );
    write_record(
        dir.path(),
        "sum.txt",
        "summarize",
        None,
        "    script: \"scripts/summ.py\"\n",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let cmd = "set -euo pipefail;  /v/bin/python3 /w/.snakemake/scripts/tmp_2y_47b_.summ.py";
    let got = resolve(a.as_mut(), &[(job_proc(31, cmd, 0), 1001.2)], false);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("summarize"));
}

#[test]
fn run_jobs_and_cluster_jobs_are_named_from_target_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let cmd = "cd /w && /usr/bin/python3 -m snakemake --snakefile '/w/Snakefile' --target-jobs 'run_wc:s=a,t=1' --cores 2";
    let got = resolve(a.as_mut(), &[(job_proc(41, cmd, 0), 1001.0)], false);
    let info = got[0].clone().unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.wildcards.as_deref(),
            info.in_engine
        ),
        ("run_wc", Some("s=a, t=1"), true)
    );
    // On a cluster node the job's own Snakemake is the run: its shells are that job.
    let mut node = adapter(
        dir.path(),
        &[
            "python3",
            "-m",
            "snakemake",
            "--target-jobs",
            "align:sample=B",
            "--cores",
            "4",
        ],
    );
    let got = resolve(
        node.as_mut(),
        &[(job_proc(42, "set -euo pipefail;  bwa mem r.fa", 0), 1.0)],
        false,
    );
    assert_eq!(
        got[0]
            .as_ref()
            .map(|i| (i.name.as_str(), i.wildcards.as_deref())),
        Some(("align", Some("sample=B")))
    );
}

#[test]
fn an_overdue_job_no_record_names_is_named_by_its_paths_or_its_program() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), V7_LOG);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let by_paths = job_proc(51, "set -euo pipefail;  cp data/b/x /tmp/elsewhere", 0);
    let unknown = job_proc(52, "set -euo pipefail;  frobnicate --all", 0);
    let got = resolve(a.as_mut(), &[(by_paths, 1001.0), (unknown, 1002.0)], true);
    assert_eq!(
        got[0].as_ref().map(|i| i.wildcards.as_deref()),
        Some(Some("s=b"))
    );
    assert_eq!(got[1].as_ref().map(|i| i.name.as_str()), Some("frobnicate"));
}

#[test]
fn the_workdir_follows_directory_options() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("proj");
    write_log(&sub, &block("r", "o", 1));
    write_record(&sub, "o", "r", Some("true"), "", 1001.0);
    let mut a = adapter(dir.path(), &["snakemake", "-c1", "--directory", "proj"]);
    assert_eq!(a.pipeline_name(), "proj");
    let got = resolve(a.as_mut(), &[(job_proc(61, "true", 0), 1001.0)], false);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("r"));
}

#[test]
fn a_command_line_the_kernel_cut_matches_the_record_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), &block("rewrite", "out.txt", 1));
    let long = format!("sed -e '{}' in.txt > out.txt", "s/a/b/;".repeat(2000));
    write_record(dir.path(), "out.txt", "rewrite", Some(&long), "", 1001.0);
    write_record(
        dir.path(),
        "other.txt",
        "other",
        Some("sed -e 's/a/b/;' x > y"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c1"]);
    let mut p = job_proc(
        71,
        &format!("set -euo pipefail; export X=1; {}", &long[..3000]),
        0,
    );
    p.first_image.as_mut().unwrap().argv_truncated = true;
    let got = resolve(a.as_mut(), &[(p, 1001.0)], false);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("rewrite"));
}

#[test]
fn a_shell_prefix_of_the_users_wraps_the_recorded_command() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &(block("short", "a", 1) + &block("long", "b", 2)),
    );
    write_record(dir.path(), "a", "short", Some("touch a"), "", 1001.0);
    write_record(
        dir.path(),
        "b",
        "long",
        Some("touch a && touch b"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c1"]);
    let p = job_proc(
        81,
        "set -euo pipefail; export LC_ALL=C; touch a && touch b",
        0,
    );
    let got = resolve(a.as_mut(), &[(p, 1001.0)], false);
    assert_eq!(
        got[0].as_ref().map(|i| i.name.as_str()),
        Some("long"),
        "the longest fit"
    );
}

/// A job's block as Snakemake logs it when the job starts.
fn block(rule: &str, output: &str, jobid: u32) -> String {
    format!(
        "[Mon Nov 23 01:54:07 2026]\nrule {rule}:\n    output: {output}\n    jobid: {jobid}\n    wildcards: s={jobid}\n\n"
    )
}

#[test]
fn a_record_read_before_its_jobs_log_block_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "");
    write_record(
        dir.path(),
        "x/1.txt",
        "gen",
        Some("touch x/1.txt"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c1"]);
    let p = job_proc(91, "set -euo pipefail; touch x/1.txt", 0);
    // Without its block the wildcards are unknown: asked again, not named half.
    let got = resolve(a.as_mut(), &[(p.clone(), 1001.0)], false);
    assert_eq!(got[0], None);
    write_log(dir.path(), &block("gen", "x/1.txt", 1));
    let got = resolve(a.as_mut(), &[(p, 1001.0)], false);
    let info = got[0].clone().expect("named once the block is read");
    assert_eq!(
        (info.name.as_str(), info.wildcards.as_deref()),
        ("gen", Some("s=1"))
    );
}

#[test]
fn an_overdue_record_without_its_block_is_named_by_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), "");
    write_record(dir.path(), "y.txt", "solo", Some("touch y.txt"), "", 1001.0);
    let mut a = adapter(dir.path(), &["snakemake", "-c1"]);
    let p = job_proc(92, "set -euo pipefail; touch y.txt", 0);
    let got = resolve(a.as_mut(), &[(p, 1001.0)], true);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("solo"));
}

/// What Snakemake 9 wrote to its log, measured: job blocks with no `--quiet`, `--quiet
/// progress`, `--quiet host`, `-q progress host` and `--quiet reason`; none with `--quiet`,
/// `--quiet rules` or `--quiet all`. Snakemake 7's `--quiet` takes no words.
#[test]
fn only_a_quiet_that_hides_rules_leaves_job_blocks_out() {
    let argv = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
    for (cmd, hides) in [
        ("snakemake --cores 1", false),
        ("snakemake --cores 1 --quiet progress", false),
        ("snakemake --quiet host --cores 1", false),
        ("snakemake -q progress host", false),
        ("snakemake --quiet reason", false),
        ("snakemake --cores 1 --quiet", true),
        ("snakemake --quiet --cores 1", true),
        ("snakemake -q", true),
        ("snakemake --quiet rules", true),
        ("snakemake --quiet progress rules", true),
        ("snakemake --quiet all", true),
        ("snakemake --quiet=rules", true),
        ("snakemake --quiet=host", false),
    ] {
        assert_eq!(quiet_hides_jobs(&argv(cmd)), hides, "{cmd}");
    }
}

/// A job's block with its wildcard `s`.
fn sample_block(rule: &str, output: &str, jobid: u32, s: &str) -> String {
    format!(
        "[Mon Nov 23 01:54:07 2026]\nrule {rule}:\n    output: {output}\n    jobid: {jobid}\n    wildcards: s={s}\n\n"
    )
}

/// A `script:` job's process as it starts: Snakemake wrote its script, preamble first
/// (Snakemake 9's bash form), and the adapter is told of it.
fn started_script_job(
    a: &mut dyn EngineRun,
    dir: &Path,
    pid: u32,
    tmp: &str,
    output: &str,
) -> Proc {
    let scripts = dir.join(".snakemake/scripts");
    fs::create_dir_all(&scripts).unwrap();
    let path = scripts.join(format!("{tmp}.work.sh"));
    let preamble = format!(
        "#!/usr/bin/env bash\ndeclare -A snakemake_input=( )\ndeclare -A snakemake_output=( [0]={output} )\n"
    );
    fs::write(&path, preamble).unwrap();
    let p = seen_script_job(a, pid, &path);
    // The script is gone once the job ends.
    fs::remove_file(path).unwrap();
    p
}

/// The process of a job running `script`, as the adapter is told of it: a task.
fn seen_script_job(a: &mut dyn EngineRun, pid: u32, script: &Path) -> Proc {
    let command = format!("set -euo pipefail;  bash {}", script.display());
    let p = job_proc(pid, &command, 0);
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    let image = p.first_image.clone().unwrap();
    assert!(matches!(a.classify(&p, &image, place), Class::Task));
    p
}

/// Measured on 7 and 9: two jobs of one script are marked ~7 ms apart, their processes
/// start ~50 ms later in any order; the nearest mark is often the other job's.
#[test]
fn script_jobs_of_one_rule_take_the_record_their_own_script_names() {
    let dir = tempfile::tempdir().unwrap();
    let code = "    script: \"scripts/work.sh\"\n";
    write_log(
        dir.path(),
        &(sample_block("sh", "sh/s2.txt", 3, "s2") + &sample_block("sh", "sh/s7.txt", 8, "s7")),
    );
    write_record(dir.path(), "sh/s7.txt", "sh", None, code, 1001.159);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let s2 = started_script_job(a.as_mut(), dir.path(), 31, "tmpaaaa1111", "sh/s2.txt");
    let s7 = started_script_job(a.as_mut(), dir.path(), 32, "tmpbbbb2222", "sh/s7.txt");
    let got = resolve(a.as_mut(), &[(s2.clone(), 1001.208)], false);
    assert_eq!(got[0], None, "its own record is not written yet: it waits");
    write_record(dir.path(), "sh/s2.txt", "sh", None, code, 1001.152);
    let got = resolve(a.as_mut(), &[(s2, 1001.208), (s7, 1001.201)], false);
    let wildcards: Vec<_> = (got.iter())
        .map(|i| i.as_ref().and_then(|i| i.wildcards.as_deref()))
        .collect();
    assert_eq!(wildcards, [Some("s=s2"), Some("s=s7")]);
}

/// A script job shorter than the agent's look at its start: Snakemake deleted its script
/// before the job's process was seen. The host kept it as it was written (the run asked for
/// `.snakemake/scripts` at its first job), so the job still takes the record its script
/// names, not the one nearest in start.
#[test]
fn a_script_deleted_before_its_job_is_seen_is_read_from_the_hosts_copy() {
    let dir = tempfile::tempdir().unwrap();
    let code = "    script: \"scripts/work.sh\"\n";
    let blocks = sample_block("sh", "sh/s2.txt", 3, "s2")
        + &sample_block("sh", "sh/s7.txt", 8, "s7")
        + &sample_block("sh", "sh/s9.txt", 10, "s9");
    write_log(dir.path(), &blocks);
    for (out, t) in [
        ("sh/s2.txt", 1001.152),
        ("sh/s7.txt", 1001.159),
        ("sh/s9.txt", 1001.3),
    ] {
        write_record(dir.path(), out, "sh", None, code, t);
    }
    let host = std::sync::Arc::new(crate::disk_host::DiskHost::default());
    let mut a = adapter_on(dir.path(), &["snakemake", "-c2"], host.clone());
    let first = started_script_job(a.as_mut(), dir.path(), 31, "tmpaaaa1111", "sh/s2.txt");
    // Written, kept (as the host crate's keeper copies it), deleted: all before the agent
    // looks.
    let script = dir.path().join(".snakemake/scripts/tmpcccc3333.work.sh");
    let preamble = "declare -A snakemake_output=( [0]=sh/s7.txt )\n";
    fs::write(&script, preamble).unwrap();
    host.keep(script.file_name().unwrap(), preamble.as_bytes());
    fs::remove_file(&script).unwrap();
    let late = seen_script_job(a.as_mut(), 32, &script);
    // Started nearest to s9's record: only its script tells it is s7.
    let got = resolve(a.as_mut(), &[(first, 1001.208), (late, 1001.29)], false);
    let wildcards: Vec<_> = (got.iter())
        .map(|i| i.as_ref().and_then(|i| i.wildcards.as_deref()))
        .collect();
    assert_eq!(wildcards, [Some("s=s2"), Some("s=s7")]);
}

/// Measured on 7 and 9 (one core or more): jobs are started from executor threads; the
/// Snakefile's own `shell()` (parse time, `onstart`, `onsuccess`) from the main thread.
#[test]
fn shells_the_main_thread_starts_are_the_engines_own_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    let class = |a: &mut dyn EngineRun, forked_by: u32| {
        let mut p = job_proc(61, "set -euo pipefail;  echo done > logs/done.txt", 0);
        p.parent = Some(ProcKey {
            pid: 60,
            start_ticks: 1,
        });
        p.forked_by = forked_by;
        let image = p.first_image.clone().unwrap();
        a.classify(&p, &image, place)
    };
    assert!(
        matches!(class(a.as_mut(), 60), Class::Helper),
        "main thread"
    );
    assert!(
        matches!(class(a.as_mut(), 64), Class::Task),
        "an executor thread"
    );
    assert!(
        matches!(class(a.as_mut(), 0), Class::Task),
        "thread unknown"
    );
}

#[test]
fn a_job_block_a_record_named_is_no_guess_for_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let log = "[Mon Nov 23 01:54:07 2026]\nrule make:\n    output: out/a.txt\n    jobid: 1\n    wildcards: s=a\n\n[Mon Nov 23 01:54:08 2026]\nFinished job 1.\n\n";
    write_log(dir.path(), log);
    write_record(
        dir.path(),
        "out/a.txt",
        "make",
        Some("echo a > out/a.txt"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let job = job_proc(71, "set -euo pipefail;  echo a > out/a.txt", 0);
    let other = job_proc(72, "set -euo pipefail;  cat out/a.txt > summary.txt", 0);
    let got = resolve(a.as_mut(), &[(job, 1001.0)], false);
    assert_eq!(
        got[0].as_ref().map(|i| i.wildcards.as_deref()),
        Some(Some("s=a"))
    );
    let got = resolve(a.as_mut(), &[(other, 1003.0)], true);
    let info = got[0].clone().expect("named at the last look");
    assert_eq!(
        (info.name.as_str(), info.wildcards.as_deref()),
        ("cat", None),
        "the block of make (s=a) named its job already"
    );
}

/// `benchmark: repeat(..., 2)`: one attempt, one record, its command run twice.
#[test]
fn a_benchmark_repeat_of_a_job_is_that_job_again() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), &block("bench", "b.txt", 4));
    write_record(
        dir.path(),
        "b.txt",
        "bench",
        Some("sort a > b.txt"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c1"]);
    let first = job_proc(81, "set -euo pipefail;  sort a > b.txt", 0);
    let second = job_proc(82, "set -euo pipefail;  sort a > b.txt", 0);
    let got = resolve(a.as_mut(), &[(first, 1001.0), (second, 1001.05)], false);
    let wildcards: Vec<_> = (got.iter())
        .map(|i| {
            i.as_ref()
                .map(|i| (i.name.as_str(), i.wildcards.as_deref()))
        })
        .collect();
    assert_eq!(wildcards, [Some(("bench", Some("s=4"))); 2]);
}
