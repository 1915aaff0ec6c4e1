//! Prefect's own database (`$PREFECT_HOME/prefect.db`, SQLite in WAL mode, written by its
//! API server): flow runs (`flow_run` with its flow's name from `flow`) and task runs
//! (`task_run`), with names, UTC start and end times and `labels` (where Prefect's
//! OpenTelemetry trace context is kept as `__OTEL_TRACEPARENT`), and each task run's states
//! (`task_run_state`) stamped by the flow process, and each run's state now (`state_type`).
//! Opened read-only, by the host.
use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use crate::port::{Cell, Database, Host};

#[derive(Clone, Debug, PartialEq)]
pub struct FlowRun {
    pub id: String,
    pub name: String,
    pub flow: String,
    pub start: Option<SystemTime>,
    pub end: Option<SystemTime>,
    pub traceparent: Option<String>,
    /// The task run of its parent flow that it runs as (a subflow's).
    pub parent_task: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TaskRun {
    pub id: String,
    pub name: String,
    pub start: Option<SystemTime>,
    pub end: Option<SystemTime>,
    pub traceparent: Option<String>,
    /// The placeholder task run of a subflow (the subflow's runs are its own).
    pub subflow: bool,
}

/// The database a Prefect API server process has open. SQLite reads it itself: the host
/// says which file it is.
pub(crate) fn open_by(host: &dyn crate::port::Host, server_pid: u32) -> Option<PathBuf> {
    let mut dbs: Vec<PathBuf> = (host.open_files(server_pid).into_iter())
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .collect();
    dbs.sort_by_key(|p| p.file_name().is_none_or(|n| n != "prefect.db"));
    dbs.into_iter().next()
}

pub struct Db {
    db: Box<dyn Database>,
}

/// A time as Prefect stores it: UTC, `YYYY-MM-DD HH:MM:SS.ffffff`, no zone.
fn time(cell: Option<&Cell>) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(cell?.text()?.trim()).ok()
}

fn traceparent(labels: Option<&Cell>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(&labels?.text()?).ok()?;
    Some(v.get("__OTEL_TRACEPARENT")?.as_str()?.to_string())
}

fn text(row: &[Cell], i: usize) -> Option<String> {
    row.get(i)?.text()
}

impl Db {
    pub fn open(host: &dyn Host, path: &Path) -> Option<Self> {
        Some(Self {
            db: host.open_database(path)?,
        })
    }

    /// The rows of a query; none where it fails (a fresh database may not have its tables yet).
    fn rows(&self, sql: &str, params: &[&str]) -> Vec<Vec<Cell>> {
        self.db.rows(sql, params).unwrap_or_default()
    }

    /// Flow runs that started at or after `since`.
    pub(crate) fn flow_runs_since(&self, since: SystemTime) -> Vec<FlowRun> {
        let sql = "SELECT fr.id, fr.name, f.name, fr.start_time, fr.labels, fr.end_time, \
                   fr.parent_task_run_id FROM flow_run fr \
                   JOIN flow f ON f.id = fr.flow_id ORDER BY fr.created DESC LIMIT 500";
        let rows = self.rows(sql, &[]).into_iter().filter_map(|r| {
            Some(FlowRun {
                id: text(&r, 0)?,
                name: text(&r, 1)?,
                flow: text(&r, 2)?,
                start: time(r.get(3)),
                end: time(r.get(5)),
                traceparent: traceparent(r.get(4)),
                parent_task: text(&r, 6),
            })
        });
        let mut runs: Vec<FlowRun> = rows.collect();
        runs.retain(|f| f.start.is_some_and(|s| s >= since));
        runs.sort_by_key(|f| f.start);
        runs
    }

    /// The flow run task run `id` belongs to.
    pub(crate) fn flow_run_of_task(&self, id: &str) -> Option<String> {
        let sql = "SELECT flow_run_id FROM task_run WHERE id = ?1";
        text(self.rows(sql, &[id]).first()?, 0)
    }

    /// When task run `id` ended, if it has.
    pub(crate) fn task_run_end(&self, id: &str) -> Option<SystemTime> {
        let sql = "SELECT end_time FROM task_run WHERE id = ?1";
        time(self.rows(sql, &[id]).first()?.first())
    }

    /// How many task runs of `flow_run` are in each state type now (`state_type`, None for
    /// one with no state yet), subflows' placeholders left out.
    pub fn task_states(&self, flow_run: &str) -> Vec<(Option<String>, u32)> {
        let sql = "SELECT tr.state_type, COUNT(*) FROM task_run tr WHERE tr.flow_run_id = ?1 \
                   AND NOT EXISTS(SELECT 1 FROM flow_run c WHERE c.parent_task_run_id = tr.id) \
                   GROUP BY tr.state_type";
        let rows = self.rows(sql, &[flow_run]).into_iter();
        rows.filter_map(|r| Some((text(&r, 0), u32::try_from(r.get(1)?.int()?).ok()?)))
            .collect()
    }

    pub(crate) fn task_runs(&self, flow_run: &str) -> Vec<TaskRun> {
        // The row's start and end are first stamped by the server as the states arrive and
        // only later set to the flow process's own stamps: the states' are those at once.
        let sql = "SELECT tr.id, tr.name, \
                   COALESCE((SELECT MIN(s.timestamp) FROM task_run_state s \
                     WHERE s.task_run_id = tr.id AND s.type = 'RUNNING'), tr.start_time), \
                   COALESCE((SELECT MAX(s.timestamp) FROM task_run_state s \
                     WHERE s.task_run_id = tr.id AND s.type IN \
                     ('COMPLETED', 'FAILED', 'CRASHED', 'CANCELLED')), tr.end_time), \
                   tr.labels, \
                   EXISTS(SELECT 1 FROM flow_run c WHERE c.parent_task_run_id = tr.id) \
                   FROM task_run tr WHERE tr.flow_run_id = ?1";
        let rows = self.rows(sql, &[flow_run]).into_iter();
        rows.filter_map(|r| {
            Some(TaskRun {
                id: text(&r, 0)?,
                name: text(&r, 1)?,
                start: time(r.get(2)),
                end: time(r.get(3)),
                traceparent: traceparent(r.get(4)),
                subflow: r.get(5)?.int()? != 0,
            })
        })
        .collect()
    }
}
