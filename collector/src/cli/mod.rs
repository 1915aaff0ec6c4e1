//! The `pipetrace` command line. Errors become one clear line and an exit code here.
mod agent;
mod args;
mod compare;
mod config_cmd;
mod demo;
mod doctor;
#[cfg(test)]
mod examples;
mod forward;
mod logging;
mod provenance_cmd;
mod report_cmd;
mod run;
mod send;
mod serve;
mod stop;
mod suggest_cmd;
mod top;
mod trace_file;
mod usage_error;
mod view;

use args::{Cli, Command, ConfigCommand};
use clap::Parser;
use pipetrace_config::{Config, ConfigError};

/// Exit code for bad input (config, usage).
pub const EXIT_USAGE: i32 = 2;

/// Exit code of `pipetrace run` when pipetrace itself fails (bad input, cannot start): apart
/// from the command's own codes, as `env`, `timeout` and `nice` keep theirs (125).
pub const EXIT_RUN_OWN: i32 = 125;

/// The exit code of pipetrace's own failure in `command`: `run`'s is 125, whatever went
/// wrong, so that it is never taken for the command's; others say 2 for bad input, else 1.
fn own_failure(command: &Command, usage: bool) -> i32 {
    match command {
        Command::Run { .. } => EXIT_RUN_OWN,
        _ if usage => EXIT_USAGE,
        _ => 1,
    }
}

impl Cli {
    fn load(&self, file: Option<&std::path::Path>) -> Result<Config, ConfigError> {
        let (given, flags) = self.settings().map_err(|message| ConfigError::Malformed {
            source_name: "the command line".into(),
            message,
        })?;
        let file = file.or(given.as_deref());
        let cfg = pipetrace_config::load(file, &flags)?;
        // The engines are the core's to know: a name none has is refused before anything runs.
        let engines = cfg.attribution.engines.as_deref();
        if let Err(e) = pipetrace_core::attribution::engines::Enabled::from_config(engines) {
            return Err(ConfigError::Invalid {
                source_name: file.map_or("the configuration".into(), |f| f.display().to_string()),
                key: "attribution.engines".into(),
                message: e.to_string(),
            });
        }
        Ok(cfg)
    }
}

fn config_failed(e: ConfigError) -> i32 {
    errln!("pipetrace: config error: {e}");
    EXIT_USAGE
}

/// A command line clap refused (or help and version, which it prints as errors): said as
/// clap says it; under `run`, with `run`'s own exit code for pipetrace's failures (a closed
/// stderr gets EPIPE: main ignores SIGPIPE).
fn parse_failed(e: clap::Error) -> i32 {
    let _ = e.print();
    let asked = matches!(
        e.kind(),
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
    );
    match () {
        _ if asked => 0,
        _ if subcommand_named(std::env::args().skip(1)).as_deref() == Some("run") => EXIT_RUN_OWN,
        _ => e.exit_code(),
    }
}

/// The subcommand a command line names: its first word that is one (before `--`), even
/// where clap refused the line.
fn subcommand_named(args: impl Iterator<Item = String>) -> Option<String> {
    let cmd = command();
    let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
    (args.take_while(|a| a != "--")).find(|a| names.contains(&a.as_str()))
}

/// The agent's own spans are taken from the start (the probes load before the sink runs),
/// when the config asks for them and an OTLP traces endpoint will carry them.
fn own_spans(cfg: &Config) {
    if !cfg.self_telemetry.traces {
        return;
    }
    match cfg
        .export
        .otlp
        .resolve(pipetrace_config::SignalKind::Traces)
    {
        Some(_) => (pipetrace_export::export::own::OwnSpans::installed().iter())
            .for_each(|o| o.capture(true)),
        None => log::warn!(
            "self_telemetry.traces is on, but pipetrace's own spans go over OTLP only and no \
             traces endpoint is set: set --endpoint or OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
    }
}

/// The command line's definition, for what is generated from it (completions, the man page).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failed(e),
    };
    if let Err(e) = cli.settings() {
        errln!("pipetrace: {e}: give it after a command that takes it (see --help)");
        return own_failure(&cli.command, true);
    }
    crate::print::QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    logging::init(logging::Asked {
        verbose: cli.verbose,
        quiet: cli.quiet,
    });
    match &cli.command {
        Command::Config(ConfigCommand::PrintDefault) => {
            out!("{}", pipetrace_config::load::default_yaml());
            0
        }
        Command::Config(ConfigCommand::Validate { file }) => {
            config_cmd::validate(file, || cli.load(Some(file)))
        }
        Command::Config(ConfigCommand::Show { json, .. }) => match cli.settings() {
            Ok((file, flags)) => config_cmd::show(file.as_deref(), &flags, *json),
            Err(_) => unreachable!("checked above"),
        },
        Command::Doctor { json, .. } => {
            let loaded = cli.load(None);
            let state = (loaded.as_ref().ok())
                .and_then(|c| c.diagnosis.state_dir.clone())
                .unwrap_or_else(|| pipetrace_config::defaults::STATE_DIR.into());
            let config = loaded.map(|_| ()).map_err(|e| e.to_string());
            doctor::run(&state, config, *json)
        }
        Command::Report {
            file,
            html,
            json,
            machines,
            fail_on,
            ..
        } => match cli.load(None) {
            Ok(cfg) => {
                let html = html.as_deref();
                report_cmd::run(
                    &cfg,
                    report_cmd::Ask {
                        file,
                        html,
                        json: *json,
                        machines: *machines,
                        fail_on,
                    },
                )
            }
            Err(e) => config_failed(e),
        },
        Command::Compare {
            a,
            b,
            usual,
            json,
            html,
            machines: print_machines,
            ..
        } => {
            let cfg = match cli.load(None) {
                Ok(c) => c,
                Err(e) => return config_failed(e),
            };
            let machines = match crate::sizing::catalog(&cfg.sizing) {
                Ok(m) => m.map(|m| (m, cfg.diagnosis.headroom)),
                Err(e) => {
                    errln!("pipetrace: {e}");
                    return EXIT_USAGE;
                }
            };
            compare::run(&compare::Args {
                a,
                b: b.as_deref(),
                usual: *usual,
                json: *json,
                html: html.as_deref(),
                state_dir: cfg.diagnosis.state_dir.clone(),
                machines,
                print_machines: *print_machines,
            })
        }
        Command::Status { json } => top::status(*json),
        Command::Suggest {
            inputs,
            format,
            percentile,
            margin,
            cwl_workflow,
            output,
            pipeline,
            ..
        } => suggest_cmd::run(&suggest_cmd::Ask {
            pipeline: pipeline.as_deref(),
            state_dir: cli
                .load(None)
                .ok()
                .and_then(|c| c.diagnosis.state_dir)
                .as_deref(),
            inputs,
            format: *format,
            policy: pipetrace_core::sizing::Policy {
                percentile: *percentile,
                margin: *margin,
                ..Default::default()
            },
            cwl_workflow: cwl_workflow.as_deref(),
            output: output.as_deref(),
        }),
        Command::Provenance {
            file,
            dir,
            workflow,
            hash,
            cwl_outputs,
            license,
            publisher,
            publisher_url,
            ..
        } => provenance_cmd::run(&provenance_cmd::Ask {
            input: file,
            dir: dir.as_deref(),
            options: crate::provenance::Options {
                workflow: workflow.as_deref(),
                hash: *hash,
                cwl_outputs: cwl_outputs.as_deref(),
                license,
                publisher: publisher.as_deref(),
                publisher_url: publisher_url.as_deref(),
            },
        }),
        Command::Top => top::top(),
        command => with_runtime(&cli, command),
    }
}

/// `run`, `agent`, `demo` and `send`: the commands that trace or export, on the async
/// runtime (SIGPIPE ignored, as main leaves it: a backend that closes its socket must not
/// end the agent).
fn with_runtime(cli: &Cli, command: &Command) -> i32 {
    let cfg = match cli.load(None) {
        Ok(c) => c,
        Err(e) => {
            errln!("pipetrace: config error: {e}");
            return own_failure(command, true);
        }
    };
    if !matches!(command, Command::Send { .. }) {
        own_spans(&cfg);
    }
    // Before the runtime's threads start, so that they inherit it.
    if let Err(e) = pipetrace_host::cpu_policy::apply(cfg.cpu_policy) {
        log::warn!(
            "cpu_policy {:?} not applied ({e}): pipetrace's threads keep the policy \
                 they started with",
            cfg.cpu_policy
        );
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("pipetrace: error: cannot start the async runtime: {e}");
            return own_failure(command, false);
        }
    };
    let result = rt.block_on(async {
        match command {
            Command::Run {
                no_summary,
                all,
                keep_running,
                stop_grace,
                machines,
                command,
                ..
            } => {
                let how = run::How {
                    summary: !no_summary && !cli.quiet,
                    keep_running: *keep_running,
                    stop_grace: **stop_grace,
                    machines: *machines,
                };
                let mut cfg = cfg.clone();
                if *all {
                    (cfg.summary.max_tasks, cfg.summary.max_tools_per_task) =
                        (usize::MAX, usize::MAX);
                }
                run::run(&cfg, command, None, how).await
            }
            Command::Agent { .. } => agent::run(&cfg).await,
            Command::Demo { dir, .. } => demo::run(cfg, dir, !cli.quiet).await,
            Command::Send { file, .. } => send::run(&cfg, file).await,
            _ => unreachable!("handled above"),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            errln!("pipetrace: error: {e:#}");
            // A setting that cannot work is a usage error, as a bad config is.
            let usage = e.downcast_ref::<usage_error::UsageError>().is_some()
                || e.downcast_ref::<pipetrace_export::export::ExportError>()
                    .is_some();
            own_failure(command, usage)
        }
    }
}
