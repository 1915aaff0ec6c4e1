use super::*;
use pipetrace_semconv::event;

use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportEvent;

const MIB: u64 = 1 << 20;

fn task(id: &str, name: &str, wall_s: f64, cpu_s: f64, peak: u64) -> ReportSpan {
    let mut numbers = BTreeMap::new();
    numbers.insert(attr::CPU_USER_TIME.to_string(), cpu_s);
    numbers.insert(attr::MEMORY_PEAK.to_string(), peak as f64);
    let mut texts = BTreeMap::new();
    texts.insert(attr::CICD_PIPELINE_TASK_NAME.to_string(), name.to_string());
    ReportSpan {
        trace: "t".into(),
        id: id.into(),
        parent: Some("run".into()),
        kind: Kind::Task,
        name: name.into(),
        start: 0,
        end: (wall_s * 1e9) as u64,
        error: None,
        numbers,
        texts,
        lists: BTreeMap::new(),
        events: Vec::new(),
    }
}

fn asked(mut s: ReportSpan, cpus: f64, memory: u64) -> ReportSpan {
    s.numbers.insert(attr::CPU_ALLOCATED.into(), cpus);
    let by = attr::CPU_ALLOCATION_SOURCE.to_string();
    s.texts.insert(by, "engine.threads".into());
    s.numbers.insert(attr::MEMORY_LIMIT.into(), memory as f64);
    s
}

#[test]
fn the_percentile_with_its_margin_never_below_a_peak() {
    // Nineteen jobs at 100 MiB and one at 400: the 95th percentile is 100 MiB, but a job
    // needed 400.
    let mut spans: Vec<ReportSpan> = (0..19)
        .map(|i| task(&format!("a{i}"), "align", 100.0, 150.0, 100 * MIB))
        .collect();
    spans.push(task("big", "align", 100.0, 150.0, 400 * MIB));
    let s = &suggest(&spans, Policy::default())[0];
    assert_eq!(s.jobs, 20);
    assert_eq!(s.memory_bytes, 400 * MIB, "never below the peak seen");
    // 1.5 CPUs busy: whole CPUs, 2.
    assert_eq!(s.cpus, 2);
    // 100 s plus 20%: 120 s, two minutes.
    assert_eq!(s.time_seconds, 120);
    assert_eq!(s.oom_killed, 0);
}

#[test]
fn an_over_asked_task_is_asked_less_and_says_why() {
    let spans = [asked(
        task("a", "sort", 300.0, 300.0, 200 * MIB),
        8.0,
        16384 * MIB,
    )];
    let s = &suggest(&spans, Policy::default())[0];
    assert_eq!(s.cpus, 1, "1 CPU busy");
    assert_eq!(s.memory_bytes, 240 * MIB);
    assert!(
        s.why.iter().any(|w| w.contains("asked 8 CPUs")),
        "{:?}",
        s.why
    );
    assert!(
        s.why.iter().any(|w| w.contains("asked 16384 MiB")),
        "{:?}",
        s.why
    );
}

#[test]
fn a_task_killed_for_memory_gets_twice_the_limit_it_hit() {
    let killed = asked(task("k", "assemble", 10.0, 5.0, 63 * MIB), 1.0, 64 * MIB);
    let tool = ReportSpan {
        id: "tool".into(),
        parent: Some("k".into()),
        kind: Kind::Tool,
        events: vec![ReportEvent {
            name: event::OOM_KILL.into(),
            time: 0,
            numbers: [(attr::MEMORY_LIMIT.to_string(), (64 * MIB) as f64)].into(),
            texts: BTreeMap::new(),
        }],
        ..task("tool", "x", 10.0, 5.0, 63 * MIB)
    };
    let mut tool = tool;
    tool.texts.clear();
    let s = &suggest(&[killed, tool], Policy::default())[0];
    assert_eq!(s.task, "assemble");
    assert_eq!(s.oom_killed, 1);
    assert_eq!(s.memory_bytes, 128 * MIB);
    assert!(
        s.why[0].contains("killed for memory at 64 MiB"),
        "{:?}",
        s.why
    );
}

#[test]
fn tiny_tasks_ask_at_least_a_cpu_64_mib_and_a_minute() {
    let s = &suggest(&[task("a", "touch", 0.01, 0.0, MIB)], Policy::default())[0];
    assert_eq!((s.cpus, s.memory_bytes, s.time_seconds), (1, 64 * MIB, 60));
}

#[test]
fn each_engines_settings_name_every_task() {
    let spans = [
        task("a", "align", 100.0, 150.0, 100 * MIB),
        task("b", "sort", 10.0, 1.0, MIB),
        task("c", "realign", 10.0, 1.0, 200 * MIB),
    ];
    let s = suggest(&spans, Policy::default());
    let basis = formats::Basis {
        runs: 1,
        percentile: 95.0,
        margin: 0.2,
        from: "t.otlp.jsonl",
    };
    let profile = formats::snakemake(&s, &basis);
    let yaml: serde_yaml::Value = serde_yaml::from_str(&profile).unwrap();
    let threads: Vec<&str> = (yaml["set-threads"].as_sequence().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(threads, ["align=2", "realign=1", "sort=1"]);
    let res = yaml["set-resources"].as_sequence().unwrap();
    assert!(
        res.iter().any(|r| r.as_str() == Some("align:mem_mb=126")),
        "{profile}"
    );
    assert!(
        res.iter().any(|r| r.as_str() == Some("align:runtime=2")),
        "{profile}"
    );
    let config = formats::nextflow(&s, &basis);
    assert!(
        config.contains(
            "withName: 'align' {\n        cpus = 2\n        memory = '120 MB'\n        time = '2m'"
        ),
        "{config}"
    );
    let tools = [
        ("align".to_string(), "file:///w/align.cwl".to_string()),
        ("realign".to_string(), "file:///w/align.cwl".to_string()),
    ]
    .into();
    let overrides = formats::cwl(&s, &basis, &tools);
    let yaml: serde_yaml::Value = serde_yaml::from_str(&overrides).unwrap();
    let req =
        &yaml["cwltool:overrides"]["file:///w/align.cwl"]["requirements"]["ResourceRequirement"];
    assert_eq!(
        (req["coresMin"].as_u64(), req["ramMin"].as_u64()),
        (Some(2), Some(240))
    );
    assert!(overrides.contains("# step sort: its tool is not a file of its own"));
}
