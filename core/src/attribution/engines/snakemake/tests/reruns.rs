//! Shapes of issue 37: reruns in place, commands too long for a command line, jobs of
//! rules with a `message:`.
use super::*;

fn set_mtime(path: &Path, t: f64) {
    let f = fs::File::open(path).unwrap();
    f.set_modified(at(t)).unwrap();
}

fn task(a: &mut dyn EngineRun, p: &Proc) {
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    let image = p.first_image.clone().unwrap();
    assert!(matches!(a.classify(p, &image, place), Class::Task));
}

/// Measured on 9.27: a rerun in the same directory rewrites each job's record in place
/// (7 and 8 rename a new file over it), so the folder's time stays that of the first run.
#[test]
fn a_record_rewritten_in_place_by_a_rerun_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join(".snakemake/metadata");
    write_record(
        dir.path(),
        "r/a.txt",
        "make",
        Some("echo a > r/a.txt"),
        "",
        500.0,
    );
    write_record(
        dir.path(),
        "r/b.txt",
        "make",
        Some("echo b > r/b.txt"),
        "",
        500.0,
    );
    let a_rec = meta.join(base64::engine::general_purpose::URL_SAFE.encode("r/a.txt"));
    let b_rec = meta.join(base64::engine::general_purpose::URL_SAFE.encode("r/b.txt"));
    for f in [&a_rec, &b_rec, &meta] {
        set_mtime(f, 500.0);
    }
    // `--quiet`: no block names the outputs, only the old records' own names lead to them.
    let mut a = adapter(dir.path(), &["snakemake", "-c2", "--quiet"]);
    let a_job = job_proc(61, "set -euo pipefail;  echo a > r/a.txt", 0);
    assert_eq!(
        resolve(a.as_mut(), &[(a_job.clone(), 1001.0)], false),
        [None]
    );
    write_record(
        dir.path(),
        "r/a.txt",
        "make",
        Some("echo a > r/a.txt"),
        "",
        1001.0,
    );
    set_mtime(&a_rec, 1001.5);
    set_mtime(&meta, 500.0);
    let got = resolve(a.as_mut(), &[(a_job, 1001.0)], false);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("make"));
    // With blocks, the record of each output a block lists is looked at too.
    write_log(dir.path(), &sample_block("make", "r/b.txt", 2, "b"));
    let b_job = job_proc(62, "set -euo pipefail;  echo b > r/b.txt", 0);
    write_record(
        dir.path(),
        "r/b.txt",
        "make",
        Some("echo b > r/b.txt"),
        "",
        1002.0,
    );
    set_mtime(&b_rec, 1002.5);
    set_mtime(&meta, 500.0);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let got = resolve(a.as_mut(), &[(b_job, 1002.0)], false);
    assert_eq!(
        got[0].as_ref().and_then(|i| i.wildcards.as_deref()),
        Some("s=b")
    );
}

/// Measured on 7.21, 8.30 and 9.27: a command over Snakemake's MAX_ARG_LEN runs as
/// `bash -c '"/usr/bin/bash" "/abs/.snakemake/shell_tmp.X/script.sh"'`, the command in the
/// script, which is gone once the job ends.
#[test]
fn a_command_too_long_for_a_command_line_is_read_from_its_script() {
    let dir = tempfile::tempdir().unwrap();
    let words = |s: &str| {
        format!(
            "printf '%s\\n' {} | wc -l > long/{s}.n",
            "w ".repeat(40_000)
        )
    };
    let mut log = String::new();
    for (i, s) in ["x", "y", "z"].iter().enumerate() {
        let cmd = words(s);
        write_record(
            dir.path(),
            &format!("long/{s}.n"),
            "count",
            Some(&cmd),
            "",
            1001.0,
        );
        log += &sample_block("count", &format!("long/{s}.n"), i as u32 + 1, s);
    }
    write_log(dir.path(), &log);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let tmp = dir.path().join(".snakemake/shell_tmp.k2j_9x0a");
    fs::create_dir_all(&tmp).unwrap();
    let script = tmp.join("script.sh");
    let run = format!(
        "set -euo pipefail;  \"/usr/bin/bash\" \"{}\"",
        script.display()
    );
    // y's script read as its job is seen; x's gone before (a short job, a busy machine).
    fs::write(&script, format!("set -euo pipefail;  {}\n", words("y"))).unwrap();
    let y = job_proc(71, &run, 0);
    task(a.as_mut(), &y);
    fs::remove_dir_all(&tmp).unwrap();
    let x = job_proc(72, &run, 0);
    task(a.as_mut(), &x);
    let got = resolve(a.as_mut(), &[(y, 1001.0), (x, 1001.0)], false);
    let named: Vec<_> = (got.iter())
        .map(|i| {
            i.as_ref()
                .map(|i| (i.name.as_str(), i.wildcards.as_deref()))
        })
        .collect();
    assert_eq!(named[0], Some(("count", Some("s=y"))), "its exact command");
    assert_eq!(
        named[1].map(|n| n.0),
        Some("count"),
        "a record that long, of its time"
    );
}

/// Measured on 7.21, 8.30 and 9.27: a job of a rule with a `message:` is logged as
/// `Job N: <message>`, no block; its record alone names it (by rule, no wildcards).
#[test]
fn a_job_logged_by_its_message_is_named_by_its_record_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let log = "[Sat Nov 28 09:08:10 2026]\nJob 2: Preparing sample a into msg/a.txt\nReason: Missing output files: msg/a.txt\n\n";
    write_log(dir.path(), &(sample_block("other", "o.txt", 1, "o") + log));
    write_record(
        dir.path(),
        "msg/a.txt",
        "prepare",
        Some("seq 1 5 > msg/a.txt"),
        "",
        1001.0,
    );
    write_record(
        dir.path(),
        "o2.txt",
        "other",
        Some("touch o2.txt"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let job = job_proc(91, "set -euo pipefail;  seq 1 5 > msg/a.txt", 0);
    let other = job_proc(92, "set -euo pipefail;  touch o2.txt", 0);
    let got = resolve(a.as_mut(), &[(job, 1001.0), (other, 1001.0)], false);
    assert_eq!(got[0].as_ref().map(|i| i.name.as_str()), Some("prepare"));
    assert_eq!(got[1], None, "a rule of blocks waits for its block");
}

/// Measured on 7.21: a job of `dynamic()` outputs is logged with its output as a pattern
/// (`clusters/{*}.txt (dynamic)`), and recorded for each file made with no start.
#[test]
fn a_job_of_dynamic_outputs_is_named_by_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = "[Sat Nov 28 09:08:04 2026]\nrule cluster:\n    output: clusters/{*}.txt (dynamic)\n    jobid: 2\n    reason: Missing output files: clusters/{cid}.txt (dynamic)\n    resources: tmpdir=/tmp\n\nSubsequent jobs will be added dynamically depending on the output of this job\n";
    write_log(dir.path(), log);
    let cmd = "mkdir -p clusters; for i in 1 2; do echo $i > clusters/$i.txt; done";
    let meta = dir.path().join(".snakemake/metadata");
    fs::create_dir_all(&meta).unwrap();
    for out in ["clusters/1.txt", "clusters/2.txt"] {
        let json = serde_json::json!({
            "rule": "cluster", "shellcmd": cmd, "starttime": null, "endtime": 1001.5,
        });
        let name = base64::engine::general_purpose::URL_SAFE.encode(out);
        fs::write(meta.join(name), json.to_string()).unwrap();
    }
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let job = job_proc(95, &format!("set -euo pipefail;  {cmd}"), 0);
    let got = resolve(a.as_mut(), &[(job, 1001.0)], false);
    let info = got[0]
        .clone()
        .expect("named at once by its record and block");
    assert_eq!((info.name.as_str(), info.run_id.as_str()), ("cluster", "2"));
}

/// Measured on 8.30: with `workdir: "work"` the log too goes to `work/.snakemake/log`
/// (7 and 9 keep it in the launch directory).
#[test]
fn a_workdir_directive_on_8_moves_the_log_too() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    write_log(&work, &sample_block("make", "out/a.txt", 3, "a"));
    write_record(
        &work,
        "out/a.txt",
        "make",
        Some("echo a > out/a.txt"),
        "",
        1001.0,
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let mut p = job_proc(97, "set -euo pipefail;  echo a > out/a.txt", 0);
    let image = p.first_image.as_mut().unwrap();
    image.cwd = Some(work.clone());
    task(a.as_mut(), &p);
    let got = resolve(a.as_mut(), &[(p, 1001.0)], false);
    let info = got[0].clone().expect("its block in work/.snakemake/log");
    assert_eq!(info.wildcards.as_deref(), Some("s=a"));
}

/// A rerun in place starts with `.snakemake/scripts` already there: its scripts are kept
/// from the run's start, before its first job (a run of script jobs alone, whose first
/// jobs may end before they are seen); a first run's are kept from its first job on.
#[test]
fn a_rerun_keeps_scripts_from_its_start() {
    use crate::port::Host as _;
    let host = crate::port::fake::FakeHost::new(0, 1_000_000_000);
    let image = |dir: &str| Image {
        path: "/usr/bin/snakemake".into(),
        argv: ["snakemake", "--cores", "2"].map(String::from).to_vec(),
        cwd: Some(dir.into()),
        ..Default::default()
    };
    host.write("/rerun/.snakemake/scripts/tmpold.count.py", "run 1");
    let _rerun = (ENGINE.start)(&image("/rerun"), SystemTime::now(), host.shared());
    let _first = (ENGINE.start)(&image("/first"), SystemTime::now(), host.shared());
    host.write("/rerun/.snakemake/scripts/tmpnew.count.py", "run 2");
    host.write("/first/.snakemake/scripts/tmpone.count.py", "run 1");
    let kept = |n: &str| host.kept(std::ffi::OsStr::new(n));
    assert_eq!(kept("tmpnew.count.py"), Some(b"run 2".to_vec()));
    assert_eq!(
        kept("tmpone.count.py"),
        None,
        "a first run waits for its first job"
    );
}
