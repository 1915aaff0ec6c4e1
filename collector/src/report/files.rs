//! The files of each task in the report: its inputs (read by its processes, written by none)
//! and outputs (written), as the task span lists them (bounded) with the count of all.
use std::fmt::Write as _;

use pipetrace_semconv::attr;

use super::markup::{MAX_LISTED, esc, more};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// A task's inputs and outputs: the listed paths and how many there were in all (the count
/// may exceed the list, which the agent bounds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskFiles {
    pub inputs: Vec<String>,
    pub inputs_count: u64,
    pub outputs: Vec<String>,
    pub outputs_count: u64,
}

/// A task's inputs and outputs; None when its span says of none.
pub(crate) fn files_of(s: &ReportSpan) -> Option<TaskFiles> {
    let list = |k: &str| s.lists.get(k).cloned().unwrap_or_default();
    let (inputs, outputs) = (list(attr::TASK_INPUTS), list(attr::TASK_OUTPUTS));
    let count = |k: &str, listed: &[String]| (s.num(k).max(0.0) as u64).max(listed.len() as u64);
    let f = TaskFiles {
        inputs_count: count(attr::TASK_INPUTS_COUNT, &inputs),
        outputs_count: count(attr::TASK_OUTPUTS_COUNT, &outputs),
        inputs,
        outputs,
    };
    (f.inputs_count + f.outputs_count > 0).then_some(f)
}

/// `a, b (+3 more)`: at most `max` of the paths, each through `show`, and how many more
/// there were.
fn in_words(paths: &[String], count: u64, max: usize, show: impl Fn(&str) -> String) -> String {
    let shown: Vec<String> = paths.iter().take(max).map(|p| show(p)).collect();
    let mut s = shown.join(", ");
    let rest = count.saturating_sub(shown.len() as u64);
    if rest > 0 {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "(+{rest} more)");
    }
    s
}

/// Tasks listed at most under the terminal table; the HTML report lists more.
pub const MAX_TEXT_TASKS: usize = 20;
/// Paths per line in the terminal.
const TEXT_PATHS: usize = 3;
/// Characters of a path in the terminal; a longer one keeps its end (the file's name).
const TEXT_PATH_CHARS: usize = 60;
/// Paths per cell in the HTML report.
const HTML_PATHS: usize = 20;

/// `…/the/end/of/a/long/path.bam`, so a line stays readable.
fn tail(path: &str) -> String {
    let n = path.chars().count();
    if n <= TEXT_PATH_CHARS {
        return path.to_string();
    }
    let end: String = path.chars().skip(n - (TEXT_PATH_CHARS - 1)).collect();
    format!("…{end}")
}

/// The terminal's files section under the table: each task (job) with files, its inputs and
/// outputs; `hidden` tasks with files beyond those given are counted. Nothing without any.
pub(crate) fn render_text(tasks: &[(String, TaskFiles)], hidden: u64, out: &mut String) {
    if tasks.is_empty() && hidden == 0 {
        return;
    }
    out.push_str("\nfiles (in: read and never written by the task; out: written)\n");
    for (name, f) in tasks {
        let _ = writeln!(out, "{name}");
        if f.inputs_count > 0 {
            let s = in_words(&f.inputs, f.inputs_count, TEXT_PATHS, tail);
            let _ = writeln!(out, "  in:  {s}");
        }
        if f.outputs_count > 0 {
            let s = in_words(&f.outputs, f.outputs_count, TEXT_PATHS, tail);
            let _ = writeln!(out, "  out: {s}");
        }
    }
    if hidden > 0 {
        let _ = writeln!(
            out,
            "… and {hidden} more tasks with files (the HTML report lists them)"
        );
    }
}

/// The HTML report's files table: a row per task (job) with files, in the order they
/// started. Nothing when no task has any.
pub(crate) fn render_html(spans: &[ReportSpan], out: &mut String) {
    let mut tasks: Vec<(&ReportSpan, TaskFiles)> = spans
        .iter()
        .filter(|s| s.kind == Kind::Task)
        .filter_map(|s| Some((s, files_of(s)?)))
        .collect();
    if tasks.is_empty() {
        return;
    }
    tasks.sort_by_key(|(s, _)| (s.start, s.id.clone()));
    out.push_str(
        "<h2>Files</h2><p>in: read and never written by the task; out: written.</p><table>\
         <tr><th>task</th><th class=\"l\">in</th><th class=\"l\">out</th></tr>",
    );
    for (s, f) in tasks.iter().take(MAX_LISTED) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&s.name),
            in_words(&f.inputs, f.inputs_count, HTML_PATHS, esc),
            in_words(&f.outputs, f.outputs_count, HTML_PATHS, esc)
        );
    }
    out.push_str("</table>");
    more(tasks.len(), out);
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A task span with these inputs and outputs (lists, and counts when given).
    pub(crate) fn task(
        id: &str,
        name: &str,
        inputs: (&[&str], Option<u64>),
        outputs: (&[&str], Option<u64>),
    ) -> ReportSpan {
        let mut s = ReportSpan {
            trace: "t".into(),
            id: id.into(),
            parent: Some("r".into()),
            kind: Kind::Task,
            name: name.into(),
            start: 1_000_000_000,
            end: 2_000_000_000,
            error: None,
            numbers: BTreeMap::new(),
            texts: [(attr::CICD_PIPELINE_TASK_NAME.to_string(), name.to_string())].into(),
            lists: BTreeMap::new(),
            events: Vec::new(),
        };
        for (key, count_key, (paths, count)) in [
            (attr::TASK_INPUTS, attr::TASK_INPUTS_COUNT, inputs),
            (attr::TASK_OUTPUTS, attr::TASK_OUTPUTS_COUNT, outputs),
        ] {
            if !paths.is_empty() {
                let v = paths.iter().map(|p| p.to_string()).collect();
                s.lists.insert(key.to_string(), v);
            }
            if let Some(n) = count {
                s.numbers.insert(count_key.to_string(), n as f64);
            }
        }
        s
    }

    #[test]
    fn a_task_reads_its_files_with_counts_past_the_list() {
        let s = task(
            "a",
            "align",
            (&["/d/a.fq", "/d/b.fq"], Some(5)),
            (&[], None),
        );
        let f = files_of(&s).expect("files");
        assert_eq!(f.inputs, ["/d/a.fq", "/d/b.fq"]);
        assert_eq!((f.inputs_count, f.outputs_count), (5, 0));
        // A count missing or below the list is the list's length.
        let s = task("b", "sort", (&[], None), (&["/o/x.bam"], None));
        assert_eq!(files_of(&s).expect("files").outputs_count, 1);
        assert_eq!(files_of(&task("c", "none", (&[], None), (&[], None))), None);
    }

    #[test]
    fn paths_in_words_are_bounded_with_how_many_more() {
        let paths: Vec<String> = ["a", "b", "c", "d"].map(String::from).into();
        assert_eq!(in_words(&paths, 4, 2, str::to_string), "a, b (+2 more)");
        assert_eq!(in_words(&paths[..2], 2, 3, str::to_string), "a, b");
        assert_eq!(in_words(&[], 7, 3, str::to_string), "(+7 more)");
        let long = format!("/{}/sample.bam", "x".repeat(100));
        let short = tail(&long);
        assert_eq!(short.chars().count(), TEXT_PATH_CHARS);
        assert!(short.starts_with('…') && short.ends_with("/sample.bam"));
    }

    #[test]
    fn html_lists_each_task_with_files_escaped_and_bounded() {
        let many: Vec<String> = (0..HTML_PATHS + 2).map(|i| format!("/d/{i}.fq")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let spans = [
            task(
                "a",
                "align <s1>",
                (&many, Some(30)),
                (&["/o/a&b.bam"], None),
            ),
            task("b", "plain", (&[], None), (&[], None)),
        ];
        let mut html = String::new();
        render_html(&spans, &mut html);
        assert!(html.contains("<h2>Files</h2>"), "{html}");
        assert!(html.contains("<td>align &lt;s1&gt;</td>"), "{html}");
        assert!(html.contains("/d/0.fq, /d/1.fq"), "{html}");
        assert!(html.contains(&format!("/d/{}.fq (+10 more)", HTML_PATHS - 1)));
        assert!(!html.contains(&format!("/d/{HTML_PATHS}.fq")));
        assert!(
            html.contains("<td class=\"l\">/o/a&amp;b.bam</td>"),
            "{html}"
        );
        assert!(!html.contains("plain"), "a task without files has no row");
        let mut none = String::new();
        render_html(&spans[1..], &mut none);
        assert_eq!(none, "", "no files section without files");
    }
}
