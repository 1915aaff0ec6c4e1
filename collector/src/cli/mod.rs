//! The `pipetrace` command line. Errors become one clear line and an exit code here.
mod agent;
mod compare;
mod config_cmd;
mod demo;
mod doctor;
mod forward;
mod logging;
mod outputs;
mod report_cmd;
mod run;
mod send;
mod serve;
mod stop;
mod top;
mod trace_file;
mod usage_error;
mod view;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use pipetrace_config::{Config, ConfigError, Flags, Protocol};

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

#[derive(Parser, Debug)]
#[command(
    name = "pipetrace",
    version,
    about = "Watch pipelines from the Linux kernel; export them as OpenTelemetry"
)]
pub struct Cli {
    /// YAML config file (defaults < file < environment < flags).
    #[arg(
        long,
        short = 'c',
        global = true,
        value_name = "FILE",
        env = "PIPETRACE_CONFIG"
    )]
    config: Option<PathBuf>,
    /// OTLP endpoint, e.g. http://localhost:4317 (gRPC) or http://localhost:4318 (HTTP).
    #[arg(long, global = true, value_name = "URL")]
    endpoint: Option<String>,
    /// OTLP protocol: grpc or http/protobuf.
    #[arg(long, global = true, value_parser = parse_protocol)]
    protocol: Option<Protocol>,
    /// Write OTLP JSON lines to this file (default when no endpoint is set: a file in .).
    #[arg(long, short = 'o', global = true, value_name = "FILE")]
    output: Option<PathBuf>,
    /// OTel service.name of the exported resource.
    #[arg(long, global = true)]
    service_name: Option<String>,
    #[command(subcommand)]
    command: Command,
}

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    match s {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
        other => Err(format!("`{other}` is not grpc or http/protobuf")),
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a command under pipetrace: one trace for it, exits with its exit code.
    Run {
        /// Do not print the trace tree and summary at the end.
        #[arg(long)]
        no_summary: bool,
        /// When pipetrace is told to stop (Ctrl-C, SIGTERM), leave the command's other
        /// processes running instead of stopping them with it (they are not exported).
        #[arg(long)]
        keep_running: bool,
        /// Also print the cloud machines that fit each task and the run (the HTML report
        /// always has them).
        #[arg(long)]
        machines: bool,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Watch the whole host: every run of a known engine or a run rule becomes a trace.
    Agent,
    /// Check that this machine can run pipetrace, and say how to fix what is missing.
    Doctor,
    /// Validate or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the per-task table of a trace file and the machines that fit each task, and
    /// write its HTML report.
    Report {
        /// An OTLP JSON lines trace file, as `pipetrace run` writes it.
        file: PathBuf,
        /// Where to write the HTML report (default: beside FILE, `.report.html`).
        #[arg(long)]
        html: Option<PathBuf>,
        /// Print the machines of each run as JSON instead of the tables.
        #[arg(long)]
        json: bool,
        /// Also print the cloud machines that fit each run (the HTML report always has them).
        #[arg(long)]
        machines: bool,
    },
    /// Two runs side by side, task by task: what moved beyond noise and the tools behind it.
    Compare {
        /// A trace file (`FILE#N` for its Nth run), or a run id kept in the state directory.
        a: String,
        /// The run to compare A with, given as A is.
        #[arg(required_unless_present = "usual")]
        b: Option<String>,
        /// Compare A with the usual of its pipeline, from the task history.
        #[arg(long, conflicts_with = "b")]
        usual: bool,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the comparison as an HTML page here.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Also print each side's cloud machines (JSON and the page always have them).
        #[arg(long)]
        machines: bool,
    },
    /// What the node's agent sees running now, once: every run with its running tasks.
    Status {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// What the node's agent sees running now, on a full screen updated every second.
    Top,
    /// Send what a run could not deliver (the file its last lines name) to the OTLP
    /// endpoint of --endpoint / OTEL_EXPORTER_OTLP_*, and say what arrived.
    Send {
        /// The file `pipetrace run` kept undelivered spans and metrics in.
        file: PathBuf,
    },
    /// Trace the bundled demo pipeline (Snakemake with bwa, samtools and python).
    Demo {
        /// Where to write the demo pipeline and its results.
        #[arg(long, default_value = "pipetrace-demo")]
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Check a config file; exit 2 with the key at fault if it is not valid.
    Validate { file: PathBuf },
    /// Print the default configuration as YAML.
    PrintDefault,
}

impl Cli {
    fn flags(&self) -> Flags {
        Flags {
            service_name: self.service_name.clone(),
            endpoint: self.endpoint.clone(),
            protocol: self.protocol,
            output: self.output.clone(),
        }
    }

    fn load(&self, file: Option<&std::path::Path>) -> Result<Config, ConfigError> {
        let file = file.or(self.config.as_deref());
        let cfg = pipetrace_config::load(file, &self.flags())?;
        // The engines are the core's to know: a name none has is refused before anything runs.
        let engines = cfg.attribution.engines.as_deref();
        if let Err(e) = crate::attribution::engines::Enabled::from_config(engines) {
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
/// clap says it; under `run`, with `run`'s own exit code for pipetrace's failures.
fn parse_failed(e: clap::Error) -> i32 {
    let _ = e.print();
    let asked = matches!(
        e.kind(),
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
    );
    // clap's usage line names the subcommand it was parsing.
    let under_run = e.render().to_string().contains("Usage: pipetrace run ");
    match () {
        _ if asked => 0,
        _ if under_run => EXIT_RUN_OWN,
        _ => e.exit_code(),
    }
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
        Some(_) => (crate::export::own::OwnSpans::installed().iter()).for_each(|o| o.capture(true)),
        None => log::warn!(
            "self_telemetry.traces is on, but pipetrace's own spans go over OTLP only and no \
             traces endpoint is set: set --endpoint or OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
    }
}

/// Runs the command line; returns the process exit code.
/// The command line's definition, for what is generated from it (completions, the man page).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failed(e),
    };
    logging::init();
    match &cli.command {
        Command::Config(ConfigCommand::PrintDefault) => {
            out!("{}", pipetrace_config::load::default_yaml());
            0
        }
        Command::Config(ConfigCommand::Validate { file }) => {
            config_cmd::validate(file, || cli.load(Some(file)))
        }
        Command::Doctor => {
            let state = cli
                .load(None)
                .ok()
                .and_then(|c| c.diagnosis.state_dir)
                .unwrap_or_else(|| "/var/lib/pipetrace".into());
            doctor::run(&state)
        }
        Command::Report {
            file,
            html,
            json,
            machines,
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
        Command::Top => top::top(),
        command => with_runtime(&cli, command),
    }
}

/// `run`, `agent`, `demo` and `send`: the commands that trace or export, on the async
/// runtime, with SIGPIPE ignored.
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
    // A backend that closes its socket must not end the agent: writes get EPIPE.
    // The wrapped command gets the default back (`run`'s pre_exec).
    // SAFETY: before any thread of the runtime starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // Before the runtime's threads start, so that they inherit it.
    if let Err(e) = crate::cpu_policy::apply(cfg.cpu_policy) {
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
                keep_running,
                machines,
                command,
            } => {
                let how = run::How {
                    summary: !no_summary,
                    keep_running: *keep_running,
                    machines: *machines,
                };
                run::run(&cfg, command, None, how).await
            }
            Command::Agent => agent::run(&cfg).await,
            Command::Demo { dir } => demo::run(cfg, dir).await,
            Command::Send { file } => send::run(&cfg, file).await,
            _ => unreachable!("handled above"),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            errln!("pipetrace: error: {e:#}");
            // A setting that cannot work is a usage error, as a bad config is.
            let usage = e.downcast_ref::<usage_error::UsageError>().is_some()
                || e.downcast_ref::<crate::export::ExportError>().is_some();
            own_failure(command, usage)
        }
    }
}
