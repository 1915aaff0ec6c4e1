//! The trace file a command writes, or reads when the user names a run as `FILE` or `FILE#N`.
use std::path::{Path, PathBuf};

use crate::report::{Kind, ReadError, ReportSpan};

/// `pipetrace-<UTC time>.otlp.jsonl` in `dir` (or here): one per run, never overwritten.
pub(super) fn default_file(dir: Option<&Path>) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    dir.unwrap_or(Path::new("."))
        .join(format!("pipetrace-{stamp}.otlp.jsonl"))
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
    pub fn one(mut self) -> Result<(PathBuf, Vec<ReportSpan>), RunsError> {
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
    pub fn picked_or_all(mut self) -> Vec<Vec<ReportSpan>> {
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
