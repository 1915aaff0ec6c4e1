//! Task runs started together (`.submit()`, `.map()`) to threads. They start about 1 ms
//! apart and Prefect records no thread, so one process's times fit several of them. But a
//! worker thread runs one task run at a time and waits for what it starts: all of a
//! thread's processes in a task run fall within its stamps, its first one starts a few ms
//! after the run started and its last one ends a few ms before the run ended. So each
//! thread's processes are matched as a whole, and the threads together, as an assignment:
//! no task run goes to two threads, and the gaps at both ends are as small as they can be.
use std::{
    collections::{HashMap, HashSet},
    time::{Duration, SystemTime},
};

use super::{
    db::TaskRun,
    matching::{self, Found, Process, Threads, candidates},
};

/// The cost of leaving a thread's process without a task run here (left to `find`).
const NONE: f64 = 1e12;
/// The cost added for a task run another thread was already matched to for good.
const TAKEN: f64 = 1e9;
/// How many choices the search tries before it keeps the best it found.
const BUDGET: usize = 200_000;

fn ms(a: SystemTime, b: SystemTime) -> f64 {
    a.duration_since(b).unwrap_or(Duration::ZERO).as_secs_f64() * 1e3
}

/// How badly thread `p.thread`'s processes fit task run `t`, from `p` on: the gap from
/// `t`'s start to the thread's first process in it, and from the thread's last process in
/// it to `t`'s end (unknown while `t` runs). Each gap counts by its logarithm: most are a
/// few ms, but on a busy machine some threads wait 50 to 90 ms for the GIL between the
/// stamp and the fork, and the sum of the gaps is the same for every assignment; so one
/// tiny gap and one large beat two middling ones.
fn cost(t: &TaskRun, p: &Process, mine: &[&Process]) -> f64 {
    let Some(start) = t.start else { return NONE };
    let inside = |q: &&&Process| t.end.is_none_or(|e| q.start <= e && q.end <= e);
    let first = (mine.iter())
        .filter(|q| q.start >= start && q.start <= p.start)
        .filter(inside)
        .map(|q| q.start)
        .min()
        .unwrap_or(p.start);
    let head = ms(first, start);
    let tail = t.end.map_or(0.0, |e| {
        let last = (mine.iter())
            .filter(|q| q.start >= p.start)
            .filter(inside)
            .map(|q| q.end)
            .max()
            .unwrap_or(p.end);
        ms(e, last)
    });
    head.ln_1p() + tail.ln_1p()
}

/// The task run found for each process of `batch`, in rounds: each thread's first process
/// not its known task run's is matched together with the other threads' (see `plan`);
/// then the rest that its thread's task run may hold follow it. `known`: processes already
/// matched, for the threads' context.
pub fn decide(
    tasks: &[TaskRun],
    batch: &[Process],
    known: &[Process],
    threads: &Threads,
) -> Vec<Found> {
    let mut scratch = threads.clone();
    let mut found: Vec<Option<Found>> = batch.iter().map(|_| None).collect();
    let mut left = matching::order(tasks, batch);
    while !left.is_empty() {
        let plan = plan(tasks, batch, &left, known, &scratch);
        let mut next = Vec::new();
        for i in left.iter().copied() {
            let p = &batch[i];
            let f = match plan.get(&i) {
                Some(&k) => Found {
                    run: Some(tasks[k].clone()),
                    sure: candidates(tasks, p).iter().all(|t| t.end.is_some()),
                },
                // A later process of a thread planned this round waits for the next one.
                None if p.thread != 0 && plan.keys().any(|&j| batch[j].thread == p.thread) => {
                    next.push(i);
                    continue;
                }
                None => scratch.find(tasks, p),
            };
            if let Some(run) = &f.run {
                scratch.remember(p.thread, run, f.sure);
            }
            found[i] = Some(f);
        }
        left = next;
    }
    found.into_iter().map(|f| f.expect("all decided")).collect()
}

/// The task run (an index into `tasks`) for the first process in `left` of each thread
/// that is not its thread's known task run's, chosen together.
fn plan(
    tasks: &[TaskRun],
    batch: &[Process],
    left: &[usize],
    known: &[Process],
    threads: &Threads,
) -> HashMap<usize, usize> {
    let reps = representatives(tasks, batch, left, threads);
    let options: Vec<Vec<(usize, f64)>> = (reps.iter())
        .map(|&i| options(tasks, &batch[i], batch, known, threads))
        .collect();
    let chosen = search(&options);
    (reps.into_iter().zip(chosen))
        .filter_map(|(i, t)| Some((i, t?)))
        .collect()
}

/// Each thread's first process in `batch` that a task run may hold, none of them the
/// thread's own (then it is that one's, see `Threads::find`). Those only one may hold
/// take part too: that task run is no other thread's.
fn representatives(
    tasks: &[TaskRun],
    batch: &[Process],
    left: &[usize],
    threads: &Threads,
) -> Vec<usize> {
    let mut order = left.to_vec();
    order.sort_by_key(|&i| batch[i].start);
    let mut seen = HashSet::new();
    let mut reps = Vec::new();
    for i in order {
        let p = &batch[i];
        if p.thread == 0 || seen.contains(&p.thread) {
            continue;
        }
        let cands = candidates(tasks, p);
        let own = threads.last(p.thread);
        if cands.is_empty() || cands.iter().any(|c| own.is_some_and(|o| o.id == c.id)) {
            continue;
        }
        seen.insert(p.thread);
        reps.push(i);
    }
    reps
}

/// The task runs that may hold `p`, each with its cost, best first.
fn options(
    tasks: &[TaskRun],
    p: &Process,
    batch: &[Process],
    known: &[Process],
    threads: &Threads,
) -> Vec<(usize, f64)> {
    let mine: Vec<&Process> = (known.iter().chain(batch))
        .filter(|q| q.thread == p.thread)
        .collect();
    let cands = candidates(tasks, p);
    let mut out: Vec<(usize, f64)> = (tasks.iter().enumerate())
        .filter(|(_, t)| cands.iter().any(|c| c.id == t.id))
        .map(|(k, t)| {
            let taken = threads.held_by_other(p.thread, &t.id);
            (k, cost(t, p, &mine) + if taken { TAKEN } else { 0.0 })
        })
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

/// The choice of one option (or none) per row, no two rows the same task run, of least
/// total cost; within `BUDGET` steps, else the best found by then.
fn search(options: &[Vec<(usize, f64)>]) -> Vec<Option<usize>> {
    struct S<'a> {
        options: &'a [Vec<(usize, f64)>],
        used: HashSet<usize>,
        now: Vec<Option<usize>>,
        best: (f64, Vec<Option<usize>>),
        steps: usize,
    }
    fn go(s: &mut S, row: usize, total: f64) {
        s.steps += 1;
        if total >= s.best.0 || s.steps > BUDGET {
            return;
        }
        if row == s.options.len() {
            s.best = (total, s.now.clone());
            return;
        }
        for &(t, c) in &s.options[row] {
            if s.used.insert(t) {
                s.now[row] = Some(t);
                go(s, row + 1, total + c);
                s.now[row] = None;
                s.used.remove(&t);
            }
        }
        go(s, row + 1, total + NONE);
    }
    let n = options.len();
    let mut s = S {
        options,
        used: HashSet::new(),
        now: vec![None; n],
        best: (f64::INFINITY, vec![None; n]),
        steps: 0,
    };
    go(&mut s, 0, 0.0);
    s.best.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engines::prefect::fixtures::Clock;

    /// Times in µs.
    const C: Clock = Clock(Duration::from_micros(1));

    fn run(name: &str, start: u64, end: u64) -> TaskRun {
        C.run(name, start, Some(end))
    }

    fn process(thread: u32, start: u64, end: u64) -> Process {
        C.process(thread, start, end)
    }

    fn names(tasks: &[TaskRun], batch: &[Process]) -> Vec<String> {
        (decide(tasks, batch, &[], &Threads::default()).into_iter())
            .map(|f| f.run.unwrap().name)
            .collect()
    }

    /// Three equal task runs submitted together, as Prefect recorded them (times in µs).
    /// The first process to end was alone in its batch, and the third task run's row not
    /// yet written: of the two it fits, it went to the first to start, its sibling's.
    #[test]
    fn equal_submitted_task_runs_go_to_the_threads_that_ran_them() {
        let tasks = [run("a-89e", 0, 337_000), run("a-005", 10_000, 334_000)];
        let first = [process(11, 27_400, 332_100)];
        assert_eq!(names(&tasks, &first), ["a-005"]);
        let tasks = [
            run("a-89e", 0, 337_000),
            run("a-005", 10_000, 334_000),
            run("a-10e", 23_000, 363_000),
        ];
        let batch = [
            process(11, 27_400, 332_100),
            process(12, 28_100, 334_400),
            process(13, 32_500, 353_900),
        ];
        assert_eq!(names(&tasks, &batch), ["a-005", "a-89e", "a-10e"]);
    }

    /// Three equal task runs on a busy machine (µs): the two that started first forked 75
    /// and 85 ms later, the last one 5 ms after it started: the first fork is its.
    #[test]
    fn the_first_fork_can_be_the_last_started_task_runs() {
        let tasks = [
            run("a-16e", 0, 440_000),
            run("a-a7a", 3_000, 439_000),
            run("a-f05", 66_000, 443_000),
        ];
        let batch = [
            process(11, 71_000, 431_700),
            process(12, 74_600, 431_400),
            process(13, 87_900, 432_200),
        ];
        assert_eq!(names(&tasks, &batch)[0], "a-f05");
    }

    /// Four threads run eight mapped task runs, two each, all the same length: a thread's
    /// second task run is matched by its own processes, not by the first thread free at its
    /// start. The task runs start 1 ms apart, the threads fork in the reverse order (the
    /// last started 3 ms after its start, the first 40 ms) and the runs end 2 ms after.
    #[test]
    fn a_thread_that_runs_several_task_runs_gets_each_by_its_own_ends() {
        let mut tasks = Vec::new();
        let mut batch = Vec::new();
        for (k, t) in [2u32, 0, 3, 1].into_iter().enumerate() {
            for round in 0..2u64 {
                let s = round * 400_000 + k as u64 * 1_000;
                let fork = round * 400_000 + [40_000, 30_000, 20_000, 6_000][k];
                tasks.push(run(&format!("w{t}-{round}"), s, fork + 302_000));
                batch.push(process(10 + t, fork, fork + 300_000));
            }
        }
        let want: Vec<String> = (batch.iter().enumerate())
            .map(|(i, p)| format!("w{}-{}", p.thread - 10, i % 2))
            .collect();
        assert_eq!(names(&tasks, &batch), want);
    }
}
