//! `pipetrace run -- COMMAND`: trace one command and everything it starts.
use std::{
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context;
use pipetrace_config::Config;
use pipetrace_core::judgement::Judgement;

use crate::{
    assembly::{For, Prepared, assemble, prepare},
    pipeline::Pipeline,
    sizing::Catalog,
    summary::{Delivery, Loss, Made, Summary},
};
use pipetrace_export::export::{Destinations, Place, Sink};

use super::serve::Core;

use super::{trace_file::RunFiles, usage_error::UsageError};

/// The first line: what is traced and where its data will go.
fn announce(argv: &[String], to_: &Destinations) {
    let (spans, metrics) = (&to_.spans, &to_.metrics);
    let command = pipetrace_core::attribution::naming::command_line(argv);
    let to = |d: &Place| {
        let places: Vec<String> = (d.otlp.iter().cloned())
            .chain(d.file.iter().map(|f| f.display().to_string()))
            .collect();
        match places.is_empty() {
            true => "nowhere".to_string(),
            false => places.join(" and "),
        }
    };
    let metrics = match metrics.otlp.is_none() && metrics.file.is_none() {
        true => String::new(),
        false => format!(", metrics to {}", to(metrics)),
    };
    say!(
        "pipetrace: tracing `{command}`: spans to {}{metrics}",
        to(spans)
    );
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// How `pipetrace run` behaves around the command.
pub struct How {
    /// Print the trace tree and summary at the end.
    pub summary: bool,
    /// Told to stop, leave the command's other processes running.
    pub keep_running: bool,
    /// Told to stop, how long processes get after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
    /// Print the machines that fit under the summary (`--machines`).
    pub machines: bool,
}

/// Runs `argv` in `cwd` under the probes. Returns the command's exit code.
pub(crate) async fn run(
    cfg: &Config,
    argv: &[String],
    cwd: Option<&Path>,
    how: How,
) -> anyhow::Result<i32> {
    let Some((program, args)) = argv.split_first() else {
        return Err(UsageError("nothing to run: pipetrace run -- COMMAND [ARGS...]".into()).into());
    };
    // A wrong instance table is said now, not after a run of hours.
    let machines = crate::sizing::catalog(&cfg.sizing).map_err(|e| UsageError(e.to_string()))?;
    // A taken port starts nothing: bound before the probes load.
    let prometheus = pipetrace_export::export::prometheus::Bound::bind(&cfg.metrics.prometheus)?;
    let Prepared {
        host,
        events,
        taps,
        builder,
    } = prepare(cfg)?;
    // Before anything else, so that a bad setting starts nothing; one stem names every file.
    // (A claimed name the sink never opened goes when `files` drops.)
    let mut files = RunFiles::claim(cfg, cwd)?;
    let exporter = Sink::start(cfg, &host, files.stem.clone())?;
    files.traces_here = exporter.destinations.spans.file.as_ref() == Some(&files.stem);
    announce(argv, &exporter.destinations);
    let forwarder = super::forward::Forwarder::install().context("installing signal forwarding")?;
    let started = Instant::now();
    let spawned_ns = pipetrace_host::boottime_ns();
    let child = match spawn(program, args, cwd) {
        Ok(c) => c,
        Err(e) => return Ok(cannot_start(exporter, &files, program, e).await),
    };
    let root_pid = child
        .id()
        .context("the command exited before it could be traced")?;
    forwarder.started(root_pid);
    let of = For::Run {
        root_pid,
        argv,
        summary: how.summary,
    };
    let built = (&host, builder, events.is_polling());
    let pipe = assemble(cfg, of, built, (exporter, prometheus))?;
    let mut core = Core::new(pipe, events, &taps, cfg, Duration::from_millis(200));
    let root = crate::pipeline::Spawned {
        pid: root_pid,
        argv: argv.to_vec(),
        start_ns: spawned_ns,
    };
    let status = until_it_exits(&mut core, (child, &root), (&forwarder, &how), cfg).await?;
    let stopped = match forwarder.stop_requested() {
        true => stop_the_rest(&mut core, &how).await,
        false => super::stop::Outcome::default(),
    };
    drain_to_the_end(&mut core, cfg.probes.usage_wait).await;
    // The run's final figures, exact for every process that ended.
    core.export_metrics();
    let figures = core.pipe.agent_figures(taps.losses());
    let lost = Loss {
        kernel: figures.lost_events,
        accumulator: figures.accumulator_lost,
        undecodable: figures.undecodable,
    };
    let Core { pipe, .. } = core;
    // Every record is in: the probes detach (tens of ms of the kernel's grace periods)
    // beside the flush and the report instead of after them.
    let detach = std::thread::spawn(move || drop(taps));
    let ending = Ending {
        usage_missing: figures.usage_missing,
        still_running: figures.processes_tracked as usize,
        stopped,
        wall: started.elapsed(),
    };
    finish(
        cfg,
        pipe,
        (lost, ending),
        (how.summary, how.machines, machines.as_ref()),
        &files,
    )
    .await;
    let _ = detach.join();
    Ok(exit_code(status))
}

/// The command could not start: nothing was traced; the exit code a shell would give.
async fn cannot_start(exporter: Sink, files: &RunFiles, program: &str, e: std::io::Error) -> i32 {
    let dest = exporter.destinations.clone();
    let _ = exporter.shutdown(Duration::from_secs(1)).await;
    files.remove_unused(dest.spans.file.as_deref(), dest.metrics.file.as_deref());
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            errln!("pipetrace: cannot start `{program}`: {e}: check its name, or give its path");
            127
        }
        std::io::ErrorKind::PermissionDenied => {
            errln!(
                "pipetrace: cannot start `{program}`: {e}: make it executable (chmod +x) or \
                 give its interpreter first (pipetrace run -- sh {program})"
            );
            126
        }
        _ => {
            errln!("pipetrace: cannot start `{program}`: {e}");
            126
        }
    }
}

/// Serves the events (and the live view, on a terminal) until the command exits. Told to
/// stop, the command gets `--stop-grace` after the signal pipetrace passed on, then SIGKILL
/// (a command that ignores SIGTERM would otherwise run on as if never asked).
async fn until_it_exits(
    core: &mut Core<'_>,
    (mut child, root): (tokio::process::Child, &crate::pipeline::Spawned),
    (forwarder, how): (&super::forward::Forwarder, &How),
    cfg: &Config,
) -> anyhow::Result<std::process::ExitStatus> {
    let live_tasks = cfg.summary.live_tasks;
    let view_height = u16::try_from(live_tasks + 2).unwrap_or(u16::MAX);
    let mut view = (cfg.summary.live)
        .then(|| super::view::StatusArea::open(view_height))
        .flatten();
    let mut watcher = crate::live_view::Watcher::default();
    let mut view_tick = tokio::time::interval(Duration::from_secs(1));
    let mut stop_tick = tokio::time::interval(Duration::from_millis(100));
    let mut stop = super::stop::RootStop::new(root.pid, how.stop_grace);
    loop {
        let next = core.serve(async {
            tokio::select! {
                _ = view_tick.tick(), if view.is_some() => None,
                _ = stop_tick.tick(), if !stop.killed() => None,
                st = child.wait() => Some(st),
            }
        });
        match next.await? {
            None => {
                stop.check(forwarder.stop_requested());
                if let Some(v) = view.as_mut() {
                    let now = core.pipe.live_now(&mut watcher).into_iter().next();
                    let lines =
                        crate::live_view::lines(&now.unwrap_or_default(), usize::MAX, live_tasks);
                    v.draw(&lines);
                }
            }
            Some(st) => {
                let st = st.context("waiting for the command")?;
                forwarder.reaped();
                core.pipe.root_reaped(root, st.into_raw() as u32);
                return Ok(st);
            }
        }
    }
}

/// Sends what is left, writes the report and prints the end of the run.
async fn finish(
    cfg: &Config,
    pipe: Pipeline,
    (lost, ending): (Loss, Ending),
    (print_summary, print_machines, machines): (bool, bool, Option<&Catalog>),
    files: &RunFiles,
) {
    let (exporter, made) = pipe.end();
    // The summary is the only view that hands something back to `run`.
    let summary = made.into_iter().map(|Made::Summary(s)| s).next();
    let sizing = summary
        .as_ref()
        .zip(machines)
        .map(|(s, table)| crate::sizing::recommend_needs(&s.needs, table, cfg.diagnosis.headroom));
    let (dest, stats) = (exporter.destinations.clone(), exporter.stats());
    // What the backend has not taken by the end is kept for `pipetrace send`, not lost.
    let keep = (dest.spans.otlp.is_some() || dest.metrics.otlp.is_some())
        .then(|| super::send::unsent_path(cfg, &files.stem, dest.spans.file.as_deref()));
    let timeout = cfg.export.flush_timeout;
    let (flushed, kept) = match &keep {
        Some(file) => exporter.shutdown_keeping(timeout, file).await,
        None => (exporter.shutdown(timeout).await, None),
    };
    if !flushed {
        errln!(
            "pipetrace: telemetry not fully sent within {}; the rest is kept, spooled or \
             counted as dropped below",
            humantime::format_duration(timeout)
        );
    }
    // The run judged once, for the page and the terminal.
    let judged = summary.as_ref().map(Summary::judge);
    let report = match (&summary, &judged, cfg.report.html) {
        (Some(s), Some(judged), true) => {
            let path = report_path(cfg, &files.stem);
            let more = sizing.as_ref().map(crate::sizing::html).unwrap_or_default();
            let summed = (&s.table, s.kept.omitted);
            let html = crate::report::html_of_run(&s.kept.spans, summed, &more, judged);
            Some(write_report(&path, &html).map(|()| path))
        }
        _ => None,
    };
    let delivery = Delivery {
        to: &dest,
        stats: &stats,
        lost,
    };
    if let (Some(s), Some(dir)) = (&summary, &cfg.diagnosis.state_dir) {
        keep_for_compare(s, dir);
    }
    let summary = (summary.as_ref().zip(judged.as_ref())).filter(|_| print_summary);
    // The machines are the HTML report's; on the terminal only when asked.
    let mut machine_lines = String::new();
    if let Some(s) = sizing.as_ref().filter(|_| print_machines) {
        crate::sizing::text(s, &mut machine_lines);
    }
    print_end(cfg, summary, (&delivery, &machine_lines), &ending);
    if let Some(line) = stats.limits.describe() {
        errln!("{line}");
    }
    if let Some(k) = &kept {
        errout!("{}", super::send::kept_lines(cfg, k));
    }
    match report {
        Some(Ok(path)) => say!("pipetrace: report written to {}", path.display()),
        Some(Err(e)) => errln!("pipetrace: {e}"),
        _ => {}
    }
}

/// Sums the run up per task and tool for `pipetrace compare RUN_ID`; a failure is logged.
fn keep_for_compare(s: &Summary, state_dir: &Path) {
    let Some(trace) = s.trace_id() else { return };
    let run = crate::compare::Run::of_spans(trace, &s.kept.spans);
    if let Err(e) = crate::compare::store::save(state_dir, &run) {
        log::warn!(
            "cannot keep the run for `pipetrace compare` in {}: {e}",
            state_dir.display()
        );
    }
}

/// Starts the command. An ignored SIGPIPE would be inherited: `yes | head` in the pipeline
/// must end as it does without us; so would pipetrace's own CPU policy.
fn spawn(
    program: &str,
    args: &[String],
    cwd: Option<&Path>,
) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    // SAFETY: only signal(2) and sched_setscheduler(2), async-signal-safe, between fork
    // and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // pipetrace's own `cpu_policy` is not the command's.
            pipetrace_host::cpu_policy::restore()
        });
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.spawn()
}

/// Once the command has exited, the usage reports still due come within tens of
/// milliseconds on a quiet machine; the kernel holds a few back far longer (measured on a
/// storm: 0.3% of processes, none of them within 40 s). An exit waits for its report at
/// most this long, or twice the slowest report of the run, after its exit; then it ends
/// with its figures from exit (counted as such) instead of waiting out
/// `probes.usage_wait`: a loaded machine, whose reports come late, still gets its exact
/// figures, and an exit long past the slowest report does not hold the end.
const REPORTS_QUIET: Duration = Duration::from_millis(100);

/// How often the end drains the kernel's records while usage reports are due: the run's
/// end waits on them alone, and an empty drain costs microseconds.
const END_DRAIN: Duration = Duration::from_millis(2);

/// The root's exit event is queued before wait() returns, but a record another CPU is still
/// committing can hold the queue for a moment: drains until the run span is out. Snakemake
/// logs a job's end just after it: gives the log that moment, then names whatever still
/// waits as best it can. Counted in the pauses between drains, not by the clock: a paused
/// VM must not cut the wait short.
async fn drain_to_the_end(core: &mut Core<'_>, usage_wait: Duration) {
    let drain_every = core.events.drain_every();
    // Polling /proc is not cheap: that source keeps its own pace.
    let reports_pace = match core.events.is_polling() {
        true => drain_every,
        false => END_DRAIN,
    };
    let grace = usage_wait.max(Duration::from_secs(2));
    let mut waited = Duration::ZERO;
    loop {
        // Set at every drain from the run's slowest report so far: a slower report that
        // came meanwhile lengthens it. The drain settles the exits past it.
        let slowest = core.pipe.slowest_usage_report();
        core.pipe
            .wait_for_usage(REPORTS_QUIET.max(slowest * 2).min(usage_wait));
        core.drain_now();
        let late = waited > grace;
        if late {
            core.pipe.poll(true);
        }
        // Every exit settled too: a process stopped at the end (SIGKILL after the grace)
        // still waits for its report when the run has finished.
        if core.pipe.run_settled() || late {
            break;
        }
        // Fast while reports are due; the engines' records at the usual pace.
        let pace = match core.pipe.awaiting_usage() {
            0 => drain_every,
            _ => reports_pace,
        };
        waited += pace;
        tokio::time::sleep(pace).await;
    }
}

/// What the last lines say beside the tree: processes without figures, what was stopped or
/// still runs, and how long it took.
struct Ending {
    usage_missing: u64,
    still_running: usize,
    stopped: super::stop::Outcome,
    wall: Duration,
}

/// The end of a run on the terminal: the tree, the table and where the data went; without
/// the summary (`--no-summary`), still where the data went and what was lost.
fn print_end(
    cfg: &Config,
    summary: Option<(&Summary, &Judgement)>,
    (delivery, machines): (&Delivery, &str),
    end: &Ending,
) {
    let Some((s, judged)) = summary else {
        let mut text = String::new();
        delivery.render(&mut text);
        if delivery.troubled() || !crate::print::QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            errout!("{text}");
        }
        return;
    };
    let (tasks, tools) = (cfg.summary.max_tasks, cfg.summary.max_tools_per_task);
    let text = s.render(judged, (tasks, tools), end.wall, machines, delivery);
    errout!("\n{text}");
    if end.usage_missing > 0 {
        errln!(
            "pipetrace: {} processes have no resource figures: the kernel's record of their \
             exit was lost (see the lost-event count above)",
            end.usage_missing
        );
    }
    match end.stopped.describe() {
        Some(line) => errln!("{line}"),
        None if end.still_running > 0 => errln!(
            "pipetrace: {} processes of the run still run (started in the background, they \
             outlived the command); not exported",
            end.still_running
        ),
        None => {}
    }
}

/// Where the HTML report goes: the configured path, else beside the run's trace file (or
/// the name claimed for it).
fn report_path(cfg: &Config, stem: &Path) -> PathBuf {
    if let Some(p) = &cfg.report.path {
        return p.clone();
    }
    pipetrace_export::export::paths::report_beside(stem)
}

/// The HTML report written to `path`, its folder made where missing (as every command
/// writes a file it was given).
pub(super) fn write_report(
    path: &Path,
    html: &str,
) -> Result<(), pipetrace_export::export::paths::WriteError> {
    pipetrace_export::export::paths::write_creating(path, html)
}

/// pipetrace was told to stop and the command's root has ended: stops what else of the run
/// still runs (SIGTERM, then SIGKILL after `--stop-grace`) while taking in their ends, or
/// with `--keep-running` leaves them and says so.
async fn stop_the_rest(core: &mut Core<'_>, how: &How) -> super::stop::Outcome {
    use super::stop::{Outcome, signal_all};
    let every = core.events.drain_every();
    core.drain_now();
    let left = core.pipe.still_running();
    if how.keep_running {
        return Outcome {
            left_running: left.iter().map(|k| k.pid).collect(),
            ..Outcome::default()
        };
    }
    let terminated = signal_all(&left, libc::SIGTERM);
    // Counted in drains, not by the clock: a paused VM must not cut the grace short.
    let mut waited = Duration::ZERO;
    while waited < how.stop_grace && !core.pipe.still_running().is_empty() {
        tokio::time::sleep(every).await;
        waited += every;
        core.drain_now();
    }
    let killed = signal_all(&core.pipe.still_running(), libc::SIGKILL);
    let mut waited = Duration::ZERO;
    while killed > 0 && waited < Duration::from_secs(2) && !core.pipe.still_running().is_empty() {
        tokio::time::sleep(every).await;
        waited += every;
        core.drain_now();
    }
    Outcome {
        terminated,
        killed,
        left_running: Vec::new(),
        grace: how.stop_grace,
    }
}
