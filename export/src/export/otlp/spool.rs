//! Batches kept on disk: one folder per signal (`traces/`, `metrics/`), one file per batch,
//! named so that names sort oldest first. Files are written whole (temporary name, then
//! rename), so a crash never leaves half a batch. Only the agent holding a folder's lock
//! sends its batches; others may add to it.
use std::{
    fs::File,
    io::Write,
    os::{fd::AsRawFd, unix::fs::DirBuilderExt},
    path::{Path, PathBuf},
    time::SystemTime,
};

use pipetrace_config::SignalKind;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error(
        "cannot use the spool folder {path} (export.spool.dir): {source}; create it writable \
         by pipetrace, or unset export.spool.dir"
    )]
    Dir {
        path: String,
        source: std::io::Error,
    },
}

/// The spool of the signals one connection carries: a lane (folder) for each.
pub struct Spool {
    lanes: Vec<(SignalKind, Lane)>,
}

/// A batch read back from the spool.
pub struct Spooled {
    pub kind: SignalKind,
    pub path: PathBuf,
    pub items: u64,
    pub body: Vec<u8>,
}

impl Spool {
    /// Opens `dir/<signal>` for each of `kinds`, each bounded by `max_bytes`.
    pub(crate) fn open(
        dir: &Path,
        max_bytes: u64,
        kinds: &[SignalKind],
    ) -> Result<Self, SpoolError> {
        let lanes = kinds
            .iter()
            .map(|&k| Ok((k, Lane::open(&dir.join(k.name()), max_bytes)?)))
            .collect::<Result<_, SpoolError>>()?;
        Ok(Self { lanes })
    }

    fn lane(&mut self, kind: SignalKind) -> Option<&mut Lane> {
        let found = self.lanes.iter_mut().find(|(k, _)| *k == kind);
        found.map(|(_, l)| l)
    }

    /// Keeps one batch of `kind`; false when its lane is full, absent or unwritable.
    pub(crate) fn write(&mut self, kind: SignalKind, items: u64, body: &[u8]) -> bool {
        self.lane(kind).is_some_and(|l| l.write(items, body))
    }

    /// The oldest batch of any signal whose folder this agent owns.
    #[cfg(test)]
    pub(crate) fn oldest(&mut self) -> Option<Spooled> {
        // Names start with the time written: the lane with the smallest first name holds it.
        let (_, i) = (self.lanes.iter().enumerate())
            .filter_map(|(i, (_, l))| Some((l.first_name()?, i)))
            .min()?;
        let (kind, lane) = &mut self.lanes[i];
        let (path, items, body) = lane.oldest()?;
        Some(Spooled {
            kind: *kind,
            path,
            items,
            body,
        })
    }

    /// The oldest batch of `kind`, if this agent owns its folder.
    pub(crate) fn oldest_of(&mut self, kind: SignalKind) -> Option<Spooled> {
        let (path, items, body) = self.lane(kind)?.oldest()?;
        Some(Spooled {
            kind,
            path,
            items,
            body,
        })
    }

    pub(crate) fn remove(&mut self, kind: SignalKind, path: &Path, len: u64) {
        if let Some(l) = self.lane(kind) {
            l.remove(path, len);
        }
    }
}

/// One signal's folder.
struct Lane {
    dir: PathBuf,
    max_bytes: u64,
    bytes: u64,
    /// Held while this agent owns the spool's contents; None when another one does.
    lock: Option<File>,
    /// Files written so far: with the time and the pid, each file's name is its own.
    written: u64,
}

const HEADER: usize = 8;

impl Lane {
    fn open(dir: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
        let err = |source| SpoolError::Dir {
            path: dir.display().to_string(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(err)?;
        let lock_file = File::create(dir.join(".lock")).map_err(err)?;
        // SAFETY: flock on a descriptor we own; non-blocking.
        let held =
            unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        let mut s = Self {
            dir: dir.to_path_buf(),
            max_bytes,
            bytes: 0,
            lock: held.then_some(lock_file),
            written: 0,
        };
        s.bytes = s.files().iter().map(|(_, len)| len).sum();
        Ok(s)
    }

    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The name of the oldest file, if this agent owns the folder.
    #[cfg(test)]
    fn first_name(&self) -> Option<std::ffi::OsString> {
        self.lock.as_ref()?;
        let files = self.files();
        files.first()?.0.file_name().map(Into::into)
    }

    fn files(&self) -> Vec<(PathBuf, u64)> {
        let mut v: Vec<(PathBuf, u64)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".pb"))
            .filter_map(|e| Some((e.path(), e.metadata().ok()?.len())))
            .collect();
        v.sort();
        v
    }

    /// Keeps one batch; false when it would pass the size bound or cannot be written.
    fn write(&mut self, items: u64, body: &[u8]) -> bool {
        let len = (HEADER + body.len()) as u64;
        if self.bytes + len > self.max_bytes {
            return false;
        }
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        self.written += 1;
        let name = format!("{nanos:024}-{}-{:08}", std::process::id(), self.written);
        let tmp = self.dir.join(format!("{name}.tmp"));
        // Created only if new: two lanes on one folder in one process never share a file.
        let created = File::options().write(true).create_new(true).open(&tmp);
        let written = created.and_then(|mut f| {
            f.write_all(&items.to_le_bytes())?;
            f.write_all(body)?;
            f.sync_data()
        });
        let kept =
            written.and_then(|()| std::fs::rename(&tmp, self.dir.join(format!("{name}.pb"))));
        match kept {
            Ok(()) => {
                self.bytes += len;
                true
            }
            Err(e) => {
                log::error!("cannot write to the spool {}: {e}", self.dir.display());
                let _ = std::fs::remove_file(&tmp);
                false
            }
        }
    }

    /// The oldest batch, if this agent owns the folder: its file, item count and body. A
    /// file that cannot be a batch is removed.
    fn oldest(&mut self) -> Option<(PathBuf, u64, Vec<u8>)> {
        self.lock.as_ref()?;
        for (path, len) in self.files() {
            match std::fs::read(&path) {
                Ok(data) if data.len() >= HEADER => {
                    let items = u64::from_le_bytes(data[..HEADER].try_into().expect("8 bytes"));
                    return Some((path, items, data[HEADER..].to_vec()));
                }
                _ => {
                    log::error!("removing {}: not a spooled batch", path.display());
                    self.remove(&path, len);
                }
            }
        }
        None
    }

    fn remove(&mut self, path: &Path, len: u64) {
        if std::fs::remove_file(path).is_ok() {
            self.bytes = self.bytes.saturating_sub(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_bound_and_ownership() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Lane::open(dir.path(), 40).unwrap();
        assert!(s.write(3, b"first batch"));
        assert!(s.write(5, b"second"));
        assert!(!s.write(1, b"does not fit in 40 bytes"), "bound");
        // A second agent on the same folder adds but does not send.
        let mut other = Lane::open(dir.path(), 1 << 20).unwrap();
        assert!(other.oldest().is_none());
        let (p, items, body) = s.oldest().unwrap();
        assert_eq!((items, body.as_slice()), (3, &b"first batch"[..]));
        s.remove(&p, (HEADER + body.len()) as u64);
        assert_eq!(s.oldest().unwrap().1, 5);
        // Reopened (an agent restart), the folder's size and contents are found again.
        drop(s);
        let mut again = Lane::open(dir.path(), 40).unwrap();
        assert_eq!(again.bytes(), (HEADER + 6) as u64);
        assert_eq!(again.oldest().unwrap().2, b"second");
    }

    #[test]
    fn one_spool_gives_the_oldest_batch_of_either_signal_from_its_own_folder() {
        use SignalKind::{Metrics, Traces};
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20, &[Traces, Metrics]).unwrap();
        assert!(s.write(Metrics, 1, b"m1"));
        assert!(s.write(Traces, 4, b"t1"));
        assert!(s.write(Metrics, 1, b"m2"));
        let pb = |sub: &str| {
            let d = std::fs::read_dir(dir.path().join(sub)).unwrap().flatten();
            d.filter(|e| e.path().extension().is_some_and(|x| x == "pb"))
                .count()
        };
        assert_eq!((pb("traces"), pb("metrics")), (1, 2), "a folder per signal");
        let mut order = Vec::new();
        while let Some(b) = s.oldest() {
            order.push((b.kind, b.items, String::from_utf8(b.body.clone()).unwrap()));
            s.remove(b.kind, &b.path, (HEADER + b.body.len()) as u64);
        }
        let want = [(Metrics, 1, "m1"), (Traces, 4, "t1"), (Metrics, 1, "m2")];
        let want: Vec<_> = want
            .iter()
            .map(|(k, n, b)| (*k, *n, b.to_string()))
            .collect();
        assert_eq!(order, want);
        // A spool of traces only neither takes nor sends metrics.
        let mut t = Spool::open(dir.path(), 1 << 20, &[Traces]).unwrap();
        assert!(!t.write(Metrics, 1, b"m3"));
    }
}
