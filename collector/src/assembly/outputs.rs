//! Where configuration decides the loop's outputs: where finished spans and metric ticks
//! go, for `pipetrace run` and for the agent. A new output is one line here.
use std::sync::Arc;

use anyhow::Context;
use pipetrace_config::Config;

use crate::{compare::keeper::Keeper, summary::Summary};
use crate::{pipeline::Outputs, summary::Made};
use pipetrace_export::export::{Sink, SinkStats, prometheus::Bound};
use pipetrace_export::outputs::Output;

/// Which views the outputs feed.
#[derive(Clone, Copy)]
pub(super) enum View {
    /// `pipetrace run`; `summary`: the end-of-run tree and tables are printed.
    Run {
        summary: bool,
    },
    Agent,
}

/// The views the configuration asks for, beside the sink (handed the data itself), and the
/// sink's counts.
pub(super) fn list(
    cfg: &Config,
    of: View,
    sink: Sink,
    prometheus: Option<Bound>,
) -> anyhow::Result<(Outputs, Arc<SinkStats>)> {
    let mut list: Vec<Box<dyn Output<Made>>> = Vec::new();
    match of {
        // The summary also feeds the HTML report: kept whenever either is wanted.
        View::Run { summary } if summary || cfg.report.html => {
            let (tasks, tools) = (cfg.summary.max_tasks, cfg.summary.max_tools_per_task);
            let tails = crate::report::tails::Tails::of(cfg);
            list.push(Box::new(Summary::new(tasks, tools).with_tails(tails)));
        }
        View::Run { .. } => {}
        // The agent's runs, kept for `pipetrace compare RUN_ID` as they end.
        View::Agent => {
            if let Some(dir) = cfg.diagnosis.state_dir.as_deref() {
                list.push(Box::new(Keeper::new(dir)));
            }
        }
    }
    if let Some(bound) = prometheus {
        let endpoint = bound.serve().context("serving the Prometheus endpoint")?;
        log::warn!("metrics for Prometheus on http://{}/metrics", endpoint.addr);
        list.push(Box::new(endpoint));
    }
    let stats = sink.stats();
    Ok((Outputs::new(list, sink), stats))
}
