//! Spans of a run that waits for its identity are held back: a Snakemake cluster head is
//! named alike on every node by the run directory its first submission makes, so a task it
//! ran before (a local rule) would otherwise be built in a trace the run then leaves. What
//! is held goes out once the run knows its identity, when it ends, or past [`HOLD_MAX`].
use std::collections::{HashMap, HashSet};

use super::{Attributor, Finished};
use crate::event::ProcKey;

/// Spans held for one run at most; past that they go in the trace they have.
const HOLD_MAX: usize = 4096;

#[derive(Default)]
pub(super) struct Held {
    by_run: HashMap<ProcKey, Vec<Finished>>,
    /// Released since the last output, to go first in the next.
    released: Vec<Finished>,
    /// Runs that held `HOLD_MAX` and hold no more.
    full: HashSet<ProcKey>,
}

fn run_of(f: &Finished) -> ProcKey {
    match f {
        Finished::Tool { run, .. } | Finished::Task { run, .. } | Finished::Engine { run, .. } => {
            *run
        }
        Finished::Run { proc, .. } => proc.key,
    }
}

impl Held {
    /// Spans to go first in the next output.
    pub(super) fn release(&mut self, spans: impl IntoIterator<Item = Finished>) {
        self.released.extend(spans);
    }
}

impl Attributor {
    /// What of `out` can be built now: all but the spans of runs waiting for their identity,
    /// after what such runs released since.
    pub(super) fn unheld(&mut self, out: Vec<Finished>) -> Vec<Finished> {
        let mut ready = std::mem::take(&mut self.held.released);
        for f in out {
            let run = run_of(&f);
            if matches!(f, Finished::Run { .. }) {
                ready.extend(self.held.by_run.remove(&run).unwrap_or_default());
                self.held.full.remove(&run);
                ready.push(f);
                continue;
            }
            let waits = !self.held.full.contains(&run)
                && self
                    .runs
                    .get(&run)
                    .is_some_and(|r| r.adapter.multi_node().is_some_and(|m| m.awaits_identity()));
            if !waits {
                ready.push(f);
                continue;
            }
            let held = self.held.by_run.entry(run).or_default();
            held.push(f);
            if held.len() >= HOLD_MAX {
                ready.extend(self.held.by_run.remove(&run).unwrap_or_default());
                self.held.full.insert(run);
            }
        }
        ready
    }

    /// Run `run` is named alike on every node now (its spans are built in the shared trace
    /// from here on): what it held goes first in the next output.
    pub(super) fn release(&mut self, run: ProcKey) {
        if let Some(held) = self.held.by_run.remove(&run) {
            self.held.released.extend(held);
        }
    }
}
