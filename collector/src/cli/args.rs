//! The command line's shape: each flag on the commands it applies to, with examples.
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};
use pipetrace_config::{Flags, Protocol};
use pipetrace_core::sizing::Policy;

#[derive(Parser, Debug)]
#[command(
    name = "pipetrace",
    version,
    about = "Watch pipelines from the Linux kernel; export them as OpenTelemetry",
    after_help = "Examples:
  pipetrace demo                                      # trace the bundled Snakemake pipeline
  pipetrace run -- snakemake -c4                      # one run: a trace file and a report
  pipetrace run --endpoint http://localhost:4317 -- nextflow run main.nf
  pipetrace agent --config /etc/pipetrace/config.yaml # every run on this host
  pipetrace report run.otlp.jsonl                     # the table and page of a trace file

Logs: -v (info), -vv (debug), -q (errors only); PIPETRACE_LOG or RUST_LOG take a filter."
)]
pub(super) struct Cli {
    /// Given before the command: kept for `pipetrace --endpoint URL run ...`; the command's
    /// own flags win.
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub export: ExportArgs,
    /// More of pipetrace's own logs: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = ArgAction::Count, global = true, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Errors only: no warnings and, for run and demo, no summary at the end.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The configuration file, for the commands that read the configuration.
#[derive(Args, Debug, Default, Clone)]
pub(super) struct ConfigArg {
    /// YAML config file (defaults < file < environment < flags).
    #[arg(long, short = 'c', value_name = "FILE", env = "PIPETRACE_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Where and how telemetry goes, for the commands that export.
#[derive(Args, Debug, Default, Clone)]
pub(super) struct ExportArgs {
    /// OTLP endpoint, e.g. http://localhost:4317 (gRPC) or http://localhost:4318 (HTTP).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// OTLP protocol: grpc or http/protobuf.
    #[arg(long, value_parser = parse_protocol)]
    pub protocol: Option<Protocol>,
    #[arg(long, short = 'o', value_name = "FILE", help = output_help())]
    pub output: Option<PathBuf>,
    /// OTel service.name of the exported resource.
    #[arg(long, value_name = "NAME")]
    pub service_name: Option<String>,
}

/// Where to send, for `send` (the file holds the rest).
#[derive(Args, Debug, Default, Clone)]
pub(super) struct SendArgs {
    /// OTLP endpoint, e.g. http://localhost:4317 (gRPC) or http://localhost:4318 (HTTP).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// OTLP protocol: grpc or http/protobuf.
    #[arg(long, value_parser = parse_protocol)]
    pub protocol: Option<Protocol>,
}

/// `-o`'s help, its defaults named by the code that picks them.
fn output_help() -> String {
    use pipetrace_config::defaults::{AGENT_TRACE_FILE, run_trace_file};
    format!(
        "Write OTLP JSON lines to this file (default when no endpoint is set: `run` writes {}, `agent` {AGENT_TRACE_FILE})",
        run_trace_file()
    )
}

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    match s {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
        other => Err(format!("`{other}` is not grpc or http/protobuf")),
    }
}

fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (1.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("`{s}` is not a percentile from 1 to 100, e.g. 95")),
    }
}

fn parse_margin(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(m) if (0.0..=10.0).contains(&m) => Ok(m),
        _ => Err(format!(
            "`{s}` is not a margin from 0 to 10, e.g. 0.2 for 20% more"
        )),
    }
}

impl ExportArgs {
    fn given(&self) -> Option<&'static str> {
        let set = [
            (self.endpoint.is_some(), "--endpoint"),
            (self.protocol.is_some(), "--protocol"),
            (self.output.is_some(), "--output"),
            (self.service_name.is_some(), "--service-name"),
        ];
        set.into_iter().find(|(on, _)| *on).map(|(_, name)| name)
    }

    /// These flags over `below` (the ones given before the command).
    fn over(&self, below: &ExportArgs) -> Flags {
        Flags {
            service_name: (self.service_name.clone()).or_else(|| below.service_name.clone()),
            endpoint: self.endpoint.clone().or_else(|| below.endpoint.clone()),
            protocol: self.protocol.or(below.protocol),
            output: self.output.clone().or_else(|| below.output.clone()),
        }
    }
}

#[derive(Subcommand, Debug)]
pub(super) enum Command {
    /// Run a command under pipetrace: one trace for it, exits with its exit code.
    #[command(after_help = "Examples:
  pipetrace run -- snakemake -c4
  pipetrace run --endpoint http://localhost:4317 -- nextflow run main.nf -profile test
  pipetrace run -o trace.otlp.jsonl --no-summary -- ./align.sh sample.fq

Exit codes: the command's own; 125 when pipetrace itself fails (see docs/getting-started.md).")]
    Run {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        export: ExportArgs,
        /// Do not print the trace tree and summary at the end.
        #[arg(long)]
        no_summary: bool,
        /// Print every task and tool in the tree at the end (a run of more tasks than
        /// summary.max_tasks otherwise shows its jobs folded per task, after its findings).
        #[arg(long)]
        all: bool,
        /// When pipetrace is told to stop (Ctrl-C, SIGTERM), leave the command's other
        /// processes running instead of stopping them with it (they are not exported).
        #[arg(long)]
        keep_running: bool,
        /// Told to stop, how long the command and its processes get to end after SIGTERM
        /// before SIGKILL (an engine cancelling its cluster jobs may need longer).
        #[arg(
            long,
            value_name = "DURATION",
            default_value_t = humantime::Duration::from(super::stop::TERM_GRACE),
            value_parser = grace
        )]
        stop_grace: humantime::Duration,
        /// Also print the cloud machines that fit each task and the run (the HTML report
        /// always has them).
        #[arg(long)]
        machines: bool,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Watch the whole host: every run of a known engine or a run rule becomes a trace.
    #[command(after_help = "Examples:
  pipetrace agent --endpoint http://collector:4317
  pipetrace agent --config /etc/pipetrace/config.yaml")]
    Agent {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        export: ExportArgs,
    },
    /// Check that this machine can run pipetrace, and say how to fix what is missing.
    #[command(after_help = "Examples:
  pipetrace doctor
  pipetrace doctor --json | jq '.checks[] | select(.status == \"fail\")'")]
    Doctor {
        #[command(flatten)]
        config: ConfigArg,
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show, validate or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the per-task table of a trace file and the machines that fit each task, and
    /// write its HTML report.
    #[command(after_help = "Examples:
  pipetrace report run.otlp.jsonl
  pipetrace report run.otlp.jsonl --html /tmp/run.html --machines
  pipetrace report run.otlp.jsonl --json | jq '.runs[0].findings'
  pipetrace report run.otlp.jsonl --fail-on oom,failed   # a CI gate: exits 3 on such findings

Exit codes: 0; 3 when --fail-on found such findings; 2 for a bad file or option; 1 when the
HTML report cannot be written.")]
    Report {
        #[command(flatten)]
        config: ConfigArg,
        /// An OTLP JSON lines trace file, as `pipetrace run` writes it.
        file: PathBuf,
        /// Where to write the HTML report (default: beside FILE, `.report.html`).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Print each run's task table and machines as JSON instead of the tables.
        #[arg(long)]
        json: bool,
        /// Also print the cloud machines that fit each run (the HTML report always has them).
        #[arg(long)]
        machines: bool,
        /// Exit 3 when a run has findings of these kinds (comma-separated), after the report.
        #[arg(long, value_delimiter = ',', value_name = "KINDS")]
        fail_on: Vec<super::report_cmd::FailOn>,
    },
    /// Two runs side by side, task by task: what moved beyond noise and the tools behind it.
    #[command(after_help = "Examples:
  pipetrace compare before.otlp.jsonl after.otlp.jsonl
  pipetrace compare runs.otlp.jsonl#1 runs.otlp.jsonl#2 --html diff.html
  pipetrace compare after.otlp.jsonl --usual   # A: its pipeline's usual, B: this run")]
    Compare {
        #[command(flatten)]
        config: ConfigArg,
        /// A trace file (`FILE#N` for its Nth run), or a run id kept in the state directory.
        a: String,
        /// The run to compare A with, given as A is.
        #[arg(required_unless_present = "usual")]
        b: Option<String>,
        /// Compare the run given with the usual of its pipeline, from the task history: the
        /// usual is side A (before), the run side B (after).
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
    /// What each task should ask for next time (CPUs, memory, time), from what its jobs used,
    /// in the engine's own settings: a Snakemake profile, a Nextflow config, cwltool overrides.
    #[command(after_help = "Examples:
  pipetrace suggest run1.otlp.jsonl run2.otlp.jsonl -o profile/config.yaml
  snakemake --profile profile --cores 8               # the rules ask what they used
  pipetrace suggest --pipeline rnaseq --format table   # from its task history
  pipetrace suggest nf.otlp.jsonl --format nextflow -o suggested.config
  nextflow run main.nf -c suggested.config
  pipetrace suggest cwl.otlp.jsonl --format cwl --cwl-workflow wf.cwl -o overrides.yml
  cwltool --overrides overrides.yml wf.cwl job.yml")]
    Suggest {
        #[command(flatten)]
        config: ConfigArg,
        /// Trace files (`FILE#N` for one run of a file holding several) or the ids of runs
        /// `pipetrace run` kept (as compare takes them): the more runs, the better the
        /// percentile.
        #[arg(required_unless_present = "pipeline", value_name = "FILE")]
        inputs: Vec<String>,
        /// Also the task history `pipetrace run` keeps of this pipeline (its name as
        /// `compare --usual` finds it): each earlier run's medians.
        #[arg(long, value_name = "NAME")]
        pipeline: Option<String>,
        /// The settings' format: auto takes the runs' engine (a table for any other).
        #[arg(long, value_enum, default_value = "auto")]
        format: super::suggest_cmd::Format,
        /// Of each task's jobs, the percentile of their CPU use, peak memory and time taken.
        #[arg(long, default_value_t = Policy::DEFAULT.percentile, value_parser = parse_percentile)]
        percentile: f64,
        /// Added on top of the percentile: 0.2 asks 20% more.
        #[arg(long, default_value_t = Policy::DEFAULT.margin, value_parser = parse_margin)]
        margin: f64,
        /// The CWL workflow the runs ran (--format cwl): its steps name their tools' files.
        #[arg(long, value_name = "WORKFLOW")]
        cwl_workflow: Option<PathBuf>,
        /// Write the settings here instead of to stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// A Workflow Run RO-Crate (Provenance Run Crate 0.5) of a traced Snakemake or CWL run,
    /// written into the run's directory: the workflow, each task's files as the engine
    /// declared them and as its tools opened them, the programs, never a file's contents.
    #[command(after_help = "Examples:
  PIPETRACE_FILES__ENABLED=true pipetrace run -o run.otlp.jsonl -- snakemake -c4
  pipetrace provenance run.otlp.jsonl --hash   # writes ./ro-crate-metadata.json
  pipetrace provenance runs.otlp.jsonl#2 --dir /data/run2 --license CC0-1.0
  pipetrace run -o cwl.otlp.jsonl -- cwltool wf.cwl job.yml > outputs.json
  pipetrace provenance cwl.otlp.jsonl --cwl-outputs outputs.json")]
    Provenance {
        #[command(flatten)]
        config: ConfigArg,
        /// An OTLP JSON lines trace file (`FILE#N` for its Nth run), traced with
        /// `files.enabled: true` for the files each tool opened.
        file: String,
        /// The run's directory, where the crate is written (its root, beside the files it
        /// names): default the trace file's directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The workflow file, when not the one the run's command line names (or Snakefile).
        #[arg(long, value_name = "FILE")]
        workflow: Option<PathBuf>,
        /// Also record each file's SHA-256, computed by pipetrace reading the files now.
        #[arg(long)]
        hash: bool,
        /// CWL: the JSON of the run's outputs cwltool printed (saved from its stdout), for
        /// the workflow's declared outputs.
        #[arg(long, value_name = "FILE")]
        cwl_outputs: Option<PathBuf>,
        /// The crate's license: an SPDX identifier or a URL.
        #[arg(long, default_value = "CC-BY-4.0", value_parser = license)]
        license: String,
        /// The organization publishing the crate, taken as the run's user's affiliation
        /// (RO-Crate recommends naming one).
        #[arg(long, value_name = "NAME")]
        publisher: Option<String>,
        /// The publishing organization's web address.
        #[arg(long, value_name = "URL", requires = "publisher")]
        publisher_url: Option<String>,
    },
    /// What the node's agent sees running now, once: every run with its running tasks.
    #[command(after_help = "Examples:
  pipetrace status
  pipetrace status --json   # [] and exit status 1 when no agent runs")]
    Status {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// What the node's agent sees running now, on a full screen updated every second.
    #[command(after_help = "Examples:
  pipetrace top            # up and down choose a run, q quits
  pipetrace status --json  # the same, once, for a script")]
    Top,
    /// Send what a run could not deliver (the file its last lines name) to the OTLP
    /// endpoint of --endpoint / OTEL_EXPORTER_OTLP_*, and say what arrived.
    #[command(after_help = "Examples:
  pipetrace send --endpoint http://collector:4317 run.unsent.pb")]
    Send {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        export: SendArgs,
        /// The file `pipetrace run` kept undelivered spans and metrics in.
        file: PathBuf,
    },
    /// Trace the bundled demo pipeline (Snakemake with bwa, samtools and python).
    #[command(after_help = "Examples:
  pipetrace demo
  pipetrace demo --endpoint http://localhost:4317 --dir /tmp/demo")]
    Demo {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        export: ExportArgs,
        /// Where to write the demo pipeline and its results.
        #[arg(long, default_value = "pipetrace-demo")]
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub(super) enum ConfigCommand {
    /// The configuration in effect (defaults, file, environment and flags merged), each
    /// value with what set it.
    #[command(after_help = "Examples:
  pipetrace config show
  PIPETRACE_EXPORT__OTLP__COMPRESSION=none pipetrace config show -c my.yaml --endpoint http://x:4317
  pipetrace config show --json")]
    Show {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        export: ExportArgs,
        /// As JSON: [{"key", "value", "from"}].
        #[arg(long)]
        json: bool,
    },
    /// Check a config file; exit 2 with the key at fault if it is not valid.
    #[command(after_help = "Examples:
  pipetrace config validate /etc/pipetrace/config.yaml")]
    Validate { file: PathBuf },
    /// Print the default configuration as YAML.
    #[command(after_help = "Examples:
  pipetrace config print-default > pipetrace.yaml   # every setting, commented")]
    PrintDefault,
}

impl Cli {
    /// The config file and flags the command reads its configuration with, or the flag
    /// given before a command it does not apply to.
    pub(crate) fn settings(&self) -> Result<(Option<PathBuf>, Flags), String> {
        let none = ExportArgs::default();
        let (config, export): (Option<&ConfigArg>, Option<ExportArgs>) = match &self.command {
            Command::Run { config, export, .. }
            | Command::Agent { config, export }
            | Command::Demo { config, export, .. }
            | Command::Config(ConfigCommand::Show { config, export, .. }) => {
                (Some(config), Some(export.clone()))
            }
            Command::Send { config, export, .. } => (
                Some(config),
                Some(ExportArgs {
                    endpoint: export.endpoint.clone(),
                    protocol: export.protocol,
                    ..none.clone()
                }),
            ),
            Command::Doctor { config, .. }
            | Command::Suggest { config, .. }
            | Command::Provenance { config, .. }
            | Command::Report { config, .. }
            | Command::Compare { config, .. } => (Some(config), None),
            Command::Status { .. } | Command::Top | Command::Config(_) => (None, None),
        };
        let name = self.command_name();
        // `send` takes where to send; what was sent is the file's.
        let send_only = |e: &ExportArgs| {
            (e.output.as_ref().map(|_| "--output"))
                .or(e.service_name.as_ref().map(|_| "--service-name"))
        };
        if let (Command::Send { .. }, Some(flag)) = (&self.command, send_only(&self.export)) {
            return Err(format!("{flag} does not apply to `pipetrace {name}`"));
        }
        if let (None, Some(flag)) = (&export, self.export.given()) {
            return Err(format!("{flag} does not apply to `pipetrace {name}`"));
        }
        if config.is_none() && self.config.config.is_some() && !config_from_env() {
            return Err(format!("--config does not apply to `pipetrace {name}`"));
        }
        let file = config
            .and_then(|c| c.config.clone())
            .or(self.config.config.clone());
        let flags = export.map_or_else(Flags::default, |e| e.over(&self.export));
        Ok((file, flags))
    }

    fn command_name(&self) -> &'static str {
        match &self.command {
            Command::Run { .. } => "run",
            Command::Agent { .. } => "agent",
            Command::Doctor { .. } => "doctor",
            Command::Config(_) => "config",
            Command::Report { .. } => "report",
            Command::Compare { .. } => "compare",
            Command::Status { .. } => "status",
            Command::Suggest { .. } => "suggest",
            Command::Provenance { .. } => "provenance",
            Command::Top => "top",
            Command::Send { .. } => "send",
            Command::Demo { .. } => "demo",
        }
    }
}

/// PIPETRACE_CONFIG fills --config wherever the flag is: set in the environment, it is no
/// mistake on a command that reads no configuration.
fn config_from_env() -> bool {
    std::env::var_os("PIPETRACE_CONFIG").is_some()
}

/// A `--stop-grace`: a duration as humantime writes it, up to [`super::stop::MAX_GRACE`].
fn grace(s: &str) -> Result<humantime::Duration, String> {
    let max = humantime::format_duration(super::stop::MAX_GRACE);
    match humantime::parse_duration(s) {
        Ok(d) if d <= super::stop::MAX_GRACE => Ok(d.into()),
        Ok(_) => Err(format!(
            "`{s}` is longer than {max}, the most a stop waits: write it as 5s, 30s or 2m"
        )),
        Err(e) => Err(format!(
            "`{s}` is not a duration from 0s to {max} ({e}): write it as 5s, 30s or 2m"
        )),
    }
}

/// A `--license`: an SPDX identifier (letters, digits, `.`, `-`, `+`) or an http(s) URL.
fn license(s: &str) -> Result<String, String> {
    let url =
        (s.starts_with("https://") || s.starts_with("http://")) && !s.contains(char::is_whitespace);
    let spdx = !s.is_empty()
        && (s.chars()).all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
    match url || spdx {
        true => Ok(s.to_string()),
        false => Err(format!(
            "`{s}` is neither an SPDX license identifier (such as CC-BY-4.0, CC0-1.0 or MIT) \
             nor an http(s) URL"
        )),
    }
}

#[cfg(test)]
mod tests;
