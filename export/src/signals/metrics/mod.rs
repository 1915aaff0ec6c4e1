//! Live metrics: per (pipeline, task, tool), CPU, memory, disk and network of running and
//! finished work, exported every interval.
//!
//! Counters are exact for processes that ended (the kernel's figures at reap) plus the last
//! sample of those still running; a process counts in one series for its whole life, so the
//! totals only grow. Task names are those the attribution gives while the task runs (for
//! Snakemake, its rule from the log); once a task's series is chosen it stays.
//!
//! The sampler runs every interval even with `metrics.enabled: false`: stall detection
//! needs it. Only the export is off then.
mod agent;
pub mod gpu;
pub mod progress;
mod proto;
mod series;

use std::{collections::HashMap, time::SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use pipetrace_probes_common::Accumulator;

pub use agent::AgentFigures;
use series::Table;
pub use series::{Counters, SeriesKey};

use pipetrace_core::accounting::Measured;
use pipetrace_core::attribution::{Attributor, Finished, Membership, Role};
use pipetrace_core::diagnosis::watch::{Parts, TaskCounts};
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Tree;

/// Processes younger than this are not sampled: most are about to exec (their tool name
/// would change) or end (their exact figures follow at once).
const MIN_AGE_NS: u64 = 1_000_000_000;

/// A process's part of a progress signature: its CPU, bytes and characters moved, and its
/// finished waits for storage (a wait for the disk is not idleness).
fn progress_of(c: &Counters, io_chars: u64) -> u64 {
    let work = c.cpu_user_ns + c.cpu_system_ns + c.disk_read_bytes + c.disk_write_bytes;
    let work = work + c.net_tx_bytes + c.net_rx_bytes + c.disk_wait_ns;
    work.wrapping_add(io_chars)
}

/// An ended process's figures, waiting for its task's name.
struct Held {
    run: ProcKey,
    pipeline: String,
    tool: String,
    counters: Counters,
    peak: u64,
}

pub struct Metrics {
    cfg: pipetrace_config::Metrics,
    measured: Measured,
    table: Table,
    /// The series name each task got, with its run: sticky for the task's life.
    labels: HashMap<ProcKey, (ProcKey, String)>,
    /// Ended processes of tasks not named yet.
    held: HashMap<ProcKey, Vec<Held>>,
    /// Finished tasks whose label stays while a process of theirs may still end.
    finished: Vec<ProcKey>,
    /// The last sample of each running process, and its series.
    last: HashMap<ProcKey, (SeriesKey, Counters)>,
    /// Memory limits of running tasks, by (pipeline, task).
    limits: HashMap<(String, String), u64>,
    /// Failed tasks by (pipeline, task) since the agent started: counted, and as exported.
    failed: proto::Failed,
    findings: proto::Failed,
    resource: opentelemetry_proto::tonic::resource::v1::Resource,
    /// When the agent's own counters started.
    started: SystemTime,
    /// The clock series and exports are stamped with.
    host: pipetrace_core::port::SharedHost,
}

impl Metrics {
    pub fn new(
        cfg: &pipetrace_config::Metrics,
        measured: Measured,
        resource: &opentelemetry_sdk::Resource,
        host: pipetrace_core::port::SharedHost,
    ) -> Self {
        Self {
            started: host.now(),
            failed: proto::Failed::default(),
            findings: proto::Failed::default(),
            host,
            cfg: cfg.clone(),
            measured,
            table: Table::new(cfg.max_series),
            labels: HashMap::new(),
            held: HashMap::new(),
            finished: Vec::new(),
            last: HashMap::new(),
            limits: HashMap::new(),
            resource: proto::resource(resource),
        }
    }

    /// Tasks named at a sample so far (and not ended), with their run and name.
    pub fn labelled(&self) -> impl Iterator<Item = (ProcKey, ProcKey, &str)> + '_ {
        (self.labels.iter()).map(|(t, (run, name))| (*t, *run, name.as_str()))
    }

    /// Attribute sets placed in the overflow series so far.
    pub fn overflowed(&self) -> u64 {
        self.table.overflowed
    }

    #[cfg(test)]
    pub(crate) fn series_count(&self) -> usize {
        self.table.series.len()
    }

    /// A process's end is final: its exact figures replace its last sample.
    pub fn on_exit(&mut self, attr: &Attributor, tree: &Tree, key: ProcKey) {
        let last = self.last.remove(&key);
        let (Some(p), Some(m)) = (tree.get(&key), attr.membership(&key)) else {
            return;
        };
        let Some(usage) = p.usage else { return };
        let mut counters = Counters::from_usage(&usage);
        counters.oom_kills = u64::from(p.oom.is_some());
        let peak = usage.peak_bytes();
        let pipeline = attr.run_name(m.run).unwrap_or_default().to_string();
        let tool = Attributor::tool_of(p);
        let task = match m.task {
            None => String::new(),
            Some(t) => match self.labels.get(&t) {
                Some((_, label)) => label.clone(),
                None => {
                    self.held.entry(t).or_default().push(Held {
                        run: m.run,
                        pipeline,
                        tool,
                        counters,
                        peak,
                    });
                    return;
                }
            },
        };
        // The series its samples went to, if it was sampled: counters must not move. Its
        // sample leaves the live part as its exact figures join the finished part.
        let s = match &last {
            Some((k, _)) => self.table.series.get_mut(k),
            None => None,
        };
        let s = match s {
            Some(s) => s,
            None => self.table.get(&pipeline, &task, &tool, self.host.now()),
        };
        if let Some((_, sampled)) = &last {
            s.live = s.live.minus(sampled);
        }
        s.finished
            .add(&counters.max(&last.map(|l| l.1).unwrap_or_default()));
        s.peak = s.peak.max(peak);
    }

    /// A run of `pipeline` was judged with these findings (their kinds).
    pub fn found<'k>(&mut self, pipeline: &str, kinds: impl Iterator<Item = &'k str>) {
        for k in kinds {
            self.findings.count(pipeline.to_string(), k.to_string());
        }
    }

    /// Names tasks as they finish, and releases what waited for the name.
    pub fn on_finished(&mut self, f: &Finished, attr: &Attributor) {
        match f {
            Finished::Task {
                proc, run, info, ..
            } => {
                if info.failed(proc) {
                    let pipeline = attr.run_name(*run).unwrap_or_default().to_string();
                    self.failed.count(pipeline, info.name.clone());
                }
                let label = self
                    .labels
                    .entry(proc.key)
                    .or_insert_with(|| (*run, info.name.clone()))
                    .1
                    .clone();
                let held = self.held.remove(&proc.key).unwrap_or_default();
                for h in held {
                    let s = self
                        .table
                        .get(&h.pipeline, &label, &h.tool, self.host.now());
                    s.finished.add(&h.counters);
                    s.peak = s.peak.max(h.peak);
                }
                self.finished.push(proc.key);
            }
            Finished::Run { proc, .. } => {
                self.labels.retain(|_, (run, _)| *run != proc.key);
                let labels = &self.labels;
                self.finished.retain(|t| labels.contains_key(t));
                self.held
                    .retain(|_, v| v.first().is_some_and(|h| h.run != proc.key));
            }
            Finished::Tool { .. } | Finished::Engine { .. } => {}
        }
    }

    /// Samples every running process of every run. `net` gives what the kernel has counted
    /// for a live process so far (network bytes).
    pub fn sample(
        &mut self,
        host: &dyn pipetrace_core::port::Host,
        attr: &Attributor,
        tree: &Tree,
        now_ns: u64,
        net: &dyn Fn(u32) -> Accumulator,
    ) -> Parts {
        self.forget_finished(attr);
        for s in self.table.series.values_mut() {
            s.live = Counters::default();
            s.rss_now = 0;
        }
        self.limits.clear();
        // Each process of a running task: its task, and its own part of the progress
        // signatures of that task and of the tools above it (its presence, however young, and
        // its figures): a process starting or ending, CPU or I/O all change them.
        let mut own = Parts::new();
        let members: Vec<_> = attr.members().collect();
        for (key, m) in members {
            let Some(p) = tree.get(&key) else { continue };
            // A task whose root has ended is over, whatever its processes still await.
            let running = |t: &ProcKey| tree.get(t).is_some_and(|r| r.exit.is_none());
            if let Some(t) = m.task.filter(running) {
                let presence = u64::from(key.pid).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                own.insert(key, (t, presence));
            }
            if p.settled {
                continue;
            }
            if now_ns.saturating_sub(p.start_ns) < MIN_AGE_NS {
                // Too young for a series of its own, but its work is its task's progress: a
                // task of sub-second tools one after another is not quiet.
                if let (Some((_, part)), None) = (own.get_mut(&key), &p.exit)
                    && let Some(l) = host.live(key.pid)
                {
                    let c = Counters::from_live(&l, &Accumulator::default());
                    *part = part.wrapping_add(progress_of(&c, l.io_chars));
                }
                continue;
            }
            self.sample_one(host, attr, (p, &m), net, &mut own);
        }
        own
    }

    /// One process old enough for a series of its own: its live figures into its series.
    fn sample_one(
        &mut self,
        host: &dyn pipetrace_core::port::Host,
        attr: &Attributor,
        (p, m): (&pipetrace_core::tree::Proc, &Membership),
        net: &dyn Fn(u32) -> Accumulator,
        own: &mut Parts,
    ) {
        let key = p.key;
        let pipeline = attr.run_name(m.run).unwrap_or_default().to_string();
        let Some(task) = self.task_label(attr, m) else {
            return;
        };
        // A process that ended (its exit event may still be on its way) keeps its last
        // sample until its exact figures replace it: counters never step back.
        let reading = match p.exit {
            None => host.live(key.pid),
            Some(_) => None,
        };
        let chars = reading.as_ref().map_or(0, |l| l.io_chars);
        let prev = self.last.get(&key);
        let (key_of, counters, rss, hwm) = match (reading, prev) {
            (Some(l), prev) => {
                let acc = net(key.pid);
                let c = Counters::from_live(&l, &acc);
                let k = match prev {
                    Some((k, _)) => k.clone(),
                    None => self.table.key_of(&pipeline, &task, &Attributor::tool_of(p)),
                };
                (k, c, l.rss_bytes, l.hwm_bytes)
            }
            (None, Some((k, c))) => (k.clone(), *c, 0, 0),
            (None, None) => return,
        };
        let s = match self.table.series.get_mut(&key_of) {
            Some(s) => s,
            None => (self.table).get(&key_of.pipeline, &key_of.task, &key_of.tool, host.now()),
        };
        if let Some((_, part)) = own.get_mut(&key) {
            *part = part.wrapping_add(progress_of(&counters, chars));
        }
        s.live.add(&counters);
        s.rss_now += rss;
        s.peak = s.peak.max(hwm);
        self.last.insert(key, (key_of, counters));
        if m.role == Role::TaskRoot
            && p.exit.is_none()
            && let Some(limit) = attr.allocation(&key).and_then(|a| a.memory_limit)
        {
            self.limits.insert((pipeline, task), limit);
        }
    }

    /// Forgets the labels of finished tasks none of whose processes can still end (the
    /// task's root leaves the attribution with the last of them). Kept until their run
    /// ended, they grew by a label per task: 100 MB for a run of a million tasks.
    fn forget_finished(&mut self, attr: &Attributor) {
        let labels = &mut self.labels;
        self.finished.retain(|t| {
            let gone = attr.membership(t).is_none();
            if gone {
                labels.remove(t);
            }
            !gone
        });
    }

    /// A member's task label ("" outside any task); `None` while its task has no name yet.
    fn task_label(&mut self, attr: &Attributor, m: &Membership) -> Option<String> {
        let Some(t) = m.task else {
            return Some(String::new());
        };
        if let Some((_, l)) = self.labels.get(&t) {
            return Some(l.clone());
        }
        let l = attr.running_name(&t)?.to_string();
        self.labels.insert(t, (m.run, l.clone()));
        Some(l)
    }

    /// The series a running process was last sampled into.
    pub fn series_of(&self, key: &ProcKey) -> Option<&SeriesKey> {
        self.last.get(key).map(|(k, _)| k)
    }

    /// The OTLP request for now, with the agent's own figures; None when metrics are off.
    pub fn collect(
        &mut self,
        figures: &AgentFigures,
        (running, stalled): (&TaskCounts, &TaskCounts),
    ) -> Option<ExportMetricsServiceRequest> {
        if !self.cfg.enabled {
            return None;
        }
        // One time stamp for every point of the request.
        let now = self.host.now();
        self.retire_ended();
        let mut req = proto::request(
            &self.table,
            &self.limits,
            proto::TaskCounts {
                running,
                stalled,
                failed: &self.failed,
                findings: &self.findings,
                since: self.started,
            },
            &self.resource,
            self.cfg.temporality,
            self.measured,
            now,
        );
        let own = agent::metrics(figures, self.started, now);
        if let Some(scope) = req
            .resource_metrics
            .first_mut()
            .and_then(|r| r.scope_metrics.first_mut())
        {
            scope.metrics.extend(own);
        }
        self.table.retired.clear();
        self.failed.exported();
        self.findings.exported();
        let running = self.running_series();
        for (k, s) in self.table.series.iter_mut() {
            s.exported = s.total();
            s.exported_at = now;
            // Nothing of it runs: this export held its final point.
            s.final_sent = !running.contains(k) && s.rss_now == 0;
            // The next interval's peak starts from what is resident now.
            s.peak = s.rss_now;
        }
        Some(req)
    }

    /// The series a running process was last sampled into.
    fn running_series(&self) -> std::collections::HashSet<SeriesKey> {
        self.last.values().map(|(k, _)| k.clone()).collect()
    }

    /// Series whose work has ended, whose final point went out at the last export, and to
    /// which nothing was added since: retired, so that the export follows the work running
    /// now and not all the work ever seen. One staleness marker each goes out instead.
    fn retire_ended(&mut self) {
        let running = self.running_series();
        let done: Vec<SeriesKey> = (self.table.series.iter())
            .filter(|(k, s)| s.final_sent && !running.contains(*k) && s.total() == s.exported)
            .map(|(k, _)| k.clone())
            .collect();
        for k in done {
            if let Some(s) = self.table.series.remove(&k) {
                self.table.retired.push((k, s));
            }
        }
    }
}

#[cfg(test)]
mod tests;
