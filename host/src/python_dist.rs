//! Which version of a Python distribution an interpreter's environment holds, from the
//! `NAME-VERSION.dist-info` folder pip and Debian's packages install beside it: read, never
//! run. An engine written in Python (Snakemake, cwltool, Prefect) is versioned so.
use std::path::{Path, PathBuf};

/// A distribution's name as written in its folder, and its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dist {
    pub name: String,
    pub version: String,
}

/// PEP 503's normal form, which folder names may spell with `_` or `.`.
fn normal(name: &str) -> String {
    name.to_lowercase().replace(['_', '.'], "-")
}

/// Where an interpreter in `bin` finds its packages: its environment's own
/// `lib/pythonX.Y/site-packages` (a virtualenv, conda), and Debian's folders for the
/// system's `/usr/bin` and `/usr/local/bin`.
fn site_dirs(bin: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Some(prefix) = bin.parent().filter(|_| bin.ends_with("bin")) else {
        return out;
    };
    let pythons = std::fs::read_dir(prefix.join("lib")).into_iter().flatten();
    for p in pythons.flatten() {
        if p.file_name().to_string_lossy().starts_with("python") {
            out.push(p.path().join("site-packages"));
            out.push(p.path().join("dist-packages"));
        }
    }
    if prefix == Path::new("/usr") {
        out.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    }
    out
}

/// The distribution `name` in the environment of the interpreter or program in `bin`.
pub fn in_bin(bin: &Path, name: &str) -> Option<Dist> {
    let want = normal(name);
    for dir in site_dirs(bin) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let folder = e.file_name().to_string_lossy().into_owned();
            let Some((n, v)) = (folder.strip_suffix(".dist-info")).and_then(|d| d.rsplit_once('-'))
            else {
                continue;
            };
            if normal(n) == want {
                return Some(Dist {
                    name: n.to_string(),
                    version: v.to_string(),
                });
            }
        }
    }
    None
}

/// The version of `engine` (its distribution's name) that the process running `image_path`
/// with `argv` used: looked up beside the program (`VENV/bin/snakemake`, `/usr/bin/cwltool`)
/// and beside its interpreter (`VENV/bin/python flow.py` for Prefect).
pub fn engine_version(image_path: &str, argv: &[String], engine: &str) -> Option<String> {
    let dirs = [Some(image_path), argv.first().map(String::as_str)];
    (dirs.into_iter().flatten())
        .filter(|p| p.starts_with('/'))
        .filter_map(|p| Path::new(p).parent())
        .find_map(|bin| in_bin(bin, engine))
        .map(|d| d.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn venv(dists: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        for d in dists {
            let site = dir.path().join("lib/python3.11/site-packages");
            std::fs::create_dir_all(site.join(d)).unwrap();
        }
        dir
    }

    #[test]
    fn a_virtualenvs_engine_has_the_version_pip_installed() {
        let v = venv(&[
            "snakemake-9.27.1.dist-info",
            "snakemake_interface_common-1.17.4.dist-info",
        ]);
        let script = v.path().join("bin/snakemake");
        let argv = [v.path().join("bin/python3").display().to_string()];
        let got = engine_version(&script.display().to_string(), &argv, "snakemake");
        assert_eq!(got.as_deref(), Some("9.27.1"));
        assert_eq!(
            in_bin(&v.path().join("bin"), "snakemake-interface-common").map(|d| d.version),
            Some("1.17.4".to_string()),
            "names compare in PEP 503's form"
        );
    }

    #[test]
    fn a_flow_run_by_its_interpreter_finds_the_engine_beside_it() {
        let v = venv(&["prefect-3.8.8.dist-info"]);
        let python = v.path().join("bin/python").display().to_string();
        let got = engine_version(&python, &[python.clone(), "flow.py".into()], "prefect");
        assert_eq!(got.as_deref(), Some("3.8.8"));
        assert_eq!(engine_version(&python, &[], "snakemake"), None, "not there");
        assert_eq!(
            engine_version("snakemake", &[], "snakemake"),
            None,
            "no path"
        );
    }
}
