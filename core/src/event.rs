//! Decoding of the probes' ring-buffer records into owned events.
use pipetrace_probes_common::{
    EXEC_ARGV_TRUNCATED, EventHeader, ExecHead, ExitEvent, FinalCpuEvent, ForkEvent, KIND_EXEC,
    KIND_EXIT, KIND_FINAL_CPU, KIND_FORK, KIND_OOM, KIND_OPEN, KIND_SIGNAL, KIND_USAGE, OomEvent,
    OpenEvent, SignalEvent, UsageEvent,
};

pub use crate::facts::split_argv;
use crate::{
    accounting::{CpuTimes, Switches, Usage},
    facts::{ns_per_tick, page_size},
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than an event header")]
    Short(usize),
    #[error("record of kind {kind} has {got} bytes, expected {want}")]
    Size { kind: u32, got: usize, want: usize },
    #[error("unknown record kind {0}")]
    Kind(u32),
}

/// Maps and sets keyed by process (or pid) on the hot path: pids are the kernel's, not an
/// attacker's choice, so a fast hash serves better than SipHash's resistance to flooding.
pub type ProcMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
pub type ProcSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;

/// A process identity within one boot: PID reuse never merges two processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcKey {
    pub pid: u32,
    pub start_ticks: u64,
}

impl ProcKey {
    pub fn from_ns(pid: u32, start_ns: u64) -> Self {
        Self {
            pid,
            start_ticks: start_ns / ns_per_tick(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Fork {
        key: ProcKey,
        start_ns: u64,
        parent: ProcKey,
        /// The parent's thread that forked (0: unknown).
        parent_tid: u32,
        comm: String,
    },
    Exec(Exec),
    Exit {
        key: ProcKey,
        time_ns: u64,
        status: u32,
        /// High-water mark of the image it ended as, bytes (0: unknown).
        image_peak_bytes: u64,
        /// Its usage as its last thread exited: what stands in if the reap-time report
        /// never comes (None where the source cannot tell).
        at_exit: Option<Usage>,
    },
    /// A thread of the process left its CPU for good after every thread had exited: the
    /// CPU it finally used, in the kernel's units (tick-sampled user and system, exact
    /// runtime, the split last reported; nanoseconds), and its context switches, for the
    /// figures from exit.
    FinalCpu {
        key: ProcKey,
        cpu: CpuTimes,
        switches: Switches,
    },
    /// The process was reaped: its final resource usage.
    Usage {
        key: ProcKey,
        usage: Usage,
    },
    /// The OOM killer chose process `pid`; its memory then, in bytes, and the least limit of
    /// its memory cgroup and those above it (`None`: not known, or no limit set).
    Oom {
        pid: u32,
        time_ns: u64,
        anon_rss_bytes: u64,
        file_rss_bytes: u64,
        shmem_rss_bytes: u64,
        limit_bytes: Option<u64>,
        /// The process whose allocation set the OOM killer off, and its name.
        trigger: Option<(u32, String)>,
    },
    /// The process opened a file (the open succeeded): the path as it named it.
    Open {
        key: ProcKey,
        path: String,
        /// `open(2)` flags.
        flags: u32,
    },
    /// A fatal signal was delivered to thread `target`.
    Signal {
        target: u32,
        time_ns: u64,
        sig: u32,
        code: i32,
        sender_pid: u32,
        sender_comm: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exec {
    pub key: ProcKey,
    pub start_ns: u64,
    pub time_ns: u64,
    pub ppid: u32,
    pub uid: u32,
    pub cgroup_id: u64,
    pub filename: String,
    pub argv: Vec<String>,
    pub argv_truncated: bool,
}

fn read<T: Copy>(bytes: &[u8], kind: u32) -> Result<T, DecodeError> {
    let want = size_of::<T>();
    if bytes.len() < want {
        return Err(DecodeError::Size {
            kind,
            got: bytes.len(),
            want,
        });
    }
    // SAFETY: length checked; the types are plain `#[repr(C)]` integers and byte arrays.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

pub(crate) fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    if bytes.len() < size_of::<EventHeader>() {
        return Err(DecodeError::Short(bytes.len()));
    }
    let h: EventHeader = read(bytes, 0)?;
    let key = ProcKey::from_ns(h.tgid, h.start_ns);
    match h.kind {
        KIND_FORK => {
            let e: ForkEvent = read(bytes, h.kind)?;
            Ok(Event::Fork {
                key,
                start_ns: h.start_ns,
                parent: ProcKey::from_ns(e.parent_tgid, e.parent_start_ns),
                parent_tid: e.parent_tid,
                comm: cstr(&e.comm),
            })
        }
        KIND_EXEC => exec(bytes, &h, key),
        KIND_EXIT => {
            let e: ExitEvent = read(bytes, h.kind)?;
            Ok(Event::Exit {
                key,
                time_ns: h.time_ns,
                status: e.exit_code,
                image_peak_bytes: e.image_peak_pages.saturating_mul(page_size()),
                at_exit: Some(Usage::from_figures(&e.figures, page_size())),
            })
        }
        KIND_USAGE => {
            let e: UsageEvent = read(bytes, h.kind)?;
            Ok(Event::Usage {
                key,
                usage: Usage::from_figures(&e.figures, page_size()),
            })
        }
        KIND_FINAL_CPU => {
            let e: FinalCpuEvent = read(bytes, h.kind)?;
            Ok(Event::FinalCpu {
                key,
                cpu: CpuTimes {
                    utime: e.utime_ns,
                    stime: e.stime_ns,
                    rtime: e.runtime_ns,
                    prev: (e.prev_utime_ns, e.prev_stime_ns),
                },
                switches: Switches {
                    voluntary: e.nvcsw,
                    involuntary: e.nivcsw,
                },
            })
        }
        KIND_OOM => {
            let e: OomEvent = read(bytes, h.kind)?;
            // The probe gives memory in pages.
            let page = page_size();
            Ok(Event::Oom {
                pid: h.tgid,
                time_ns: h.time_ns,
                anon_rss_bytes: e.anon_rss.saturating_mul(page),
                file_rss_bytes: e.file_rss.saturating_mul(page),
                shmem_rss_bytes: e.shmem_rss.saturating_mul(page),
                limit_bytes: memory_limit(e.limit_pages, page),
                trigger: (e.trigger_tgid != 0).then(|| (e.trigger_tgid, cstr(&e.trigger_comm))),
            })
        }
        KIND_SIGNAL => signal(bytes, &h),
        KIND_OPEN => {
            let e: OpenEvent = read(bytes, h.kind)?;
            let n = (e.path_len as usize).min(e.path.len());
            Ok(Event::Open {
                key,
                path: String::from_utf8_lossy(&e.path[..n]).into_owned(),
                flags: e.flags,
            })
        }
        other => Err(DecodeError::Kind(other)),
    }
}

/// An exec record: its head, then argv and the file name, as many bytes as the head says.
fn exec(bytes: &[u8], h: &EventHeader, key: ProcKey) -> Result<Event, DecodeError> {
    let e: ExecHead = read(bytes, h.kind)?;
    let data = &bytes[size_of::<ExecHead>()..];
    let argv_end = (e.argv_len as usize).min(data.len());
    let name_end = (argv_end + e.filename_len as usize).min(data.len());
    Ok(Event::Exec(Exec {
        key,
        start_ns: h.start_ns,
        time_ns: h.time_ns,
        ppid: e.ppid,
        uid: e.uid,
        cgroup_id: e.cgroup_id,
        filename: cstr(&data[argv_end..name_end]),
        argv: split_argv(&data[..argv_end]),
        argv_truncated: e.flags & EXEC_ARGV_TRUNCATED != 0,
    }))
}

/// A memory cgroup's limit from its page count: none where unset (the kernel's "max",
/// `LONG_MAX` bytes in pages) or not known (0).
fn memory_limit(pages: u64, page: u64) -> Option<u64> {
    let unset = i64::MAX as u64 / page;
    (pages > 0 && pages < unset).then(|| pages * page)
}

fn signal(bytes: &[u8], h: &EventHeader) -> Result<Event, DecodeError> {
    let e: SignalEvent = read(bytes, h.kind)?;
    Ok(Event::Signal {
        target: h.tgid,
        time_ns: h.time_ns,
        sig: e.sig,
        code: e.code,
        sender_pid: e.sender_tgid,
        sender_comm: cstr(&e.sender_comm),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T>(v: &T) -> Vec<u8> {
        // SAFETY: reading the bytes of a plain repr(C) value.
        unsafe { std::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()).to_vec() }
    }

    /// An exec's record as the probe sends it: its head, argv, then its file name.
    fn exec_record(argv: &[u8], filename: &[u8], flags: u32) -> Vec<u8> {
        let head = ExecHead {
            header: EventHeader {
                kind: KIND_EXEC,
                tgid: 7,
                time_ns: 5,
                start_ns: 30_000_000,
            },
            ppid: 1,
            uid: 0,
            cgroup_id: 9,
            flags,
            argv_len: argv.len() as u32,
            filename_len: filename.len() as u32,
            _pad: 0,
        };
        [bytes_of(&head), argv.to_vec(), filename.to_vec()].concat()
    }

    #[test]
    fn an_oom_records_limit_is_none_where_the_cgroup_sets_none() {
        let page = page_size();
        let limit = |limit_pages| {
            let e = OomEvent {
                header: EventHeader {
                    kind: KIND_OOM,
                    tgid: 7,
                    ..EventHeader::default()
                },
                anon_rss: 3,
                limit_pages,
                ..OomEvent::default()
            };
            match decode(&bytes_of(&e)).unwrap() {
                Event::Oom { limit_bytes, .. } => limit_bytes,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(limit(16_384), Some(16_384 * page));
        assert_eq!(limit(0), None, "not known");
        // The kernel's PAGE_COUNTER_MAX: no limit was set.
        assert_eq!(limit(i64::MAX as u64 / page), None);
        // The process whose allocation set it off, where the probe read it.
        let mut e = OomEvent {
            header: EventHeader {
                kind: KIND_OOM,
                tgid: 7,
                ..EventHeader::default()
            },
            trigger_tgid: 9,
            ..OomEvent::default()
        };
        e.trigger_comm[..8].copy_from_slice(b"samtools");
        match decode(&bytes_of(&e)).unwrap() {
            Event::Oom { trigger, .. } => assert_eq!(trigger, Some((9, "samtools".into()))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn exec_record_round_trips() {
        let rec = exec_record(b"ls\0-l\0/tmp\0", b"/bin/ls", EXEC_ARGV_TRUNCATED);
        let Event::Exec(x) = decode(&rec).unwrap() else {
            panic!("not exec")
        };
        assert_eq!(
            x.key,
            ProcKey {
                pid: 7,
                start_ticks: 3
            }
        );
        assert_eq!(x.filename, "/bin/ls");
        assert_eq!(x.argv, ["ls", "-l", "/tmp"]);
        assert!(x.argv_truncated);
    }

    #[test]
    fn an_exec_record_shorter_than_its_head_says_keeps_what_it_has() {
        let mut rec = exec_record(b"ls\0", b"/bin/ls", 0);
        rec.truncate(rec.len() - 3);
        let Event::Exec(x) = decode(&rec).unwrap() else {
            panic!("not exec")
        };
        assert_eq!((x.filename.as_str(), x.argv.len()), ("/bin", 1));
        // A head alone: no argv, no name.
        let Event::Exec(x) = decode(&rec[..size_of::<ExecHead>()]).unwrap() else {
            panic!("not exec")
        };
        assert!(x.filename.is_empty() && x.argv.is_empty());
    }

    #[test]
    fn open_record_round_trips() {
        let mut e = OpenEvent {
            header: EventHeader {
                kind: KIND_OPEN,
                tgid: 9,
                time_ns: 5,
                start_ns: 40_000_000,
            },
            flags: 0o1101,
            path_len: 0,
            path: [0; pipetrace_probes_common::OPEN_PATH_LEN],
        };
        let p = b"results/A.bam";
        e.path[..p.len()].copy_from_slice(p);
        e.path_len = p.len() as u32;
        let ev = decode(&bytes_of(&e)).unwrap();
        let Event::Open { key, path, flags } = ev else {
            panic!("not open")
        };
        assert_eq!((key.pid, key.start_ticks), (9, 4));
        assert_eq!((path.as_str(), flags), ("results/A.bam", 0o1101));
    }

    #[test]
    fn short_and_unknown_records_are_errors() {
        assert_eq!(decode(&[0; 4]), Err(DecodeError::Short(4)));
        let h = EventHeader {
            kind: 99,
            ..Default::default()
        };
        assert_eq!(decode(&bytes_of(&h)), Err(DecodeError::Kind(99)));
        let h = EventHeader {
            kind: KIND_EXIT,
            ..Default::default()
        };
        assert!(matches!(
            decode(&bytes_of(&h)),
            Err(DecodeError::Size { .. })
        ));
    }

    #[test]
    fn argv_splitting_keeps_empty_arguments() {
        assert_eq!(split_argv(b"a\0\0b\0"), ["a", "", "b"]);
        assert!(split_argv(b"").is_empty());
    }
}
