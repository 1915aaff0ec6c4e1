//! What ended a process, as span events: the OOM killer's choice, and the fatal signal that
//! ended it with who sent it.
use std::borrow::Cow;

use opentelemetry::{KeyValue, trace::Event};
use pipetrace_semconv::{attr, event};

use super::signal_name;
use pipetrace_core::machine::HostInfo;
use pipetrace_core::tree::Proc;

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / 1048576.0)
}

/// Span events for how `p` ended.
pub(crate) fn end_events(p: &Proc, host: &HostInfo) -> Vec<Event> {
    let mut out = Vec::new();
    if let Some(o) = &p.oom {
        let mut a = vec![KeyValue::new(attr::OOM_RSS, int(o.rss_bytes))];
        if let Some(u) = &p.usage {
            a.push(KeyValue::new(attr::MEMORY_PEAK, int(u.peak_bytes())));
        }
        if let Some(limit) = o.limit_bytes {
            a.push(KeyValue::new(attr::MEMORY_LIMIT, int(limit)));
        }
        if let Some(cg) = &o.cgroup {
            a.push(KeyValue::new(attr::OOM_CGROUP, cg.clone()));
        }
        // Said where another process set it off: the victim's own allocation says nothing.
        if let Some((pid, comm)) = o.trigger.as_ref().filter(|(pid, _)| *pid != p.key.pid) {
            a.push(KeyValue::new(attr::OOM_TRIGGER_PID, i64::from(*pid)));
            a.push(KeyValue::new(attr::OOM_TRIGGER, comm.clone()));
        }
        out.push(Event::new(
            Cow::Borrowed(event::OOM_KILL),
            host.system_time(o.time_ns),
            a,
            0,
        ));
    }
    // The signal that ended it: the last delivered one of the number it died of.
    let died_of = p.exit.as_ref().and_then(|e| e.signal());
    if let Some(s) = p.signals.iter().rev().find(|s| Some(s.sig) == died_of) {
        let origin = if s.by_kernel { "kernel" } else { "process" };
        let a = vec![
            KeyValue::new(attr::PROCESS_SIGNAL, signal_name(s.sig)),
            KeyValue::new(attr::SIGNAL_ORIGIN, origin),
            KeyValue::new(attr::SIGNAL_SENDER_PID, s.sender_pid as i64),
            KeyValue::new(attr::SIGNAL_SENDER, s.sender_comm.clone()),
        ];
        out.push(Event::new(
            Cow::Borrowed(event::SIGNAL),
            host.system_time(s.time_ns),
            a,
            0,
        ));
    }
    out
}

/// A task's periods without progress.
pub(crate) fn stall_events(
    stalls: &[pipetrace_core::diagnosis::Stall],
    host: &HostInfo,
) -> Vec<Event> {
    stalls
        .iter()
        .map(|s| {
            let secs = s.end_ns.saturating_sub(s.start_ns) as f64 / 1e9;
            Event::new(
                Cow::Borrowed(event::STALL),
                host.system_time(s.start_ns),
                vec![KeyValue::new(attr::STALL_DURATION, secs)],
                0,
            )
        })
        .collect()
}

/// A task that took far longer than its history says is usual.
pub(crate) fn slower_event(
    s: &pipetrace_core::diagnosis::Against,
    at: std::time::SystemTime,
) -> Event {
    let a = vec![
        KeyValue::new(attr::HISTORY_USUAL_DURATION, s.usual_s),
        KeyValue::new(attr::HISTORY_RUNS, s.runs as i64),
        KeyValue::new(attr::HISTORY_FACTOR, s.this_s / s.usual_s.max(1e-9)),
    ];
    Event::new(Cow::Borrowed(event::SLOWER_THAN_USUAL), at, a, 0)
}

/// Why a process failed, in words, when something other than its own exit code ended it.
pub(crate) fn end_reason(p: &Proc, what: &str) -> Option<String> {
    let o = p.oom.as_ref()?;
    let limit = o
        .limit_bytes
        .map(|l| format!(" at its cgroup's {} limit", mib(l)))
        .unwrap_or_default();
    Some(format!("{what} killed by the OOM killer{limit}"))
}
