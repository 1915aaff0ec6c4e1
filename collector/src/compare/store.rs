//! Runs kept for `pipetrace compare RUN_ID`: each run `pipetrace run` ends (or the agent sees
//! end, `keeper`) is summed up per task and tool in `runs/<trace id>.json` under the state directory; the newest
//! [`MAX_RUNS`] are kept.
use std::path::{Path, PathBuf};

use super::model::Run;

/// Runs kept at most; older ones are removed as new ones are written.
pub const MAX_RUNS: usize = 50;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "no run `{id}` in {dir}: give a trace id of a run `pipetrace run` or the agent kept ({known}), or a \
         trace file"
    )]
    NoSuchRun {
        id: String,
        dir: String,
        known: String,
    },
    #[error("run id `{id}` is the start of several kept runs ({which}): give more of it")]
    Ambiguous { id: String, which: String },
    #[error(
        "cannot read the kept run {path} ({reason}): remove that file, and compare the run's \
         trace file instead"
    )]
    Unreadable { path: String, reason: String },
}

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("runs")
}

/// Writes one run, whole or not at all, then removes the oldest past [`MAX_RUNS`].
pub(crate) fn save(state_dir: &Path, run: &Run) -> std::io::Result<PathBuf> {
    let d = dir(state_dir);
    std::fs::create_dir_all(&d)?;
    let safe: String = (run.trace.chars())
        .filter(char::is_ascii_hexdigit)
        .collect();
    let (tmp, path) = (
        d.join(format!(".{safe}.tmp")),
        d.join(format!("{safe}.json")),
    );
    std::fs::write(&tmp, serde_json::to_vec(run)?)?;
    std::fs::rename(tmp, &path)?;
    // The run just written is never the one to go, whatever the clock's resolution.
    let mut kept: Vec<_> = (kept(state_dir).into_iter())
        .filter(|(id, _)| *id != safe)
        .collect();
    if kept.len() >= MAX_RUNS {
        kept.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        for (old, _) in &kept[..=kept.len() - MAX_RUNS] {
            let _ = std::fs::remove_file(d.join(format!("{old}.json")));
        }
    }
    Ok(path)
}

/// Kept runs' ids with their files' times.
fn kept(state_dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    let entries = std::fs::read_dir(dir(state_dir))
        .into_iter()
        .flatten()
        .flatten();
    entries
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let id = name.strip_suffix(".json")?.to_string();
            let modified = e.metadata().ok()?.modified().ok()?;
            Some((id, modified))
        })
        .collect()
}

/// Whether `s` could be a run id (a trace id, or the start of one).
pub(crate) fn looks_like_id(s: &str) -> bool {
    (8..=32).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// The kept run whose id is or starts with `id`.
pub(crate) fn load(state_dir: &Path, id: &str) -> Result<Run, StoreError> {
    let mut ids: Vec<String> = kept(state_dir).into_iter().map(|(id, _)| id).collect();
    ids.sort();
    let found: Vec<&String> = ids
        .iter()
        .filter(|k| k.starts_with(&id.to_ascii_lowercase()))
        .collect();
    let one = match found.as_slice() {
        [one] => *one,
        [] => {
            return Err(StoreError::NoSuchRun {
                id: id.into(),
                dir: dir(state_dir).display().to_string(),
                known: match ids.len() {
                    0 => "none kept yet".into(),
                    n => format!("{n} kept, e.g. {}", ids[ids.len() - 1]),
                },
            });
        }
        many => {
            return Err(StoreError::Ambiguous {
                id: id.into(),
                which: super::listed(many.iter().map(|s| s.as_str())),
            });
        }
    };
    let path = dir(state_dir).join(format!("{one}.json"));
    let unreadable = |reason: String| StoreError::Unreadable {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| unreadable(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(trace: &str) -> Run {
        Run {
            trace: trace.into(),
            name: "p".into(),
            ..Run::default()
        }
    }

    #[test]
    fn runs_are_kept_by_id_bounded_and_found_by_a_prefix() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..MAX_RUNS + 3 {
            save(d.path(), &run(&format!("{i:032x}"))).unwrap();
        }
        assert_eq!(kept(d.path()).len(), MAX_RUNS);
        let last = format!("{:032x}", MAX_RUNS + 2);
        assert_eq!(load(d.path(), &last).unwrap().trace, last);
        let first = format!("{:032x}", 0);
        assert!(load(d.path(), &first).is_err(), "the oldest went");
        let e = load(d.path(), "ffffffffff").unwrap_err().to_string();
        assert!(
            e.contains("no run `ffffffffff`") && e.contains("50 kept"),
            "{e}"
        );
        let e = load(d.path(), "00000000").unwrap_err().to_string();
        assert!(e.contains("several"), "{e}");
    }
}
