//! One direction: events -> process tree -> attribution -> signals -> export.
use crate::{
    attribution::Attributor,
    event::Event,
    export::{Exporter, summary::Summary},
    host,
    signals::SpanBuilder,
    tree::Tree,
};

pub struct Pipeline {
    pub tree: Tree,
    pub attr: Attributor,
    builder: SpanBuilder,
    exporter: Exporter,
    /// Kept in `pipetrace run` for the terminal tree; the agent keeps none.
    pub summary: Option<Summary>,
    pub events: u64,
    /// Exits of processes the tree never saw (started before the agent, exited at once).
    pub unknown_exits: u64,
    /// Ring-buffer records that could not be decoded (a probe/agent version mismatch).
    pub undecodable: u64,
    /// Run spans exported so far.
    pub runs_finished: u64,
}

impl Pipeline {
    pub fn new(attr: Attributor, builder: SpanBuilder, exporter: Exporter, summary: bool) -> Self {
        Self {
            tree: Tree::default(),
            attr,
            builder,
            exporter,
            summary: summary.then(Summary::default),
            events: 0,
            unknown_exits: 0,
            runs_finished: 0,
            undecodable: 0,
        }
    }

    /// Seeds the tree with what runs now, and lets the attribution find runs among it.
    pub fn seed(&mut self) {
        let mut snap = host::scan();
        snap.sort_by_key(|s| s.start_ticks);
        let keys: Vec<_> = snap
            .iter()
            .map(|s| crate::event::ProcKey {
                pid: s.pid,
                start_ticks: s.start_ticks,
            })
            .collect();
        self.tree.seed(snap);
        self.attr.on_seed(&self.tree, &keys);
    }

    /// Takes a batch from the ring buffer (`bad`: records that did not decode), then
    /// exports whatever the attribution could name since.
    pub fn ingest(&mut self, batch: &mut Vec<Event>, bad: u64) {
        self.undecodable += bad;
        for ev in batch.drain(..) {
            self.handle(ev);
        }
        self.poll(false);
    }

    pub fn handle(&mut self, ev: Event) {
        self.events += 1;
        match ev {
            Event::Fork {
                key,
                start_ns,
                parent,
                comm,
            } => {
                self.tree.fork(key, start_ns, parent, comm);
                self.attr.on_fork(&self.tree, key);
            }
            Event::Exec(e) => {
                let cwd = self
                    .attr
                    .wants_cwd(&self.tree, &e)
                    .then(|| host::cwd(e.key.pid))
                    .flatten();
                self.tree.exec(&e, cwd);
                self.attr.on_exec(&self.tree, e.key);
            }
            Event::Exit {
                key,
                time_ns,
                status,
            } => {
                if !self.tree.exit(&key, time_ns, status) {
                    self.unknown_exits += 1;
                    return;
                }
                let finished = self.attr.on_exit(&self.tree, key);
                self.emit(finished);
                let dropped = self.tree.release(key);
                self.attr.forget(&dropped);
            }
        }
    }

    /// Exports what the attribution could name since the last call (Snakemake jobs wait
    /// for the engine's log); with `force`, everything still waiting.
    pub fn poll(&mut self, force: bool) {
        let finished = self.attr.poll(force);
        self.emit(finished);
    }

    fn emit(&mut self, finished: Vec<crate::attribution::Finished>) {
        for f in finished {
            let signal = self.builder.build(&f);
            if signal.kind == crate::signals::Kind::Run {
                self.runs_finished += 1;
            }
            if let Some(s) = self.summary.as_mut() {
                s.record(&signal);
            }
            self.exporter.send(signal);
        }
    }

    pub fn exporter(&self) -> &Exporter {
        &self.exporter
    }

    pub fn into_parts(self) -> (Exporter, Option<Summary>) {
        (self.exporter, self.summary)
    }
}
