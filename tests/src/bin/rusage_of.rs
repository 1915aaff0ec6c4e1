//! `rusage-of OUT.json -- CMD ARGS...`: runs CMD, reaps it with wait4 and writes the kernel's
//! rusage for it as JSON: the truth the accounting tests compare pipetrace with.
//! `RUSAGE_OF_REAP_AFTER_MS=N`: leave the ended child unreaped for N ms first, as a parent
//! busy elsewhere does (the kernel's reap-time report then comes that late).
//! `RUSAGE_OF_READ_STAT_MS=N`: read /proc/PID/stat every N ms while the child runs, as `ps`
//! and `top` do: each read fixes a user/system split the kernel's final one may not go below.
use std::{ffi::CString, os::unix::ffi::OsStrExt};

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    assert!(
        args.len() >= 3 && args[1] == "--",
        "usage: rusage-of OUT.json -- CMD..."
    );
    let out = args[0].clone();
    let argv: Vec<CString> = args[2..]
        .iter()
        .map(|a| CString::new(a.as_bytes()).expect("no NUL in arguments"))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: fork in a single-threaded program; the child only execs or exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    assert!(pid > 0, "fork failed");
    if let Some(ms) = std::env::var("RUSAGE_OF_READ_STAT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::spawn(move || read_stat_while_alive(pid, ms));
    }
    if let Some(ms) = std::env::var("RUSAGE_OF_REAP_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        // SAFETY: zeroed siginfo is valid; waitid with WNOWAIT leaves the child a zombie.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0, "waitid");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(got, pid, "wait4");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let json = serde_json::json!({
        "pid": pid,
        "status": status,
        "user_s": tv(ru.ru_utime),
        "system_s": tv(ru.ru_stime),
        "maxrss_kib": ru.ru_maxrss,
        "minflt": ru.ru_minflt,
        "majflt": ru.ru_majflt,
        "nvcsw": ru.ru_nvcsw,
        "nivcsw": ru.ru_nivcsw,
        "inblock": ru.ru_inblock,
        "oublock": ru.ru_oublock,
    });
    let out = std::path::Path::new(&out);
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).expect("create the JSON's folder");
    }
    std::fs::write(out, json.to_string()).expect("write rusage JSON");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    std::process::exit(code);
}

/// Reads the child's /proc stat until it is a zombie (or gone).
fn read_stat_while_alive(pid: libc::pid_t, every_ms: u64) {
    let path = format!("/proc/{pid}/stat");
    while let Ok(stat) = std::fs::read_to_string(&path) {
        // The state follows the command's closing parenthesis.
        let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
        if state == Some("Z") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(every_ms));
    }
}
