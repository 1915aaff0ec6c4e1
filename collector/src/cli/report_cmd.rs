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
    let mut table = Table::default();
    for s in spans.iter().filter(|s| s.kind == Kind::Task) {
        table.record_task(s);
    }
    let mut out = String::new();
    table.render(&mut out);
    print!("{out}");
    let path = html
        .map(Path::to_path_buf)
        .unwrap_or_else(|| crate::export::paths::report_beside(file));
    match super::run::write_report(&path, &spans) {
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
