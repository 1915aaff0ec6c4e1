//! What pipetrace finds out itself at the end of the run: each file's size (and, when asked,
//! its SHA-256, computed here from the file, never taken from the tools) and each program's
//! package and version, as the package manager records them. No program is ever run.
use std::{io::Read, path::Path, process::Command};

use sha2::{Digest, Sha256};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub size: u64,
    pub sha256: Option<String>,
}

/// The file at `path` (relative to `dir`) as it is now, or None when it is gone or no
/// regular file.
pub fn file(dir: &Path, path: &str, hash: bool) -> Option<FileFacts> {
    let full = dir.join(path);
    let meta = std::fs::metadata(&full).ok().filter(|m| m.is_file())?;
    Some(FileFacts {
        size: meta.len(),
        sha256: hash.then(|| sha256(&full)).flatten(),
    })
}

fn sha256(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return None,
        }
    }
    Some(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Software {
    pub path: String,
    /// The Debian package that installed it, and its version.
    pub package: Option<(String, String)>,
}

/// The package and version of the program at `path`, as dpkg knows them (none where dpkg
/// is absent or did not install it).
pub fn software(path: &str) -> Software {
    // Merged /usr: dpkg knows /bin/bash, the kernel saw /usr/bin/bash (or the reverse).
    let mut names = vec![path.to_string()];
    if let Some(rest) = path.strip_prefix("/usr") {
        names.push(rest.to_string());
    } else if path.starts_with("/bin/") || path.starts_with("/sbin/") {
        names.push(format!("/usr{path}"));
    }
    if let Ok(real) = std::fs::canonicalize(path) {
        names.push(real.to_string_lossy().into_owned());
    }
    let package = names.iter().find_map(|n| owner(n)).and_then(|pkg| {
        let v = dpkg_query(&["-W", "-f=${Version}", &pkg])?;
        Some((pkg, v))
    });
    Software {
        path: path.to_string(),
        package,
    }
}

/// `dpkg-query -S PATH` says `package[:arch][, other]: PATH`.
fn owner(path: &str) -> Option<String> {
    let out = dpkg_query(&["-S", path])?;
    let line = out.lines().find(|l| l.ends_with(&format!(": {path}")))?;
    let pkgs = line.rsplit_once(": ")?.0;
    let first = pkgs.split(", ").next()?;
    Some(first.split(':').next()?.to_string())
}

fn dpkg_query(args: &[&str]) -> Option<String> {
    let out = Command::new("dpkg-query").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_measured_and_hashed_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "abc").unwrap();
        let plain = file(dir.path(), "a.txt", false).unwrap();
        assert_eq!((plain.size, plain.sha256), (3, None));
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        let hashed = file(dir.path(), "a.txt", true).unwrap();
        assert_eq!(
            hashed.sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(file(dir.path(), "gone.txt", true), None);
        assert_eq!(file(dir.path(), ".", false), None, "a directory is no file");
    }

    #[test]
    fn a_program_no_package_installed_has_no_version() {
        let s = software("/nonexistent/bin/tool");
        assert_eq!(s.package, None);
    }
}
