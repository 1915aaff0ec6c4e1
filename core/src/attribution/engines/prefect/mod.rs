//! Prefect 3: a flow runs inside the process that calls it (`python flow.py`), with its
//! tasks: called ones on the flow's main thread, submitted ones on `ThreadPoolExecutor`
//! threads. That process starts Prefect's temporary API server as a child
//! (`python -m uvicorn --factory prefect.server.api.server:create_app ...`), which is how
//! the run is recognised, and the server keeps the runs in Prefect's own database. A flow run
//! is the run (named by its flow, labelled with the flow-run name); each process the flow
//! process starts is a task named by the task run that started it (see `matching`): one
//! that ran from the process's start to its end, its thread's own (the kernel says which
//! thread forked) when it can be, else the first-started one no other thread holds. What the
//! server and Prefect's imports start are helpers. A flow that talks to a standing server
//! (`prefect server start`) is recognised by its connection to it instead (see `standing`).
mod assign;
pub mod db;
#[cfg(test)]
mod fixtures;
mod matching;
mod progress;
mod servers;
mod standing;

pub(crate) use standing::{is_multiprocessing, is_standing_server, runs_a_flow_run, server_of};

use std::{
    path::PathBuf,
    time::{Duration, SystemTime},
};

use db::{Db, FlowRun, TaskRun};
use matching::{Process, Threads};

use super::{Class, Ended, Engine, EngineRun, Place, TaskRuns, by_tool, digest};
use crate::{
    attribution::{TaskInfo, naming},
    tree::{Image, Proc},
};

/// As `pipetrace.run.engine` and `attribution.engines` name it.
pub const KIND: super::EngineKind = super::EngineKind::engine("prefect");

pub const ENGINE: Engine = Engine {
    kind: KIND,
    // Recognised by the server it starts (see `is_server`), not by its own command line.
    recognises: |_, _| false,
    start,
    // Its records are in a database, opened by the server, never by a task.
    bookkeeping: crate::files::Bookkeeping {
        parts: &[],
        names: &[],
    },
    started_by_parent: Some(starts_a_server),
    starts_in: None,
    watches: Some(servers::watch),
    allocates: None,
    python_package: Some("prefect"),
};

/// A flow process is known by the temporary API server it starts, not by its own command
/// line. `prefect server start --background` starts the same server, and is no flow.
fn starts_a_server(image: &Image, parent: &Proc) -> bool {
    let launcher = (parent.image.as_ref()).is_some_and(is_standing_server);
    is_server(image) && !launcher
}

/// Whether a process runs Prefect's temporary API server: its parent runs a flow.
pub(crate) fn is_server(image: &Image) -> bool {
    image
        .argv
        .iter()
        .any(|a| a == "prefect.server.api.server:create_app")
}

/// How long after a task's process ends its task run's row may still be on its way: the
/// server writes it from events the flow process sends.
const ROW_DELAY: Duration = Duration::from_secs(1);

struct Prefect {
    /// Finds the API server's database, and the clock rows are judged by.
    host: crate::port::SharedHost,
    script: String,
    key: String,
    started: SystemTime,
    server: Option<u32>,
    /// The server was running before the flow (`prefect server start`): its database is
    /// open from the start, so one not found is one pipetrace cannot read.
    standing: bool,
    db: Option<Db>,
    db_path: Option<PathBuf>,
    /// The first flow run of this process: names the run.
    flow: Option<FlowRun>,
    /// The task run each thread of the flow process ran last.
    threads: Threads,
    /// The processes matched so far (the latest `KNOWN`): what each thread ran before.
    known: Vec<Process>,
}

/// How many matched processes are kept for their threads' context.
const KNOWN: usize = 4096;

fn start(image: &Image, started: SystemTime, host: crate::port::SharedHost) -> Box<dyn EngineRun> {
    let script = naming::tool_name_of(naming::program_name(&image.path, &image.argv), &image.argv);
    let cwd = image.cwd.as_ref().map(|c| c.display().to_string());
    let key = digest(&[
        "prefect",
        &image.argv.join("\u{1f}"),
        cwd.as_deref().unwrap_or(""),
    ]);
    Box::new(Prefect {
        host,
        key: format!("{}-{key}", naming::clean_name(&script)),
        script,
        started,
        server: None,
        standing: false,
        db: None,
        db_path: None,
        flow: None,
        threads: Threads::default(),
        known: Vec::new(),
    })
}

impl Prefect {
    /// Prefect's database, once the server has it open.
    fn db(&mut self) -> Option<&Db> {
        if self.db.is_none() {
            let path = (self.db_path.clone()).or_else(|| db::open_by(&*self.host, self.server?))?;
            self.db = Db::open(&*self.host, &path);
            self.db_path = Some(path);
        }
        self.db.as_ref()
    }

    /// The flow runs of this process (started since it did).
    fn flow_runs(&mut self) -> Vec<FlowRun> {
        let since = self.started - Duration::from_secs(2);
        let standing = self.standing;
        let Some(db) = self.db() else {
            return Vec::new();
        };
        let mut runs = db.flow_runs_since(since);
        // A standing server's database holds every client's runs; a temporary one, ours.
        if standing {
            runs = standing::own_flow_runs(&runs, |t| db.flow_run_of_task(t));
        }
        // Read again each time: Prefect adds the run's trace context just after it starts.
        if let Some(first) = runs.first() {
            self.flow = Some(first.clone());
        }
        runs
    }

    /// The task runs of this process's flow runs (subflows' placeholders left out).
    fn task_runs(&mut self) -> Vec<TaskRun> {
        let runs = self.flow_runs();
        let Some(db) = self.db.as_ref() else {
            return Vec::new();
        };
        (runs.iter())
            .flat_map(|f| db.task_runs(&f.id))
            .filter(|t| !t.subflow)
            .collect()
    }
}

impl Prefect {
    /// A standing server with no database pipetrace can read (PostgreSQL, say): its flows'
    /// processes are tasks named by their programs, and the log says why.
    fn unreadable(&mut self) -> bool {
        if !self.standing || self.db().is_some() {
            return false;
        }
        if let Some(server) = self.server.take() {
            log::warn!(
                "prefect: the API server (pid {server}) of {} has no SQLite database open \
                 that pipetrace can read: its tasks are named by their programs",
                self.script
            );
        }
        true
    }

    fn remember_known(&mut self, p: Process) {
        if self.known.len() >= KNOWN {
            self.known.drain(..KNOWN / 2);
        }
        self.known.push(p);
    }
}

/// What matching needs of an ended process.
fn process(e: &Ended) -> Process {
    Process {
        thread: e.proc.forked_by,
        start: e.start,
        end: e.end,
    }
}

impl TaskRuns for Prefect {
    fn group_ended(&mut self, id: &str) -> bool {
        if self.unreadable() {
            return true;
        }
        // Its processes' rows may land up to ROW_DELAY after they end, and they end first.
        let end = self.db().and_then(|db| db.task_run_end(id));
        end.is_some_and(|e| e + 2 * ROW_DELAY < self.host.now())
    }

    fn trace_parent(&mut self) -> Option<String> {
        self.flow.as_ref()?.traceparent.clone()
    }

    fn served_by(&mut self, server: u32) {
        self.server = Some(server);
        self.standing = true;
    }
}

impl EngineRun for Prefect {
    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        let flow = self.flow.as_ref().map(|f| f.flow.clone());
        naming::clean_name(&flow.unwrap_or_else(|| self.script.clone()))
    }

    fn run_label(&self) -> Option<String> {
        self.flow.as_ref().map(|f| naming::clean_name(&f.name))
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn task_runs(&mut self) -> Option<&mut dyn TaskRuns> {
        Some(self)
    }

    /// The flow runs' task runs by state, from Prefect's database.
    fn progress(&mut self) -> Option<super::Progress> {
        if self.unreadable() {
            return None;
        }
        let runs = self.flow_runs();
        let db = self.db.as_ref().filter(|_| !runs.is_empty())?;
        Some(progress::of(
            runs.iter().flat_map(|f| db.task_states(&f.id)),
        ))
    }

    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class {
        if is_server(image) {
            self.server = Some(p.key.pid);
            return Class::Helper;
        }
        if !place.parent_is_root {
            return Class::Undecided;
        }
        if self.unreadable() {
            return Class::Task;
        }
        // What Prefect's imports start comes before any flow runs.
        match self.flow_runs().is_empty() {
            true => Class::Helper,
            false => Class::Task,
        }
    }

    fn provisional(&mut self, task: &Proc) -> Option<String> {
        self.threads.last(task.forked_by).map(|t| t.name.clone())
    }

    fn resolve(&mut self, ended: &[Ended], force: bool) -> Vec<Option<TaskInfo>> {
        if self.unreadable() {
            return ended.iter().map(|e| Some(by_tool(e.proc))).collect();
        }
        let now = self.host.now();
        let tasks = self.task_runs();
        let batch: Vec<Process> = ended.iter().map(process).collect();
        // The batch's matches inform each other; only final ones are kept for later batches.
        let found = assign::decide(&tasks, &batch, &self.known, &self.threads);
        let mut named: Vec<Option<TaskInfo>> = ended.iter().map(|_| None).collect();
        for (i, found) in found.into_iter().enumerate() {
            let (e, p) = (&ended[i], &batch[i]);
            let last_look = force || e.overdue;
            let settled = last_look || (found.sure && e.end + ROW_DELAY < now);
            named[i] = match found.run {
                Some(t) if settled => {
                    self.remember_known(*p);
                    self.threads.remember(p.thread, &t, true, &found.others);
                    Some(TaskInfo {
                        name: t.name,
                        run_id: t.id,
                        traceparent: t.traceparent,
                        alternatives: found.others,
                        ..Default::default()
                    })
                }
                Some(_) => None,
                // No row yet: under load the server writes it seconds late. Named by
                // its tool only once overdue (or at the end), never after ROW_DELAY.
                None if last_look => {
                    log::debug!(
                        "prefect: no task run was running for pid {}",
                        e.proc.key.pid
                    );
                    Some(by_tool(e.proc))
                }
                None => None,
            };
        }
        named
    }
}
