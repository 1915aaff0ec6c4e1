//! Terminal output made comparable across runs: what varies from run to run (figures, ids,
//! temporary paths, the order in which concurrent jobs started) is masked or put in order,
//! so that a snapshot holds the layout and the words: which sections show, in which order,
//! with which rows.
use std::sync::LazyLock;

use regex::Regex;

/// A figure, not part of a word: `12`, `0.25s`, `3.1x`, `45%` (`sha256sum` stays).
static FIGURE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?P<pre>^|[^A-Za-z0-9_])\d+(\.\d+)?").unwrap());
/// A trace or span id.
static ID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b[0-9a-f]{16,32}\b").unwrap());
static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[ \t]+").unwrap());
/// The time in a file name pipetrace made up: `pipetrace-20260131T120000Z`; and the one in
/// Snakemake's log of a run: `.snakemake/log/2026-12-03T134851.123456.snakemake.log`.
static STAMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d{8}T\d{6}Z|\d{4}-\d{2}-\d{2}T\d{6}(\.\d+)?").unwrap());

/// `text` with `dirs` named `<dir>`, ids `<id>`, figures `N`, runs of blanks one blank,
/// and the trees' siblings in order of their text.
pub fn normalize(text: &str, dirs: &[&std::path::Path]) -> String {
    let mut t = text.to_string();
    for (i, d) in dirs.iter().enumerate() {
        t = t.replace(&*d.to_string_lossy(), &format!("<dir{i}>"));
    }
    let t = STAMP.replace_all(&t, "<time>");
    let t = ID.replace_all(&t, "<id>");
    let t = FIGURE.replace_all(&t, "${pre}N");
    let lines: Vec<String> = t.lines().map(|l| l.trim_end().to_string()).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if is_branch(&lines[i]) {
            let end = (i..lines.len())
                .find(|&j| !is_tree(&lines[j]))
                .unwrap_or(lines.len());
            out.extend(sorted_tree(&lines[i..end], 0));
            i = end;
        } else {
            out.push(lines[i].clone());
            i += 1;
        }
    }
    // Columns move with the width of their figures; the indent of a tree does not.
    let out: Vec<String> = (out.iter())
        .map(|l| {
            let body = l.trim_start();
            let indent = &l[..l.len() - body.len()];
            format!("{indent}{}", SPACES.replace_all(body, " "))
        })
        .collect();
    out.join("\n") + "\n"
}

/// The blocks of `text` (runs of lines between blank lines) whose first line starts with
/// one of `heads`, in their order: a file's runs of this test among other tests' runs.
pub fn blocks_headed(text: &str, heads: &[&str]) -> String {
    (text.split("\n\n"))
        .map(|b| b.trim_matches('\n'))
        .filter(|b| heads.iter().any(|h| b.starts_with(h)))
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n"
}

fn is_branch(l: &str) -> bool {
    l.starts_with("├─") || l.starts_with("└─")
}

fn is_tree(l: &str) -> bool {
    is_branch(l) || l.starts_with("│") || l.starts_with(' ')
}

/// The siblings at `depth` (each with what is under it), in order of their text, every
/// connector written `─` (which sibling is last depends on the order).
fn sorted_tree(lines: &[String], depth: usize) -> Vec<String> {
    let prefix_len = depth * 3;
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for l in lines {
        let rest: String = l.chars().skip(prefix_len).collect();
        if is_branch(&rest) {
            blocks.push(vec![l.clone()]);
        } else if let Some(b) = blocks.last_mut() {
            b.push(l.clone());
        }
    }
    let mut blocks: Vec<Vec<String>> = (blocks.into_iter())
        .map(|b| {
            let head = format!(
                "{}─{}",
                "  ".repeat(depth),
                b[0].chars().skip(prefix_len + 2).collect::<String>()
            );
            let mut block = vec![head];
            block.extend(sorted_tree(&b[1..], depth + 1));
            block
        })
        .collect();
    blocks.sort();
    blocks.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_are_put_in_order_and_figures_masked() {
        let a = "run x  2.5s  ok\n├─ b (s=2)  0.1s  ok\n│  ├─ z  0.1s  ok\n│  └─ y  0.0s  ok\n└─ a  1.0s  ok\n   └─ tool  1.0s  ok\n\ntask  jobs\nb     1\n";
        let b = "run x  2.6s  ok\n├─ a  1.1s  ok\n│  └─ tool  1.0s  ok\n└─ b (s=2)  0.2s  ok\n   ├─ y  0.0s  ok\n   └─ z  0.1s  ok\n\ntask  jobs\nb     1\n";
        assert_eq!(normalize(a, &[]), normalize(b, &[]));
        let n = normalize(a, &[]);
        assert!(
            n.starts_with("run x Ns ok\n─ a Ns ok\n  ─ tool Ns ok\n─ b (s=N)"),
            "{n}"
        );
        assert!(n.ends_with("task jobs\nb N\n"), "{n}");
    }
}
