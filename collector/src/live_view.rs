//! What runs now, for the live view of `pipetrace run`: each running task with its elapsed
//! time, the CPUs it uses, its memory now and at its highest, its storage I/O rate and the
//! tools running under it. Built from the attribution's members and a reading of each
//! running process that the caller hands in (the /proc read stays at the edge).
use std::collections::{BTreeSet, HashMap};

use pipetrace_core::accounting::live::RunningUsage;
use pipetrace_core::attribution::{Attributor, Role};
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Tree;

/// A running task as the view shows it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskNow {
    pub name: String,
    pub elapsed_s: f64,
    /// CPU-seconds per second since the last look.
    pub cpus: f64,
    pub rss: u64,
    /// The highest `rss` seen at a look.
    pub peak: u64,
    /// Storage bytes read and written per second since the last look.
    pub io_rate: f64,
    /// The programs running in it, by name.
    pub tools: Vec<String>,
    pub stalled: bool,
    /// What the task's earlier runs took (its history's median), where known.
    pub usual_s: Option<f64>,
    /// GPU memory its processes hold now, and their SM utilisation so far (where a
    /// process of it holds a GPU context).
    #[serde(default)]
    pub gpu_memory: u64,
    #[serde(default)]
    pub gpu_utilization: Option<f64>,
}

/// The run now: its name, how long it has run, its tasks done and failed, those running.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Now {
    pub run: String,
    pub elapsed_s: f64,
    pub done: u32,
    pub failed: u32,
    pub tasks: Vec<TaskNow>,
    /// Tasks the run will run in all, where its engine says (then `done` is the engine's),
    /// and those not started yet.
    #[serde(default)]
    pub total: Option<u32>,
    #[serde(default)]
    pub queued: Option<u32>,
    /// Tasks running by the engine's records, where they tell running from queued (tasks
    /// on other nodes, or in the engine's own process, that no process here shows).
    #[serde(default)]
    pub running: Option<u32>,
    /// What the pipeline's earlier runs usually took (the median of its last runs that
    /// succeeded), and the time this one has left by that, or by its pace so far.
    #[serde(default)]
    pub usual_s: Option<f64>,
    #[serde(default)]
    pub left_s: Option<f64>,
}

impl Now {
    /// The time left: the usual run's time less what this one has run; without a history,
    /// the tasks not done at the pace of those done (where the engine says how many).
    pub(crate) fn expect_end(&mut self, usual_s: Option<f64>) {
        self.usual_s = usual_s;
        self.left_s = match (usual_s, self.total) {
            (Some(u), _) => Some(u - self.elapsed_s).filter(|l| *l > 0.0),
            (None, Some(total)) if self.done > 0 => {
                let per_task = self.elapsed_s / f64::from(self.done);
                Some(per_task * f64::from(total.saturating_sub(self.done)))
            }
            _ => None,
        };
    }

    /// Tasks not started yet, where the engine says how many there are in all.
    pub(crate) fn not_started(&self) -> Option<u32> {
        let started = self.done + self.tasks.len() as u32;
        self.total.map(|t| t.saturating_sub(started))
    }

    /// The engine's counts: its done and total stand, and its queued and running where it
    /// says (else queued are those neither done nor seen running).
    pub(crate) fn engine_says(&mut self, p: &pipetrace_core::attribution::engines::Progress) {
        (self.done, self.total) = (p.done, Some(p.total));
        self.running = p.running();
        self.queued = p.queued.or_else(|| self.not_started());
    }

    /// Tasks running: by the engine's records where they say, else those seen.
    pub(crate) fn running_now(&self) -> u32 {
        self.running.unwrap_or(self.tasks.len() as u32)
    }
}

/// What a task held at the last look, to turn counters into rates.
#[derive(Clone, Copy, Default)]
struct Last {
    at_ns: u64,
    cpu_ns: u64,
    io_bytes: u64,
    peak: u64,
}

/// Of a running task (by its root and name): whether it is stalled, and what its earlier
/// runs usually took.
pub type Judge<'a> = dyn FnMut(ProcKey, ProcKey, &str) -> (bool, Option<f64>) + 'a;

/// Looks at the running tasks again and again, remembering each one's last totals.
#[derive(Default)]
pub struct Watcher {
    last: HashMap<ProcKey, Last>,
    /// Each task's name once the engine's records gave one (asked once, not every look).
    names: HashMap<ProcKey, String>,
}

/// A task's processes read at one look.
#[derive(Default)]
struct Sum {
    cpu_ns: u64,
    io_bytes: u64,
    rss: u64,
    tools: BTreeSet<String>,
    gpu_memory: u64,
    gpu: pipetrace_core::accounting::GpuFigures,
}

/// A running process's GPU memory now and GPU figures so far, where it holds a context.
pub type GpuNow<'a> = dyn Fn(u32) -> Option<(u64, pipetrace_core::accounting::GpuFigures)> + 'a;

impl Watcher {
    /// Each run now, in the order they started. `read` gives a running process's figures
    /// (None once it is gone); `judge`, of a run's task, whether it is stalled and what its
    /// earlier runs usually took.
    pub(crate) fn look(
        &mut self,
        attr: &Attributor,
        tree: &Tree,
        now_ns: u64,
        read: &dyn Fn(u32) -> Option<RunningUsage>,
        gpu: &GpuNow,
        judge: &mut Judge,
    ) -> Vec<Now> {
        let mut sums: HashMap<ProcKey, (ProcKey, Sum)> = HashMap::new();
        let mut runs: Vec<ProcKey> = Vec::new();
        for (key, m) in attr.members().collect::<Vec<_>>() {
            if !runs.contains(&m.run) {
                runs.push(m.run);
            }
            let Some(task) = m.task else { continue };
            let (Some(p), Some(root)) = (tree.get(&key), tree.get(&task)) else {
                continue;
            };
            if p.exit.is_some() || root.exit.is_some() || m.role == Role::Helper {
                continue;
            }
            let Some(l) = read(key.pid) else { continue };
            let (_, s) = sums.entry(task).or_insert_with(|| (m.run, Sum::default()));
            s.cpu_ns += l.cpu_user_ns + l.cpu_system_ns;
            s.io_bytes += l.disk_read_bytes + l.disk_write_bytes;
            s.rss += l.rss_bytes;
            if let Some((bytes, figures)) = gpu(key.pid) {
                s.gpu_memory += bytes;
                s.gpu.add(&figures);
            }
            if key != task || s.tools.is_empty() {
                s.tools.insert(Attributor::tool_of(p));
            }
        }
        self.last.retain(|k, _| sums.contains_key(k));
        self.names.retain(|k, _| sums.contains_key(k));
        let mut tasks: Vec<(ProcKey, u64, TaskNow)> = Vec::new();
        for (task, (run, s)) in sums {
            let Some(root) = tree.get(&task) else {
                continue;
            };
            let now = self.task_now(attr, tree, now_ns, (run, task), s, judge);
            tasks.push((run, root.start_ns, now));
        }
        tasks.sort_by_key(|(_, start, _)| *start);
        let mut out: Vec<(u64, Now)> = Vec::new();
        for run in runs {
            let Some((name, done, failed)) = attr.run_now(run) else {
                continue;
            };
            let started = tree.get(&run).map_or(now_ns, |p| p.start_ns);
            let mine = tasks.iter().filter(|(r, _, _)| *r == run);
            out.push((
                started,
                Now {
                    run: name,
                    elapsed_s: now_ns.saturating_sub(started) as f64 / 1e9,
                    done,
                    failed,
                    tasks: mine.map(|(_, _, t)| t.clone()).collect(),
                    total: None,
                    queued: None,
                    running: None,
                    usual_s: None,
                    left_s: None,
                },
            ));
        }
        out.sort_by_key(|(start, _)| *start);
        out.into_iter().map(|(_, n)| n).collect()
    }

    /// One running task now, from its processes' sum and its last look.
    fn task_now(
        &mut self,
        attr: &Attributor,
        tree: &Tree,
        now_ns: u64,
        (run, task): (ProcKey, ProcKey),
        s: Sum,
        judge: &mut Judge,
    ) -> TaskNow {
        let root = tree.get(&task);
        let own = root.map(Attributor::tool_of).unwrap_or_default();
        let name = match self.names.get(&task) {
            Some(n) => n.clone(),
            None => match attr.running_name(&task) {
                Some(n) => self.names.entry(task).or_insert(n.to_string()).clone(),
                None => own.clone(),
            },
        };
        let l = self.last.get(&task).copied();
        let secs = l.map_or(0.0, |l| now_ns.saturating_sub(l.at_ns) as f64 / 1e9);
        let rate = |now: u64, then: u64| match secs > 0.0 {
            true => now.saturating_sub(then) as f64 / secs,
            false => 0.0,
        };
        let l = l.unwrap_or_default();
        let peak = l.peak.max(s.rss);
        let (stalled, usual_s) = judge(run, task, &name);
        let mut tools: Vec<String> = s.tools.into_iter().collect();
        if tools.len() > 1 {
            tools.retain(|t| *t != own);
        }
        let gpu_utilization = s.gpu.sm_utilization();
        let next = Last {
            at_ns: now_ns,
            cpu_ns: s.cpu_ns,
            io_bytes: s.io_bytes,
            peak,
        };
        self.last.insert(task, next);
        TaskNow {
            elapsed_s: root.map_or(0.0, |r| now_ns.saturating_sub(r.start_ns) as f64 / 1e9),
            cpus: rate(s.cpu_ns, l.cpu_ns) / 1e9,
            io_rate: rate(s.io_bytes, l.io_bytes),
            rss: s.rss,
            peak,
            tools,
            stalled,
            usual_s,
            name,
            gpu_memory: s.gpu_memory,
            gpu_utilization,
        }
    }
}

fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{v:.0} {}", UNITS[u]),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

fn duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The view as text lines at most `width` characters wide: the run, then at most `max`
/// running tasks (the rest counted).
pub(crate) fn lines(now: &Now, width: usize, max: usize) -> Vec<String> {
    let counts = match (now.total, now.queued.or_else(|| now.not_started())) {
        (Some(total), Some(queued)) => format!(
            "{} running, {queued} queued, {} of {total} done, {} failed",
            now.running_now(),
            now.done,
            now.failed
        ),
        _ => format!(
            "{} running, {} done, {} failed",
            now.running_now(),
            now.done,
            now.failed
        ),
    };
    let expected = match (now.left_s, now.usual_s) {
        (Some(left), _) => format!("  ~{} left", duration(left)),
        (None, Some(u)) => format!("  over its usual {}", duration(u)),
        (None, None) => String::new(),
    };
    let mut out = vec![format!(
        "pipetrace ▸ {}  {}  {counts}{expected}",
        now.run,
        duration(now.elapsed_s),
    )];
    for t in now.tasks.iter().take(max) {
        let mut line = format!(
            "  {:<24} {:>7}  cpu {:.1}  mem {} (peak {})  io {}/s  {}",
            t.name,
            duration(t.elapsed_s),
            t.cpus,
            bytes(t.rss as f64),
            bytes(t.peak as f64),
            bytes(t.io_rate),
            t.tools.join(", ")
        );
        if t.gpu_memory > 0 || t.gpu_utilization.is_some() {
            let busy = t
                .gpu_utilization
                .map_or("-".into(), |u| format!("{:.0}%", 100.0 * u));
            line += &format!("  gpu {busy} {}", bytes(t.gpu_memory as f64));
        }
        if t.stalled {
            line.push_str("  STALLED");
        }
        match t.usual_s {
            Some(u) if u > t.elapsed_s => line += &format!("  ~{} left", duration(u - t.elapsed_s)),
            Some(u) => line += &format!("  over its usual {}", duration(u)),
            None => {}
        }
        out.push(line);
    }
    if now.tasks.len() > max {
        out.push(format!("  … and {} more running", now.tasks.len() - max));
    }
    for l in &mut out {
        if let Some((at, _)) = l.char_indices().nth(width) {
            l.truncate(at);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, elapsed_s: f64) -> TaskNow {
        TaskNow {
            name: name.into(),
            elapsed_s,
            cpus: 1.5,
            rss: 3 * 1024 * 1024,
            peak: 5 * 1024 * 1024,
            io_rate: 2048.0,
            tools: vec!["bwa".into(), "samtools".into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_view_names_the_run_its_counts_and_each_running_task() {
        let mut slow = task("sort (sample=B)", 130.0);
        slow.stalled = true;
        slow.usual_s = Some(100.0);
        let mut fresh = task("align (sample=A)", 4.0);
        fresh.usual_s = Some(10.0);
        let now = Now {
            run: "demo".into(),
            elapsed_s: 3725.0,
            done: 5,
            failed: 1,
            tasks: vec![fresh, slow, task("x", 1.0)],
            ..Default::default()
        };
        let l = lines(&now, 200, 2);
        assert_eq!(l[0], "pipetrace ▸ demo  1h02m  3 running, 5 done, 1 failed");
        assert!(l[1].starts_with("  align (sample=A)"), "{}", l[1]);
        assert!(l[1].contains("cpu 1.5  mem 3.0 MiB (peak 5.0 MiB)  io 2.0 KiB/s  bwa, samtools"));
        assert!(l[1].ends_with("~6s left"), "{}", l[1]);
        assert!(
            l[2].contains("2m10s") && l[2].contains("STALLED"),
            "{}",
            l[2]
        );
        assert!(l[2].ends_with("over its usual 1m40s"), "{}", l[2]);
        assert_eq!(l[3], "  … and 1 more running");
        assert!(lines(&now, 12, 2).iter().all(|x| x.chars().count() <= 12));
    }

    #[test]
    fn a_run_whose_engine_says_how_many_tasks_shows_the_queued_ones() {
        let now = Now {
            run: "wgs".into(),
            elapsed_s: 5.0,
            done: 2,
            tasks: vec![task("align", 1.0)],
            total: Some(6),
            ..Default::default()
        };
        assert_eq!(now.not_started(), Some(3));
        let l = lines(&now, 200, 5);
        assert_eq!(
            l[0],
            "pipetrace ▸ wgs  5s  1 running, 3 queued, 2 of 6 done, 0 failed"
        );
        let mut paced = now.clone();
        paced.expect_end(None);
        assert_eq!(paced.left_s, Some(10.0), "4 tasks to go at 2.5 s each");
        assert!(lines(&paced, 200, 5)[0].ends_with("0 failed  ~10s left"));
        let mut usual = now.clone();
        usual.expect_end(Some(65.0));
        assert_eq!(usual.left_s, Some(60.0), "the history's usual wins");
        assert!(lines(&usual, 200, 5)[0].ends_with("~1m00s left"));
        let mut late = now.clone();
        late.expect_end(Some(4.0));
        assert_eq!(late.left_s, None);
        assert!(lines(&late, 200, 5)[0].ends_with("over its usual 4s"));
        let mut unknown = Now { total: None, ..now };
        unknown.expect_end(None);
        assert_eq!(unknown.left_s, None, "nothing to judge by");
    }

    #[test]
    fn an_engine_that_tells_queued_from_running_is_believed_over_what_is_seen() {
        use pipetrace_core::attribution::engines::Progress;
        let mut now = Now {
            run: "nf".into(),
            elapsed_s: 5.0,
            done: 0,
            tasks: vec![task("a", 1.0)],
            ..Default::default()
        };
        let mut by_count = now.clone();
        by_count.engine_says(&Progress {
            done: 1,
            total: 5,
            queued: None,
            cached: 0,
        });
        assert_eq!((by_count.queued, by_count.running), (Some(3), None));
        // Jobs on other nodes: none seen here, three running by the engine's records.
        now.tasks.clear();
        now.engine_says(&Progress {
            done: 1,
            total: 6,
            queued: Some(2),
            cached: 0,
        });
        assert_eq!((now.done, now.total, now.queued), (1, Some(6), Some(2)));
        assert_eq!(
            lines(&now, 200, 5)[0],
            "pipetrace ▸ nf  5s  3 running, 2 queued, 1 of 6 done, 0 failed"
        );
    }

    #[test]
    fn a_task_on_a_gpu_shows_its_gpu_use_and_one_without_shows_none() {
        let mut train = task("train", 30.0);
        train.gpu_memory = 8 << 30;
        train.gpu_utilization = Some(0.93);
        let now = Now {
            run: "demo".into(),
            tasks: vec![train, task("qc", 2.0)],
            ..Default::default()
        };
        let l = lines(&now, 200, 5);
        assert!(l[1].contains("  gpu 93% 8.0 GiB"), "{}", l[1]);
        assert!(!l[2].contains("gpu"), "{}", l[2]);
    }
}
