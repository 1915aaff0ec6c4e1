//! Stalls: a running task or tool that makes no progress (no CPU, no I/O, no process starting
//! or ending) for `diagnosis.stall_after`. Fed by the live sampler, one progress signature per
//! task or tool per sample.
use std::collections::HashMap;

use crate::event::ProcKey;

/// A period without progress, CLOCK_BOOTTIME ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub start_ns: u64,
    pub end_ns: u64,
}

struct Progress {
    signature: u64,
    since_ns: u64,
    seen_ns: u64,
    stalled: bool,
    periods: Vec<Stall>,
    /// Time between observations that saw no progress, however short each stretch: how
    /// much of its life it did nothing, stall or not.
    quiet_ns: u64,
}

pub struct Stalls {
    after_ns: u64,
    watched: HashMap<ProcKey, Progress>,
}

/// Periods kept per task at most; later ones extend the last.
const MAX_PERIODS: usize = 16;

impl Stalls {
    pub(crate) fn new(after: std::time::Duration) -> Self {
        Self {
            after_ns: after.as_nanos() as u64,
            watched: HashMap::new(),
        }
    }

    /// `key`'s progress signature at `now_ns`: any change is progress.
    pub(crate) fn observe(&mut self, key: ProcKey, signature: u64, now_ns: u64) {
        let p = self.watched.entry(key).or_insert(Progress {
            signature,
            since_ns: now_ns,
            seen_ns: now_ns,
            stalled: false,
            periods: Vec::new(),
            quiet_ns: 0,
        });
        if p.signature == signature {
            p.quiet_ns += now_ns.saturating_sub(p.seen_ns);
        }
        p.seen_ns = now_ns;
        if p.signature != signature {
            if p.stalled {
                close(p, now_ns);
            }
            p.signature = signature;
            p.since_ns = now_ns;
        } else if !p.stalled && now_ns.saturating_sub(p.since_ns) >= self.after_ns {
            p.stalled = true;
        }
    }

    /// Those stalled now.
    pub(crate) fn stalled(&self) -> impl Iterator<Item = ProcKey> + '_ {
        self.watched
            .iter()
            .filter(|(_, p)| p.stalled)
            .map(|(k, _)| *k)
    }

    /// It ended at `end_ns`: its stall periods, the open one closed then, and how long it
    /// made no progress in all (ns).
    pub(crate) fn take(&mut self, key: ProcKey, end_ns: u64) -> (Vec<Stall>, u64) {
        let Some(mut p) = self.watched.remove(&key) else {
            return (Vec::new(), 0);
        };
        if p.stalled {
            close(&mut p, end_ns);
        }
        (p.periods, p.quiet_ns)
    }

    /// Forgets what was last observed before `cutoff_ns` and never taken (a process that
    /// gets no span of its own), so the map stays bounded.
    pub(crate) fn forget_unseen_since(&mut self, cutoff_ns: u64) {
        self.watched.retain(|_, p| p.seen_ns >= cutoff_ns);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.watched.len()
    }
}

fn close(p: &mut Progress, end_ns: u64) {
    p.stalled = false;
    // Seen only after the task had ended: not a stall of the task.
    if end_ns <= p.since_ns {
        return;
    }
    let s = Stall {
        start_ns: p.since_ns,
        end_ns,
    };
    if p.periods.len() == MAX_PERIODS {
        if let Some(last) = p.periods.last_mut() {
            last.end_ns = s.end_ns;
        }
    } else {
        p.periods.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn key() -> ProcKey {
        ProcKey {
            pid: 1,
            start_ticks: 1,
        }
    }

    #[test]
    fn no_progress_past_the_window_is_a_stall_until_progress_or_the_end() {
        let mut st = Stalls::new(std::time::Duration::from_secs(5));
        st.observe(key(), 10, 0);
        st.observe(key(), 11, 2 * S);
        st.observe(key(), 11, 6 * S);
        assert_eq!(
            st.stalled().count(),
            0,
            "4 s without progress is not yet a stall"
        );
        st.observe(key(), 11, 8 * S);
        assert_eq!(st.stalled().count(), 1);
        st.observe(key(), 12, 9 * S);
        assert_eq!(st.stalled().count(), 0);
        st.observe(key(), 12, 20 * S);
        let (periods, quiet) = st.take(key(), 21 * S);
        // 2..8 s and 9..20 s saw no progress.
        assert_eq!(quiet, 17 * S);
        assert_eq!(
            periods,
            [
                Stall {
                    start_ns: 2 * S,
                    end_ns: 9 * S
                },
                Stall {
                    start_ns: 9 * S,
                    end_ns: 21 * S
                }
            ]
        );
        assert!(st.take(key(), 30 * S).0.is_empty());
    }

    #[test]
    fn quiet_stretches_shorter_than_a_stall_add_up() {
        let mut st = Stalls::new(std::time::Duration::from_secs(300));
        st.observe(key(), 1, 0);
        st.observe(key(), 2, 5 * S);
        for i in 2..6 {
            st.observe(key(), 2, i * 5 * S);
        }
        assert_eq!(st.stalled().count(), 0, "never 300 s without progress");
        let (periods, quiet) = st.take(key(), 26 * S);
        assert!(periods.is_empty());
        assert_eq!(quiet, 20 * S, "20 s of 26 s without progress");
    }

    #[test]
    fn what_is_never_taken_is_forgotten_once_unseen() {
        let mut st = Stalls::new(std::time::Duration::from_secs(5));
        let other = ProcKey {
            pid: 2,
            start_ticks: 2,
        };
        st.observe(key(), 1, 0);
        st.observe(other, 1, 0);
        st.observe(other, 1, 10 * S);
        st.forget_unseen_since(5 * S);
        assert_eq!(st.len(), 1);
        assert_eq!(
            st.take(other, 11 * S).0.len(),
            1,
            "the seen one keeps its stall"
        );
    }
}
