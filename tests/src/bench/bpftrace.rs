//! bpftrace printing every exec and exit: the common way to watch processes with eBPF, to
//! put pipetrace's cost beside. Not installed by scripts/setup.sh: the bench says how to
//! install it and leaves its figures out without it.
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use super::memory::{self, Mem};

pub const INSTALL: &str = "apt-get install -y bpftrace";

const SCRIPT: &str = r#"
tracepoint:sched:sched_process_exec { printf("%llu %d exec %s\n", nsecs, pid, str(args->filename)); }
tracepoint:sched:sched_process_exit { printf("%llu %d exit %s %d\n", nsecs, pid, comm, args->prio); }
"#;

pub fn version() -> Option<String> {
    let out = Command::new("bpftrace").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A running bpftrace, its output in a file.
pub struct Bpftrace {
    child: Child,
    out: PathBuf,
    sampler: Option<memory::Sampler>,
}

impl Bpftrace {
    /// Starts it and returns once its probes print (it compiles its script first, for
    /// seconds); None if it never does.
    pub fn start(dir: &Path) -> Option<Self> {
        let out = dir.join("bpftrace.out");
        let child = Command::new("bpftrace")
            .args(["-o", out.to_str()?, "-e", SCRIPT])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let marker = dir.join("bpftrace-ready");
        let _ = std::os::unix::fs::symlink("/bin/true", &marker);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut me = Self {
            child,
            out,
            sampler: None,
        };
        while Instant::now() < deadline {
            let _ = Command::new(&marker).status();
            let seen = std::fs::read_to_string(&me.out).unwrap_or_default();
            if seen.contains("bpftrace-ready") {
                me.sampler = Some(memory::Sampler::start(me.child.id()));
                return Some(me);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = me.child.kill();
        None
    }

    /// Stops it (as Ctrl-C does): its memory at its highest, and the lines it printed.
    pub fn stop(mut self) -> (Mem, usize) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let mem = self.sampler.take().map(|s| s.stop().0).unwrap_or_default();
        let lines = std::fs::read(&self.out)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0);
        let _ = std::fs::remove_file(&self.out);
        (mem, lines)
    }
}
