//! The few span fields the judgement reads, from whichever source: the SDK's spans as a run
//! exports them, or OTLP spans read back from a trace file (the command crate decodes both).
use std::collections::BTreeMap;

use pipetrace_semconv::attr;

/// What a span stands for in the run -> task -> tool tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Run,
    Task,
    Tool,
    /// The engine's helpers of a run, folded into one span.
    Engine,
    /// A run or task found running (`run started`, `task started`).
    Started,
}

#[derive(Clone, Debug)]
pub struct ReportSpan {
    /// The trace, one per run.
    pub trace: String,
    pub id: String,
    pub parent: Option<String>,
    pub kind: Kind,
    pub name: String,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    pub numbers: BTreeMap<String, f64>,
    pub texts: BTreeMap<String, String>,
    /// String-array attributes (a task's inputs and outputs, bounded lists of paths).
    pub lists: BTreeMap<String, Vec<String>>,
    pub events: Vec<ReportEvent>,
}

/// A span event with its figures, so the report can say what happened in words.
#[derive(Clone, Debug)]
pub struct ReportEvent {
    pub name: String,
    /// Unix nanoseconds.
    pub time: u64,
    pub numbers: BTreeMap<String, f64>,
    pub texts: BTreeMap<String, String>,
}

impl ReportSpan {
    pub fn num(&self, key: &str) -> f64 {
        self.numbers.get(key).copied().unwrap_or(0.0)
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        self.texts.get(key).map(String::as_str)
    }

    pub fn secs(&self) -> f64 {
        self.end.saturating_sub(self.start) as f64 / 1e9
    }

    pub fn cpu(&self) -> f64 {
        self.num(attr::CPU_USER_TIME) + self.num(attr::CPU_SYSTEM_TIME)
    }
}
