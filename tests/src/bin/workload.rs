//! Workloads of known size, for the accounting accuracy tests. Each does one thing and
//! starts no other process:
//!   alloc MIB          touch MIB MiB of fresh memory page by page
//!   burn MS            use MS milliseconds of CPU
//!   threads N MS       N threads, each using MS milliseconds of CPU
//!   write FILE BYTES   write BYTES to FILE and fsync it
//!   short              use 2 ms of CPU and end
//!   send ADDR BYTES    send BYTES over TCP to ADDR, wait for the peer to close
//!   sleep MS           sleep MS milliseconds
//!   pulse MS           for MS ms, 100 ms of CPU then 100 ms of sleep, again and again
//!   segv               write through a null pointer
//!   direct FILE MS     write a 32 MiB FILE, then overwrite 4 KiB blocks of it with
//!                      O_DIRECT for MS ms
use std::{
    io::{Read, Write},
    time::Duration,
};

fn thread_cpu() -> Duration {
    // SAFETY: a zeroed timespec is valid; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until this thread has used `d` of CPU (not wall) time: the same work however busy
/// the machine is.
fn spin(d: Duration) -> u64 {
    let t = thread_cpu();
    let mut x = 0u64;
    while thread_cpu() - t < d {
        for i in 0..1000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
    }
    x
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("argument {i} missing or invalid: {args:?}"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("alloc") => alloc(arg::<usize>(&args, 1) << 20),
        Some("burn") => {
            std::hint::black_box(spin(Duration::from_millis(arg(&args, 1))));
        }
        Some("threads") => {
            let (n, ms): (usize, u64) = (arg(&args, 1), arg(&args, 2));
            let hs: Vec<_> = (0..n)
                .map(|_| std::thread::spawn(move || spin(Duration::from_millis(ms))))
                .collect();
            for h in hs {
                std::hint::black_box(h.join().unwrap());
            }
        }
        Some("write") => {
            let mut f = std::fs::File::create(&args[1]).expect("create");
            write_n(&mut f, arg(&args, 2), 7);
            f.sync_all().expect("fsync");
        }
        Some("short") => {
            std::hint::black_box(spin(Duration::from_millis(2)));
        }
        Some("send") => send(&args[1], arg(&args, 2)),
        Some("sleep") => std::thread::sleep(Duration::from_millis(arg(&args, 1))),
        Some("pulse") => {
            let end = std::time::Instant::now() + Duration::from_millis(arg(&args, 1));
            while std::time::Instant::now() < end {
                std::hint::black_box(spin(Duration::from_millis(100)));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Some("direct") => direct(&args[1], Duration::from_millis(arg(&args, 2))),
        Some("segv") => {
            // SAFETY: none: the point is the fault.
            unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u8>(), 1) };
        }
        other => {
            eprintln!("unknown workload {other:?}");
            std::process::exit(2);
        }
    }
}

/// Touches `len` bytes of fresh anonymous pages: each becomes resident when first touched.
fn alloc(len: usize) {
    // SAFETY: a private anonymous mapping; written only within `len`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(p != libc::MAP_FAILED, "mmap");
    for off in (0..len).step_by(4096) {
        unsafe { std::ptr::write_volatile((p as *mut u8).add(off), 1) };
    }
}

/// Writes `n` bytes of `byte` in 64 KiB chunks.
fn write_n(w: &mut impl Write, n: usize, byte: u8) {
    let chunk = vec![byte; 1 << 16];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        w.write_all(&chunk[..k]).expect("write");
        left -= k;
    }
}

/// Sends `n` bytes to `addr`, then waits for the peer's 4-byte answer (how many it got).
fn send(addr: &str, n: usize) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write_n(&mut s, n, 1);
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut ack = [0u8; 4];
    s.read_exact(&mut ack).expect("ack");
}

/// An O_DIRECT, O_DSYNC writer for `time`: overwrites 256 KiB blocks of a 32 MiB file
/// already on disk (no allocation, no journal), each write waiting for the device to have
/// it. 4 KiB writes without O_DSYNC spent half their time in the kernel's submission on a
/// fast virtual disk, no single limit under load; these wait about 70% of the time.
fn direct(path: &str, time: Duration) {
    use std::os::{fd::AsRawFd, unix::fs::OpenOptionsExt};
    const BLOCK: i64 = 256 << 10;
    let size: i64 = 32 << 20;
    // A block device is storage already; a file is filled first.
    let device = std::fs::metadata(path)
        .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()));
    if !device {
        let mut f = std::fs::File::create(path).expect("create");
        f.write_all(&vec![3u8; size as usize]).expect("fill");
        f.sync_all().expect("fsync");
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(path)
        .expect("open O_DIRECT");
    let layout = std::alloc::Layout::from_size_align(BLOCK as usize, 4096).unwrap();
    // SAFETY: a 4 KiB block aligned as O_DIRECT requires, freed below.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    let t = std::time::Instant::now();
    let mut block: i64 = 1;
    while t.elapsed() < time {
        // A stride that visits every block before any repeats.
        block = (block * 7919) % (size / BLOCK);
        let n = unsafe {
            libc::pwrite(
                f.as_raw_fd(),
                buf as *const _,
                BLOCK as usize,
                block * BLOCK,
            )
        };
        assert_eq!(n, BLOCK as isize, "O_DIRECT write");
    }
    unsafe { std::alloc::dealloc(buf, layout) };
}
