//! What the HTML pieces of the report share: escaping and the bound on listed rows. Below
//! `html` and `files`, so that `files` (which `table` uses too) never imports `html`.
use std::fmt::Write as _;

/// `s` safe inside HTML text and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Rows listed at most per table of happenings; the rest are counted.
/// `n` jobs, as a reader says it: "1 job", "2 jobs".
pub(super) fn jobs(n: usize) -> String {
    match n {
        1 => "1 job".into(),
        n => format!("{n} jobs"),
    }
}

pub(super) const MAX_LISTED: usize = 500;

pub(super) fn more(n: usize, out: &mut String) {
    if n > MAX_LISTED {
        let _ = write!(
            out,
            "<p>… and {} more; the trace has them.</p>",
            n - MAX_LISTED
        );
    }
}
