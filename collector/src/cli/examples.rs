//! Every documented `pipetrace` command line, in each command's `--help` and in README.md and
//! docs/*.md, is one the command line takes: an example that names a flag or a value that no
//! longer exists fails here. (Running them is the e2e tests'; this holds every one of them.)
use std::path::Path;

use clap::Parser as _;

use super::args::Cli;

// One reading of the docs for this test and the e2e test that runs them.
#[path = "../../../tests/src/examples.rs"]
#[allow(dead_code)]
mod extract;
use extract::{argv_of, doc_examples, help_examples};

/// The `Examples:` lines of pipetrace's help and every command's.
fn all_help_examples() -> Vec<(String, String)> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let mut helps = vec![("pipetrace".to_string(), cmd.render_help().to_string())];
    for sub in cmd.get_subcommands_mut() {
        helps.push((sub.get_name().to_string(), sub.render_help().to_string()));
        for leaf in sub.get_subcommands_mut() {
            helps.push((leaf.get_name().to_string(), leaf.render_help().to_string()));
        }
    }
    (helps.iter())
        .flat_map(|(name, help)| help_examples(name, help))
        .collect()
}

#[test]
fn every_documented_command_line_is_one_pipetrace_takes() {
    let mut all = all_help_examples();
    let helps = all.len();
    all.extend(doc_examples(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    ));
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
