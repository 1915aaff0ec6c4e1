//! The command line's shape, held to what the help and the docs say.
use super::*;

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(args).unwrap()
}

#[test]
fn export_flags_go_before_or_after_the_command_and_the_commands_win() {
    let cli = parse(&[
        "pipetrace",
        "--endpoint",
        "http://a:4317",
        "run",
        "--",
        "true",
    ]);
    assert_eq!(
        cli.settings().unwrap().1.endpoint.as_deref(),
        Some("http://a:4317")
    );
    let cli = parse(&[
        "pipetrace",
        "--endpoint",
        "http://a:4317",
        "run",
        "--endpoint",
        "http://b:4317",
        "--",
        "true",
    ]);
    assert_eq!(
        cli.settings().unwrap().1.endpoint.as_deref(),
        Some("http://b:4317")
    );
}

#[test]
fn a_flag_on_a_command_it_does_not_apply_to_is_refused() {
    // On the command itself clap refuses it; before it, the settings do.
    assert!(Cli::try_parse_from(["pipetrace", "status", "--endpoint", "x"]).is_err());
    let cli = parse(&["pipetrace", "--endpoint", "http://a:4317", "status"]);
    let e = cli.settings().unwrap_err();
    assert!(
        e.contains("--endpoint does not apply to `pipetrace status`"),
        "{e}"
    );
    assert!(Cli::try_parse_from(["pipetrace", "report", "f", "--output", "x"]).is_err());
    let cli = parse(&["pipetrace", "--output", "x", "send", "f"]);
    assert!(
        cli.settings()
            .unwrap_err()
            .contains("--output does not apply")
    );
}

#[test]
fn the_help_of_a_command_shows_only_its_own_flags_and_examples() {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let status = cmd
        .find_subcommand_mut("status")
        .unwrap()
        .render_help()
        .to_string();
    assert!(
        !status.contains("--endpoint") && !status.contains("--config"),
        "{status}"
    );
    assert!(
        status.contains("--quiet") && status.contains("Examples:"),
        "{status}"
    );
    let run = cmd
        .find_subcommand_mut("run")
        .unwrap()
        .render_help()
        .to_string();
    assert!(
        run.contains("--endpoint") && run.contains("--config"),
        "{run}"
    );
}

#[test]
fn the_output_flags_help_names_the_files_the_commands_write() {
    use pipetrace_config::defaults::{AGENT_TRACE_FILE, run_trace_file};
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let help = |name: &str, cmd: &mut clap::Command| {
        let sub = cmd.find_subcommand_mut(name).unwrap();
        sub.render_help()
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for name in ["agent", "run"] {
        let text = help(name, &mut cmd);
        assert!(text.contains(AGENT_TRACE_FILE), "{name}: {text}");
        assert!(text.contains(&run_trace_file()), "{name}: {text}");
    }
}

#[test]
fn every_command_shows_examples() {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let mut missing = Vec::new();
    for sub in cmd.get_subcommands_mut().filter(|s| s.get_name() != "help") {
        let name = sub.get_name().to_string();
        let mut all = vec![(name.clone(), sub.render_help().to_string())];
        for leaf in sub.get_subcommands_mut().filter(|s| s.get_name() != "help") {
            let leaf_name = format!("{name} {}", leaf.get_name());
            all.push((leaf_name, leaf.render_help().to_string()));
        }
        let has_leaves = all.len() > 1;
        for (n, help) in all.into_iter().skip(usize::from(has_leaves)) {
            if !help.contains("Examples:") {
                missing.push(n);
            }
        }
    }
    assert!(missing.is_empty(), "no examples in the help of {missing:?}");
}

#[test]
fn quiet_and_verbose_are_taken_anywhere_but_not_together() {
    let cli = parse(&["pipetrace", "run", "-vv", "--", "true"]);
    assert_eq!(cli.verbose, 2);
    assert!(parse(&["pipetrace", "-q", "report", "f"]).quiet);
    assert!(Cli::try_parse_from(["pipetrace", "-q", "-v", "top"]).is_err());
}

/// A command's help, its whitespace folded (clap wraps it to the terminal).
fn help_of(name: &str) -> String {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let sub = cmd.find_subcommand_mut(name).unwrap();
    (sub.render_help().to_string().split_whitespace())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The defaults the help shows are the code's own, and what a command line without the
/// flag gets: `run --stop-grace`, `suggest --percentile` and `--margin`.
#[test]
fn the_helps_defaults_are_the_codes() {
    use crate::cli::stop::TERM_GRACE;
    let grace = humantime::format_duration(TERM_GRACE);
    let run = help_of("run");
    assert!(run.contains(&format!("[default: {grace}]")), "{run}");
    let suggest = help_of("suggest");
    for value in [Policy::DEFAULT.percentile, Policy::DEFAULT.margin] {
        assert!(
            suggest.contains(&format!("[default: {value}]")),
            "{suggest}"
        );
    }
    let Command::Run { stop_grace, .. } = parse(&["pipetrace", "run", "--", "true"]).command else {
        unreachable!("a run")
    };
    assert_eq!(*stop_grace, TERM_GRACE);
    let Command::Suggest {
        percentile, margin, ..
    } = parse(&["pipetrace", "suggest", "t.otlp.jsonl"]).command
    else {
        unreachable!("a suggest")
    };
    let code = Policy::default();
    assert_eq!((percentile, margin), (code.percentile, code.margin));
}

#[test]
fn a_stop_grace_out_of_its_range_is_refused_with_an_example() {
    let given =
        |g: &str| Cli::try_parse_from(["pipetrace", "run", "--stop-grace", g, "--", "true"]);
    for bad in ["2h", "forever", "5x"] {
        let e = given(bad).unwrap_err().to_string();
        assert!(e.contains(&format!("`{bad}`")), "{e}");
        assert!(
            e.contains("1h") && e.contains("write it as 5s, 30s or 2m"),
            "{e}"
        );
    }
    for good in ["0s", "2m", "1h"] {
        assert!(given(good).is_ok(), "{good}");
    }
}
