//! Runs the agent sees, kept for `pipetrace compare RUN_ID` as they end: each run's task and
//! tool spans (only the figures compare reads) gathered by trace, summed up per task and
//! tool and written to the state directory when the run's own span comes. `pipetrace run`
//! keeps its run from its end-of-run summary instead.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use super::{model::Run, store};
use crate::report::{Decode, TASK_KEYS, TOOL_KEYS};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;
use pipetrace_export::signals::ReadySpan;

/// Runs gathered at once at most; past it, the one opened first (a run whose own span never
/// came: a part of a run rooted elsewhere) is dropped.
const MAX_OPEN_RUNS: usize = 64;
/// Tool spans kept per run at most: its tasks are kept whole, its tools' detail up to this
/// (a run of a million processes must not hold the agent's memory).
const MAX_TOOLS_PER_RUN: usize = 5000;

#[derive(Default)]
struct Open {
    spans: Vec<ReportSpan>,
    tools: usize,
    /// When it was opened, in spans taken.
    since: u64,
}

pub struct Keeper {
    state_dir: PathBuf,
    open: HashMap<String, Open>,
    taken: u64,
    /// Runs dropped unkept because too many were open at once.
    pub not_kept: u64,
}

/// The keeper keeps each run as its spans leave.
impl<E> pipetrace_export::outputs::Output<E> for Keeper {
    fn spans(&mut self, spans: &[ReadySpan]) {
        spans.iter().for_each(|s| self.record(s));
    }
}

impl Keeper {
    pub(crate) fn new(state_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            open: HashMap::new(),
            taken: 0,
            not_kept: 0,
        }
    }

    /// Takes a span as it is exported; a run's own span ends its run, which is then written.
    fn record(&mut self, s: &ReadySpan) {
        let keep: &[&str] = match s.kind {
            Kind::Task => &TASK_KEYS,
            Kind::Tool => &TOOL_KEYS,
            Kind::Run => &[],
            Kind::Engine | Kind::Started => return,
        };
        let trace = s.span.span_context.trace_id().to_string();
        self.taken += 1;
        if !self.open.contains_key(&trace) {
            if self.open.len() >= MAX_OPEN_RUNS {
                self.drop_oldest();
            }
            let since = self.taken;
            self.open.insert(
                trace.clone(),
                Open {
                    since,
                    ..Open::default()
                },
            );
        }
        let open = self.open.get_mut(&trace).expect("inserted above");
        match s.kind {
            Kind::Run => {
                let mut spans = self
                    .open
                    .remove(&trace)
                    .map(|o| o.spans)
                    .unwrap_or_default();
                spans.push(ReportSpan::from_sdk(&s.span));
                self.write(&trace, &spans);
            }
            Kind::Tool if open.tools >= MAX_TOOLS_PER_RUN => {}
            kind => {
                open.tools += usize::from(kind == Kind::Tool);
                (open.spans).push(ReportSpan::from_sdk_keeping(&s.span, kind, keep));
            }
        }
    }

    fn drop_oldest(&mut self) {
        let oldest = (self.open.iter())
            .min_by_key(|(_, o)| o.since)
            .map(|(t, _)| t.clone());
        if let Some(t) = oldest {
            self.open.remove(&t);
            self.not_kept += 1;
            log::info!("run {t} not kept for `pipetrace compare`: its run span never came");
        }
    }

    fn write(&self, trace: &str, spans: &[ReportSpan]) {
        let run = Run::of_spans(trace, spans);
        if let Err(e) = store::save(&self.state_dir, &run) {
            log::warn!(
                "cannot keep run {trace} for `pipetrace compare` in {}: {e}",
                self.state_dir.display()
            );
        }
    }
}
