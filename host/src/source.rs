//! Where events come from: the eBPF probes, or, when they cannot load and `probes.strict`
//! is off, polling /proc. The rest of the pipeline does not care which.
use std::time::Duration;

use pipetrace_probes_common::Accumulator;

use pipetrace_core::{accounting::Measured, event::Event};

use crate::{
    poller::Poller,
    probes::{EventReader, ProbeError, Probes},
};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "{0}\n  probes.strict is set, so pipetrace does not fall back to polling /proc; \
         unset it (PIPETRACE_PROBES__STRICT=false) to run degraded"
    )]
    Strict(ProbeError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(
        "{0}\n  probes.strict is set, so pipetrace does not fall back to polling /proc; unset \
         it (PIPETRACE_PROBES__STRICT=false) to run degraded"
    )]
    PidNamespace(crate::pidns::PrivatePidNamespace),
}

/// The stream of events.
pub enum Events {
    Kernel(EventReader),
    /// The interval lives here: `next_batch` is raced against other timers, and a tick
    /// (unlike a fresh sleep) survives being cancelled.
    Poll(Poller, tokio::time::Interval),
}

/// What the source can tell besides events.
pub enum ProbeState {
    Kernel(Box<Probes>),
    Poll,
}

/// Loads the probes (with the open probes when `files`), or falls back to polling with a
/// warning that says why.
/// In a PID namespace of its own (`pipetrace run` in a container without the host's), the
/// probes' host PIDs name nothing here: measured, such a run exported no span at all. It
/// polls this namespace's /proc instead, or refuses with `probes.strict`.
pub fn open(
    cfg: &pipetrace_config::Probes,
    files: bool,
) -> Result<(Events, ProbeState), SourceError> {
    if let Err(e) = crate::pidns::check() {
        if cfg.strict {
            return Err(SourceError::PidNamespace(e));
        }
        return Ok(poll(cfg, &e.to_string()));
    }
    match Probes::load(cfg.into(), files) {
        Ok(mut probes) => {
            let reader = probes.take_reader()?;
            Ok((Events::Kernel(reader), ProbeState::Kernel(Box::new(probes))))
        }
        Err(e) if cfg.strict => Err(SourceError::Strict(e)),
        Err(e) => Ok(poll(cfg, &format!("the eBPF probes cannot run: {e}"))),
    }
}

/// Polling /proc, with a warning that says `why`.
fn poll(cfg: &pipetrace_config::Probes, why: &str) -> (Events, ProbeState) {
    log::warn!(
        "{why}\n  pipetrace falls back to polling /proc every {}: processes shorter than that \
         may be missed, figures are the last sample, exit codes are unknown, and spans say \
         pipetrace.collection.mode=procfs. Set probes.strict: true to refuse instead.",
        humantime::format_duration(cfg.poll_interval)
    );
    let mut tick = tokio::time::interval(cfg.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    (
        Events::Poll(Poller::new(cfg.poll_interval), tick),
        ProbeState::Poll,
    )
}

impl Events {
    /// Waits for the next events. Returns the count of records that did not decode.
    pub async fn next_batch(&mut self, out: &mut Vec<Event>) -> std::io::Result<u64> {
        match self {
            Events::Kernel(r) => r.next_batch(out).await,
            Events::Poll(p, tick) => {
                tick.tick().await;
                p.scan(out, true);
                Ok(0)
            }
        }
    }

    /// What is there now, without waiting.
    pub fn drain_now(&mut self, out: &mut Vec<Event>) -> u64 {
        match self {
            Events::Kernel(r) => r.drain_now(out),
            Events::Poll(p, _) => {
                p.scan(out, true);
                0
            }
        }
    }

    pub fn is_polling(&self) -> bool {
        matches!(self, Events::Poll(..))
    }

    /// How long the end of a run waits between two looks at the source.
    pub fn drain_every(&self) -> Duration {
        match self {
            Events::Kernel(_) => Duration::from_millis(10),
            Events::Poll(p, _) => p.interval().min(Duration::from_millis(100)),
        }
    }
}

/// Dropped in the kernel, cumulative since the probes were loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelLosses {
    /// Records refused by a full ring buffer.
    pub events: u64,
    /// Updates of a process's sums refused by a full accumulator map.
    pub accumulator_updates: u64,
}

impl ProbeState {
    pub fn measured(&self) -> Measured {
        match self {
            ProbeState::Kernel(p) => p.measured(),
            ProbeState::Poll => Measured {
                network: false,
                delay_accounting: false,
                io_wait: false,
            },
        }
    }

    /// What the kernel summed so far for a live process (nothing when polling).
    pub fn accumulated(&self, pid: u32) -> Accumulator {
        match self {
            ProbeState::Kernel(p) => p.accumulated(pid),
            ProbeState::Poll => Accumulator::default(),
        }
    }

    /// What the kernel side dropped so far: records, and updates of its per-process sums.
    pub fn losses(&self) -> KernelLosses {
        match self {
            ProbeState::Kernel(p) => KernelLosses {
                events: p.lost_events(),
                accumulator_updates: p.lost_accumulator_updates(),
            },
            ProbeState::Poll => KernelLosses::default(),
        }
    }
}
