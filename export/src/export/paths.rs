//! What a run writes beside its trace file, named one way whatever the trace file is
//! called (the stem and extension of `X.otlp.jsonl`, or `X.jsonl`, `X.json`, give
//! `X.metrics.otlp.jsonl`, `X.metrics.jsonl` ..., and `X.report.html`), and every file a
//! command is given (`run -o`, `report --html`, `compare --html`, `suggest -o`) written
//! one way: its missing folders made, or the path refused saying why.
use std::path::{Path, PathBuf};

/// A file the user named could not be written there: which, why, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(
        "cannot create the folder {dir} for {path} ({cause}): give a path in a folder you \
         can write, or create the folder first"
    )]
    Folder {
        dir: String,
        path: String,
        cause: std::io::Error,
    },
    #[error("cannot write {path} ({cause}): give a path in a folder you can write")]
    File { path: String, cause: std::io::Error },
}

/// Makes the folder `path` is to be written in (and those above it) where missing: every
/// command that writes a file the user named does this, and refuses only a folder that
/// cannot be made.
pub(crate) fn make_folder_of(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir),
        None => Ok(()),
    }
}

/// `contents` written to `path`, its folder made first ([`make_folder_of`]).
pub fn write_creating(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), WriteError> {
    make_folder_of(path).map_err(|cause| WriteError::Folder {
        dir: path.parent().unwrap_or(path).display().to_string(),
        path: path.display().to_string(),
        cause,
    })?;
    std::fs::write(path, contents).map_err(|cause| WriteError::File {
        path: path.display().to_string(),
        cause,
    })
}

/// Extensions a trace file is known by, longest first.
const EXTENSIONS: &[&str] = &[".otlp.jsonl", ".jsonl", ".json"];

/// The trace file's path without its extension, and the extension (`.otlp.jsonl` where it
/// has none of those).
fn split(trace: &Path) -> (String, &'static str) {
    let s = trace.to_string_lossy();
    for ext in EXTENSIONS {
        if let Some(stem) = s.strip_suffix(ext).filter(|st| !st.ends_with('/')) {
            return (stem.to_string(), ext);
        }
    }
    (s.into_owned(), EXTENSIONS[0])
}

/// The metrics file beside a trace file.
pub fn metrics_beside(trace: &Path) -> PathBuf {
    let (stem, ext) = split(trace);
    PathBuf::from(format!("{stem}.metrics{ext}"))
}

/// The HTML report beside a trace file.
pub fn report_beside(trace: &Path) -> PathBuf {
    let (stem, _) = split(trace);
    PathBuf::from(format!("{stem}.report.html"))
}

/// Where `pipetrace run` keeps what it could not deliver, beside a trace file.
pub fn unsent_beside(trace: &Path) -> PathBuf {
    let (stem, _) = split(trace);
    PathBuf::from(format!("{stem}.unsent.pb"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_file_name_gives_its_companions_one_way() {
        for (trace, metrics, report) in [
            (
                "d/x.otlp.jsonl",
                "d/x.metrics.otlp.jsonl",
                "d/x.report.html",
            ),
            (
                "mytrace.jsonl",
                "mytrace.metrics.jsonl",
                "mytrace.report.html",
            ),
            ("t.json", "t.metrics.json", "t.report.html"),
            ("trace", "trace.metrics.otlp.jsonl", "trace.report.html"),
            (
                "d/.jsonl",
                "d/.jsonl.metrics.otlp.jsonl",
                "d/.jsonl.report.html",
            ),
        ] {
            assert_eq!(
                metrics_beside(Path::new(trace)),
                Path::new(metrics),
                "{trace}"
            );
            assert_eq!(
                report_beside(Path::new(trace)),
                Path::new(report),
                "{trace}"
            );
        }
        assert_eq!(
            unsent_beside(Path::new("d/x.otlp.jsonl")),
            Path::new("d/x.unsent.pb")
        );
    }

    #[test]
    fn a_file_is_written_into_a_folder_made_for_it_or_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/report.html");
        write_creating(&deep, "page").unwrap();
        assert_eq!(std::fs::read_to_string(&deep).unwrap(), "page");
        // A folder that cannot be made: under a file (root too is refused that).
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        let e = write_creating(&file.join("sub/x.html"), "page").unwrap_err();
        let said = e.to_string();
        assert!(matches!(e, WriteError::Folder { .. }), "{said}");
        assert!(said.contains("plain/sub/x.html"), "names the path: {said}");
        assert!(
            said.contains("give a path in a folder you can write"),
            "{said}"
        );
        // A name that is a folder: the file cannot be written.
        let e = write_creating(dir.path(), "page").unwrap_err();
        assert!(matches!(e, WriteError::File { .. }), "{e}");
    }
}
