//! Every documented `pipetrace` command line, in each command's `--help` and in README.md and
//! docs/*.md, is one the command line takes: an example that names a flag or a value that no
//! longer exists fails here. (Running them is the e2e tests'; this holds every one of them.)
use std::path::Path;

use clap::Parser as _;

use super::args::Cli;

/// `pipetrace …` as documented: the shell's words, without a pipe or comment after it, an
/// environment assignment or `sudo` before it.
fn argv_of(line: &str) -> Option<Vec<String>> {
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

/// The `Examples:` lines of every command's help.
fn help_examples() -> Vec<(String, String)> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let mut out = Vec::new();
    let mut helps = Vec::new();
    for sub in cmd.get_subcommands_mut() {
        helps.push((sub.get_name().to_string(), sub.render_help().to_string()));
        for leaf in sub.get_subcommands_mut() {
            helps.push((leaf.get_name().to_string(), leaf.render_help().to_string()));
        }
    }
    for (name, help) in helps {
        let Some((_, rest)) = help.split_once("Examples:") else {
            continue;
        };
        (rest.lines().skip(1))
            .take_while(|l| !l.trim().is_empty())
            .for_each(|l| out.push((format!("{name} --help"), l.to_string())));
    }
    out
}

/// The shell lines of README.md's and docs/*.md's code blocks, continuations joined.
fn doc_examples() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/");
    files.extend(
        (docs.flatten().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
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
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, std::mem::take(&mut line)));
        }
    }
    out
}

#[test]
fn every_documented_command_line_is_one_pipetrace_takes() {
    let mut all = help_examples();
    let helps = all.len();
    all.extend(doc_examples());
    let mut checked = 0;
    let mut refused = Vec::new();
    for (place, line) in &all {
        let Some(argv) = argv_of(line) else { continue };
        // Placeholders the docs write in capitals stand for a value of the user's.
        let argv: Vec<String> = (argv.into_iter())
            .map(|w| {
                if w.chars().any(|c| c.is_ascii_lowercase()) {
                    w
                } else {
                    w.to_lowercase()
                }
            })
            .collect();
        checked += 1;
        match Cli::try_parse_from(&argv) {
            Ok(_) => {}
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {}
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => {}
            Err(e) => refused.push(format!("{place}: `{line}`: {}", e.kind())),
        }
    }
    eprintln!("{checked} documented command lines parsed ({helps} help example lines)");
    assert!(
        helps >= 20 && checked >= 60,
        "{helps} help lines, {checked} checked"
    );
    assert!(
        refused.is_empty(),
        "{} of {checked} refused:\n{}",
        refused.len(),
        refused.join("\n")
    );
}
