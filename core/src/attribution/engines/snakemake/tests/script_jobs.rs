//! `script:` jobs where they run: a moved workdir, repeated benchmarks.
use super::*;

/// Measured on 7 and 9: with `workdir: "work"` the log stays in the launch directory,
/// the metadata and the jobs' scripts go to `work/.snakemake`, where every job starts.
#[test]
fn a_workdir_directive_moves_the_records_where_the_jobs_run() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    write_log(dir.path(), &sample_block("py", "py/a.txt", 3, "a"));
    let code = "    script: \"scripts/copy.py\"\n";
    write_record(&work, "py/a.txt", "py", None, code, 1001.0);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let mut p = job_proc(
        41,
        &format!(
            "set -euo pipefail;  python3 {}/.snakemake/scripts/tmpab12cd34.copy.py",
            work.display()
        ),
        0,
    );
    let image = p.first_image.as_mut().unwrap();
    assert!(a.needs_cwd(&image.argv), "a job shell's directory is asked");
    image.cwd = Some(work.clone());
    let image = image.clone();
    let place = Place {
        parent_is_root: true,
        under_run: true,
    };
    assert!(matches!(a.classify(&p, &image, place), Class::Task));
    assert!(!a.needs_cwd(&image.argv), "once known, no more");
    let got = resolve(a.as_mut(), &[(p, 1001.0)], false);
    let info = got[0].clone().expect("its record in work/.snakemake");
    assert_eq!(
        (info.name.as_str(), info.wildcards.as_deref()),
        ("py", Some("s=a"))
    );
}

/// `benchmark: repeat(..., 3)` on a `script:` rule: each run has a script of its own,
/// the job one record.
#[test]
fn a_benchmark_repeat_of_a_script_job_is_that_job_again() {
    let dir = tempfile::tempdir().unwrap();
    let code = "    script: \"scripts/work.sh\"\n";
    write_log(
        dir.path(),
        &(sample_block("sh", "sh/a.txt", 1, "a") + &sample_block("sh", "sh/b.txt", 2, "b")),
    );
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let runs: Vec<Proc> = (0..3)
        .map(|i| {
            let tmp = format!("tmpaaaa000{i}");
            started_script_job(a.as_mut(), dir.path(), 50 + i, &tmp, "sh/a.txt")
        })
        .collect();
    let other = started_script_job(a.as_mut(), dir.path(), 59, "tmpbbbb0000", "sh/b.txt");
    write_record(dir.path(), "sh/a.txt", "sh", None, code, 1001.0);
    write_record(dir.path(), "sh/b.txt", "sh", None, code, 1001.1);
    let procs: Vec<(Proc, f64)> = (runs.into_iter().chain([other]))
        .zip([1001.0, 1001.1, 1001.2, 1001.1])
        .collect();
    let got = resolve(a.as_mut(), &procs, false);
    let wildcards: Vec<_> = (got.iter())
        .map(|i| i.as_ref().and_then(|i| i.wildcards.as_deref()))
        .collect();
    assert_eq!(
        wildcards,
        [Some("s=a"), Some("s=a"), Some("s=a"), Some("s=b")]
    );
}
