//! Batches kept on disk: one file per batch, named so that names sort oldest first. Files are
//! written whole (temporary name, then rename), so a crash never leaves half a batch. Only
//! the agent holding the folder's lock sends them; others may add to it.
use std::{
    fs::File,
    io::Write,
    os::{fd::AsRawFd, unix::fs::DirBuilderExt},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
    time::SystemTime,
};

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

pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    bytes: u64,
    /// Held while this agent owns the spool's contents; None when another one does.
    lock: Option<File>,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

const HEADER: usize = 8;

impl Spool {
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
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
        };
        s.bytes = s.files().iter().map(|(_, len)| len).sum();
        Ok(s)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
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
    pub fn write(&mut self, items: u64, body: &[u8]) -> bool {
        let len = (HEADER + body.len()) as u64;
        if self.bytes + len > self.max_bytes {
            return false;
        }
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{nanos:024}-{}-{seq:08}", std::process::id());
        let tmp = self.dir.join(format!("{name}.tmp"));
        let written = File::create(&tmp).and_then(|mut f| {
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

    /// The oldest batch, if this agent owns the spool: its file, item count and body. A
    /// file that cannot be a batch is removed and reported as `Err(items lost: 0)`.
    pub fn oldest(&mut self) -> Option<(PathBuf, u64, Vec<u8>)> {
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

    pub fn remove(&mut self, path: &Path, len: u64) {
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
        let mut s = Spool::open(dir.path(), 40).unwrap();
        assert!(s.write(3, b"first batch"));
        assert!(s.write(5, b"second"));
        assert!(!s.write(1, b"does not fit in 40 bytes"), "bound");
        // A second agent on the same folder adds but does not send.
        let mut other = Spool::open(dir.path(), 1 << 20).unwrap();
        assert!(other.oldest().is_none());
        let (p, items, body) = s.oldest().unwrap();
        assert_eq!((items, body.as_slice()), (3, &b"first batch"[..]));
        s.remove(&p, (HEADER + body.len()) as u64);
        assert_eq!(s.oldest().unwrap().1, 5);
        // Reopened (an agent restart), the folder's size and contents are found again.
        drop(s);
        let mut again = Spool::open(dir.path(), 40).unwrap();
        assert_eq!(again.bytes(), (HEADER + 6) as u64);
        assert_eq!(again.oldest().unwrap().2, b"second");
    }
}
