//! Span events in words for the report: what happened, with the figures the event carries.
use pipetrace_semconv::{attr, event};

use super::ReportEvent;
use crate::diagnosis::gib;

impl ReportEvent {
    fn num(&self, key: &str) -> Option<f64> {
        self.numbers.get(key).copied()
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.texts.get(key).map(String::as_str)
    }

    /// One sentence; an event of a name this build does not know is given by its name.
    pub fn describe(&self) -> String {
        let bytes = |k: &str| self.num(k).map(|v| gib(v as u64));
        match self.name.as_str() {
            event::OOM_KILL => {
                let mut s = String::from("killed by the OOM killer");
                if let Some(rss) = bytes(attr::OOM_RSS) {
                    s += &format!(" at {rss} resident");
                }
                if let Some(limit) = bytes(attr::MEMORY_LIMIT) {
                    s += &format!(", limit {limit}");
                }
                if let Some(cg) = self.text(attr::OOM_CGROUP) {
                    s += &format!(" (cgroup {cg})");
                }
                if let Some(peak) = bytes(attr::MEMORY_PEAK) {
                    s += &format!("; peak {peak}");
                }
                if let Some(pid) = self.num(attr::OOM_TRIGGER_PID) {
                    let comm = self.text(attr::OOM_TRIGGER).unwrap_or("?");
                    s += &format!("; set off by {comm} (pid {})", pid as i64);
                }
                s
            }
            event::SIGNAL => {
                let sig = self.text(attr::PROCESS_SIGNAL).unwrap_or("a signal");
                let from = match self.text(attr::SIGNAL_ORIGIN) {
                    Some("kernel") => " from the kernel".to_string(),
                    Some(_) => format!(
                        " from process {} ({})",
                        self.num(attr::SIGNAL_SENDER_PID).unwrap_or(0.0) as i64,
                        self.text(attr::SIGNAL_SENDER).unwrap_or("?")
                    ),
                    None => String::new(),
                };
                format!("ended by {sig}{from}")
            }
            event::STALL => format!(
                "no CPU, no I/O and no process started or ended for {:.1} s",
                self.num(attr::STALL_DURATION).unwrap_or(0.0)
            ),
            event::SLOWER_THAN_USUAL => format!(
                "{:.1}x slower than usual: usually {:.1} s (median of {} earlier runs)",
                self.num(attr::HISTORY_FACTOR).unwrap_or(0.0),
                self.num(attr::HISTORY_USUAL_DURATION).unwrap_or(0.0),
                self.num(attr::HISTORY_RUNS).unwrap_or(0.0) as u64
            ),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn ev(name: &str, numbers: &[(&str, f64)], texts: &[(&str, &str)]) -> ReportEvent {
        ReportEvent {
            name: name.into(),
            time: 0,
            numbers: numbers.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            texts: texts
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn events_read_as_sentences_with_their_figures() {
        let oom = ev(
            event::OOM_KILL,
            &[
                (attr::OOM_RSS, 63.0 * 1048576.0),
                (attr::MEMORY_LIMIT, 64.0 * 1048576.0),
                (attr::MEMORY_PEAK, 64.0 * 1048576.0),
            ],
            &[(attr::OOM_CGROUP, "/t/oom")],
        );
        assert_eq!(
            oom.describe(),
            "killed by the OOM killer at 63 MiB resident, limit 64 MiB (cgroup /t/oom); peak 64 MiB"
        );
        let term = ev(
            event::SIGNAL,
            &[(attr::SIGNAL_SENDER_PID, 42.0)],
            &[
                (attr::PROCESS_SIGNAL, "SIGTERM"),
                (attr::SIGNAL_ORIGIN, "process"),
                (attr::SIGNAL_SENDER, "bash"),
            ],
        );
        assert_eq!(term.describe(), "ended by SIGTERM from process 42 (bash)");
        let segv = ev(
            event::SIGNAL,
            &[],
            &[
                (attr::PROCESS_SIGNAL, "SIGSEGV"),
                (attr::SIGNAL_ORIGIN, "kernel"),
            ],
        );
        assert_eq!(segv.describe(), "ended by SIGSEGV from the kernel");
        let stall = ev(event::STALL, &[(attr::STALL_DURATION, 3.04)], &[]);
        assert!(
            stall.describe().ends_with("for 3.0 s"),
            "{}",
            stall.describe()
        );
        let slow = ev(
            event::SLOWER_THAN_USUAL,
            &[
                (attr::HISTORY_FACTOR, 3.2),
                (attr::HISTORY_USUAL_DURATION, 1.0),
                (attr::HISTORY_RUNS, 3.0),
            ],
            &[],
        );
        assert_eq!(
            slow.describe(),
            "3.2x slower than usual: usually 1.0 s (median of 3 earlier runs)"
        );
        assert_eq!(ev("x.other", &[], &[]).describe(), "x.other");
    }
}
