//! Task runs and processes for the matching tests, on a clock of the test's own unit.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{db::TaskRun, matching::Process};

/// Times as whole counts of `unit` after a fixed instant.
pub struct Clock(pub Duration);

impl Clock {
    pub(crate) fn at(&self, t: u64) -> SystemTime {
        UNIX_EPOCH
            + Duration::from_secs(1_800_000_000)
            + Duration::from_nanos(t * self.0.as_nanos() as u64)
    }

    pub(crate) fn run(&self, name: &str, start: u64, end: Option<u64>) -> TaskRun {
        TaskRun {
            id: format!("id-{name}"),
            name: name.into(),
            start: Some(self.at(start)),
            end: end.map(|e| self.at(e)),
            traceparent: None,
            subflow: false,
        }
    }

    pub(crate) fn process(&self, thread: u32, start: u64, end: u64) -> Process {
        Process {
            thread,
            start: self.at(start),
            end: self.at(end),
        }
    }
}
