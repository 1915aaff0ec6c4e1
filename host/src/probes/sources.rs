//! The digest of the probes' sources, which probes/prebuilt records: shared by host/build.rs
//! (is the committed object built from these sources?) and the unit test that fails when
//! it is not (host/tests/prebuilt.rs).
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// SHA-256, in hex, of every file of the probes' crates (by path, then content), in the
/// order of their paths: stable across compilers, unlike std's hasher.
pub(crate) fn of_sources(root: &Path) -> String {
    let mut h = Sha256::new();
    for f in &files(root) {
        let rel = f.strip_prefix(root).unwrap_or(f);
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        let body = std::fs::read(f).unwrap_or_default();
        h.update((body.len() as u64).to_le_bytes());
        h.update(&body);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file of the probes' crates (their build output aside), in the order of their paths.
pub(crate) fn files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["probes/ebpf", "probes/common"] {
        walk(&root.join(dir), &mut files);
    }
    files.sort();
    files
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                walk(&path, files);
            }
        } else {
            files.push(path);
        }
    }
}
