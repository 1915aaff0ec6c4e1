//! What compare reads of a run: per task (by span name) its figures and its tools' figures,
//! from the run's spans. Serde, so that a run's summary can be kept in the state directory.
use std::collections::{BTreeMap, HashMap};

use pipetrace_semconv::attr;
use serde::{Deserialize, Serialize};

use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// A figure compared between runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Seconds from start to end.
    Wall,
    /// CPU seconds, user and system.
    Cpu,
    /// Bytes, the largest of the jobs.
    PeakMemory,
    /// Bytes read from and written to disk.
    DiskRead,
    DiskWrite,
    /// Seconds runnable but waiting for a CPU.
    RunQueueDelay,
    /// Seconds waiting for block I/O and for memory (delay accounting).
    DiskWait,
    MemoryWait,
    /// In the configured currency.
    Cost,
}

impl Metric {
    pub const ALL: [Metric; 9] = [
        Metric::Wall,
        Metric::Cpu,
        Metric::PeakMemory,
        Metric::DiskRead,
        Metric::DiskWrite,
        Metric::RunQueueDelay,
        Metric::DiskWait,
        Metric::MemoryWait,
        Metric::Cost,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Metric::Wall => "wall",
            Metric::Cpu => "cpu",
            Metric::PeakMemory => "peak mem",
            Metric::DiskRead => "disk read",
            Metric::DiskWrite => "disk write",
            Metric::RunQueueDelay => "cpu wait",
            Metric::DiskWait => "I/O wait",
            Metric::MemoryWait => "mem wait",
            Metric::Cost => "cost",
        }
    }

    pub(crate) fn is_bytes(self) -> bool {
        matches!(
            self,
            Metric::PeakMemory | Metric::DiskRead | Metric::DiskWrite
        )
    }
}

/// Figures of a task or a tool; a figure the spans did not carry is absent.
pub type Figures = BTreeMap<Metric, f64>;

/// Adds a span's figures: sums, but the peak is the largest.
fn add(f: &mut Figures, s: &ReportSpan) {
    let mut put = |m: Metric, v: f64| {
        let e = f.entry(m).or_insert(0.0);
        *e = if m == Metric::PeakMemory {
            e.max(v)
        } else {
            *e + v
        };
    };
    put(Metric::Wall, s.secs());
    put(Metric::Cpu, s.cpu());
    let optional = [
        (Metric::PeakMemory, attr::MEMORY_PEAK),
        (Metric::DiskRead, attr::DISK_READ_BYTES),
        (Metric::DiskWrite, attr::DISK_WRITE_BYTES),
        (Metric::RunQueueDelay, attr::CPU_RUN_QUEUE_DELAY),
        (Metric::DiskWait, attr::DISK_WAIT_TIME),
        (Metric::MemoryWait, attr::MEMORY_WAIT_TIME),
        (Metric::Cost, attr::COST),
    ];
    for (m, key) in optional {
        if let Some(v) = s.numbers.get(key) {
            put(m, *v);
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Tool {
    /// Processes of this name in the task.
    pub count: u64,
    pub figures: Figures,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Task {
    /// The span name: the task name with its wildcards or tag, e.g. `stats (s=A)`.
    pub name: String,
    /// `cicd.pipeline.task.name`: the rule or process, without wildcards.
    pub task: String,
    /// Jobs under this name (retries, folded repeats).
    pub jobs: u64,
    pub failed: u64,
    /// The first failure's description.
    pub error: Option<String>,
    pub figures: Figures,
    pub tools: BTreeMap<String, Tool>,
}

impl Task {
    /// Its mean job: sums over its jobs divided by them, the peak as it is.
    pub(crate) fn per_job(&self) -> Task {
        let n = self.jobs.max(1) as f64;
        let figures = (self.figures.iter())
            .map(|(m, v)| (*m, if *m == Metric::PeakMemory { *v } else { v / n }))
            .collect();
        Task {
            figures,
            ..self.clone()
        }
    }
}

/// One side of a comparison.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    /// What the user named (a file, `FILE#2`, a run id, `usual of P`).
    pub label: String,
    /// The trace id; empty for a usual.
    pub trace: String,
    /// The run span's name.
    pub name: String,
    /// Unix nanoseconds.
    pub start: u64,
    pub failed: bool,
    pub currency: Option<String>,
    pub tasks: Vec<Task>,
    /// Its cost and work by user and cost centre.
    #[serde(default)]
    pub who: crate::report::who::ByWho,
    /// What each task needed of a machine (none for a usual, made from the history).
    #[serde(default)]
    pub needs: Option<crate::sizing::Needs>,
    /// The judgement's findings of the run, most serious first (none for a usual).
    #[serde(default)]
    pub findings: Vec<Found>,
}

/// One of a run's findings, as the judgement said it (`report --json`'s kind and words).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Found {
    pub kind: String,
    /// The job it names ("align sample=B"), and its task.
    pub job: Option<String>,
    pub task: Option<String>,
    pub text: String,
}

impl Found {
    fn of(f: &pipetrace_core::judgement::Finding) -> Self {
        Found {
            kind: f.what.kind().to_string(),
            job: f.job.as_ref().map(|j| j.label.clone()),
            task: f.job.as_ref().map(|j| j.task.clone()),
            text: f.text.clone(),
        }
    }

    /// Its kind and task: a finding of the same kind on the same task in both runs is
    /// one the runs share, whichever job it names.
    pub(crate) fn same_as(&self, o: &Found) -> bool {
        self.kind == o.kind && self.task == o.task
    }
}

impl Run {
    /// The run with each entry as its mean job ([`Task::per_job`]).
    pub(crate) fn per_job(&self) -> Run {
        Run {
            tasks: self.tasks.iter().map(Task::per_job).collect(),
            ..self.clone()
        }
    }

    /// A run from its spans (one trace); tools are grouped under the task they ran in.
    pub(crate) fn of_spans(label: &str, spans: &[ReportSpan]) -> Self {
        let run = spans.iter().find(|s| s.kind == Kind::Run);
        let by_id: HashMap<&str, &ReportSpan> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
        let mut tasks: BTreeMap<String, Task> = BTreeMap::new();
        let mut task_of: HashMap<&str, String> = HashMap::new();
        for s in spans.iter().filter(|s| s.kind == Kind::Task) {
            let t = tasks.entry(s.name.clone()).or_insert_with(|| Task {
                name: s.name.clone(),
                task: s
                    .text(attr::CICD_PIPELINE_TASK_NAME)
                    .unwrap_or_default()
                    .into(),
                ..Task::default()
            });
            t.jobs += (s.num(attr::FOLD_SPANS) as u64).max(1);
            t.failed += u64::from(s.error.is_some());
            if t.error.is_none() {
                t.error.clone_from(&s.error);
            }
            add(&mut t.figures, s);
            task_of.insert(&s.id, s.name.clone());
        }
        for s in spans.iter().filter(|s| s.kind == Kind::Tool) {
            let Some(task) = enclosing_task(s, &by_id, &task_of) else {
                continue;
            };
            let tool = (tasks.get_mut(&task).expect("a task above"))
                .tools
                .entry(s.name.clone())
                .or_default();
            tool.count += (s.num(attr::FOLD_SPANS) as u64).max(1);
            add(&mut tool.figures, s);
        }
        Self {
            label: label.to_string(),
            trace: spans.first().map(|s| s.trace.clone()).unwrap_or_default(),
            name: run.map(|r| r.name.clone()).unwrap_or_default(),
            start: spans.iter().map(|s| s.start).min().unwrap_or(0),
            failed: run.is_some_and(|r| r.error.is_some()),
            currency: (spans.iter()).find_map(|s| s.text(attr::COST_CURRENCY).map(str::to_string)),
            tasks: tasks.into_values().collect(),
            who: crate::report::who::ByWho::of(spans),
            needs: Some(crate::sizing::Needs::of(spans)),
            findings: (pipetrace_core::judgement::Judgement::of(spans)
                .findings
                .iter())
            .map(Found::of)
            .collect(),
        }
    }
}

/// The task a tool ran in: the first task span up its parents (tools nest in tools).
fn enclosing_task(
    s: &ReportSpan,
    by_id: &HashMap<&str, &ReportSpan>,
    task_of: &HashMap<&str, String>,
) -> Option<String> {
    let mut at = s.parent.as_deref();
    // Bounded: a malformed file must not loop.
    for _ in 0..64 {
        let id = at?;
        if let Some(t) = task_of.get(id) {
            return Some(t.clone());
        }
        at = by_id.get(id).and_then(|p| p.parent.as_deref());
    }
    None
}
