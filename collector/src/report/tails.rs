//! The last lines of a failed job's own log, under its finding: read only where
//! `report.failure_log_lines` asks (pipetrace collects no file contents by default), for
//! the local views alone, and redacted as command lines are.
use std::{
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use pipetrace_semconv::attr;

use pipetrace_core::judgement::{Finding, Judgement, ReportSpan, What, job::Job};

use pipetrace_core::redact::Redactor;

/// How many of a failed job's last log lines the local views show (`report.failure_log_lines`),
/// and the redaction they go through.
#[derive(Default)]
pub struct Tails {
    pub lines: usize,
    pub redactor: Option<Redactor>,
}

impl Tails {
    pub(crate) fn of(cfg: &pipetrace_config::Config) -> Self {
        let lines = cfg.report.failure_log_lines;
        let r = &cfg.redaction;
        let redactor = (lines > 0)
            .then(|| Redactor::new(r.enabled, &r.patterns).ok())
            .flatten();
        Tails { lines, redactor }
    }

    /// The core's judgement of one run, with each failure's last log lines where asked:
    /// reading the logs is the machine's, not the judgement's.
    pub fn judge<'a>(&self, spans: &'a [ReportSpan]) -> Judgement<'a> {
        let mut j = Judgement::of(spans);
        if let Some(r) = &self.redactor {
            let cwd = j.run.and_then(|r| r.text(attr::PROCESS_WORKING_DIRECTORY));
            fill((&mut j.findings, &j.jobs), cwd, self.lines, r);
        }
        j
    }
}

/// Read at most this much of a log's end: a log of gigabytes costs no more than a small one.
const TAIL_BYTES: u64 = 64 * 1024;
/// A line is cut past this many characters.
const LINE_CHARS: usize = 300;

/// Fills each failure's `log_tail` with the last `lines` lines of its first readable log; a
/// log named relative is the run's working directory's (`run_cwd`), as Snakemake's are.
fn fill(
    (findings, jobs): (&mut [Finding], &[Job]),
    run_cwd: Option<&str>,
    lines: usize,
    redactor: &Redactor,
) {
    if lines == 0 {
        return;
    }
    for f in findings.iter_mut() {
        let (Some(job), What::Failed { logs, log_tail, .. }) = (&f.job, &mut f.what) else {
            continue;
        };
        let Some(j) = jobs.iter().find(|j| j.span.id == job.span_id) else {
            continue;
        };
        let cwd = (j.span.text(attr::PROCESS_WORKING_DIRECTORY))
            .or(run_cwd)
            .map(Path::new);
        let tail = (logs.iter())
            .map(|l| resolve(l, cwd))
            .find_map(|p| last_lines(&p, lines).ok().filter(|t| !t.is_empty()));
        *log_tail = (tail.unwrap_or_default().iter())
            .map(|l| redactor.text(l))
            .collect();
    }
}

/// A log named relative to the job's working directory (Snakemake's), where it is known.
fn resolve(log: &str, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(dir) if Path::new(log).is_relative() => dir.join(log),
        _ => PathBuf::from(log),
    }
}

/// The last `n` non-empty lines of a file, each cut to [`LINE_CHARS`].
fn last_lines(path: &Path, n: usize) -> std::io::Result<Vec<String>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
    let mut bytes = Vec::new();
    f.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = (text.lines().rev())
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| l.chars().take(LINE_CHARS).collect())
        .collect();
    lines.reverse();
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_core::judgement::{asks::by_task, findings, job::jobs_of, testing::*};

    #[test]
    fn a_failures_log_tail_is_read_relative_to_its_job_redacted_and_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let mut text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        text.push_str("filter: no reads; token=hunter2\n\n");
        std::fs::write(dir.path().join("logs/f.log"), text).unwrap();
        let cwd = dir.path().to_str();
        let mut t = task("t", "filter", Some("s=A"), (0.0, 1.0));
        t.error = Some("task filter exited with code 3".into());
        let logs = vec!["gone.log".to_string(), "logs/f.log".to_string()];
        t.lists.insert(attr::TASK_LOGS.into(), logs);
        let spans = [t];
        let jobs = jobs_of(&spans);
        let mut all = findings(None, &jobs, (&by_task(&jobs), ""));
        assert!(
            all[0].text.ends_with("; its log: gone.log, logs/f.log"),
            "{}",
            all[0].text
        );
        let redactor = Redactor::new(true, &[]).unwrap();
        fill((&mut all, &jobs), cwd, 0, &redactor);
        let tail = |f: &Finding| match &f.what {
            What::Failed { log_tail, .. } => log_tail.clone(),
            _ => panic!("not a failure"),
        };
        assert!(tail(&all[0]).is_empty(), "nothing read unless asked");
        fill((&mut all, &jobs), cwd, 2, &redactor);
        let got = tail(&all[0]);
        assert_eq!(got[0], "line 4999");
        assert!(got[1].starts_with("filter: no reads; token="), "{got:?}");
        assert!(!got[1].contains("hunter2"), "redacted: {got:?}");
    }
}
