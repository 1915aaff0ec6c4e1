//! Which task run started a process. Prefect's database says when each task run ran, the
//! kernel which thread forked the process and when it ran. Submitted task runs start within
//! milliseconds of each other, so the start alone is ambiguous; a task's thread waits for
//! what it starts, so the process also ended before its task run did, and that tells
//! task runs of different lengths apart.
use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use super::db::TaskRun;

/// Clocks and Prefect's stamps may differ by this much at a task run's start. The states'
/// stamps are the flow process's own clock (the row's, the server's, lagged far more): a
/// task run's first process starts 3 to 20 ms after it. More would hand a process the flow
/// body starts just before it submits task runs to one of them.
const SLACK: Duration = Duration::from_millis(20);
/// Prefect stamps a task run's end after its thread's last process has ended: on the same
/// clock, later by at least the time the state takes to be proposed. This much is allowed
/// for the two clocks to disagree.
const END_SLACK: Duration = Duration::from_millis(20);

/// One process to match: the thread that forked it (0: not known) and when it ran.
#[derive(Clone, Copy, Debug)]
pub struct Process {
    pub thread: u32,
    pub start: SystemTime,
    pub end: SystemTime,
}

/// Whether task run `t` was running when a process started at `s`. Its end is stamped
/// after its function returned, so nothing it started starts after that.
fn running_at(t: &TaskRun, s: SystemTime) -> bool {
    t.start.is_some_and(|b| b <= s + SLACK) && t.end.is_none_or(|end| s <= end)
}

/// Whether task run `t`'s own stamps hold `p` from its start to its end, with no slack.
fn holds(t: &TaskRun, p: &Process) -> bool {
    t.start.is_some_and(|b| b <= p.start) && t.end.is_none_or(|end| p.end <= end)
}

/// The task runs that may have started `p`: those whose stamps hold it exactly, when any
/// does (called task runs follow each other within milliseconds, closer than the slack:
/// the next one must not take the last process of the one before); else those running from
/// its start to its end give or take the slack; or, when none was (a process left running
/// in the background), those running at its start.
pub(crate) fn candidates<'a>(tasks: &'a [TaskRun], p: &Process) -> Vec<&'a TaskRun> {
    let exact: Vec<&TaskRun> = tasks.iter().filter(|t| holds(t, p)).collect();
    if !exact.is_empty() {
        return exact;
    }
    let at_start: Vec<&TaskRun> = tasks.iter().filter(|t| running_at(t, p.start)).collect();
    let whole: Vec<&TaskRun> = (at_start.iter().copied())
        .filter(|t| t.end.is_none_or(|end| p.end <= end + END_SLACK))
        .collect();
    if whole.is_empty() { at_start } else { whole }
}

/// The task run each thread of the flow process ran last, and whether that is final (a
/// guess made within one batch only informs the rest of it).
#[derive(Clone, Default)]
pub struct Threads(HashMap<u32, Held>);

/// A thread's task run, whether that is final, and the others Prefect's records allow as
/// well (see `assign::allowed`).
#[derive(Clone)]
struct Held {
    run: TaskRun,
    fin: bool,
    others: Vec<String>,
}

/// How far another thread holds a task run (see `Threads::hold_on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hold {
    Free,
    Shared,
    Held,
}

/// The task run found for a process, and whether it is sure.
pub struct Found {
    pub run: Option<TaskRun>,
    /// Nothing Prefect writes later can change it: its thread's own task run, or one of task
    /// runs that have all ended (so every process they started is known). The only one
    /// running is not enough: under load the server writes other task runs' rows seconds
    /// late, and one of those may have started it.
    pub sure: bool,
    /// Other task runs (their ids) that Prefect's records allow as well: task runs started
    /// together, doing the same work, that nothing recorded tells apart.
    pub others: Vec<String>,
}

impl Threads {
    /// The task run thread `tid` ran last.
    pub(crate) fn last(&self, tid: u32) -> Option<&TaskRun> {
        self.0.get(&tid).map(|h| &h.run)
    }

    /// How thread `tid` may take task run `id`: `Free` when no other thread was matched to it
    /// for good; `Shared` when one was, but Prefect's records allowed that one others as
    /// well (equal task runs, forks late and out of order): a guess, so `tid` may still be
    /// given it, or named beside its match, though a run no thread holds comes first;
    /// `Held` when one was, alone.
    pub(crate) fn hold_on(&self, tid: u32, id: &str) -> Hold {
        let by_others = (self.0.iter()).filter(|(t, h)| **t != tid && h.fin && h.run.id == id);
        by_others.fold(Hold::Free, |was, (_, h)| match h.others.is_empty() {
            true => Hold::Held,
            false => was.max(Hold::Shared),
        })
    }

    /// Remembers `run` as thread `tid`'s (0: not known); `fin`: as a final match; `others`:
    /// the task runs the records allow as well.
    pub(crate) fn remember(&mut self, tid: u32, run: &TaskRun, fin: bool, others: &[String]) {
        if tid != 0 {
            let (run, others) = (run.clone(), others.to_vec());
            self.0.insert(tid, Held { run, fin, others });
        }
    }

    /// The task run that started `p`: its thread's own, when that one may have (with the
    /// others the records allowed the thread as well); else the first to start of those no other
    /// thread runs now (submitted task runs start in order, each a moment before its thread
    /// forks); else the first to start.
    pub(crate) fn find(&self, tasks: &[TaskRun], p: &Process) -> Found {
        let cands = candidates(tasks, p);
        let own = self.0.get(&p.thread);
        let taken: Vec<&str> = (self.0.iter())
            .filter(|(tid, h)| **tid != p.thread && running_at(&h.run, p.start))
            .map(|(_, h)| h.run.id.as_str())
            .collect();
        let mine = cands.iter().find(|t| own.is_some_and(|h| h.run.id == t.id));
        let own_final = mine.is_some() && own.is_some_and(|h| h.fin);
        let others = match (mine, own) {
            (Some(_), Some(h)) => h.others.clone(),
            _ => Vec::new(),
        };
        let free = cands.iter().filter(|t| !taken.contains(&t.id.as_str()));
        let run = (mine.or_else(|| free.min_by_key(|t| t.start)))
            .or_else(|| cands.iter().min_by_key(|t| t.start))
            .map(|t| (*t).clone());
        let sure = run.is_some() && (own_final || cands.iter().all(|t| t.end.is_some()));
        Found { run, sure, others }
    }
}

/// The order to match a batch of processes in: those fewest task runs may hold first, as
/// each one matched tells its thread's task run to the others; then by start.
pub(crate) fn order(tasks: &[TaskRun], batch: &[Process]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| (candidates(tasks, &batch[i]).len(), batch[i].start));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engines::prefect::fixtures::Clock;

    /// Times in ms.
    const C: Clock = Clock(Duration::from_millis(1));

    fn at(ms: u64) -> SystemTime {
        C.at(ms)
    }

    fn run(name: &str, start: u64, end: Option<u64>) -> TaskRun {
        C.run(name, start, end)
    }

    fn process(thread: u32, start: u64, end: u64) -> Process {
        C.process(thread, start, end)
    }

    /// Three submitted task runs that sleep 0.3, 0.4 and 0.5 s and then sort, on three
    /// threads whose forks came in another order than the task runs started: as Prefect
    /// recorded one such run.
    fn three_sorts() -> (Vec<TaskRun>, Vec<(Process, &'static str)>) {
        let tasks = vec![
            run("a", 67, Some(381)),
            run("b", 73, Some(483)),
            run("c", 79, Some(592)),
        ];
        let procs = vec![
            (process(17, 80, 580), "c"),
            (process(13, 81, 380), "a"),
            (process(14, 82, 480), "b"),
            (process(13, 380, 381), "a"),
            (process(14, 480, 482), "b"),
            (process(17, 586, 591), "c"),
        ];
        (tasks, procs)
    }

    /// Finds `p`'s task run and remembers it as its thread's.
    fn take(threads: &mut Threads, tasks: &[TaskRun], p: &Process) -> Option<TaskRun> {
        let run = threads.find(tasks, p).run?;
        threads.remember(p.thread, &run, true, &[]);
        Some(run)
    }

    /// Matches `procs` as one batch, in `order`, each against the names given.
    fn assert_named_as_a_batch(tasks: &[TaskRun], procs: &[(Process, &str)]) {
        let batch: Vec<Process> = procs.iter().map(|(p, _)| *p).collect();
        let mut threads = Threads::default();
        let mut named = vec![String::new(); batch.len()];
        for i in order(tasks, &batch) {
            named[i] = take(&mut threads, tasks, &batch[i]).unwrap().name;
        }
        let want: Vec<&str> = procs.iter().map(|(_, n)| *n).collect();
        assert_eq!(named, want);
    }

    #[test]
    fn a_process_of_one_of_several_running_task_runs_is_not_sure_until_they_end() {
        let mut tasks = vec![run("a", 0, None), run("b", 5, None)];
        let threads = Threads::default();
        let p = process(7, 10, 300);
        assert!(!threads.find(&tasks, &p).sure);
        tasks[1].end = Some(at(400));
        assert!(!threads.find(&tasks, &p).sure, "a may still be b's");
        tasks[0].end = Some(at(310));
        assert!(threads.find(&tasks, &p).sure);
    }

    /// Sixteen mapped task runs, whose rows the server wrote late: when the first processes
    /// ended only one task run was in the database.
    #[test]
    fn the_only_task_run_in_the_database_is_not_sure_while_it_runs() {
        let threads = Threads::default();
        let p = process(7, 10, 30);
        let alone = [run("a", 0, None)];
        let found = threads.find(&alone, &p);
        assert_eq!(found.run.unwrap().name, "a");
        assert!(!found.sure, "another task run's row may come later");
        let ended = [run("a", 0, Some(40))];
        assert!(
            threads.find(&ended, &p).sure,
            "it ended: all of it is known"
        );
    }

    #[test]
    fn a_guess_for_a_thread_does_not_make_its_next_process_sure() {
        let tasks = vec![run("a", 0, None), run("b", 5, None)];
        let mut threads = Threads::default();
        let (first, next) = (process(7, 10, 300), process(7, 310, 320));
        let guess = threads.find(&tasks, &first);
        assert!(!guess.sure);
        threads.remember(7, guess.run.as_ref().unwrap(), false, &[]);
        let found = threads.find(&tasks, &next);
        assert_eq!(
            found.run.unwrap().name,
            "a",
            "its thread's guess still leads"
        );
        assert!(!found.sure, "but a guess proves nothing");
        threads.remember(7, &tasks[0], true, &[]);
        assert!(threads.find(&tasks, &next).sure);
    }

    #[test]
    fn a_batch_of_processes_goes_to_the_task_runs_that_waited_for_them() {
        let (tasks, procs) = three_sorts();
        assert_named_as_a_batch(&tasks, &procs);
    }

    #[test]
    fn processes_one_at_a_time_in_start_order_go_to_their_task_runs() {
        let (tasks, procs) = three_sorts();
        let mut threads = Threads::default();
        for (p, want) in procs {
            assert_eq!(take(&mut threads, &tasks, &p).unwrap().name, want, "{p:?}");
        }
    }

    #[test]
    fn a_process_left_running_past_its_task_run_is_matched_by_its_start() {
        let tasks = vec![run("a", 0, Some(100)), run("b", 500, None)];
        let mut threads = Threads::default();
        let p = process(5, 10, 900);
        assert_eq!(take(&mut threads, &tasks, &p).unwrap().name, "a");
        assert_eq!(threads.last(5).unwrap().name, "a");
    }

    #[test]
    fn a_process_no_task_run_was_running_for_matches_none() {
        let tasks = vec![run("a", 0, Some(100))];
        let threads = Threads::default();
        let found = threads.find(&tasks, &process(5, 400, 410));
        assert!(found.run.is_none() && !found.sure);
    }

    /// Called task runs one after another on the flow's thread, as Prefect recorded a flow
    /// calling `many`, `other`, `many`: each ends a few milliseconds after its last process
    /// and the next starts some 30 ms later, within the slack of the one before.
    #[test]
    fn the_last_process_of_a_called_task_run_is_not_the_next_ones() {
        let tasks = vec![
            run("many-41c", 0, Some(163)),
            run("other-3e6", 173, Some(189)),
            run("many-c75", 193, Some(321)),
        ];
        let procs = [
            (process(1, 5, 9), "many-41c"),
            (process(1, 152, 158), "many-41c"),
            (process(1, 179, 186), "other-3e6"),
            (process(1, 197, 201), "many-c75"),
            (process(1, 318, 320), "many-c75"),
        ];
        assert_named_as_a_batch(&tasks, &procs);
    }

    /// The flow body runs `sh` on its own thread, then submits two task runs; Prefect
    /// stamped them running 51 and 96 ms after those processes started; after they end
    /// it runs `ls`.
    #[test]
    fn a_process_the_flow_body_starts_outside_task_runs_is_none_of_theirs() {
        let tasks = vec![run("slow-0", 96, Some(612)), run("slow-1", 97, Some(603))];
        let threads = Threads::default();
        for p in [process(1, 0, 20), process(1, 45, 152), process(1, 618, 622)] {
            let found = threads.find(&tasks, &p);
            assert!(found.run.is_none(), "{p:?} went to {:?}", found.run);
        }
    }

    #[test]
    fn a_thread_whose_task_run_another_thread_was_thought_to_hold_still_gets_it() {
        // Thread 9 was matched to "b" by mistake; 8's process can only be "b"'s.
        let tasks = vec![run("a", 0, Some(300)), run("b", 10, Some(600))];
        let mut threads = Threads::default();
        threads.remember(9, &tasks[1], true, &[]);
        let p = process(8, 550, 590);
        assert_eq!(take(&mut threads, &tasks, &p).unwrap().name, "b");
    }
}
