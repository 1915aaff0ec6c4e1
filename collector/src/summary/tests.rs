//! The summary's tree: what it keeps and how it shows a run of any size.
use super::*;

fn entry(start_s: u64) -> Entry {
    Entry {
        kind: Kind::Tool,
        name: format!("t{start_s}"),
        start: std::time::UNIX_EPOCH + Duration::from_secs(start_s),
        secs: 0.0,
        error: None,
        events: Vec::new(),
    }
}

fn id(n: u64) -> SpanId {
    SpanId::from_bytes(n.to_be_bytes())
}

#[test]
fn the_tree_keeps_the_earliest_children_of_each_parent_and_counts_them_all() {
    let mut kept = Kept {
        keep: 3,
        ..Default::default()
    };
    let root = id(1);
    // Children end (arrive) in another order than they started; each has one child
    // of its own, which arrives first.
    for n in [50u64, 10, 40, 20, 30, 60] {
        kept.insert(id(1000 + n), id(100 + n), entry(n));
        kept.insert(id(100 + n), root, entry(n));
    }
    assert_eq!(kept.counts[&root], 6);
    let mut kids: Vec<u64> = kept.children[&root]
        .iter()
        .map(|k| {
            kept.entries[k]
                .start
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        })
        .collect();
    kids.sort();
    assert_eq!(kids, [10, 20, 30], "the earliest by start");
    // What was under a child left out is gone with it: 1 root's 3 + their 3.
    assert_eq!(kept.entries.len(), 6);
    assert!(!kept.children.contains_key(&id(150)));
}

mod sizes {
    use opentelemetry::{
        KeyValue,
        trace::{Event, SpanContext, SpanKind, TraceFlags, TraceId, TraceState},
    };
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use pipetrace_semconv::event;

    use super::*;

    const T0: u64 = 1_700_000_000;

    fn at(ms: u64) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_millis(ms)
    }

    struct Span {
        kind: Kind,
        id: u64,
        parent: u64,
        name: String,
        ms: (u64, u64),
        attrs: Vec<KeyValue>,
        error: Option<String>,
        events: Vec<Event>,
    }

    impl Span {
        fn new(kind: Kind, id: u64, parent: u64, name: &str, ms: (u64, u64)) -> Self {
            Span {
                kind,
                id,
                parent,
                name: name.into(),
                ms,
                attrs: Vec::new(),
                error: None,
                events: Vec::new(),
            }
        }

        fn ready(self) -> ReadySpan {
            let ctx = SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(self.id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            );
            let mut events = SpanEvents::default();
            events.events = self.events;
            ReadySpan {
                kind: self.kind,
                span: SpanData {
                    span_context: ctx,
                    parent_span_id: SpanId::from(self.parent),
                    parent_span_is_remote: false,
                    span_kind: SpanKind::Internal,
                    name: self.name.into(),
                    start_time: at(self.ms.0),
                    end_time: at(self.ms.1),
                    attributes: self.attrs,
                    dropped_attributes_count: 0,
                    events,
                    links: SpanLinks::default(),
                    status: self.error.map_or(Status::Unset, Status::error),
                    instrumentation_scope: Default::default(),
                },
            }
        }
    }

    /// A Snakemake-like run of `n` jobs: `make` and `filter` per sample and one `merge`,
    /// each job a task with one tool, in the order they end. Among the last `filter` jobs
    /// to start, three exit 3 and one is OOM-killed.
    fn pipeline(n: u64) -> Vec<ReadySpan> {
        let samples = (n - 1) / 2;
        let mut spans = Vec::new();
        let mut job = |rule: &str, i: u64, start: u64, wall: u64, fail: Option<&str>| {
            let (task, tool) = (10 + 2 * i, 11 + 2 * i);
            let tag = format!("sample=S{i}");
            let mut t = Span::new(
                Kind::Task,
                task,
                1,
                &format!("{rule} ({tag})"),
                (start, start + wall),
            );
            t.attrs.extend([
                KeyValue::new(attr::CICD_PIPELINE_TASK_NAME, rule.to_string()),
                KeyValue::new(attr::TASK_WILDCARDS, tag),
            ]);
            let mut p = Span::new(Kind::Tool, tool, task, "tool", (start, start + wall));
            match fail {
                Some("oom") => {
                    t.error = Some(format!(
                        "task {rule}: 1 process(es) killed by the OOM killer"
                    ));
                    p.error = Some("tool killed by SIGKILL".into());
                    p.events.push(Event::new(
                        event::OOM_KILL,
                        at(start + wall),
                        vec![
                            KeyValue::new(attr::OOM_RSS, 210i64 << 20),
                            KeyValue::new(attr::MEMORY_LIMIT, 200i64 << 20),
                            KeyValue::new(attr::OOM_CGROUP, "/pipetrace-test"),
                        ],
                        0,
                    ));
                }
                Some(_) => {
                    t.error = Some(format!("task {rule} exited with code 3"));
                    p.error = Some("tool exited with code 3".into());
                }
                None => {}
            }
            spans.extend([p.ready(), t.ready()]);
        };
        for i in 0..samples {
            job("make", i, 10 * i, 10, None);
        }
        for i in 0..samples {
            let fail = match samples - i {
                1 | 3 | 4 => Some("exit"),
                2 => Some("oom"),
                _ => None,
            };
            job("filter", samples + i, 10 * samples + 10 * i, 50, fail);
        }
        let end = 20 * samples + 100;
        job("merge", 2 * samples, end - 30, 20, None);
        let mut run = Span::new(Kind::Run, 1, 0, "run big", (0, end));
        run.error = Some(format!("run exited with code 1; 4 of {n} tasks failed"));
        spans.push(run.ready());
        spans
    }

    fn end_of(n: u64, limits: (usize, usize)) -> String {
        let mut s = Summary::new(limits.0, limits.1);
        for span in pipeline(n) {
            s.record(&span);
        }
        s.body(&s.judge(), limits, "")
    }

    /// Every failure and the OOM kill are named, in at most 40 lines with the totals and
    /// delivery lines after them (about 6).
    fn names_every_failure(text: &str, n: u64) {
        let samples = (n - 1) / 2;
        assert!(
            text.lines().count() <= 34,
            "{} lines:\n{text}",
            text.lines().count()
        );
        let last = 2 * samples - 1;
        for i in [last, last - 2, last - 3] {
            let said =
                format!("FAILED     filter sample=S{i}: failed: task filter exited with code 3");
            assert!(text.contains(&said), "no {said} in:\n{text}");
        }
        let oom = format!(
            "OOM-KILLED filter sample=S{}: killed by the OOM killer at a peak of 210 MiB, over its limit of 200 MiB (cgroup /pipetrace-test)",
            last - 1
        );
        assert!(text.starts_with("pipetrace: findings"), "{text}");
        assert!(text.contains(&oom), "{text}");
        let made = format!("├─ make ×{samples}  ok  median 0.01s\n");
        assert!(text.contains(&made), "{text}");
        let filtered = format!(
            "├─ filter ×{samples}  {} ok, 4 FAILED  median 0.05s\n",
            samples - 4
        );
        assert!(text.contains(&filtered), "{text}");
    }

    #[test]
    fn a_run_of_11_jobs_shows_its_findings_then_every_job() {
        let text = end_of(11, (30, 8));
        assert_eq!(
            text,
            "pipetrace: findings, most serious first:
  OOM-KILLED filter sample=S8: killed by the OOM killer at a peak of 210 MiB, over its limit of 200 MiB (cgroup /pipetrace-test)
  FAILED     filter sample=S6: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S7: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S9: failed: task filter exited with code 3 (tool exited with code 3)

run big  0.20s  FAILED: run exited with code 1; 4 of 11 tasks failed
├─ make (sample=S0)  0.01s  ok
│  └─ tool  0.01s  ok
├─ make (sample=S1)  0.01s  ok
│  └─ tool  0.01s  ok
├─ make (sample=S2)  0.01s  ok
│  └─ tool  0.01s  ok
├─ make (sample=S3)  0.01s  ok
│  └─ tool  0.01s  ok
├─ make (sample=S4)  0.01s  ok
│  └─ tool  0.01s  ok
├─ filter (sample=S5)  0.05s  ok
│  └─ tool  0.05s  ok
├─ filter (sample=S6)  0.05s  FAILED: task filter exited with code 3
│  └─ tool  0.05s  FAILED: tool exited with code 3
├─ filter (sample=S7)  0.05s  FAILED: task filter exited with code 3
│  └─ tool  0.05s  FAILED: tool exited with code 3
├─ filter (sample=S8)  0.05s  FAILED: task filter: 1 process(es) killed by the OOM killer
│  └─ tool  0.05s  FAILED: tool killed by SIGKILL  [killed by the OOM killer at 210 MiB resident, limit 200 MiB (cgroup /pipetrace-test)]
├─ filter (sample=S9)  0.05s  FAILED: task filter exited with code 3
│  └─ tool  0.05s  FAILED: tool exited with code 3
└─ merge (sample=S10)  0.02s  ok
   └─ tool  0.02s  ok

task                  jobs    wall s     cpu s  peak mem  disk I/O  bottleneck    failed  advice
filter                   5      0.25      0.00     0 MiB     0 MiB  -                  4  memory: 420 MiB
make                     5      0.05      0.00     0 MiB     0 MiB  -                  0  -
merge                    1      0.02      0.00     0 MiB     0 MiB  -                  0  -
"
        );
    }

    #[test]
    fn a_run_of_501_jobs_names_every_failure_and_folds_the_rest_per_task() {
        let text = end_of(501, (30, 8));
        names_every_failure(&text, 501);
        assert_eq!(
            text,
            "pipetrace: findings, most serious first:
  OOM-KILLED filter sample=S498: killed by the OOM killer at a peak of 210 MiB, over its limit of 200 MiB (cgroup /pipetrace-test)
  FAILED     filter sample=S496: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S497: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S499: failed: task filter exited with code 3 (tool exited with code 3)

run big  5.10s  FAILED: run exited with code 1; 4 of 501 tasks failed
├─ make ×250  ok  median 0.01s
├─ filter ×250  246 ok, 4 FAILED  median 0.05s
└─ merge  0.02s  ok

task                  jobs    wall s     cpu s  peak mem  disk I/O  bottleneck    failed  advice
filter                 250     12.50      0.00     0 MiB     0 MiB  -                  4  memory: 420 MiB
make                   250      2.50      0.00     0 MiB     0 MiB  -                  0  -
merge                    1      0.02      0.00     0 MiB     0 MiB  -                  0  -
"
        );
    }

    #[test]
    fn a_run_of_5001_jobs_names_every_failure_and_folds_the_rest_per_task() {
        let text = end_of(5001, (30, 8));
        names_every_failure(&text, 5001);
        assert_eq!(
            text,
            "pipetrace: findings, most serious first:
  OOM-KILLED filter sample=S4998: killed by the OOM killer at a peak of 210 MiB, over its limit of 200 MiB (cgroup /pipetrace-test)
  FAILED     filter sample=S4996: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S4997: failed: task filter exited with code 3 (tool exited with code 3)
  FAILED     filter sample=S4999: failed: task filter exited with code 3 (tool exited with code 3)

run big  50.10s  FAILED: run exited with code 1; 4 of 5001 tasks failed
├─ make ×2500  ok  median 0.01s
├─ filter ×2500  2496 ok, 4 FAILED  median 0.05s
└─ merge  0.02s  ok

task                  jobs    wall s     cpu s  peak mem  disk I/O  bottleneck    failed  advice
filter                2500    125.00      0.00     0 MiB     0 MiB  -                  4  memory: 420 MiB
make                  2500     25.00      0.00     0 MiB     0 MiB  -                  0  -
merge                    1      0.02      0.00     0 MiB     0 MiB  -                  0  -
"
        );
    }

    /// The judgement stage ahead of the outputs: the run span leaves with the findings the
    /// end prints, in their order and words, past the tasks a view keeps in full; the end
    /// still prints them once, above the tree, not as events of the run's line.
    #[test]
    fn the_run_span_of_5001_jobs_carries_the_findings_the_end_prints() {
        let mut spans = pipeline(5001);
        let mut judging = crate::judging::Judging::default();
        for chunk in spans.chunks_mut(97) {
            judging.pass(chunk);
        }
        let run = &spans.last().unwrap().span;
        let said: Vec<(String, String)> = (run.events.iter())
            .filter(|e| e.name == event::FINDING)
            .map(|e| {
                let get = |k: &str| {
                    (e.attributes.iter())
                        .find(|kv| kv.key.as_str() == k)
                        .map(|kv| kv.value.to_string())
                        .unwrap_or_default()
                };
                (get(attr::FINDING_JOB), get(attr::FINDING_TEXT))
            })
            .collect();
        let mut s = Summary::new(30, 8);
        spans.iter().for_each(|span| s.record(span));
        let judged = s.judge();
        let printed: Vec<(String, String)> = (judged.findings.iter())
            .map(|f| (f.job.as_ref().unwrap().label.clone(), f.text.clone()))
            .collect();
        assert_eq!(said, printed);
        assert_eq!(said.len(), 4, "{said:?}");
        assert_eq!(said[0].0, "filter sample=S4998");
        let count = (run.attributes.iter()).find(|kv| kv.key.as_str() == attr::RUN_FINDINGS);
        assert_eq!(count.map(|kv| kv.value.to_string()).as_deref(), Some("4"));
        let text = s.body(&judged, (30, 8), "");
        let run_line = text.lines().find(|l| l.starts_with("run big")).unwrap();
        assert!(!run_line.contains('['), "{run_line}");
    }

    #[test]
    fn all_prints_every_job_of_a_large_run() {
        let text = end_of(501, (usize::MAX, usize::MAX));
        assert_eq!(text.matches("├─ filter (sample=").count(), 250, "{text}");
        assert!(!text.contains(" ×"), "nothing folded: {text}");
    }
}
