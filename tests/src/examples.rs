//! The documented `pipetrace` command lines: the `Examples:` of every command's `--help` and
//! the shell lines of README.md's and docs/*.md's code blocks. Shared, by path, with the
//! command crate's unit test that parses every one (`collector/src/cli/examples.rs`); the
//! e2e test `examples` runs those that need no other machine.
use std::path::Path;

/// `pipetrace …` as documented: the shell's words, without a pipe or comment after it, an
/// environment assignment or `sudo` before it.
pub fn argv_of(line: &str) -> Option<Vec<String>> {
    let line = line.trim().trim_start_matches("$ ");
    let line = line.split(" | ").next()?.split("  #").next()?;
    let line = line.split(" && ").next()?.split(" > ").next()?;
    // A synopsis's optional parts (`[--json]`) are taken as given.
    let words = shlex::split(&line.replace(['[', ']'], ""))?;
    let at = words.iter().position(|w| w == "pipetrace")?;
    let before_ok = words[..at]
        .iter()
        .all(|w| w == "sudo" || w.contains('=') || w == "-E");
    (before_ok && !line.contains("$(")).then(|| words[at..].to_vec())
}

/// The environment assignments before `pipetrace` on a documented line (`FOO=1 pipetrace …`).
pub fn env_of(line: &str) -> Vec<(String, String)> {
    let words = shlex::split(line.trim().trim_start_matches("$ ")).unwrap_or_default();
    (words.iter())
        .take_while(|w| *w != "pipetrace")
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The lines under `Examples:` of a help text, each with `place`.
pub fn help_examples(place: &str, help: &str) -> Vec<(String, String)> {
    let Some((_, rest)) = help.split_once("Examples:") else {
        return Vec::new();
    };
    (rest.lines().skip(1))
        .take_while(|l| !l.trim().is_empty())
        .map(|l| (format!("{place} --help"), l.to_string()))
        .collect()
}

/// Whether `s` ends inside a shell quote (`sh -c '` and the lines after it, up to the
/// closing quote, are one command). A comment's apostrophe ("the node's agent") is none.
pub fn in_quote(s: &str) -> bool {
    let (mut quote, mut escaped, mut word_start) = (None, false, true);
    for c in s.chars() {
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, _) if escaped => escaped = false,
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (None, '#') if word_start => return false,
            (None, '\'' | '"') => quote = Some(c),
            _ => {}
        }
        word_start = c.is_whitespace();
    }
    quote.is_some()
}

/// The shell lines of README.md's and docs/*.md's code blocks under `root`, each with its
/// file's name: continuations (`\`) and a quote's lines joined into one command, blank
/// lines left out.
pub fn doc_examples(root: &Path) -> Vec<(String, String)> {
    let mut files = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/");
    let mut md: Vec<_> = (docs.flatten().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    md.sort();
    files.extend(md);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let (mut in_block, mut line) = (false, String::new());
        for l in text.lines() {
            if l.trim_start().starts_with("```") {
                let lang = l.trim_start().trim_start_matches('`');
                in_block = !in_block && matches!(lang, "sh" | "bash" | "console" | "shell");
                continue;
            }
            if !in_block {
                continue;
            }
            line.push_str(l.trim_end_matches('\\'));
            if l.ends_with('\\') {
                continue;
            }
            if in_quote(&line) {
                line.push('\n');
                continue;
            }
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if line.trim().is_empty() {
                line.clear();
                continue;
            }
            out.push((name, std::mem::take(&mut line)));
        }
    }
    out
}
