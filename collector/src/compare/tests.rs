//! Two synthetic runs as the report reads them back: spans of a run, its tasks and tools.
use std::collections::BTreeMap;

use pipetrace_semconv::attr;

use super::*;
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

const S: u64 = 1_000_000_000;

fn span(trace: &str, id: &str, parent: Option<&str>, kind: Kind, name: &str) -> ReportSpan {
    ReportSpan {
        trace: trace.into(),
        id: id.into(),
        parent: parent.map(str::to_string),
        kind,
        name: name.into(),
        start: 0,
        end: S,
        error: None,
        numbers: BTreeMap::new(),
        texts: BTreeMap::new(),
        lists: BTreeMap::new(),
        events: Vec::new(),
    }
}

/// A task (with its `bash` and one tool) taking `secs` wall and `cpu` CPU in its tool.
fn task(trace: &str, n: usize, name: &str, secs: f64, tool: (&str, f64)) -> Vec<ReportSpan> {
    let id = format!("t{n}");
    let mut t = span(trace, &id, Some("run"), Kind::Task, name);
    let rule = name.split(" (").next().unwrap();
    t.texts
        .insert(attr::CICD_PIPELINE_TASK_NAME.into(), rule.into());
    t.end = (secs * S as f64) as u64;
    t.numbers.insert(attr::CPU_USER_TIME.into(), tool.1 + 0.01);
    t.numbers.insert(attr::MEMORY_PEAK.into(), 50e6);
    let mut bash = span(trace, &format!("b{n}"), Some(&id), Kind::Tool, "bash");
    bash.end = t.end;
    bash.numbers.insert(attr::CPU_USER_TIME.into(), 0.01);
    let mut x = span(
        trace,
        &format!("x{n}"),
        Some(&format!("b{n}")),
        Kind::Tool,
        tool.0,
    );
    x.numbers.insert(attr::CPU_USER_TIME.into(), tool.1);
    x.end = (tool.1 * S as f64) as u64;
    vec![t, bash, x]
}

fn run(trace: &str, tasks: &[(&str, f64, (&str, f64))]) -> Run {
    let mut spans = vec![span(trace, "run", None, Kind::Run, "snakemake")];
    spans[0]
        .texts
        .insert(attr::RUN_ENGINE.into(), "snakemake".into());
    for (n, (name, secs, tool)) in tasks.iter().enumerate() {
        spans.extend(task(trace, n, name, *secs, *tool));
    }
    Run::of_spans(trace, &spans)
}

#[test]
fn the_slowed_task_and_its_tool_stand_out_and_nothing_else() {
    let a = run(
        "a",
        &[
            ("count (s=A)", 0.4, ("wc", 0.1)),
            ("pack (s=A)", 0.5, ("gzip", 0.3)),
            ("old", 0.3, ("cat", 0.0)),
        ],
    );
    let b = run(
        "b",
        &[
            ("count (s=A)", 1.1, ("wc", 0.4)),
            ("pack (s=A)", 14.0, ("gzip", 13.0)),
            ("new", 0.3, ("cat", 0.0)),
        ],
    );
    let c = compare(&a, &b, false, &Spreads::new(), None).unwrap();
    assert_eq!(c.moved, ["pack (s=A)"]);
    let pack = c.tasks.iter().find(|t| t.moved).unwrap();
    let moved: Vec<Metric> = pack.moved_figures().map(|f| f.metric).collect();
    assert_eq!(moved, [Metric::Wall, Metric::Cpu]);
    let first = pack.explaining().next().unwrap();
    assert_eq!(
        (first.name.as_str(), first.change),
        ("gzip", Change::Slower)
    );
    // The count task's jobs live under its name; its small moves are noise.
    let count = c.tasks.iter().find(|t| t.name == "count (s=A)").unwrap();
    assert!(!count.moved && count.tools.iter().all(|t| t.change == Change::Same));
    assert_eq!(
        (c.only_a.as_slice(), c.only_b.as_slice()),
        (&["old".to_string()][..], &["new".to_string()][..])
    );
    let mut text = String::new();
    table(&c, &mut text);
    assert!(
        text.contains("1 task(s) moved beyond noise: pack (s=A)"),
        "{text}"
    );
    assert!(text.contains("tool gzip slower"), "{text}");
    assert!(
        text.contains("only in A: old") && text.contains("only in B: new"),
        "{text}"
    );
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["moved"][0], "pack (s=A)");
    assert_eq!(json["tasks"][1]["tools"][0]["name"], "gzip");
    assert_eq!(
        json["tasks"][1]["figures"][0]["verdict"]["basis"]["by"],
        "floor"
    );
}

#[test]
fn a_task_that_fails_in_b_only_moved_even_with_the_same_figures() {
    let a = run("a", &[("x", 1.0, ("true", 0.0))]);
    let mut b = a.clone();
    b.tasks[0].failed = 1;
    b.tasks[0].error = Some("exit code 3".into());
    let c = compare(&a, &b, false, &Spreads::new(), None).unwrap();
    assert_eq!(c.moved, ["x"]);
    assert_eq!(c.tasks[0].new_failure.as_deref(), Some("exit code 3"));
}

#[test]
fn a_history_spread_decides_where_there_is_one() {
    let a = run("a", &[("sort", 100.0, ("sort", 90.0))]);
    let b = run("b", &[("sort", 115.0, ("sort", 90.0))]);
    assert!(
        compare(&a, &b, false, &Spreads::new(), None)
            .unwrap()
            .moved
            .is_empty()
    );
    let tight = Spread::of(&[100.0, 100.5, 99.5, 100.0]).unwrap();
    let spreads: Spreads = [("sort".to_string(), [(Metric::Wall, tight)].into())].into();
    let c = compare(&a, &b, false, &spreads, Some("p".into())).unwrap();
    assert_eq!(c.moved, ["sort"]);
}

#[test]
fn runs_with_nothing_in_common_say_so_with_their_tasks() {
    let a = run("a", &[("x", 1.0, ("true", 0.0))]);
    let b = run("b", &[("y", 1.0, ("true", 0.0))]);
    let e = compare(&a, &b, false, &Spreads::new(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no task in common (A: x; B: y)"), "{e}");
}

#[test]
fn the_page_escapes_every_name() {
    let a = run("a", &[("<b>x</b>", 1.0, ("<i>", 0.0))]);
    let b = run("b", &[("<b>x</b>", 30.0, ("<i>", 20.0))]);
    let c = compare(&a, &b, false, &Spreads::new(), None).unwrap();
    let page = html(&c);
    assert!(!page.contains("<b>x") && !page.contains("<i>"), "{page}");
    assert!(page.contains("&lt;b&gt;x&lt;/b&gt;") && page.contains("class=\"moved\""));
}

#[test]
fn against_the_usual_each_job_meets_its_task_name() {
    let usual = Run {
        label: "usual of p".into(),
        tasks: vec![Task {
            name: "pack".into(),
            task: "pack".into(),
            figures: [
                (Metric::Wall, 0.5),
                (Metric::Cpu, 0.3),
                (Metric::PeakMemory, 50e6),
            ]
            .into(),
            ..Task::default()
        }],
        ..Run::default()
    };
    let b = run(
        "b",
        &[
            ("pack (s=A)", 14.0, ("gzip", 13.0)),
            ("pack (s=B)", 0.6, ("gzip", 0.3)),
        ],
    );
    let c = compare(&usual, &b, true, &Spreads::new(), None).unwrap();
    assert_eq!(c.moved, ["pack (s=A)"]);
    assert_eq!(c.tasks.len(), 2);
}

#[test]
fn against_the_usual_a_task_that_runs_twice_meets_it_as_its_mean_job() {
    // Three identical runs kept: each time two jobs of one name, 2.5 s (on CPU) each.
    let h = kept("p", "sleep", &[("a", 2.5), ("b", 2.5), ("c", 2.5)]);
    let usual = usual_of(&h, "d").unwrap().run;
    let b = run(
        "d",
        &[
            ("sleep", 2.5, ("sleep", 2.49)),
            ("sleep", 2.5, ("sleep", 2.49)),
        ],
    );
    assert_eq!(b.tasks.len(), 1, "one entry of two jobs");
    assert_eq!(b.tasks[0].jobs, 2);
    let c = compare(&usual, &b, true, &Spreads::new(), None).unwrap();
    let wall = (c.tasks[0].figures.iter())
        .find(|f| f.metric == Metric::Wall)
        .unwrap();
    assert_eq!((wall.a, wall.b), (2.5, 2.5), "like with like");
    assert!(c.moved.is_empty(), "{:?}", c.tasks[0]);
    // Two runs compared with each other stay run-sums on both sides.
    let c = compare(&b, &b, false, &Spreads::new(), None).unwrap();
    let wall = (c.tasks[0].figures.iter())
        .find(|f| f.metric == Metric::Wall)
        .unwrap();
    assert_eq!((wall.a, wall.b), (5.0, 5.0));
}

fn kept(
    pipeline: &str,
    task: &str,
    walls: &[(&str, f64)],
) -> pipetrace_core::diagnosis::HistoryKept {
    let runs = (walls.iter())
        .map(|(run, w)| pipetrace_core::diagnosis::RunFigures {
            run: run.to_string(),
            wall_s: *w,
            cpu_s: *w,
            peak_bytes: 50e6,
        })
        .collect();
    pipetrace_core::diagnosis::HistoryKept {
        pipeline: pipeline.into(),
        tasks: [(task.to_string(), runs)].into(),
    }
}

#[test]
fn the_history_of_a_run_is_the_one_with_its_records_and_its_usual_leaves_it_out() {
    let b = run("b", &[("pack (s=A)", 30.0, ("gzip", 29.0))]);
    let other = kept("other", "pack", &[("x", 1.0), ("y", 1.0), ("z", 1.0)]);
    let mine = kept(
        "mine",
        "pack",
        &[("r1", 10.0), ("r2", 11.0), ("r3", 9.0), ("b", 30.0)],
    );
    let all = [other, mine];
    let h = find_history(&all, &[&b]).unwrap();
    assert_eq!(h.pipeline, "mine", "the file holding run b's own records");
    let u = usual_of(h, "b").unwrap();
    assert_eq!(
        u.run.tasks[0].figures[&Metric::Wall],
        10.0,
        "b itself left out"
    );
    let s = spreads(h, &["b"]);
    assert_eq!(s["pack"][&Metric::Wall].runs, 3);
    let c = compare(&u.run, &b, true, &s, Some(h.pipeline.clone())).unwrap();
    assert_eq!(c.moved, ["pack (s=A)"]);
    let wall = &c.tasks[0].figures[0];
    assert!(
        matches!(wall.verdict.basis, Basis::History { runs: 3, .. }),
        "{wall:?}"
    );
    // A run the history never saw: the pipeline with most of its task names.
    let stranger = run("s", &[("pack (s=Z)", 1.0, ("gzip", 0.5))]);
    assert!(find_history(&all, &[&stranger]).is_some());
    let unrelated = run("u", &[("align", 1.0, ("bwa", 0.5))]);
    assert!(find_history(&all, &[&unrelated]).is_none());
}

/// The judgement's findings of each run, compared: what B has that A had not is named in
/// the judgement's own words, on the terminal, the page and in the JSON.
#[test]
fn a_finding_new_in_b_is_named_as_the_judgement_says_it() {
    let spans = |trace: &str, fail: bool| {
        let mut s = vec![span(trace, "run", None, Kind::Run, "snakemake")];
        s.extend(task(trace, 0, "count (s=A)", 1.0, ("wc", 0.1)));
        s.extend(task(trace, 1, "pack (s=A)", 1.0, ("gzip", 0.1)));
        if fail {
            s[4].error = Some("task pack exited with code 3".into());
        }
        s
    };
    let (sa, sb) = (spans("a", false), spans("b", true));
    let (a, b) = (Run::of_spans("a", &sa), Run::of_spans("b", &sb));
    let c = compare(&a, &b, false, &Spreads::new(), None).unwrap();
    let judged = pipetrace_core::judgement::Judgement::of(&sb);
    let failure = judged
        .findings
        .iter()
        .find(|f| f.what.kind() == "failed")
        .unwrap();
    assert_eq!(c.findings.new_in_b.len(), 1, "{:?}", c.findings);
    assert_eq!(c.findings.new_in_b[0].text, failure.text);
    assert!(c.findings.gone_in_b.is_empty());
    let mut text = String::new();
    table(&c, &mut text);
    let label = &failure.job.as_ref().unwrap().label;
    let line = format!("  failed     {label}: {}", failure.text);
    assert!(
        text.contains(&format!("findings new in B:\n{line}")),
        "{text}"
    );
    assert!(html(&c).contains("Findings new in B"));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["findings"]["new_in_b"][0]["kind"], "failed");
    // The other way round, it is gone in B; the same run twice has none new.
    let back = compare(&b, &a, false, &Spreads::new(), None).unwrap();
    assert_eq!(back.findings.gone_in_b.len(), 1);
    let same = compare(&b, &b, false, &Spreads::new(), None).unwrap();
    assert!(same.findings.new_in_b.is_empty() && same.findings.both.len() == 1);
}
