//! `pipetrace agent`: watch the host; every pipeline that starts here becomes a trace.
use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use pipetrace_config::Config;
use tokio::signal::unix::{SignalKind, signal};

use super::run::{Prepared, prepare};
use crate::{
    attribution::{Attributor, Mode},
    export::Exporter,
    pipeline::Pipeline,
};

pub async fn run(cfg: &Config) -> anyhow::Result<i32> {
    let Prepared {
        host,
        mut probes,
        builder,
    } = prepare(cfg)?;
    let mut reader = probes.take_reader()?;
    let default_file = PathBuf::from("/var/lib/pipetrace/traces.otlp.jsonl");
    let exporter = Exporter::start(cfg, &host, default_file)?;
    let dest = exporter.destinations.clone();
    let attr = Attributor::new(Mode::Agent, &cfg.attribution, host.boot_to_unix_ns)?;
    let mut pipe = Pipeline::new(attr, builder, exporter, false);
    pipe.seed();
    log::warn!(
        "pipetrace agent watching {} processes ({} in runs); exporting to {}",
        pipe.tree.len(),
        pipe.attr.tracked(),
        dest.otlp
            .clone()
            .or(dest.file.map(|f| f.display().to_string()))
            .unwrap_or_default()
    );
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut buf = Vec::new();
    loop {
        tokio::select! {
            r = reader.next_batch(&mut buf) => {
                r.context("reading kernel events")?;
                buf.drain(..).for_each(|ev| pipe.handle(ev));
            }
            _ = tick.tick() => log::info!(
                "{} events, {} processes known, {} in runs, {} kernel events lost",
                pipe.events, pipe.tree.len(), pipe.attr.tracked(), probes.lost_events()
            ),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let (exporter, _) = pipe.into_parts();
    exporter.shutdown(cfg.export.flush_timeout).await;
    Ok(0)
}
