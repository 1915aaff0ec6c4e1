//! `pipetrace report FILE`: the end-of-run table and HTML report from a trace file.
use std::path::Path;

use crate::report::{self, Kind, table::Table};

pub fn run(file: &Path, html: Option<&Path>) -> i32 {
    let spans = match report::read_file(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pipetrace: {e}");
            return super::EXIT_USAGE;
        }
    };
    let runs = report::by_run(&spans);
    let mut out = String::new();
    for run in &runs {
        if runs.len() > 1 {
            heading(run, &mut out);
        }
        let mut table = Table::default();
        for s in run.iter().filter(|s| s.kind == Kind::Task) {
            table.record_task(s);
        }
        table.render(&mut out);
    }
    report::who::ByWho::of(&spans).render(&mut out);
    print!("{out}");
    let path = html
        .map(Path::to_path_buf)
        .unwrap_or_else(|| crate::export::paths::report_beside(file));
    match super::run::write_report(&path, &crate::report::html(&spans)) {
        Ok(()) => {
            eprintln!("pipetrace: report written to {}", path.display());
            0
        }
        Err(e) => {
            eprintln!("pipetrace: {e:#}");
            1
        }
    }
}

/// A run's line above its table, where a file holds several: name, status, wall time and
/// trace id.
fn heading(run: &[report::ReportSpan], out: &mut String) {
    use std::fmt::Write;
    let Some(r) = run.iter().find(|s| s.kind == Kind::Run) else {
        let trace = run.first().map_or("", |s| s.trace.as_str());
        let _ = writeln!(out, "\n(spans of trace {trace} without their run span)");
        return;
    };
    let status = r.error.as_deref().unwrap_or("ok");
    let _ = writeln!(
        out,
        "\n{}  {:.1}s  {status}  trace {}",
        r.name,
        r.secs(),
        r.trace
    );
}
