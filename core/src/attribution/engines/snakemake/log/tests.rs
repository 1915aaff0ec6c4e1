//! Excerpts of logs written by Snakemake 7.21 and 9.27 (trimmed, otherwise verbatim).
use super::*;

#[test]
fn snakemakes_mem_mib_is_2_to_the_20_and_its_mem_mb_10_to_the_6() {
    let res = |s: &str| memory_bytes(s.split(", ").map(str::to_string));
    // As Snakemake 7.21, 8 and 9 print a job's resources.
    assert_eq!(
        res("tmpdir=/tmp, mem_mb=4000, mem_mib=3815"),
        Some(3815 << 20)
    );
    assert_eq!(res("mem_mb=4000, tmpdir=/tmp"), Some(4_000_000_000));
    assert_eq!(res("tmpdir=/tmp"), None);
}

/// Snakemake's `runtime` resource counts minutes (its own default: none).
#[test]
fn snakemakes_runtime_is_minutes() {
    let rt = |s: &str| runtime_s(s.split(", ").map(str::to_string));
    assert_eq!(rt("mem_mb=1000, runtime=90, tmpdir=/tmp"), Some(5400));
    assert_eq!(rt("tmpdir=/tmp"), None);
}

const V7: &str = "Building DAG of jobs...\n\n[Mon Nov 23 01:54:07 2026]\nrule gen:\n    output: data/a/x\n    jobid: 1\n    reason: Missing output files: data/a/x\n    wildcards: s=a\n    resources: tmpdir=/tmp\n\n\n[Mon Nov 23 01:54:07 2026]\ncheckpoint split:\n    output: split\n    jobid: 12\nDAG of jobs will be updated after completion.\n\n[Mon Nov 23 01:54:07 2026]\nFinished job 12.\n\n[Mon Nov 23 01:54:12 2026]\nrule fail:\n    output: fail.txt\n    jobid: 18\n    threads: 2\n    resources: mem_mb=1500, tmpdir=/tmp\n\n[Mon Nov 23 01:54:12 2026]\nError in rule fail:\n    jobid: 18\n    output: fail.txt\n    shell:\n        echo failing; exit 3\n        (one of the commands exited with non-zero exit code; note that snakemake uses bash strict mode!)\n\n[Mon Nov 23 01:54:12 2026]\nError in rule badscript:\n    jobid: 19\n    output: badscript.txt\n\n";

const V9: &str = "Execute 2 jobs...\n[Mon Nov 23 01:54:20 2026]\nlocalrule gen:\n    output: data/b/x\n    jobid: 2\n    reason: Missing output files: data/b/x\n    wildcards: s=b\n    resources: tmpdir=/tmp\nShell command: mkdir -p data/b && python3 gen.py b > data/b/x\n[Mon Nov 23 01:54:21 2026]\nFinished jobid: 2 (Rule: gen)\n1 of 26 steps (4%) done\n[Mon Nov 23 01:54:21 2026]\nlocalrule fail:\n    output: fail.txt\n    jobid: 18\n    reason: Missing output files: fail.txt\n    resources: tmpdir=/tmp\nRuleException:\nCalledProcessError in file \"/x/Snakefile\", line 95:\nCommand 'set -euo pipefail;  echo failing;\n   exit 3' returned non-zero exit status 3.\n[Mon Nov 23 01:54:21 2026]\nError in rule fail:\n    message: None\n    jobid: 18\n    output: fail.txt\n[Mon Nov 23 01:54:23 2026]\nlocalcheckpoint split:\n    output: split\n    jobid: 12\n";

fn jobs(entries: &[Entry]) -> Vec<&Job> {
    entries
        .iter()
        .filter_map(|e| if let Entry::Job(j) = e { Some(j) } else { None })
        .collect()
}

#[test]
fn snakemake_7_blocks_ends_and_failures() {
    let (entries, consumed) = parse_blocks(V7);
    assert_eq!(consumed, V7.len());
    let jobs_seen = jobs(&entries);
    assert_eq!(jobs_seen.len(), 3);
    assert_eq!(jobs_seen[0].rule, "gen");
    assert_eq!(jobs_seen[0].outputs, ["data/a/x"]);
    assert_eq!(jobs_seen[0].wildcards.as_deref(), Some("s=a"));
    assert_eq!(jobs_seen[1].rule, "split", "checkpoints are jobs");
    // mem_mb counts 10^6 bytes.
    assert_eq!(
        (jobs_seen[2].threads, jobs_seen[2].memory_bytes),
        (Some(2), Some(1_500_000_000))
    );
    assert!(entries.contains(&Entry::Ended("12".into())));
    let failed: Vec<_> = entries
        .iter()
        .filter_map(|e| {
            if let Entry::Failed(f) = e {
                Some(f)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(failed.len(), 2);
    assert_eq!(
        (failed[0].jobid.as_deref(), failed[0].shell.as_deref()),
        (Some("18"), Some("echo failing; exit 3")),
        "the note after the command is not part of it"
    );
    assert_eq!(
        (failed[1].rule.as_str(), failed[1].shell.as_ref()),
        ("badscript", None)
    );
}

#[test]
fn snakemake_9_blocks_ends_and_failed_commands() {
    let (entries, consumed) = parse_blocks(V9);
    let jobs_seen = jobs(&entries);
    assert_eq!(
        jobs_seen.len(),
        2,
        "the last block has no line after it yet"
    );
    assert_eq!(consumed, V9.find("[Mon Nov 23 01:54:23").unwrap() + 27);
    assert_eq!(
        jobs_seen[0].shell.as_deref(),
        Some("mkdir -p data/b && python3 gen.py b > data/b/x"),
        "-p prints the command after the block"
    );
    assert!(entries.contains(&Entry::Ended("2".into())));
    let failure = Failure {
        rule: "fail".into(),
        jobid: Some("18".into()),
        shell: Some("echo failing; exit 3".into()),
    };
    assert!(entries.contains(&Entry::Failed(failure)), "{entries:?}");
    let (rest, _) = parse_blocks(&format!("{}\n", &V9[consumed..]));
    assert_eq!(jobs(&rest)[0].rule, "split");
}

#[test]
fn the_jobs_of_a_group_job_are_blocks_too() {
    let text = "[Mon Nov 23 02:05:10 2026]\n\ngroup job d4d7c256 (jobs in lexicogr. order):\n\n    [Mon Nov 23 02:05:10 2026]\n    rule gunzip:\n        input: raw/libB.fastq.gz\n        output: stream/libB.fastq (pipe)\n        jobid: 11\n        wildcards: lib=libB\n\n\n    [Mon Nov 23 02:05:10 2026]\n    rule trim:\n        output: trimmed/libB.fastq.gz\n        jobid: 10\n        wildcards: lib=libB\n\n";
    let (entries, _) = parse_blocks(text);
    let got: Vec<_> = jobs(&entries)
        .iter()
        .map(|j| (j.rule.as_str(), j.jobid.as_deref(), j.wildcards.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("gunzip", Some("11"), Some("lib=libB")),
            ("trim", Some("10"), Some("lib=libB"))
        ]
    );
    assert_eq!(
        jobs(&entries)[0].outputs,
        ["stream/libB.fastq"],
        "without its (pipe) flag"
    );
}

/// Snakemake 9.27, a job killed by a signal (`kill -9 $$`) beside others (`--keep-going`).
const V9_KILLED: &str = "localrule step:\n    input: gen/3.txt\n    output: out/3.txt\n    jobid: 7\n    wildcards: i=3\n    resources: tmpdir=/tmp\nRuleException:\nCalledProcessError in file \"/tmp/w2/Snakefile\", line 19:\nCommand 'set -euo pipefail;  \n        if [ 3 = 3 ]; then kill -9 $$; fi\n        awk '{s+=$1} END {print s}' gen/3.txt > out/3.txt' died with <Signals.SIGKILL: 9>.\nWrite-protecting output file out/0.txt.\n[Thu Nov 26 03:56:46 2026]\nError in rule step:\n    message: None\n    jobid: 7\n    input: gen/3.txt\n    output: out/3.txt\n    shell:\n        \n        if [ 3 = 3 ]; then kill -9 $$; fi\n        awk '{s+=$1} END {print s}' gen/3.txt > out/3.txt\n        \n        (command exited with non-zero exit code)\n[Thu Nov 26 03:56:46 2026]\nFinished jobid: 1 (Rule: step)\n[Thu Nov 26 03:56:46 2026]\nlocalrule step:\n    input: gen/1.txt\n    output: out/1.txt\n    jobid: 3\n    wildcards: i=1\n    resources: tmpdir=/tmp\nWrite-protecting output file out/1.txt.\n";

#[test]
fn a_job_killed_by_a_signal_ends_its_message_and_later_blocks_are_read() {
    let (entries, consumed) = parse_blocks(V9_KILLED);
    assert_eq!(consumed, V9_KILLED.len(), "nothing left waiting");
    let got: Vec<_> = (jobs(&entries).iter())
        .map(|j| (j.jobid.as_deref(), j.wildcards.as_deref()))
        .collect();
    assert_eq!(got, [(Some("7"), Some("i=3")), (Some("3"), Some("i=1"))]);
    let failure = Failure {
        rule: "step".into(),
        jobid: Some("7".into()),
        shell: Some(
            "if [ 3 = 3 ]; then kill -9 $$; fi awk '{s+=$1} END {print s}' gen/3.txt > out/3.txt"
                .into(),
        ),
    };
    assert!(entries.contains(&Entry::Failed(failure)), "{entries:?}");
    assert!(entries.contains(&Entry::Ended("1".into())));
}

#[test]
fn a_failure_message_of_another_ending_stops_at_the_error_block() {
    let text = V9_KILLED.replace("died with <Signals.SIGKILL: 9>.", "was lost.");
    let (entries, _) = parse_blocks(&text);
    assert_eq!(jobs(&entries).len(), 2, "{entries:?}");
    assert!(entries.contains(&Entry::Ended("1".into())));
}

/// Snakemake 9.27, jobs of rules with a `message:` (7 and 8 alike, with blank lines).
const V9_MESSAGES: &str = "[Sat Nov 28 09:08:10 2026]\nJob 2: Preparing sample a into msg/a.txt\nReason: Missing output files: msg/a.txt\n[Sat Nov 28 09:08:10 2026]\nJob 6: Gathering everything\nReason: Missing output files: msg/all.txt\n[Sat Nov 28 09:08:10 2026]\nFinished jobid: 2 (Rule: prepare)\nJob stats:\n";

#[test]
fn jobs_logged_by_their_message_are_read_as_such() {
    let (entries, _) = parse_blocks(V9_MESSAGES);
    let messages: Vec<_> = (entries.iter())
        .filter_map(|e| match e {
            Entry::Message(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(messages, ["2", "6"]);
    assert!(jobs(&entries).is_empty());
    assert!(entries.contains(&Entry::Ended("2".into())));
}

#[test]
fn progress_from_the_job_stats_table_then_the_steps_done() {
    let v7 = "Building DAG of jobs...\nUsing shell: /usr/bin/bash\nJob stats:\njob        count    min threads    max threads\n-------  -------  -------------  -------------\nall            1              1              1\nmake           4              1              1\ntotal          5              1              1\n\nSelect jobs to execute...\n\n[Sat Nov 28 12:00:01 2026]\nrule make:\n    output: out/a.txt\n    jobid: 1\n\n[Sat Nov 28 12:00:02 2026]\nFinished job 1.\n1 of 5 steps (20%) done\n";
    let (entries, _) = parse_blocks(v7);
    let progress: Vec<&Entry> = (entries.iter())
        .filter(|e| matches!(e, Entry::Progress { .. }))
        .collect();
    assert_eq!(
        progress,
        [
            &Entry::Progress { done: 0, total: 5 },
            &Entry::Progress { done: 1, total: 5 }
        ]
    );
    assert_eq!(jobs(&entries).len(), 1, "the table is no job");
    // Snakemake 9 says it the same way.
    let (entries, _) = parse_blocks(V9);
    assert!(entries.contains(&Entry::Progress { done: 1, total: 26 }));
}

/// A rerun in place: the previous run's log was written a moment before this run started.
/// It is not taken while this run may still begin its own, which is read once there.
#[test]
fn a_rerun_reads_its_own_log_not_the_previous_runs() {
    use crate::port::Host;
    let host = crate::port::fake::FakeHost::new(1_700_000_000_000_000_000, 10_000_000_000);
    let dir = std::path::PathBuf::from("/w");
    let logs = dir.join(".snakemake/log");
    host.write(
        logs.join("2026-11-28T100000.000000.snakemake.log"),
        "rule old:\n    jobid: 1\n\n",
    );
    host.advance(Duration::from_secs(1));
    let started = host.now();
    let mut log = LogFile::new(dir, started, host.shared());
    assert!(
        log.read_new().is_empty(),
        "the previous run's log is not this run's"
    );
    host.advance(Duration::from_millis(500));
    host.write(
        logs.join("2026-11-28T100001.000000.snakemake.log"),
        "rule new:\n    jobid: 1\n\n",
    );
    let rules: Vec<String> = (log.read_new().into_iter())
        .filter_map(|e| {
            if let Entry::Job(j) = e {
                Some(j.rule)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(rules, ["new"]);
}
