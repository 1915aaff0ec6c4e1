//! How far a flow run is, from Prefect's database: its task runs so far by the type of their
//! state now. Prefect records a task run as it is called or submitted (Pending, while it
//! waits for the futures it depends on), so the total grows as the flow goes.
use super::super::Progress;

/// Task runs counted by state type: waiting (Pending, Scheduled such as AwaitingRetry,
/// Paused, or no state yet), running (Running, Cancelling), done (Completed, Failed,
/// Crashed, Cancelled).
pub fn of(states: impl IntoIterator<Item = (Option<String>, u32)>) -> Progress {
    let mut p = Progress {
        queued: Some(0),
        ..Default::default()
    };
    for (state, n) in states {
        p.total += n;
        match state.as_deref() {
            Some("COMPLETED" | "FAILED" | "CRASHED" | "CANCELLED") => p.done += n,
            Some("RUNNING" | "CANCELLING") => {}
            _ => p.queued = p.queued.map(|q| q + n),
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engines::prefect::db::Db;

    #[test]
    fn task_runs_count_by_the_type_of_their_state_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prefect.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "CREATE TABLE flow_run (id TEXT, parent_task_run_id TEXT);
             CREATE TABLE task_run (id TEXT, flow_run_id TEXT, state_type TEXT);
             INSERT INTO flow_run VALUES ('fr1', NULL), ('sub', 'tr6'), ('fr2', NULL);
             INSERT INTO task_run VALUES ('tr1', 'fr1', 'COMPLETED'), ('tr2', 'fr1', 'FAILED'),
               ('tr3', 'fr1', 'RUNNING'), ('tr4', 'fr1', 'PENDING'), ('tr5', 'fr1', 'PENDING'),
               ('tr6', 'fr1', 'RUNNING'), ('tr7', 'sub', 'SCHEDULED'), ('tr8', 'fr1', NULL),
               ('tr9', 'fr2', 'RUNNING');",
        )
        .unwrap();
        let db = Db::open(&path).unwrap();
        // tr6 is the subflow's placeholder: its own run's task runs count instead.
        let p = of(["fr1", "sub"].iter().flat_map(|f| db.task_states(f)));
        assert_eq!(
            p,
            Progress {
                done: 2,
                total: 7,
                queued: Some(4)
            }
        );
        assert_eq!(p.running(), Some(1));
        assert_eq!(of([]).total, 0);
    }
}
