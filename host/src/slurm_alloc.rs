//! Which job an `srun` or `salloc` run outside any job created: its own allocation, whose
//! steps run on other nodes. Nothing on the submitting node names the job but Slurm: the
//! controller records the session the allocation was asked from (`AllocSID`), whether it has
//! a batch script, and when it was submitted. A thread of its own asks `squeue` until one
//! job fits (or the time is up), so the events never wait for the controller.
use std::time::{Duration, Instant};

/// The job an allocation client created: set once Slurm has answered, `None` inside when it
/// never told one job (no Slurm, gone, or several that fit).
use pipetrace_core::port::AllocCell;

/// Lookups running at once at most; past it a client goes without its job.
const LOOKUPS: usize = 64;
/// How long a client's job is looked for (a pending allocation is listed at once).
const LOOK_FOR: Duration = Duration::from_secs(20);
/// How far its submit time may lie from the client's start, seconds (squeue's clock has
/// seconds; the client asks a moment after it starts).
const SUBMIT_WINDOW: (i64, i64) = (-2, 10);

static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Starts looking for the job that client `pid` (started at `started` Unix seconds by user
/// `uid`) created; its answer fills the returned cell.
pub(crate) fn lookup(pid: u32, uid: u32, started: i64) -> AllocCell {
    let cell = AllocCell::default();
    let Some(sid) = session_of(pid) else {
        let _ = cell.set(None);
        return cell;
    };
    use std::sync::atomic::Ordering::Relaxed;
    if RUNNING.fetch_add(1, Relaxed) >= LOOKUPS {
        RUNNING.fetch_sub(1, Relaxed);
        log::warn!("too many srun/salloc clients waiting for squeue: pid {pid} has no job");
        let _ = cell.set(None);
        return cell;
    }
    let answer = cell.clone();
    let spawned = std::thread::Builder::new()
        .name("pipetrace-salloc".into())
        .spawn(move || {
            let _ = answer.set(look(sid, uid, started));
            RUNNING.fetch_sub(1, Relaxed);
        });
    if spawned.is_err() {
        RUNNING.fetch_sub(1, Relaxed);
        let _ = cell.set(None);
    }
    cell
}

fn look(sid: u32, uid: u32, started: i64) -> Option<u64> {
    let deadline = Instant::now() + LOOK_FOR;
    while Instant::now() < deadline {
        match ask(uid).map(|text| fitting(&text, sid, started)) {
            Some(Fit::One(job)) => return Some(job),
            Some(Fit::Several) => {
                log::info!("several Slurm jobs fit session {sid}: its client has no job");
                return None;
            }
            Some(Fit::None) | None => std::thread::sleep(Duration::from_millis(250)),
        }
    }
    None
}

/// The session a process belongs to.
fn session_of(pid: u32) -> Option<u32> {
    super::session(pid)
}

/// `squeue` of the user's jobs, any state: id, session, batch flag, submit time.
fn ask(uid: u32) -> Option<String> {
    let o = std::process::Command::new("timeout")
        .args([
            "--kill-after=1",
            "5",
            "squeue",
            "--noheader",
            "--states=all",
        ])
        .args(["--user", &uid.to_string()])
        .args(["--Format", "JobID:24,AllocSID:16,BatchFlag:4,SubmitTime:24"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[derive(Debug, PartialEq, Eq)]
enum Fit {
    None,
    One(u64),
    Several,
}

/// The jobs without a batch script asked from session `sid` around `started`.
fn fitting(text: &str, sid: u32, started: i64) -> Fit {
    let jobs: Vec<u64> = text
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [id, session, batch, submitted] = f[..] else {
                return None;
            };
            let at = local_time(submitted)? - started;
            let fits = session.parse::<u32>().ok()? == sid
                && batch == "0"
                && (SUBMIT_WINDOW.0..=SUBMIT_WINDOW.1).contains(&at);
            fits.then(|| id.parse().ok()).flatten()
        })
        .collect();
    match jobs[..] {
        [] => Fit::None,
        [one] => Fit::One(one),
        _ => Fit::Several,
    }
}

/// Unix seconds of Slurm's `YYYY-MM-DDTHH:MM:SS` in the node's local time.
fn local_time(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('T')?;
    let d: Vec<i32> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i32> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let (&[y, mo, da], &[h, mi, se]) = (&d[..], &t[..]) else {
        return None;
    };
    // SAFETY: a zeroed tm is valid; mktime reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    (tm.tm_year, tm.tm_mon, tm.tm_mday) = (y - 1900, mo - 1, da);
    (tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_isdst) = (h, mi, se, -1);
    // SAFETY: a valid tm; mktime has no other effect than reading the time zone.
    let t = unsafe { libc::mktime(&mut tm) };
    (t != -1).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_asked_from_the_clients_session_without_a_script_around_its_start_is_its() {
        let at = local_time("2026-11-25T08:08:52").unwrap();
        let text = "12  1123  0  2026-11-25T08:08:53\n\
                    11  1123  1  2026-11-25T08:08:52\n\
                    10  1123  0  2026-11-25T07:00:00\n\
                    13  999   0  2026-11-25T08:08:52\n";
        assert_eq!(fitting(text, 1123, at), Fit::One(12));
        assert_eq!(fitting(text, 77, at), Fit::None);
        let two = format!("{text}14 1123 0 2026-11-25T08:08:54\n");
        assert_eq!(fitting(&two, 1123, at), Fit::Several, "never a guess");
        assert_eq!(fitting("garbage\n", 1123, at), Fit::None);
    }

    #[test]
    fn slurms_local_times_read_as_unix_seconds() {
        let a = local_time("2026-11-25T08:08:52").unwrap();
        assert_eq!(local_time("2026-11-25T08:09:02").unwrap() - a, 10);
        assert_eq!(local_time("2026-11-26T08:08:52").unwrap() - a, 86_400);
        assert_eq!(local_time("Unknown"), None);
    }

    #[test]
    fn a_process_session_is_read_from_its_stat_line() {
        let own = session_of(std::process::id()).unwrap();
        // SAFETY: getsid(0) has no side effect.
        assert_eq!(own as i32, unsafe { libc::getsid(0) });
    }
}
