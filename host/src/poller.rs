//! The degraded source: without eBPF, processes are found by polling /proc. A process that
//! lives shorter than the interval can be missed, figures are the last sample before the
//! end, and exit codes are unknown (only the parent learns them). Spans say so with
//! `pipetrace.collection.mode = procfs`.
use std::{collections::HashMap, fs, time::Duration};

use procfs::process::Process;

use pipetrace_core::{
    accounting::Usage,
    event::{Event, Exec, ProcKey},
    tree::Exit,
};

/// What one read of /proc/PID says.
#[derive(Clone, Debug, Default)]
struct Sample {
    comm: String,
    usage: Usage,
    peak_bytes: u64,
    /// Its program has been reported. A process caught inside exec shows its new name but
    /// not yet its arguments, so its Exec waits for the next scan.
    named: bool,
}

pub struct Poller {
    interval: Duration,
    known: HashMap<u32, (ProcKey, Sample)>,
}

/// /proc/PID/stat: comm, ppid, start ticks, and the counters after them.
struct Stat {
    comm: String,
    ppid: u32,
    kernel_thread: bool,
    start_ticks: u64,
    minflt: u64,
    majflt: u64,
    utime_ticks: u64,
    stime_ticks: u64,
}

/// include/linux/sched.h: kernel threads have no command line to wait for.
const PF_KTHREAD: u32 = 0x0020_0000;

fn read_stat(p: &Process) -> Option<Stat> {
    let st = p.stat().ok()?;
    Some(Stat {
        ppid: u32::try_from(st.ppid).ok()?,
        kernel_thread: st.flags & PF_KTHREAD != 0,
        minflt: st.minflt,
        majflt: st.majflt,
        utime_ticks: st.utime,
        stime_ticks: st.stime,
        start_ticks: st.starttime,
        comm: st.comm,
    })
}

fn sample(p: &Process, stat: &Stat) -> Sample {
    let status = p.status().ok();
    let kib =
        |f: fn(&procfs::process::Status) -> Option<u64>| status.as_ref().and_then(f).unwrap_or(0);
    // Reading another user's io needs ptrace rights; without them those stay 0.
    let io = p.io().ok();
    let io_field = |f: fn(&procfs::process::Io) -> u64| io.as_ref().map_or(0, f);
    let ns = pipetrace_core::facts::ns_per_tick();
    let usage = Usage {
        cpu_user_ns: stat.utime_ticks * ns,
        cpu_system_ns: stat.stime_ticks * ns,
        maxrss_bytes: kib(|s| s.vmhwm) * 1024,
        minor_faults: stat.minflt,
        major_faults: stat.majflt,
        voluntary_switches: kib(|s| s.voluntary_ctxt_switches),
        involuntary_switches: kib(|s| s.nonvoluntary_ctxt_switches),
        read_chars: io_field(|i| i.rchar),
        write_chars: io_field(|i| i.wchar),
        read_calls: io_field(|i| i.syscr),
        write_calls: io_field(|i| i.syscw),
        disk_read_bytes: io_field(|i| i.read_bytes),
        disk_write_bytes: io_field(|i| i.write_bytes),
        disk_cancelled_write_bytes: io_field(|i| i.cancelled_write_bytes),
        run_delay_ns: p.schedstat().map_or(0, |s| s.run_delay),
        ..Default::default()
    };
    Sample {
        comm: stat.comm.clone(),
        peak_bytes: usage.maxrss_bytes,
        usage,
        named: false,
    }
}

fn exec_event(pid: u32, key: ProcKey, ppid: u32, start_ns: u64, now: u64) -> Exec {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let filename = as_executed(&exe, &stat_comm(pid)).display().to_string();
    Exec {
        key,
        start_ns,
        time_ns: now.max(start_ns),
        ppid,
        // As the kernel's exec record has it: the real user.
        uid: procfs::process::Process::new(pid as i32)
            .and_then(|p| p.status())
            .map_or(0, |s| s.ruid),
        cgroup_id: 0,
        filename,
        argv: pipetrace_core::event::split_argv(&cmdline),
        argv_truncated: false,
    }
}

fn stat_comm(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| String::new(), |c| c.trim_end().into())
}

/// The program as exec'd, as the kernel's exec record names it: `/proc/PID/exe` resolves
/// links (`/usr/bin/sh` reads as `/usr/bin/dash`), while the comm keeps the name run (up to
/// 15 bytes). The link beside the program that has that name and leads to it is the one.
fn as_executed(exe: &std::path::Path, comm: &str) -> std::path::PathBuf {
    let named = exe.file_name().and_then(|n| n.to_str());
    let (Some(named), Some(dir)) = (named, exe.parent()) else {
        return exe.to_path_buf();
    };
    if comm.is_empty() || named.starts_with(comm) || comm.len() >= 15 {
        return exe.to_path_buf();
    }
    let link = dir.join(comm);
    match fs::canonicalize(&link) {
        Ok(to) if to == exe => link,
        _ => exe.to_path_buf(),
    }
}

impl Poller {
    /// Starts from what runs now: those processes are the start-up scan's, not new ones.
    pub(crate) fn new(interval: Duration) -> Self {
        let mut p = Self {
            interval,
            known: HashMap::new(),
        };
        let mut ignored = Vec::new();
        p.scan(&mut ignored, false);
        p
    }

    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Compares /proc with the last scan: new processes, new programs, ends.
    pub(crate) fn scan(&mut self, out: &mut Vec<Event>, report: bool) {
        let now = crate::boottime_ns();
        let Ok(all) = procfs::process::all_processes() else {
            return;
        };
        let mut seen: Vec<(Process, Stat)> = all
            .filter_map(|p| {
                let p = p.ok()?;
                let st = read_stat(&p)?;
                Some((p, st))
            })
            .collect();
        // Parents before children, so each new process finds its parent.
        seen.sort_by_key(|(_, s)| s.start_ticks);
        let mut alive: HashMap<u32, ProcKey> = HashMap::with_capacity(seen.len());
        for (proc_, st) in &seen {
            let pid = &(proc_.pid as u32);
            let key = ProcKey {
                pid: *pid,
                start_ticks: st.start_ticks,
            };
            alive.insert(*pid, key);
            let start_ns = st.start_ticks * pipetrace_core::facts::ns_per_tick();
            let mut fresh = sample(proc_, st);
            match self.known.get_mut(pid) {
                Some((k, last)) if *k == key => {
                    fresh.named = last.named;
                    if report && (last.comm != fresh.comm || !last.named) {
                        fresh.named = name(out, *pid, key, st, start_ns, now);
                    }
                    fresh.peak_bytes = last.peak_bytes.max(fresh.peak_bytes);
                    *last = fresh;
                    continue;
                }
                _ => {}
            }
            if let Some((old, last)) = self.known.remove(pid) {
                // The pid was reused between two scans: the old one ended.
                if report {
                    end(out, old, last, now);
                }
            }
            if report {
                let parent = alive.get(&st.ppid).copied().unwrap_or(ProcKey {
                    pid: st.ppid,
                    start_ticks: 0,
                });
                out.push(Event::Fork {
                    key,
                    start_ns,
                    parent,
                    // /proc does not say which thread forked.
                    parent_tid: 0,
                    comm: st.comm.clone(),
                });
                fresh.named = name(out, *pid, key, st, start_ns, now);
            }
            self.known.insert(*pid, (key, fresh));
        }
        let gone: Vec<u32> = self
            .known
            .keys()
            .filter(|pid| !alive.contains_key(pid))
            .copied()
            .collect();
        for pid in gone {
            if let Some((key, last)) = self.known.remove(&pid)
                && report
            {
                end(out, key, last, now);
            }
        }
    }
}

/// Reports the program the process runs, unless it is caught inside exec with no arguments
/// yet. Returns whether it was reported.
fn name(out: &mut Vec<Event>, pid: u32, key: ProcKey, st: &Stat, start_ns: u64, now: u64) -> bool {
    let exec = exec_event(pid, key, st.ppid, start_ns, now);
    if exec.argv.is_empty() && !st.kernel_thread {
        return false;
    }
    out.push(Event::Exec(exec));
    true
}

fn end(out: &mut Vec<Event>, key: ProcKey, last: Sample, now: u64) {
    out.push(Event::Exit {
        key,
        time_ns: now,
        status: Exit::UNKNOWN,
        image_peak_bytes: last.peak_bytes,
        at_exit: None,
    });
    out.push(Event::Usage {
        key,
        usage: last.usage,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_run_through_a_link_is_named_as_run() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dash");
        std::fs::write(&real, "").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("sh")).unwrap();
        let real = fs::canonicalize(&real).unwrap();
        assert_eq!(as_executed(&real, "sh"), real.with_file_name("sh"));
        assert_eq!(as_executed(&real, "dash"), real);
        // No such link beside it: the resolved program stays.
        assert_eq!(as_executed(&real, "bash"), real);
    }

    #[test]
    fn sees_a_process_start_run_a_program_and_end() {
        let mut p = Poller::new(Duration::from_millis(10));
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut events = Vec::new();
        // The first scan may catch it before or inside exec; the program shows within a few.
        let execs = |events: &[Event]| -> Vec<Vec<String>> {
            events
                .iter()
                .filter_map(|e| match e {
                    Event::Exec(x) if x.key.pid == pid => Some(x.argv.clone()),
                    _ => None,
                })
                .collect()
        };
        for _ in 0..20 {
            p.scan(&mut events, true);
            if execs(&events)
                .last()
                .is_some_and(|a| a == &["sleep", "0.3"])
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let fork = events
            .iter()
            .filter(|e| matches!(e, Event::Fork { key, .. } if key.pid == pid))
            .count();
        assert_eq!(fork, 1, "the new process is reported once");
        let execs = execs(&events);
        assert_eq!(execs.last().unwrap(), &["sleep", "0.3"], "{execs:?}");
        assert!(
            execs.iter().all(|a| !a.is_empty()),
            "a program is never reported without its arguments: {execs:?}"
        );
        child.wait().unwrap();
        events.clear();
        p.scan(&mut events, true);
        let exit = events.iter().any(|e| {
            matches!(e, Event::Exit { key, status, .. } if key.pid == pid && *status == Exit::UNKNOWN)
        });
        assert!(exit, "its end is reported, status unknown");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Usage { key, .. } if key.pid == pid))
        );
    }
}
