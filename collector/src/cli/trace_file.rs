//! The trace file a command writes, or reads when the user names a run as `FILE` or `FILE#N`.
use std::path::{Path, PathBuf};

use pipetrace_config::defaults::{RUN_TRACE_PREFIX, TRACE_EXTENSION};

use crate::report::ReadError;
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// The UTC second a default trace file is named by: `20250102T030405Z`.
fn stamp_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "")
}

/// `pipetrace-<stamp>[-N].otlp.jsonl` in `dir`, created empty and exclusively: two runs
/// started in one second each get their own (the second `-2`), never one file. A stem is
/// taken while any file of its run is there (`companions`: its metrics, report, unsent
/// file), not only its trace file: a run whose spans went to an endpoint gives its empty
/// trace file back at its end but keeps its report, which the next run of that second must
/// not overwrite. Looked at once the name is held, so that a run ending in between (its
/// report written, then its trace file removed) is seen too.
fn claim_default(
    dir: &Path,
    stamp: &str,
    companions: impl Fn(&Path) -> Vec<PathBuf>,
) -> std::io::Result<PathBuf> {
    for n in 1u32.. {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let path = dir.join(format!(
            "{RUN_TRACE_PREFIX}{stamp}{suffix}{TRACE_EXTENSION}"
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) if companions(&path).iter().any(|p| p.exists()) => {
                let _ = std::fs::remove_file(&path);
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 suffixes run out")
}

/// What a run named by the trace file `stem` writes besides it: metrics, the report (unless
/// `report.path` names one), and what it could not send (beside it, or in the state
/// directory by the stem's name).
fn companions(cfg: &pipetrace_config::Config, stem: &Path) -> Vec<PathBuf> {
    use pipetrace_export::export::paths;
    let mut all = vec![paths::metrics_beside(stem), paths::unsent_beside(stem)];
    all.extend(
        cfg.report
            .path
            .is_none()
            .then(|| paths::report_beside(stem)),
    );
    all.push(super::send::unsent_path(cfg, stem, None));
    all
}

/// The files of one run, named once from one stem: its trace file (the configured one, else
/// a claimed default), and beside it the metrics, the report and what was not sent.
pub(super) struct RunFiles {
    /// The trace file's name: the configured file, or the claimed default.
    pub stem: PathBuf,
    /// The default was claimed (created empty) for this run.
    claimed: bool,
    /// The spans go to the claimed default (no endpoint took them).
    pub traces_here: bool,
    /// Which of the trace and metrics files were there before the run (kept as they are).
    existed: [bool; 2],
}

impl RunFiles {
    pub(crate) fn claim(
        cfg: &pipetrace_config::Config,
        cwd: Option<&Path>,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let (stem, claimed) = match &cfg.export.file {
            Some(f) => (f.clone(), false),
            None => {
                let dir = cwd.unwrap_or(Path::new("."));
                let beside = |stem: &Path| companions(cfg, stem);
                let f = claim_default(dir, &stamp_now(), beside).with_context(|| {
                    format!(
                        "cannot create a trace file in {}; give one with -o FILE",
                        dir.display()
                    )
                })?;
                (f, true)
            }
        };
        let metrics = pipetrace_export::export::paths::metrics_beside(&stem);
        let existed = [stem.exists() && !claimed, metrics.exists()];
        Ok(Self {
            stem,
            claimed,
            traces_here: false,
            existed,
        })
    }

    /// Nothing was traced (the command could not start): the configured files this run
    /// created, still empty, go; a file that was there before stays as it was.
    pub(crate) fn remove_unused(&self, traces: Option<&Path>, metrics: Option<&Path>) {
        for (path, existed) in [(traces, self.existed[0]), (metrics, self.existed[1])] {
            if let Some(p) = path.filter(|_| !existed) {
                remove_if_empty(p);
            }
        }
    }
}

/// A claimed default the spans did not go to (an endpoint took them) held only the name;
/// one they went to goes only when nothing at all was written beside it (the run stopped
/// before it traced anything), with its empty metrics file.
impl Drop for RunFiles {
    fn drop(&mut self) {
        let metrics = pipetrace_export::export::paths::metrics_beside(&self.stem);
        let empty = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() == 0);
        match (self.claimed, self.traces_here) {
            (true, false) => remove_if_empty(&self.stem),
            (true, true) if empty(&self.stem) && (empty(&metrics) || !metrics.exists()) => {
                remove_if_empty(&self.stem);
                remove_if_empty(&metrics);
            }
            _ => {}
        }
    }
}

fn remove_if_empty(p: &Path) {
    if std::fs::metadata(p).is_ok_and(|m| m.len() == 0) {
        let _ = std::fs::remove_file(p);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{file} holds {n} runs; pick one as {file}#N:\n{runs}")]
    Several {
        file: String,
        n: usize,
        runs: String,
    },
    #[error("{file} has no run #{want}; it holds {n}:\n{runs}")]
    NoSuchNumber {
        file: String,
        want: String,
        n: usize,
        runs: String,
    },
}

/// A trace file's runs, as `FILE` or `FILE#N` names them.
pub(super) struct Runs {
    pub file: PathBuf,
    pub runs: Vec<Vec<ReportSpan>>,
    /// The run `#N` asked for (0-based), checked to be one of them.
    pub picked: Option<usize>,
}

impl Runs {
    /// The run asked for, or the file's only one: its file and spans.
    pub(crate) fn one(mut self) -> Result<(PathBuf, Vec<ReportSpan>), RunsError> {
        let i = match self.picked {
            Some(i) => i,
            None if self.runs.len() == 1 => 0,
            None => {
                return Err(RunsError::Several {
                    file: self.file.display().to_string(),
                    n: self.runs.len(),
                    runs: listing(&self.runs),
                });
            }
        };
        Ok((self.file, self.runs.swap_remove(i)))
    }

    /// The run asked for, or every run of the file.
    pub(crate) fn picked_or_all(mut self) -> Vec<Vec<ReportSpan>> {
        match self.picked {
            Some(i) => vec![self.runs.swap_remove(i)],
            None => self.runs,
        }
    }
}

/// `  #1  run demo  trace 4bf9…`, a line a run: what `FILE#N` can name.
fn listing(runs: &[Vec<ReportSpan>]) -> String {
    let line = |(i, r): (usize, &Vec<ReportSpan>)| {
        let run = r.iter().find(|s| s.kind == Kind::Run);
        let name = run.map_or("(no run span)", |s| s.name.as_str());
        let trace = r.first().map_or("", |s| s.trace.as_str());
        format!("  #{}  {name}  trace {trace}", i + 1)
    };
    let lines: Vec<String> = runs.iter().enumerate().map(line).collect();
    lines.join("\n")
}

/// The file `input` names and the `N` of `FILE#N` (where FILE is a file).
pub(super) fn split(input: &str) -> (&str, Option<&str>) {
    match input.rsplit_once('#') {
        Some((f, n)) if Path::new(f).is_file() => (f, Some(n)),
        _ => (input, None),
    }
}

/// `FILE` (every run in it) or `FILE#N` (its Nth run, counted from 1).
pub(super) fn runs_in(input: &str) -> Result<Runs, RunsError> {
    let (file, number) = split(input);
    let spans = crate::report::read_file(Path::new(file))?;
    let runs = crate::report::by_run(&spans);
    let picked = match number.map(|n| (n, n.parse::<usize>())) {
        None => None,
        Some((_, Ok(i))) if (1..=runs.len()).contains(&i) => Some(i - 1),
        Some((n, _)) => {
            return Err(RunsError::NoSuchNumber {
                file: file.into(),
                want: n.into(),
                n: runs.len(),
                runs: listing(&runs),
            });
        }
    };
    Ok(Runs {
        file: PathBuf::from(file),
        runs,
        picked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_companions(_: &Path) -> Vec<PathBuf> {
        Vec::new()
    }

    #[test]
    fn runs_started_in_one_second_claim_files_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let claims: Vec<PathBuf> = (0..5)
            .map(|_| claim_default(dir.path(), &stamp_now(), no_companions).unwrap())
            .collect();
        let mut names: Vec<_> = claims.iter().map(|p| p.file_name().unwrap()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 5, "{claims:?}");
        assert!(claims.iter().all(|p| p.exists()));
    }

    /// A run whose spans went to an endpoint gave its trace file back but left its report
    /// and unsent file: the next run of that second takes the next stem, not theirs.
    #[test]
    fn a_stem_whose_report_or_unsent_file_is_there_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = pipetrace_config::Config::default();
        let beside = |stem: &Path| companions(&cfg, stem);
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("pipetrace-20250102T030405Z.report.html"), "first").unwrap();
        std::fs::write(at("pipetrace-20250102T030405Z-2.unsent.pb"), "second").unwrap();
        let got = claim_default(dir.path(), "20250102T030405Z", beside).unwrap();
        assert_eq!(got, at("pipetrace-20250102T030405Z-3.otlp.jsonl"));
        // The stems it passed over are left as they were: no trace file claimed for them.
        assert!(!at("pipetrace-20250102T030405Z.otlp.jsonl").exists());
        assert!(!at("pipetrace-20250102T030405Z-2.otlp.jsonl").exists());
        let first = std::fs::read_to_string(at("pipetrace-20250102T030405Z.report.html"));
        assert_eq!(first.unwrap(), "first");
    }
}
