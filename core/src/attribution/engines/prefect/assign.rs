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
    matching::{self, Found, Hold, Process, Threads, candidates},
};

/// The cost of leaving a thread's process without a task run here (left to `find`).
const NONE: f64 = 1e12;
/// The cost added for a task run another thread was already matched to for good, alone.
const TAKEN: f64 = 1e9;
/// The cost added for one another thread was matched to for good among others: more than
/// any fit, so that a task run no thread holds goes first (else two threads share one and a
/// sibling is left with no process), yet still one the records allow (below `TAKEN`).
const SHARED: f64 = 1e6;
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
pub(crate) fn decide(
    tasks: &[TaskRun],
    batch: &[Process],
    known: &[Process],
    threads: &Threads,
) -> Vec<Found> {
    let mut scratch = threads.clone();
    let mut found: Vec<Option<Found>> = batch.iter().map(|_| None).collect();
    let mut left = matching::order(tasks, batch);
    while !left.is_empty() {
        // A thread's processes are taken in the order it ran them, one a round: a later
        // one's task run must not stand for its thread while an earlier one is matched.
        let firsts = firsts(batch, &left);
        let plan = plan(tasks, batch, &firsts, known, &scratch);
        let mut next = Vec::new();
        for i in left.iter().copied() {
            let p = &batch[i];
            if !firsts.contains(&i) {
                next.push(i);
                continue;
            }
            let f = match plan.get(&i) {
                Some((k, others)) => Found {
                    run: Some(tasks[*k].clone()),
                    sure: candidates(tasks, p).iter().all(|t| t.end.is_some()),
                    others: others.iter().map(|&o| tasks[o].id.clone()).collect(),
                },
                None => scratch.find(tasks, p),
            };
            if let Some(run) = &f.run {
                scratch.remember(p.thread, run, f.sure, &f.others);
            }
            found[i] = Some(f);
        }
        left = next;
    }
    found.into_iter().map(|f| f.expect("all decided")).collect()
}

/// Of `left`, each thread's first process to start, and every one whose thread is not
/// known.
fn firsts(batch: &[Process], left: &[usize]) -> Vec<usize> {
    let mut first: HashMap<u32, usize> = HashMap::new();
    let mut out = Vec::new();
    for &i in left {
        match batch[i].thread {
            0 => out.push(i),
            t => {
                let f = first.entry(t).or_insert(i);
                if batch[i].start < batch[*f].start {
                    *f = i;
                }
            }
        }
    }
    out.extend(first.into_values());
    out
}

/// The task run (an index into `tasks`) for the first process in `left` of each thread
/// that is not its thread's known task run's, chosen together; with the others that may
/// as well have started it (see `allowed`).
fn plan(
    tasks: &[TaskRun],
    batch: &[Process],
    left: &[usize],
    known: &[Process],
    threads: &Threads,
) -> HashMap<usize, (usize, Vec<usize>)> {
    let reps = representatives(tasks, batch, left, threads);
    let options: Vec<Vec<(usize, f64)>> = (reps.iter())
        .map(|&i| options(tasks, &batch[i], batch, known, threads))
        .collect();
    let chosen = search(&options);
    let others = allowed(&options, &chosen);
    (reps.into_iter().zip(chosen).zip(others))
        .filter_map(|((i, t), others)| Some((i, (t?, others))))
        .collect()
}

/// For each row, the other task runs Prefect's records allow as well: each holds the row's
/// process, no other thread holds it for good, and every other row can still be given a
/// task run of its own (as many rows matched as in the chosen plan). Equal task runs
/// started together hold each other's processes: on a loaded machine their threads fork
/// 3 to 15 ms after their stamps, in any order, and end as far from theirs, so the
/// nearest fit is a guess; the match names the others it could as well have been.
fn allowed(options: &[Vec<(usize, f64)>], chosen: &[Option<usize>]) -> Vec<Vec<usize>> {
    let open: Vec<Vec<usize>> = (options.iter())
        .map(|o| o.iter().filter(|x| x.1 < TAKEN).map(|x| x.0).collect())
        .collect();
    let most = matched(&open, None);
    (open.iter().enumerate())
        .map(|(r, mine)| {
            (mine.iter().copied())
                .filter(|&t| chosen[r].is_some_and(|c| c != t))
                .filter(|&t| matched(&open, Some((r, t))) == most)
                .collect()
        })
        .collect()
}

/// How many rows can each have a task run of their own from `open`, row `fixed.0` given
/// `fixed.1` where set (augmenting paths: the rows are a batch's threads, a few dozen).
fn matched(open: &[Vec<usize>], fixed: Option<(usize, usize)>) -> usize {
    fn place(
        r: usize,
        open: &[Vec<usize>],
        owner: &mut HashMap<usize, usize>,
        seen: &mut HashSet<usize>,
    ) -> bool {
        for &t in &open[r] {
            if !seen.insert(t) {
                continue;
            }
            let free = match owner.get(&t) {
                None => true,
                Some(&o) => place(o, open, owner, seen),
            };
            if free {
                owner.insert(t, r);
                return true;
            }
        }
        false
    }
    let mut rows = open.to_vec();
    if let Some((r, t)) = fixed {
        rows[r] = vec![t];
    }
    let mut owner = HashMap::new();
    (0..rows.len())
        .filter(|&r| place(r, &rows, &mut owner, &mut HashSet::new()))
        .count()
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
            let held = match threads.hold_on(p.thread, &t.id) {
                Hold::Free => 0.0,
                Hold::Shared => SHARED,
                Hold::Held => TAKEN,
            };
            (k, cost(t, p, &mine) + held)
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

    /// Four equal mapped task runs on a loaded machine, as Prefect and the kernel recorded
    /// them (µs): each thread's `sleep` then `echo`, then each thread's next task run. The
    /// later processes, each held by one task run only, are matched first; a thread's
    /// `echo` must still go where its `sleep` went, not be matched again as its first.
    #[test]
    fn a_threads_later_task_run_does_not_rematch_its_earlier_processes() {
        let tasks = [
            run("w-cde", 5_011, 233_428),
            run("w-470", 10_343, 284_182),
            run("w-d7d", 11_303, 294_646),
            run("w-356", 20_148, 303_188),
            run("w-090", 380_000, 610_000),
            run("w-7f9", 381_000, 600_000),
            run("w-fbe", 390_000, 612_000),
        ];
        let known = [process(78, 7_268, 229_556)];
        let mut threads = Threads::default();
        threads.remember(78, &tasks[0], true, &[]);
        let batch = [
            process(80, 19_079, 246_102),
            process(79, 28_021, 245_571),
            process(81, 29_858, 249_129),
            process(78, 230_454, 231_883),
            process(79, 250_372, 252_007),
            process(81, 250_670, 253_969),
            process(80, 282_498, 283_793),
            process(79, 383_740, 601_169),
            process(80, 384_612, 593_618),
            process(81, 398_275, 609_185),
        ];
        let found = decide(&tasks, &batch, &known, &threads);
        let of = |i: usize| found[i].run.as_ref().unwrap().name.clone();
        for (sleep, echo) in [(0, 6), (1, 4), (2, 5)] {
            assert_eq!(of(sleep), of(echo), "thread {}", batch[sleep].thread);
        }
        assert_eq!(of(7), "w-090");
        assert_eq!(of(8), "w-7f9");
        assert_eq!(of(3), "w-cde");
    }

    /// Two equal task runs started 1 ms apart, both holding both threads' processes: either
    /// way is allowed, and the match says so. A third, which started 200 ms later, holds
    /// neither, and its own thread's process is its alone.
    #[test]
    fn task_runs_nothing_tells_apart_are_named_beside_the_match() {
        let tasks = [
            run("w-a", 0, 300_000),
            run("w-b", 1_000, 302_000),
            run("w-c", 200_000, 520_000),
        ];
        let batch = [
            process(11, 8_000, 293_000),
            process(12, 10_000, 293_000),
            process(13, 205_000, 515_000),
        ];
        let found = decide(&tasks, &batch, &[], &Threads::default());
        let others: Vec<&[String]> = found.iter().map(|f| f.others.as_slice()).collect();
        assert_eq!(others[0].len() + others[1].len(), 2, "{others:?}");
        let (a, b) = (found[0].run.clone().unwrap(), found[1].run.clone().unwrap());
        assert_eq!(others[0], std::slice::from_ref(&b.id));
        assert_eq!(others[1], std::slice::from_ref(&a.id));
        assert!(others[2].is_empty(), "{others:?}");
    }

    /// Task runs started together that end apart (they sleep 0.3, 0.4 and 0.5 s): each
    /// thread's process is held by one task run that the others' leave free, so no other
    /// is named, though the first thread's is held by all three.
    #[test]
    fn task_runs_their_ends_tell_apart_name_no_others() {
        let tasks = [
            run("a", 67_000, 381_000),
            run("b", 73_000, 483_000),
            run("c", 79_000, 592_000),
        ];
        let batch = [
            process(17, 80_000, 580_000),
            process(13, 81_000, 380_000),
            process(14, 82_000, 480_000),
        ];
        let found = decide(&tasks, &batch, &[], &Threads::default());
        let names: Vec<String> = (found.iter())
            .map(|f| f.run.as_ref().unwrap().name.clone())
            .collect();
        assert_eq!(names, ["c", "a", "b"]);
        assert!(found.iter().all(|f| f.others.is_empty()));
    }

    /// Two equal task runs; the first thread's process was settled on `w-b`, `w-a` named
    /// beside it. The second thread's process fits `w-b` best, yet `w-b` may be the first
    /// thread's: it goes to `w-a`, which no thread holds, and names `w-b`, so that each task
    /// run Prefect recorded keeps a process and no process loses its own.
    #[test]
    fn a_task_run_another_thread_holds_among_others_goes_after_a_free_one() {
        let tasks = [run("w-a", 0, 300_000), run("w-b", 1_000, 300_500)];
        let known = [process(11, 30_000, 290_000)];
        let mut threads = Threads::default();
        threads.remember(11, &tasks[1], true, std::slice::from_ref(&tasks[0].id));
        let batch = [process(12, 1_500, 300_000)];
        let found = decide(&tasks, &batch, &known, &threads);
        assert_eq!(found[0].run.as_ref().unwrap().name, "w-a");
        assert_eq!(found[0].others, [tasks[1].id.clone()]);
        threads.remember(11, &tasks[1], true, &[]);
        let found = decide(&tasks, &batch, &known, &threads);
        assert_eq!(found[0].run.as_ref().unwrap().name, "w-a");
        assert!(
            found[0].others.is_empty(),
            "w-b is the first thread's alone"
        );
    }
}
