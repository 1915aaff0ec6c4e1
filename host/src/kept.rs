//! Copies of an engine's short-lived records, taken as they are written. Snakemake writes
//! each `script:` job's script into `.snakemake/scripts` just before the job starts and
//! deletes it when the job ends: a job shorter than the agent's read of its start (the
//! ring buffer's drain tick, more on a loaded machine) left nothing to read. One thread
//! watches the directories asked for (inotify) and reads each file as its writer closes
//! it. What it keeps is bounded, the oldest going first, and never leaves the agent.
use std::{
    collections::{HashMap, VecDeque},
    ffi::{OsStr, OsString},
    io::Read,
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
};

use inotify::{Inotify, WatchDescriptor, WatchMask, Watches};

/// The most read of one file: a script's preamble (its job's inputs and outputs) is at its
/// start.
pub const FILE_BYTES: usize = 1 << 20;
/// The most kept in all.
const TOTAL_BYTES: usize = 4 << 20;
/// The most directories watched: an agent serving runs for months lets the oldest go.
const DIRS: usize = 64;

/// What the watcher keeps and where it looks.
#[derive(Default)]
struct State {
    /// By file name: the engine names each file uniquely (`tmpXXXXXXXX.NAME`), and a
    /// command may spell its directory relative or absolute.
    files: VecDeque<(OsString, Vec<u8>)>,
    bytes: usize,
    /// Directories watched for files, and parents watched for them to appear.
    dirs: HashMap<WatchDescriptor, PathBuf>,
    awaited: HashMap<WatchDescriptor, Vec<PathBuf>>,
    asked: Vec<PathBuf>,
}

impl State {
    /// Stops watching `dir` and its parent for it.
    fn forget(&mut self, dir: &Path, watches: &mut Watches) {
        let gone: Vec<WatchDescriptor> = (self.dirs.iter())
            .filter(|(_, d)| *d == dir)
            .map(|(wd, _)| wd.clone())
            .collect();
        for wd in gone {
            self.dirs.remove(&wd);
            let _ = watches.remove(wd);
        }
        for awaited in self.awaited.values_mut() {
            awaited.retain(|d| d != dir);
        }
        let empty: Vec<WatchDescriptor> = (self.awaited.iter())
            .filter(|(_, a)| a.is_empty())
            .map(|(wd, _)| wd.clone())
            .collect();
        for wd in empty {
            self.awaited.remove(&wd);
            let _ = watches.remove(wd);
        }
    }

    fn keep(&mut self, name: OsString, bytes: Vec<u8>) {
        self.bytes += bytes.len();
        self.files.retain(|(n, _)| *n != name);
        self.files.push_back((name, bytes));
        while self.bytes > TOTAL_BYTES {
            let Some((_, old)) = self.files.pop_front() else {
                break;
            };
            self.bytes -= old.len();
        }
    }
}

/// The process's one watcher: started by the first directory asked for.
pub struct Kept {
    watches: Watches,
    state: Mutex<State>,
}

static KEPT: OnceLock<Option<Kept>> = OnceLock::new();

/// The watcher, None where inotify is not available (then nothing is kept).
fn watcher() -> Option<&'static Kept> {
    KEPT.get_or_init(|| {
        let inotify = Inotify::init()
            .map_err(|e| log::warn!("cannot watch engines' short-lived records: {e}"))
            .ok()?;
        let kept = Kept {
            watches: inotify.watches(),
            state: Mutex::new(State::default()),
        };
        std::thread::Builder::new()
            .name("pipetrace-kept".into())
            .spawn(move || serve(inotify))
            .map_err(|e| log::warn!("cannot start the records' watcher: {e}"))
            .ok()?;
        Some(kept)
    })
    .as_ref()
}

/// Keeps, from now on, a copy of each file written into `dir`; if `dir` does not exist yet,
/// from when it appears in its parent. Asking again is free.
pub(crate) fn keep_written(dir: &Path) {
    let Some(k) = watcher() else { return };
    let mut s = k.state.lock().unwrap_or_else(|e| e.into_inner());
    if s.asked.iter().any(|d| d == dir) {
        return;
    }
    let mut watches = k.watches.clone();
    if s.asked.len() >= DIRS {
        let oldest = s.asked.remove(0);
        s.forget(&oldest, &mut watches);
    }
    s.asked.push(dir.to_path_buf());
    // Called as a job is first seen: what was written before it is not read here (that job's
    // own script is read directly).
    if let Ok(wd) = watches.add(dir, WatchMask::CLOSE_WRITE | WatchMask::MOVED_TO) {
        s.dirs.insert(wd, dir.to_path_buf());
        return;
    }
    let Some(parent) = dir.parent() else { return };
    if let Ok(wd) = watches.add(parent, WatchMask::CREATE | WatchMask::ONLYDIR) {
        s.awaited.entry(wd).or_default().push(dir.to_path_buf());
    }
    drop(s);
    // Made between the two watches: no event will tell.
    if let Some(name) = dir.file_name().filter(|_| dir.is_dir()) {
        appeared(k, &[dir.to_path_buf()], name);
    }
}

/// The copy kept of the file `name` (its directory left out).
pub(crate) fn kept(name: &OsStr) -> Option<Vec<u8>> {
    let k = KEPT.get()?.as_ref()?;
    let s = k.state.lock().unwrap_or_else(|e| e.into_inner());
    (s.files.iter().rev())
        .find(|(n, _)| n == name)
        .map(|(_, b)| b.clone())
}

/// Reads each event as it comes, for the life of the process.
fn serve(mut inotify: Inotify) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let events = match inotify.read_events_blocking(&mut buf) {
            Ok(events) => events,
            // A signal handler installed without SA_RESTART must not end the watch.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return log::warn!("engines' short-lived records no longer kept: {e}"),
        };
        for e in events {
            let Some(name) = e.name else { continue };
            let Some(k) = KEPT.get().and_then(Option::as_ref) else {
                return;
            };
            let s = k.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(dir) = s.dirs.get(&e.wd).cloned() {
                drop(s);
                read_one(&dir.join(name));
            } else if let Some(dirs) = s.awaited.get(&e.wd).cloned() {
                drop(s);
                appeared(k, &dirs, name);
            }
        }
    }
}

/// A directory awaited in a watched parent appeared: watched from now, and what was
/// written into it before the watch read.
fn appeared(k: &Kept, awaited: &[PathBuf], name: &OsStr) {
    let Some(dir) = awaited.iter().find(|d| d.file_name() == Some(name)) else {
        return;
    };
    let mut watches = k.watches.clone();
    if let Ok(wd) = watches.add(dir, WatchMask::CLOSE_WRITE | WatchMask::MOVED_TO) {
        let mut s = k.state.lock().unwrap_or_else(|e| e.into_inner());
        s.dirs.insert(wd, dir.clone());
    }
    read_present(dir);
}

fn read_present(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        read_one(&entry.path());
    }
}

/// Reads a regular file only: not through a symbolic link a user put there, and never a
/// FIFO, whose open would wait for a writer.
fn read_one(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = (std::fs::OpenOptions::new().read(true))
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let (Some(name), Ok(f)) = (path.file_name(), opened) else {
        return;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return;
    }
    let mut bytes = Vec::new();
    if f.take(FILE_BYTES as u64).read_to_end(&mut bytes).is_err() {
        return;
    }
    let Some(k) = KEPT.get().and_then(Option::as_ref) else {
        return;
    };
    let mut s = k.state.lock().unwrap_or_else(|e| e.into_inner());
    s.keep(name.to_os_string(), bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for(name: &str) -> Option<Vec<u8>> {
        for _ in 0..200 {
            if let Some(b) = kept(OsStr::new(name)) {
                return Some(b);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        None
    }

    #[test]
    fn a_file_written_then_deleted_is_kept_also_in_a_directory_made_later() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("scripts");
        keep_written(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("tmpaaaa1111.stats.py"), b"outputs: a.txt").unwrap();
        let got = wait_for("tmpaaaa1111.stats.py");
        assert_eq!(got.as_deref(), Some(&b"outputs: a.txt"[..]));
        std::fs::remove_file(dir.join("tmpaaaa1111.stats.py")).unwrap();
        std::fs::write(dir.join("tmpbbbb2222.stats.py"), b"outputs: b.txt").unwrap();
        let got = wait_for("tmpbbbb2222.stats.py");
        assert_eq!(got.as_deref(), Some(&b"outputs: b.txt"[..]));
        assert_eq!(
            kept(OsStr::new("tmpaaaa1111.stats.py")).as_deref(),
            Some(&b"outputs: a.txt"[..]),
            "a deleted file's copy stays"
        );
        assert_eq!(kept(OsStr::new("never-written")), None);
    }

    #[test]
    fn links_and_fifos_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"not an engine's").unwrap();
        let link = dir.path().join("tmplink0000.x.py");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let fifo = dir.path().join("tmpfifo0000.x.py");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        keep_written(dir.path());
        read_one(&link);
        read_one(&fifo);
        assert_eq!(kept(OsStr::new("tmplink0000.x.py")), None);
        assert_eq!(kept(OsStr::new("tmpfifo0000.x.py")), None);
    }

    #[test]
    fn the_oldest_copies_go_first_past_the_bound() {
        let mut s = State::default();
        let big = vec![0u8; TOTAL_BYTES / 3];
        for i in 0..4 {
            s.keep(OsString::from(format!("f{i}")), big.clone());
        }
        let names: Vec<_> = s.files.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, ["f1", "f2", "f3"]);
        assert!(s.bytes <= TOTAL_BYTES);
    }
}
