//! The core's `Store` as files in a directory (the state directory's `history/`).
use std::{
    io,
    path::{Path, PathBuf},
};

use pipetrace_core::port::Store;

/// Writes `path` whole, readable by its owner only: written aside (`.NAME.tmp` in the same
/// folder), then renamed over, so that a reader never sees half a file.
pub fn replace_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    io::Write::write_all(&mut f, bytes)?;
    std::fs::rename(tmp, path)
}

pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// `name` under `state_dir`, where one is set.
    pub fn under(state_dir: Option<&Path>, name: &str) -> Option<Box<dyn Store>> {
        Some(Box::new(Self::new(&state_dir?.join(name))))
    }
}

impl Store for DirStore {
    fn load(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.join(name)).ok()
    }

    fn save(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        replace_whole(&self.dir.join(name), bytes)
    }

    fn names(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let names = dir
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned());
        let mut names: Vec<_> = names.filter(|n| !n.starts_with('.')).collect();
        names.sort();
        names
    }

    fn place(&self) -> String {
        self.dir.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_files_written_whole_and_listed_without_those_in_progress() {
        let d = tempfile::tempdir().unwrap();
        let store = DirStore::new(&d.path().join("history"));
        assert!(store.names().is_empty() && store.load("a.json").is_none());
        store.save("a.json", b"{}").unwrap();
        store.save("a.json", b"[1]").unwrap();
        std::fs::write(d.path().join("history/.b.json.tmp"), b"half").unwrap();
        assert_eq!(store.names(), ["a.json"]);
        assert_eq!(store.load("a.json").as_deref(), Some(&b"[1]"[..]));
        assert_eq!(
            std::fs::read(d.path().join("history/a.json")).unwrap(),
            b"[1]"
        );
        assert!(DirStore::under(None, "history").is_none());
    }
}
