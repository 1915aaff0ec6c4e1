use std::io::Write;

use super::*;
use crate::disk_host::shared as live;

const SESSION: &str = "0b1d9c1e-6f7a-4c2b-9a55-3c0f1b2e4d6a";

/// A log line as Nextflow's logback pattern writes it.
fn line(thread: &str, level: &str, logger: &str, msg: &str) -> String {
    format!("Nov-28 15:00:00.123 [{thread}] {level:<5} {logger} - {msg}\n")
}

fn session(id: &str) -> String {
    line(
        "main",
        "DEBUG",
        "nextflow.Session",
        &format!("Session UUID: {id}"),
    )
}

fn submitted(hash: &str, name: &str) -> String {
    let msg = format!("[{hash}] Submitted process > {name}");
    line("Task submitter", "INFO", "nextflow.Session", &msg)
}

/// A local task's end, as `TaskHandler.toString` writes it.
fn completed(id: u32, name: &str, dir: &Path) -> String {
    let msg = format!(
        "Task completed > TaskHandler[id: {id}; name: {name}; status: COMPLETED; exit: 0; \
         error: -; workDir: {}]",
        dir.display()
    );
    line(
        "Task monitor",
        "DEBUG",
        "n.processor.TaskPollingMonitor",
        &msg,
    )
}

#[test]
fn each_line_nextflow_writes_of_a_task_is_read() {
    let sub = submitted("3f/9a1c0e", "NFCORE:QC:SORT (sample_a)");
    assert_eq!(
        parse(sub.trim_end()),
        Some(Line::Submitted {
            hash: "3f/9a1c0e",
            name: "NFCORE:QC:SORT (sample_a)"
        })
    );
    let retry = line(
        "Task submitter",
        "INFO",
        "nextflow.Session",
        "[0a/b1c2d3] Re-submitted process > ALIGN (2)",
    );
    assert!(matches!(parse(&retry), Some(Line::Submitted { .. })));
    let cached = line(
        "Actor Thread 7",
        "INFO",
        "nextflow.processor.TaskProcessor",
        "[aa/000111] Cached process > FASTQC (s1)",
    );
    assert_eq!(parse(&cached), Some(Line::Cached));
    let grid = line(
        "Task submitter",
        "DEBUG",
        "nextflow.executor.GridTaskHandler",
        "[SLURM] submitted process ALIGN (s1) > jobId: 42; workDir: /w/work/ab/cdef0123456789",
    );
    assert_eq!(parse(&grid), Some(Line::Grid("/w/work/ab/cdef0123456789")));
    // A grid job's handler: `jobId` first, `started`/`exited` after its work directory.
    let ended = line(
        "Task monitor",
        "DEBUG",
        "n.processor.TaskPollingMonitor",
        "Task completed > TaskHandler[jobId: 42; id: 3; name: ALIGN (s1); status: COMPLETED; \
         exit: 0; error: -; workDir: /w/work/ab/cdef0123456789 started: 1764; exited: \
         2026-11-28T15:00:01Z; ]",
    );
    assert_eq!(
        parse(&ended),
        Some(Line::Completed {
            hash: Some("ab/cdef01".into()),
            name: Some("ALIGN (s1)")
        })
    );
    for other in [
        line(
            "main",
            "DEBUG",
            "nextflow.cli.Launcher",
            "$> nextflow run main.nf",
        ),
        line(
            "Task monitor",
            "ERROR",
            "nextflow.processor.TaskProcessor",
            "Error executing process > 'ALIGN (s1)'",
        ),
        "Caused by: Submitted process > X\n".into(),
        line(
            "main",
            "INFO",
            "nextflow.Session",
            "[zz/123456] Submitted process > X",
        ),
    ] {
        assert_eq!(parse(other.trim_end()), None, "{other}");
    }
}

fn write(path: &Path, text: &str) {
    let mut f = (std::fs::OpenOptions::new().create(true).append(true))
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn local_tasks_count_as_submitted_and_done_and_only_the_runs_own_log_counts() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(".nextflow.log");
    // The previous run's log, not rotated yet.
    let other = "11111111-2222-3333-4444-555555555555";
    let banner = |v: &str| {
        let msg = format!("N E X T F L O W  ~  version {v}");
        line("main", "INFO", "nextflow.cli.CmdRun", &msg)
    };
    write(&log, &(banner("23.04.1") + &session(other)));
    write(&log, &submitted("aa/bbbbbb", "OLD"));
    let mut p = LogProgress::new(live(), log.clone());
    assert_eq!(p.progress(), None, "no session known yet");
    p.set_session(SESSION);
    assert_eq!(p.progress(), None, "an earlier run's log");
    assert_eq!(p.version(), None, "an earlier run's version");
    // Nextflow starts its own: the old one becomes .nextflow.log.1.
    std::fs::rename(&log, dir.path().join(".nextflow.log.1")).unwrap();
    write(&log, &(banner("24.10.0") + &session(SESSION)));
    let zero = Progress {
        done: 0,
        total: 0,
        queued: Some(0),
        cached: 0,
    };
    assert_eq!(p.progress(), Some(zero));
    assert_eq!(
        p.version().as_deref(),
        Some("24.10.0"),
        "the run's own log's"
    );
    let work = dir.path().join("work/3f/9a1c0e5d2b7f84c6a0e1d9b2c4f6a8");
    write(&log, &submitted("3f/9a1c0e", "SORT (a)"));
    write(&log, &submitted("12/345678", "SORT (b)"));
    // A line still being written waits for its end.
    let half = submitted("9c/abcdef", "SORT (c)");
    write(&log, &half[..half.len() / 2]);
    let two = p.progress().unwrap();
    assert_eq!((two.done, two.total, two.running()), (0, 2, Some(2)));
    write(&log, &half[half.len() / 2..]);
    write(&log, &completed(1, "SORT (a)", &work));
    let now = p.progress().unwrap();
    assert_eq!(
        now,
        Progress {
            done: 1,
            total: 3,
            queued: Some(0),
            cached: 0,
        },
        "local tasks run once submitted"
    );
    assert_eq!(now.running(), Some(2));
}

#[test]
fn a_grid_job_is_queued_until_its_wrapper_begins() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(".nextflow.log");
    let mut p = LogProgress::new(live(), log.clone());
    p.set_session(SESSION);
    write(&log, &session(SESSION));
    let mut dirs = Vec::new();
    for (i, hash) in ["ab/cdef01", "12/345678", "9c/abcdef"].iter().enumerate() {
        let (pre, rest) = hash.split_once('/').unwrap();
        let work = dir
            .path()
            .join(format!("work/{pre}/{rest}23456789abcdef0123456789"));
        std::fs::create_dir_all(&work).unwrap();
        let msg = format!(
            "[SLURM] submitted process T ({i}) > jobId: {}; workDir: {}",
            40 + i,
            work.display()
        );
        write(
            &log,
            &line("Task submitter", "DEBUG", "n.e.GridTaskHandler", &msg),
        );
        write(&log, &submitted(hash, &format!("T ({i})")));
        dirs.push(work);
    }
    let all_pending = p.progress().unwrap();
    assert_eq!(
        (all_pending.total, all_pending.queued),
        (3, Some(3)),
        "none has begun"
    );
    std::fs::write(dirs[0].join(".command.begin"), "").unwrap();
    std::fs::write(dirs[1].join(".command.begin"), "").unwrap();
    let now = p.progress().unwrap();
    assert_eq!((now.queued, now.running()), (Some(1), Some(2)));
    // The first ends: its error message runs over lines, its name still says which.
    let msg = "Task completed > TaskHandler[jobId: 40; id: 1; name: T (0); status: COMPLETED; \
               exit: 1; error: nextflow.exception.ProcessFailedException: oops\nmore; workDir: x";
    write(
        &log,
        &line("Task monitor", "DEBUG", "n.p.TaskPollingMonitor", msg),
    );
    let ended = p.progress().unwrap();
    assert_eq!(
        ended,
        Progress {
            done: 1,
            total: 3,
            queued: Some(1),
            cached: 0,
        }
    );
    assert_eq!(ended.running(), Some(1), "T (1) runs, T (2) waits");
    // A task taken from the cache is done as soon as counted.
    let cached = "[ee/ff0011] Cached process > C";
    write(
        &log,
        &line("Actor Thread 2", "INFO", "n.p.TaskProcessor", cached),
    );
    let now = p.progress().unwrap();
    assert_eq!((now.done, now.total, now.cached), (2, 4, 1));
}
