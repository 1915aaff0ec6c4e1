//! What pipetrace finds out itself at the end of the run: each file's size (and, when asked,
//! its SHA-256, computed here from the file, never taken from the tools) and each program's
//! package and version, as the package manager that installed it records them (dpkg, pip in
//! a virtualenv, conda). The traced programs are never run; dpkg-query answers for dpkg.
use std::{io::Read, path::Path, process::Command};

use sha2::{Digest, Sha256};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub size: u64,
    pub sha256: Option<String>,
}

/// The file at `path` (relative to `dir`) as it is now, or None when it is gone or no
/// regular file.
pub(crate) fn file(dir: &Path, path: &str, hash: bool) -> Option<FileFacts> {
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
    /// The package that installed it, as its package manager records it.
    pub package: Option<Package>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// The package's page in its registry.
    pub url: String,
}

/// The package and version of the program at `path`, from the records of the package
/// manager that installed it: dpkg, a Python virtualenv's pip, or a conda environment.
pub(crate) fn software(path: &str) -> Software {
    Software {
        path: path.to_string(),
        package: debian(path)
            .or_else(|| pip(Path::new(path)))
            .or_else(|| conda(Path::new(path))),
    }
}

fn debian(path: &str) -> Option<Package> {
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
    let name = names.iter().find_map(|n| owner(n))?;
    let version = dpkg_query(&["-W", "-f=${Version}", &name])?;
    let url = format!("https://packages.debian.org/{name}");
    Some(Package { name, version, url })
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

/// A virtualenv's program (`VENV/bin/snakemake`): the distribution of its name that pip
/// installed there (`VENV/lib/python3.X/site-packages/snakemake-9.1.0.dist-info`).
fn pip(path: &Path) -> Option<Package> {
    let program = path.file_name()?.to_str()?;
    let d = pipetrace_host::python_dist::in_bin(path.parent()?, program)?;
    let url = format!("https://pypi.org/project/{}/", d.name);
    Some(Package {
        name: d.name,
        version: d.version,
        url,
    })
}

/// A conda environment's program (`ENV/bin/samtools`): the package whose record in
/// `ENV/conda-meta` lists the file.
fn conda(path: &Path) -> Option<Package> {
    let bin = path.parent().filter(|b| b.ends_with("bin"))?;
    let prefix = bin.parent()?;
    let rel = path.strip_prefix(prefix).ok()?.to_str()?.to_string();
    for e in std::fs::read_dir(prefix.join("conda-meta")).ok()?.flatten() {
        let Some(json) = (std::fs::read_to_string(e.path()).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let lists = (json["files"].as_array().into_iter().flatten()).any(|f| f == &rel);
        let (Some(name), Some(version), true) =
            (json["name"].as_str(), json["version"].as_str(), lists)
        else {
            continue;
        };
        // `https://conda.anaconda.org/bioconda/linux-64` names the channel.
        let channel = (json["channel"].as_str().unwrap_or_default().split('/'))
            .nth(3)
            .filter(|c| !c.is_empty())
            .unwrap_or("conda-forge");
        let url = format!("https://anaconda.org/{channel}/{name}");
        let (name, version) = (name.to_string(), version.to_string());
        return Some(Package { name, version, url });
    }
    None
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
    fn a_virtualenvs_program_has_the_version_pip_recorded() {
        let venv = tempfile::tempdir().unwrap();
        let site = venv.path().join("lib/python3.12/site-packages");
        std::fs::create_dir_all(site.join("snakemake-9.1.0.dist-info")).unwrap();
        std::fs::create_dir_all(site.join("snakemake_interface_common-1.17.dist-info")).unwrap();
        std::fs::create_dir_all(venv.path().join("bin")).unwrap();
        let program = venv.path().join("bin/snakemake");
        std::fs::write(&program, "#!python\n").unwrap();
        let p = pip(&program).expect("pip's record");
        assert_eq!(
            (p.name.as_str(), p.version.as_str()),
            ("snakemake", "9.1.0")
        );
        assert_eq!(p.url, "https://pypi.org/project/snakemake/");
    }

    #[test]
    fn a_conda_environments_program_has_the_version_of_the_package_listing_it() {
        let env = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(env.path().join("conda-meta")).unwrap();
        std::fs::create_dir_all(env.path().join("bin")).unwrap();
        let record = |name: &str, version: &str, files: &[&str]| {
            serde_json::json!({"name": name, "version": version, "files": files,
                "channel": "https://conda.anaconda.org/bioconda/linux-64"})
            .to_string()
        };
        let meta = env.path().join("conda-meta");
        std::fs::write(
            meta.join("htslib-1.19-h1.json"),
            record("htslib", "1.19", &["bin/bgzip"]),
        )
        .unwrap();
        let samtools = record("samtools", "1.19.2", &["bin/samtools"]);
        std::fs::write(meta.join("samtools-1.19.2-h2.json"), samtools).unwrap();
        let p = conda(&env.path().join("bin/samtools")).expect("conda's record");
        assert_eq!(
            (p.name.as_str(), p.version.as_str()),
            ("samtools", "1.19.2")
        );
        assert_eq!(p.url, "https://anaconda.org/bioconda/samtools");
    }

    #[test]
    fn a_program_no_package_installed_has_no_version() {
        let s = software("/nonexistent/bin/tool");
        assert_eq!(s.package, None);
    }
}
