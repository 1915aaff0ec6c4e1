//! The trace file a command writes or reads when the user names none.
use std::path::{Path, PathBuf};

/// `pipetrace-<UTC time>.otlp.jsonl` in `dir` (or here): one per run, never overwritten.
pub(super) fn default_file(dir: Option<&Path>) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    dir.unwrap_or(Path::new("."))
        .join(format!("pipetrace-{stamp}.otlp.jsonl"))
}

/// A trace file's runs, as `FILE` or `FILE#N` names them.
pub(super) struct Runs {
    pub file: PathBuf,
    pub runs: Vec<Vec<crate::report::ReportSpan>>,
    /// The run `#N` asked for (0-based), checked to be one of them.
    pub picked: Option<usize>,
}

/// `FILE` (every run in it) or `FILE#N` (its Nth run, counted from 1).
pub(super) fn runs_in(input: &str) -> Result<Runs, String> {
    let (file, number) = match input.rsplit_once('#') {
        Some((f, n)) if Path::new(f).is_file() => (f, Some(n)),
        _ => (input, None),
    };
    let spans = crate::report::read_file(Path::new(file)).map_err(|e| e.to_string())?;
    let runs = crate::report::by_run(&spans);
    let picked = match number.map(|n| (n, n.parse::<usize>())) {
        None => None,
        Some((_, Ok(i))) if (1..=runs.len()).contains(&i) => Some(i - 1),
        Some((n, _)) => {
            return Err(format!(
                "{file} holds {} runs: `#{n}` is none of them",
                runs.len()
            ));
        }
    };
    Ok(Runs {
        file: PathBuf::from(file),
        runs,
        picked,
    })
}
