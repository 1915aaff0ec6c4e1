//! How far a flow run is, from Prefect's database: its task runs so far by the type of their
//! state now. Prefect records a task run as it is called or submitted (Pending, while it
//! waits for the futures it depends on), so the total grows as the flow goes.
use super::super::Progress;

/// Task runs counted by state type: waiting (Pending, Scheduled such as AwaitingRetry,
/// Paused, or no state yet), running (Running, Cancelling), done (Completed, Failed,
/// Crashed, Cancelled).
pub(crate) fn of(states: impl IntoIterator<Item = (Option<String>, u32)>) -> Progress {
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

    #[test]
    fn task_runs_count_by_the_type_of_their_state_now() {
        // As Db::task_states answers for a flow run and its subflow (the host crate's tests
        // run that query on a real SQLite database).
        let states = [
            (Some("COMPLETED"), 1),
            (Some("FAILED"), 1),
            (Some("RUNNING"), 1),
            (Some("PENDING"), 2),
            (None, 1),
            (Some("SCHEDULED"), 1),
        ];
        let p = of(states.map(|(s, n)| (s.map(String::from), n)));
        assert_eq!(
            p,
            Progress {
                done: 2,
                total: 7,
                queued: Some(4),
                cached: 0,
            }
        );
        assert_eq!(p.running(), Some(1));
        assert_eq!(of([]).total, 0);
    }
}
