//! The bottom of the crate: facts that need nothing else of it. The kernel's clock unit and
//! page size (events, the /proc scan and the host all convert with them) and how a command
//! line splits into argv and which program it names. `event`, `host`, `containers` and
//! `attribution::naming` all stand on these; this module imports nothing of the crate.

/// The kernel reports process start in nanoseconds; /proc in USER_HZ ticks. Identities use
/// ticks so that a process seen first by the /proc scan and later by the probes is one process.
/// (The C library answers from the process's auxiliary vector: no system call, no cache.)
pub fn ns_per_tick() -> u64 {
    1_000_000_000 / sysconf(libc::_SC_CLK_TCK).max(1)
}

/// The kernel's page size (memory counters come in pages).
pub fn page_size() -> u64 {
    sysconf(libc::_SC_PAGESIZE)
}

/// A constant of the C library's (`sysconf`), 0 where it has none.
fn sysconf(name: libc::c_int) -> u64 {
    // SAFETY: sysconf reads a constant and touches no memory of ours.
    u64::try_from(unsafe { libc::sysconf(name) }).unwrap_or(0)
}

/// A NUL-separated command line (the probes' argv, /proc/PID/cmdline) as its arguments.
pub fn split_argv(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// File name of a path (`/usr/bin/samtools` -> `samtools`).
pub fn executable_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A program run through a descriptor or its own image (`/proc/self/exe` as BusyBox runs its
/// applets, `/proc/self/fd/N` as runc and fexecve do) is named by its argv[0] instead.
pub(crate) fn is_anonymous_path(path: &str) -> bool {
    path == "/proc/self/exe"
        || path.starts_with("/proc/self/fd/")
        || path.starts_with("/dev/fd/")
        || (path.starts_with("/proc/") && path.ends_with("/exe"))
}

/// The executable's name for naming: argv[0]'s where the path names no program.
pub fn program_name<'a>(path: &'a str, argv: &'a [String]) -> &'a str {
    match argv.first() {
        Some(a0) if is_anonymous_path(path) && !a0.is_empty() => executable_name(a0),
        _ => executable_name(path),
    }
}
