//! Runs stopped short: jobs that end with no record of Snakemake's.
use super::*;

/// Measured on 7 and 9: a run interrupted (SIGINT) while jobs run logs their blocks and
/// nothing else of them (no `Finished`, no error, no record), whether they then finish or
/// are killed.
#[test]
fn a_job_of_an_interrupted_run_is_named_by_its_block_through_its_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let log = format!(
        "{}{}{}Terminating processes on user request, this might take some time.\n",
        sample_block("slow", "slow/0.txt", 1, "0"),
        sample_block("slow", "slow/4.txt", 5, "4"),
        sample_block("sum", "sum.txt", 7, "0").replace(
            "    output: sum.txt\n",
            "    input: slow/1.txt\n    output: sum.txt\n"
        ),
    );
    write_log(dir.path(), &log);
    let mut a = adapter(dir.path(), &["snakemake", "-c2"]);
    let zero = job_proc(81, "set -euo pipefail;  sleep 1.5; echo 0 > slow/0.txt", 0);
    let four = job_proc(
        82,
        "set -euo pipefail;  sleep 1.5; echo 4 > slow/4.txt",
        130,
    );
    let reads = job_proc(83, "set -euo pipefail;  wc -l slow/1.txt > /tmp/n", 0);
    let got = resolve(a.as_mut(), &[(zero.clone(), 1001.0)], false);
    assert_eq!(got[0], None, "not before the last look");
    let got = resolve(
        a.as_mut(),
        &[(zero, 1001.0), (four, 1001.0), (reads, 1001.0)],
        true,
    );
    let named: Vec<_> = (got.iter().flatten())
        .map(|i| (i.name.as_str(), i.wildcards.as_deref(), i.run_id.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("slow", Some("s=0"), "1"),
            ("slow", Some("s=4"), "5"),
            ("wc", None, "83-1")
        ],
        "a job that never ended is no guess for a process naming its input only"
    );
}
