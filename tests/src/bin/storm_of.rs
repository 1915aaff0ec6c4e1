//! `storm-of N OUT.jsonl [CMD ARGS...]`: starts N processes of CMD (default `/bin/true`) one
//! after another, reaps each with wait4 and writes one JSON line per process with its pid
//! and the kernel's rusage for it: the truth a storm's spans are compared with, one by one.
use std::{ffi::CString, io::Write};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert!(args.len() >= 2, "usage: storm-of N OUT.jsonl [CMD ARGS...]");
    let n: usize = args[0].parse().expect("N: a number of processes");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[1]).expect("create OUT"));
    let cmd: Vec<String> = match args.len() {
        2 => vec!["/bin/true".into()],
        _ => args[2..].to_vec(),
    };
    let argv: Vec<CString> = cmd
        .iter()
        .map(|a| CString::new(a.as_bytes()).expect("no NUL in arguments"))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    for _ in 0..n {
        // SAFETY: fork in a single-threaded program; the child only execs or exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::execv(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let got = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        assert_eq!(got, pid, "wait4");
        let line = serde_json::json!({
            "pid": pid,
            "status": status,
            "user_us": us(ru.ru_utime),
            "system_us": us(ru.ru_stime),
            "maxrss_kib": ru.ru_maxrss,
            "minflt": ru.ru_minflt,
            "nvcsw": ru.ru_nvcsw,
            "nivcsw": ru.ru_nivcsw,
        });
        writeln!(out, "{line}").expect("write OUT");
    }
    out.flush().expect("flush OUT");
}
