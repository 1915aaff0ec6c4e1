//! Exited processes waiting for the kernel's usage report, which comes when each is reaped.
//! Reports can arrive out of order (they are RCU callbacks, per CPU), so a process is
//! settled only once its exited descendants are: a task's figures then hold every tool.
use std::time::{Duration, Instant};

use pipetrace_core::accounting::{CpuTimes, Switches, Usage};
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Tree;

struct Entry {
    since: Duration,
    usage: Option<Usage>,
    image_peak_bytes: u64,
    /// Figures taken at exit: used if the reap-time report does not come.
    at_exit: Option<Usage>,
}

pub struct Awaiting {
    entries: pipetrace_core::event::ProcMap<ProcKey, Entry>,
    wait: Duration,
    clock: Clock,
    /// The longest a report that came took after its exit: how slow the kernel is now.
    slowest: Duration,
}

/// Time the agent was running to see reports. A paused VM or a stopped agent makes the wall
/// clock jump; counting that jump as waiting would give up on reports still in the queue.
struct Clock {
    last: Instant,
    now: Duration,
}

/// The most one step of [`Clock`] may count: more than any pause between two polls.
const MAX_STEP: Duration = Duration::from_secs(1);

impl Clock {
    fn advance(&mut self) -> Duration {
        let t = Instant::now();
        self.now += t.duration_since(self.last).min(MAX_STEP);
        self.last = t;
        self.now
    }
}

impl Awaiting {
    pub(crate) fn new(wait: Duration) -> Self {
        Self {
            entries: Default::default(),
            wait,
            clock: Clock {
                last: Instant::now(),
                now: Duration::ZERO,
            },
            slowest: Duration::ZERO,
        }
    }

    pub(crate) fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The processes waiting.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ProcKey> {
        self.entries.keys()
    }

    pub(crate) fn exited(&mut self, key: ProcKey, image_peak_bytes: u64, at_exit: Option<Usage>) {
        let since = self.clock.advance();
        self.entries.insert(
            key,
            Entry {
                since,
                usage: None,
                image_peak_bytes,
                at_exit,
            },
        );
    }

    /// The CPU and context switches of a process, booked as its last thread left its CPU:
    /// completes the figures from exit, in case the reap-time report does not come.
    pub fn final_cpu(&mut self, key: ProcKey, cpu: &CpuTimes, switches: &Switches) {
        if let Some(u) = self.entries.get_mut(&key).and_then(|e| e.at_exit.as_mut()) {
            u.take_final(cpu, switches);
        }
    }

    /// Records a report; false for a process not waiting (not in the tree, or unknown exit).
    pub(crate) fn reported(&mut self, key: ProcKey, usage: Usage) -> bool {
        let now = self.clock.advance();
        match self.entries.get_mut(&key) {
            Some(e) => {
                e.usage = Some(usage);
                self.slowest = self.slowest.max(now.saturating_sub(e.since));
                true
            }
            None => false,
        }
    }

    /// The longest a report that came took after its process's exit.
    pub(crate) fn slowest_report(&self) -> Duration {
        self.slowest
    }

    /// What can be settled now, descendants before ancestors: reported ones, and with
    /// `force` or past the wait, the rest with their figures from exit (if any).
    pub(crate) fn ready(&mut self, tree: &Tree, force: bool) -> Vec<(ProcKey, Option<Usage>)> {
        let now_t = self.clock.advance();
        let wait = self.wait;
        let due = |e: &Entry| e.usage.is_some() || force || now_t - e.since >= wait;
        // How many waiting processes each process is an ancestor of: it waits while any does.
        let mut below = pipetrace_core::event::ProcMap::<ProcKey, u32>::default();
        for k in self.entries.keys() {
            for a in tree.ancestors(k) {
                *below.entry(a.key).or_default() += 1;
            }
        }
        let mut now: Vec<ProcKey> = self
            .entries
            .iter()
            .filter(|(k, e)| !below.contains_key(*k) && due(e))
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::with_capacity(now.len());
        while let Some(k) = now.pop() {
            let e = self.entries.remove(&k).expect("listed once");
            for a in tree.ancestors(&k) {
                let n = below.get_mut(&a.key).expect("counted above");
                *n -= 1;
                if *n == 0 && self.entries.get(&a.key).is_some_and(due) {
                    now.push(a.key);
                }
            }
            if e.usage.is_none() && !force {
                log::debug!("{k:?}: no usage report after {:?}", now_t - e.since);
            }
            let at_exit = e.at_exit.map(|u| Usage { at_exit: true, ..u });
            let usage = e.usage.or(at_exit).map(|u| Usage {
                image_peak_bytes: e.image_peak_bytes,
                ..u
            });
            out.push((k, usage));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32) -> ProcKey {
        ProcKey {
            pid,
            start_ticks: pid as u64,
        }
    }

    #[test]
    fn a_parent_waits_for_its_childs_late_report() {
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "task".into());
        tree.fork(key(2), 0, key(1), "tool".into());
        let mut a = Awaiting::new(Duration::from_secs(60));
        a.exited(key(2), 0, None);
        a.exited(key(1), 0, None);
        // The parent's report came first: it waits for the child's.
        assert!(a.reported(key(1), Usage::default()));
        assert!(a.ready(&tree, false).is_empty());
        assert!(a.reported(key(2), Usage::default()));
        let order: Vec<u32> = a.ready(&tree, false).iter().map(|(k, _)| k.pid).collect();
        assert_eq!(order, [2, 1]);
        assert_eq!(a.len(), 0);
        assert!(!a.reported(key(3), Usage::default()));
    }

    #[test]
    fn an_ancestor_waits_for_every_waiting_descendant() {
        // 1 -> 2 -> {3, 4}, and 5 beside 1: 4's report is late.
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "a".into());
        tree.fork(key(2), 0, key(1), "b".into());
        tree.fork(key(3), 0, key(2), "c".into());
        tree.fork(key(4), 0, key(2), "d".into());
        tree.fork(key(5), 0, key(0), "e".into());
        let mut a = Awaiting::new(Duration::from_secs(60));
        for pid in [3, 4, 2, 1, 5] {
            a.exited(key(pid), 0, None);
        }
        for pid in [1, 2, 3, 5] {
            assert!(a.reported(key(pid), Usage::default()));
        }
        let mut first: Vec<u32> = a.ready(&tree, false).iter().map(|(k, _)| k.pid).collect();
        first.sort();
        assert_eq!(first, [3, 5], "2 and 1 wait for 4");
        assert!(a.reported(key(4), Usage::default()));
        let then: Vec<u32> = a.ready(&tree, false).iter().map(|(k, _)| k.pid).collect();
        assert_eq!(then, [4, 2, 1]);
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn force_settles_everything_children_first() {
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "a".into());
        tree.fork(key(2), 0, key(1), "b".into());
        let mut a = Awaiting::new(Duration::from_secs(60));
        a.exited(key(1), 0, None);
        a.exited(key(2), 0, None);
        let got = a.ready(&tree, true);
        assert_eq!(got.iter().map(|(k, _)| k.pid).collect::<Vec<_>>(), [2, 1]);
        assert!(got.iter().all(|(_, u)| u.is_none()));
    }

    #[test]
    fn a_clock_jump_is_not_waiting_but_real_time_is() {
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "a".into());
        let mut a = Awaiting::new(Duration::from_millis(1500));
        a.exited(key(1), 0, None);
        // As after a paused VM: the wall clock moved 30 s between two polls.
        a.clock.last -= Duration::from_secs(30);
        assert!(
            a.ready(&tree, false).is_empty(),
            "a jump counts as 1 s at most"
        );
        std::thread::sleep(Duration::from_millis(600));
        let got = a.ready(&tree, false);
        assert_eq!(got.len(), 1, "1.6 s of real waiting gives up on the report");
        assert!(got[0].1.is_none());
    }

    #[test]
    fn a_shorter_wait_gives_up_on_old_exits_only() {
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "a".into());
        tree.fork(key(2), 0, key(0), "b".into());
        let mut a = Awaiting::new(Duration::from_secs(60));
        a.exited(key(1), 0, None);
        // Half a second passes before the second exit.
        a.clock.last -= Duration::from_millis(500);
        a.exited(key(2), 0, None);
        assert!(a.ready(&tree, false).is_empty(), "both within 60 s");
        a.set_wait(Duration::from_millis(200));
        let got = a.ready(&tree, false);
        assert_eq!(got.iter().map(|(k, _)| k.pid).collect::<Vec<_>>(), [1]);
        assert_eq!(a.keys().map(|k| k.pid).collect::<Vec<_>>(), [2]);
        // The second exit's report may still come within the shorter wait.
        assert!(a.reported(key(2), Usage::default()));
        assert_eq!(a.ready(&tree, false).len(), 1);
    }

    #[test]
    fn figures_from_exit_stand_in_for_a_report_that_never_comes() {
        let mut tree = Tree::default();
        tree.fork(key(1), 0, key(0), "a".into());
        tree.fork(key(2), 0, key(0), "b".into());
        let mut a = Awaiting::new(Duration::from_secs(60));
        let exit = |cpu| Usage {
            cpu_user_ns: cpu,
            ..Usage::default()
        };
        a.exited(key(1), 4096, Some(exit(5)));
        a.exited(key(2), 0, Some(exit(7)));
        // The reap-time report wins where it comes.
        assert!(a.reported(key(2), exit(9)));
        let mut got = a.ready(&tree, true);
        got.sort_by_key(|(k, _)| k.pid);
        let (one, two) = (got[0].1.unwrap(), got[1].1.unwrap());
        assert_eq!(
            (one.cpu_user_ns, one.at_exit, one.image_peak_bytes),
            (5, true, 4096)
        );
        assert_eq!((two.cpu_user_ns, two.at_exit), (9, false));
    }

    #[test]
    fn the_figures_of_the_last_switch_complete_the_figures_from_exit() {
        let mut tree = Tree::default();
        for pid in 1..=3 {
            tree.fork(key(pid), 0, key(0), "a".into());
        }
        let mut a = Awaiting::new(Duration::from_secs(60));
        let exit = |user, system| Usage {
            cpu_user_ns: user,
            cpu_system_ns: system,
            voluntary_switches: 5,
            involuntary_switches: 7,
            ..Usage::default()
        };
        for pid in 1..=3 {
            a.exited(key(pid), 0, Some(exit(10, 30)));
        }
        let switched = |voluntary, involuntary| Switches {
            voluntary,
            involuntary,
        };
        let cpu = |utime, stime, rtime| CpuTimes {
            utime,
            stime,
            rtime,
            prev: (0, 0),
        };
        // The way out (a heap unmapped) booked 60 ns more; the ticks say a quarter user.
        // Preempted on the way out: more involuntary switches.
        a.final_cpu(key(1), &cpu(4, 12, 100), &switched(6, 19));
        // A thread that left while another was still being released: less, kept out.
        a.final_cpu(key(2), &cpu(1, 1, 20), &switched(1, 2));
        a.final_cpu(key(3), &cpu(4, 12, 100), &switched(6, 19));
        assert!(
            a.reported(key(3), exit(20, 81)),
            "the reap-time report wins"
        );
        a.final_cpu(key(9), &cpu(4, 12, 100), &switched(6, 19));
        let mut got = a.ready(&tree, true);
        got.sort_by_key(|(k, _)| k.pid);
        let figures = |i: usize| {
            let u = got[i].1.unwrap();
            let switches = (u.voluntary_switches, u.involuntary_switches);
            (u.cpu_user_ns, u.cpu_system_ns, switches, u.at_exit)
        };
        assert_eq!(figures(0), (25, 75, (6, 19), true));
        assert_eq!(figures(1), (10, 30, (5, 7), true));
        assert_eq!(figures(2), (20, 81, (5, 7), false));
    }

    #[test]
    fn the_slowest_report_that_came_is_kept() {
        let mut a = Awaiting::new(Duration::from_secs(2));
        assert_eq!(a.slowest_report(), Duration::ZERO);
        a.exited(key(1), 0, None);
        a.exited(key(2), 0, None);
        std::thread::sleep(Duration::from_millis(30));
        assert!(a.reported(key(1), Usage::default()));
        let slow = a.slowest_report();
        assert!(slow >= Duration::from_millis(30), "{slow:?}");
        assert!(!a.reported(key(9), Usage::default()), "no such exit");
        assert_eq!(a.slowest_report(), slow);
    }
}
