//! Stall detection over running work: each sample gives every running process's part of its
//! task's (and its tools') progress signature; a signature that stops changing for
//! `diagnosis.stall_after` opens a stall. Fed by the sampler, read by the spans and metrics.
use std::collections::{BTreeMap, HashMap};

use super::{Stall, Stalls};
use crate::{
    attribution::{Attributor, Role},
    event::ProcKey,
    tree::Tree,
};

/// A tool's stall record unseen this long belongs to a process that gets no span (a wrapper
/// that adds no level): forgotten. Ended tools are taken within `probes.usage_wait`.
const FORGET_NS: u64 = 600_000_000_000;

/// Ancestors walked from a process to the tools above it, against a malformed tree.
const MAX_DEPTH: usize = 64;

/// Running tasks by (pipeline, task name): how many run, and how many of them are stalled.
pub type TaskCounts = BTreeMap<(String, String), u64>;

/// Each sampled process's task and its own part of the progress signatures.
pub type Parts = HashMap<ProcKey, (ProcKey, u64)>;

pub struct StallWatch {
    tasks: Stalls,
    tools: Stalls,
    running: TaskCounts,
    stalled: TaskCounts,
}

impl StallWatch {
    pub fn new(after: std::time::Duration) -> Self {
        Self {
            tasks: Stalls::new(after),
            tools: Stalls::new(after),
            running: TaskCounts::new(),
            stalled: TaskCounts::new(),
        }
    }

    /// Each running task's and tool's progress signature at `now_ns`, from each process's
    /// own part: stalls open and close.
    pub fn observe(&mut self, attr: &Attributor, tree: &Tree, own: &Parts, now_ns: u64) {
        self.observe_tools(attr, tree, own, now_ns);
        let mut progress: HashMap<ProcKey, u64> = HashMap::new();
        for (t, part) in own.values() {
            let sig = progress.entry(*t).or_insert_with(|| attr.ended_in(t));
            *sig = sig.wrapping_add(*part);
        }
        self.stalled.clear();
        self.running.clear();
        let named = |t: &ProcKey| {
            let label = attr.running_name(t)?;
            let run = attr.membership(t)?.run;
            Some((
                attr.run_name(run).unwrap_or_default().to_string(),
                label.to_string(),
            ))
        };
        for (t, sig) in progress {
            self.tasks.observe(t, sig, now_ns);
            if let Some(n) = named(&t) {
                *self.running.entry(n.clone()).or_default() += 1;
                self.stalled.entry(n).or_default();
            }
        }
        for t in self.tasks.stalled() {
            if let Some(n) = named(&t) {
                *self.stalled.entry(n).or_default() += 1;
            }
        }
    }

    /// A running tool's signature is its own work and its descendants' (and their coming and
    /// going): a wrapper waiting on a busy child is not stalled.
    fn observe_tools(&mut self, attr: &Attributor, tree: &Tree, own: &Parts, now_ns: u64) {
        let mut tools: HashMap<ProcKey, u64> = HashMap::new();
        for (key, (_, part)) in own {
            let mut at = Some(*key);
            for _ in 0..MAX_DEPTH {
                let Some(k) = at else { break };
                // Up to the task's root: the task's own stall covers it.
                if attr.membership(&k).is_none_or(|m| m.role != Role::Member) {
                    break;
                }
                let Some(p) = tree.get(&k) else { break };
                if p.exit.is_none() {
                    let sig = tools.entry(k).or_default();
                    *sig = sig.wrapping_add(*part);
                }
                at = p.parent;
            }
        }
        for (k, sig) in tools {
            self.tools.observe(k, sig, now_ns);
        }
        (self.tools).forget_unseen_since(now_ns.saturating_sub(FORGET_NS));
    }

    /// Whether running task `task` was stalled at the last sample.
    pub fn task_stalled(&self, task: ProcKey) -> bool {
        self.tasks.stalled().any(|t| t == task)
    }

    /// The stall periods of a task that ended at `end_ns`, and how long it made no
    /// progress in all (ns).
    pub fn take_task(&mut self, task: ProcKey, end_ns: u64) -> (Vec<Stall>, u64) {
        self.tasks.take(task, end_ns)
    }

    /// The stall periods of a tool that ended at `end_ns`.
    pub fn take_tool(&mut self, tool: ProcKey, end_ns: u64) -> Vec<Stall> {
        self.tools.take(tool, end_ns).0
    }

    /// Running and stalled tasks at the last sample.
    pub fn counts(&self) -> (&TaskCounts, &TaskCounts) {
        (&self.running, &self.stalled)
    }
}
