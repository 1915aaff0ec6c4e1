//! Usage of a process still running, for live metrics between its start and its exit (when
//! the kernel's exact figures replace these). Read from /proc: never `environ`, never contents.
use std::fs;

use crate::host::NS_PER_TICK;

/// Counters so far and memory now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    pub rss_bytes: u64,
    pub hwm_bytes: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    /// Bytes through read and write calls (pipes and sockets too): progress a tool makes
    /// without touching storage.
    pub io_chars: u64,
    pub run_delay_ns: u64,
}

/// None when the process is gone.
pub fn read(pid: u32) -> Option<Live> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut live = parse_stat(&stat)?;
    if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |k| k * 1024)
        };
        live.rss_bytes = kib("VmRSS:");
        live.hwm_bytes = kib("VmHWM:");
    }
    // Per thread: /proc/PID/io also counts every child the process has reaped, whose own
    // figures are counted where they belong.
    if let Ok(threads) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in threads.filter_map(|e| e.ok()) {
            let Ok(io) = fs::read_to_string(t.path().join("io")) else {
                continue;
            };
            let field = |key: &str| {
                io.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            live.disk_read_bytes += field("read_bytes:");
            live.disk_write_bytes += field("write_bytes:");
            live.io_chars += field("rchar:") + field("wchar:");
        }
    }
    if let Ok(s) = fs::read_to_string(format!("/proc/{pid}/schedstat")) {
        live.run_delay_ns = s
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    Some(live)
}

/// utime and stime from /proc/PID/stat (fields 14 and 15). Block-I/O waits come from the
/// probes, not from its delayacct_blkio_ticks (see probes/ebpf/src/iowait.rs).
fn parse_stat(stat: &str) -> Option<Live> {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Some(Live {
        cpu_user_ns: ticks(11) * NS_PER_TICK,
        cpu_system_ns: ticks(12) * NS_PER_TICK,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_an_awkward_name() {
        let mut fields = vec!["S"; 50];
        fields[11] = "250";
        fields[12] = "10";
        let line = format!("42 (a (b) c) {}", fields.join(" "));
        let l = parse_stat(&line).unwrap();
        assert_eq!(l.cpu_user_ns, 250 * NS_PER_TICK);
        assert_eq!(l.cpu_system_ns, 10 * NS_PER_TICK);
    }

    #[test]
    fn this_process_reads() {
        let l = read(std::process::id()).expect("own /proc entry");
        assert!(l.rss_bytes > 0 && l.hwm_bytes >= l.rss_bytes, "{l:?}");
    }
}
