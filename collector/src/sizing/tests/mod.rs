//! Fitting synthetic tasks to the shipped table and to tables of the test's own; the
//! refresh script on sample price files (`refresh`).
mod refresh;

use std::collections::BTreeMap;

use pipetrace_semconv::attr;

use super::{
    fit::{Fit, fits},
    table::Family,
    *,
};
use pipetrace_core::judgement::Kind;

const GIB: f64 = 1024.0 * 1048576.0;

fn span(
    kind: Kind,
    name: &str,
    secs: f64,
    numbers: &[(&str, f64)],
    texts: &[(&str, &str)],
) -> ReportSpan {
    let mut t: BTreeMap<String, String> = (texts.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if kind == Kind::Task {
        t.insert(attr::CICD_PIPELINE_TASK_NAME.into(), name.into());
    }
    ReportSpan {
        trace: "t".into(),
        id: name.into(),
        parent: None,
        kind,
        name: name.into(),
        start: 1_000_000_000,
        end: 1_000_000_000 + (secs * 1e9) as u64,
        error: None,
        numbers: (numbers.iter()).map(|(k, v)| (k.to_string(), *v)).collect(),
        texts: t,
        lists: BTreeMap::new(),
        events: Vec::new(),
    }
}

/// A task of `secs` wall that kept `cpus` busy, with a memory peak and a verdict.
fn task(name: &str, secs: f64, cpus: f64, peak_gib: f64, verdict: &str) -> ReportSpan {
    span(
        Kind::Task,
        name,
        secs,
        &[
            (attr::CPU_USER_TIME, cpus * secs),
            (attr::MEMORY_PEAK, peak_gib * GIB),
        ],
        &[(attr::BOTTLENECK, verdict)],
    )
}

fn one(t: ReportSpan) -> Fit {
    let s = recommend(&[t], &Catalog::builtin(), 0.2);
    s.tasks.into_iter().next().expect("a task").fit
}

#[test]
fn a_memory_bound_task_never_gets_less_memory_than_its_peak() {
    let f = one(task("sort", 600.0, 1.0, 20.0, "memory-bound"));
    let best = f.cheapest.as_ref().expect("a machine");
    assert!(best.instance.memory_gib >= 20.0 * 1.2, "{best:?}");
    assert_eq!(best.instance.family, Family::Memory, "{best:?}");
    for c in f.by_region.iter().chain(f.cheapest_spot.as_ref()) {
        assert!(
            c.instance.memory_gib >= 24.0,
            "{}: {}",
            c.instance.name,
            c.instance.memory_gib
        );
    }
    // Every machine of the table under the peak is refused.
    let small = Catalog::builtin()
        .instances
        .into_iter()
        .filter(|i| i.memory_gib < 20.0);
    for i in small {
        assert!(!fits(&i, &f.need, 0.0), "{}", i.name);
    }
}

#[test]
fn a_cpu_bound_task_of_8_cores_gets_compute_optimised_with_enough_vcpus() {
    let f = one(task("bwa", 300.0, 8.0, 2.0, "cpu-bound"));
    assert_eq!(f.vcpus, 10, "8 busy with 20% headroom, rounded up");
    let best = f.cheapest.expect("a machine");
    assert_eq!(best.instance.family, Family::Compute, "{best:?}");
    assert!(best.instance.vcpus >= 10);
    assert!((best.on_demand_cost_usd - best.instance.on_demand_usd / 12.0).abs() < 1e-9);
}

#[test]
fn an_io_bound_task_gets_local_nvme_and_a_fast_disk_one_too() {
    let f = one(task("gzip", 60.0, 1.0, 0.5, "io-bound"));
    assert_eq!(f.need.local_disk.as_deref(), Some("io-bound"));
    let best = f.cheapest.expect("a machine");
    assert!(best.instance.nvme_gib > 0.0, "{best:?}");
    assert_eq!(best.instance.family, Family::Storage);
    // No verdict, but 300 MiB/s of disk.
    let mut fast = task("cp", 10.0, 1.0, 0.5, "mixed");
    fast.numbers
        .insert(attr::DISK_WRITE_BYTES.into(), 3000.0 * 1048576.0);
    let f = one(fast);
    assert!(f.need.local_disk.as_deref().unwrap().contains("300 MiB/s"));
    assert!(f.cheapest.unwrap().instance.nvme_gib > 0.0);
    // A quiet task needs none, and gets the cheapest machine.
    let f = one(task("echo", 10.0, 0.1, 0.1, "idle"));
    assert!(f.need.local_disk.is_none() && f.vcpus == 1);
}

#[test]
fn a_gpu_task_gets_a_gpu_machine_and_others_never_do() {
    let mut t = task("train", 100.0, 2.0, 8.0, "gpu-bound");
    t.numbers.insert(attr::GPU_TIME.into(), 90.0);
    t.numbers.insert(attr::GPU_MEMORY_PEAK.into(), 20.0 * GIB);
    let f = one(t);
    let best = f.cheapest.expect("a machine");
    assert!(
        best.instance.gpus >= 1 && best.instance.gpu_memory_gib >= 24.0,
        "{best:?}"
    );
    let cpu = one(task("bwa", 300.0, 8.0, 2.0, "cpu-bound"));
    assert!(cpu.by_region.iter().all(|c| c.instance.gpus == 0));
}

fn mine(rows: &str) -> Catalog {
    let text = format!("# date: 2026-01-02\n{}\n{rows}", table::HEADER);
    Catalog::parse(&text, "mine.csv").unwrap()
}

#[test]
fn the_cheapest_wins_spot_is_below_on_demand_and_a_users_table_is_used() {
    let c = mine(
        "x,r1,big,general,8,32,0,0,0,10,0.40,0.10\n\
         x,r1,small,general,2,8,0,0,0,10,0.10,0.04\n\
         x,r1,tiny,compute,1,1,0,0,0,10,0.01,0.005\n\
         x,r2,small,general,2,8,0,0,0,10,0.12,0.02\n",
    );
    let s = recommend(&[task("a", 3600.0, 1.2, 2.0, "cpu-bound")], &c, 0.2);
    let f = &s.tasks[0].fit;
    let best = f.cheapest.as_ref().unwrap();
    assert_eq!(
        (best.instance.name.as_str(), best.instance.region.as_str()),
        ("small", "r1")
    );
    assert_eq!(best.on_demand_cost_usd, 0.10, "an hour of it");
    let spot = f.cheapest_spot.as_ref().unwrap();
    assert_eq!(
        (spot.instance.region.as_str(), spot.instance.spot_usd),
        ("r2", 0.02)
    );
    assert!(spot.spot_cost_usd < best.on_demand_cost_usd);
    assert_eq!(f.by_region.len(), 2, "one per region: {:?}", f.by_region);
    assert_eq!(
        (s.table.as_str(), s.table_date.as_str()),
        ("mine.csv", "2026-01-02")
    );
}

#[test]
fn the_whole_run_fits_its_largest_task_and_per_task_sums_each_machine() {
    let c = mine(
        "x,r1,cpu,compute,8,8,0,0,0,10,0.30,0.10\n\
         x,r1,mem,memory,2,64,0,0,0,10,0.20,0.08\n\
         x,r1,both,general,8,64,0,0,0,10,0.90,0.30\n",
    );
    let spans = [
        span(
            Kind::Run,
            "run",
            7200.0,
            &[],
            &[(attr::RUN_ENGINE, "snakemake")],
        ),
        task("bwa", 3600.0, 5.0, 2.0, "cpu-bound"),
        task("sort", 3600.0, 1.0, 40.0, "mixed"),
    ];
    let s = recommend(&spans, &c, 0.2);
    let single = s.single_node.as_ref().unwrap();
    assert_eq!(single.cheapest.as_ref().unwrap().instance.name, "both");
    assert!((single.cheapest.as_ref().unwrap().on_demand_cost_usd - 1.8).abs() < 1e-9);
    let r = &s.per_task[0];
    assert!(
        (r.on_demand_cost_usd - 0.5).abs() < 1e-9 && r.unfitted.is_empty(),
        "{r:?}"
    );
    // A task nothing fits is said so, not dropped.
    let huge = recommend(&[task("asm", 60.0, 1.0, 500.0, "mixed")], &c, 0.2);
    assert!(huge.tasks[0].fit.cheapest.is_none());
    assert_eq!(huge.per_task[0].unfitted, ["asm"]);
    let mut out = String::new();
    text(&huge, &mut out);
    assert!(out.contains("none in the table fits"), "{out}");
}

#[test]
fn the_config_chooses_the_users_table_and_filters_and_a_bad_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.csv");
    let rows = "y,r9,only,general,4,16,0,0,0,10,0.2,0.1\n";
    std::fs::write(&path, format!("{}\n{rows}", table::HEADER)).unwrap();
    let cfg = |instances, clouds: &[&str]| pipetrace_config::Sizing {
        instances,
        clouds: clouds.iter().map(|c| c.to_string()).collect(),
        ..Default::default()
    };
    let c = catalog(&cfg(Some(path.clone()), &[])).unwrap().unwrap();
    assert_eq!(c.instances.len(), 1);
    assert_eq!(
        (c.origin, c.date),
        (path.display().to_string(), "undated".into())
    );
    let e = catalog(&cfg(Some(path.clone()), &["aws"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sizing.clouds: `aws` is not in the instance table"),
        "{e}"
    );
    std::fs::write(
        &path,
        format!("{}\ny,r9,only,general,4,16\n", table::HEADER),
    )
    .unwrap();
    let e = catalog(&cfg(Some(path.clone()), &[]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2: 6 columns where the header has 12"),
        "{e}"
    );
    let e = catalog(&cfg(Some(dir.path().join("gone.csv")), &[])).unwrap_err();
    assert!(e.to_string().contains("check sizing.instances"), "{e}");
    let off = pipetrace_config::Sizing {
        enabled: false,
        ..Default::default()
    };
    assert!(catalog(&off).unwrap().is_none());
}

#[test]
fn the_machines_show_in_text_html_and_json() {
    let s = recommend(
        &[task("bwa", 300.0, 8.0, 2.0, "cpu-bound")],
        &Catalog::builtin(),
        0.2,
    );
    let mut out = String::new();
    text(&s, &mut out);
    let row = out.lines().find(|l| l.starts_with("bwa ")).expect(&out);
    assert!(
        row.contains("10 vCPUs") && row.matches("/h").count() == 2,
        "{row}"
    );
    let page = html(&s);
    assert!(page.contains("<h2>Machines</h2>") && page.contains("aws (on demand / spot"));
    let json = serde_json::to_value(&s).unwrap();
    let best = &json["tasks"][0]["cheapest"];
    assert!(
        best["on_demand_usd"].as_f64() > best["spot_usd"].as_f64(),
        "{json}"
    );
    assert_eq!(json["tasks"][0]["task"], "bwa");
}

#[test]
fn a_task_of_many_jobs_needs_what_its_largest_job_needed_figure_by_figure() {
    let mut big_cpu = task("align", 100.0, 6.0, 1.0, "cpu-bound");
    big_cpu
        .numbers
        .insert(attr::CPU_RUN_QUEUE_DELAY.into(), 200.0);
    let mut folded = task("align", 10.0, 1.0, 9.0, "mixed");
    folded.numbers.insert(attr::FOLD_SPANS.into(), 4.0);
    let needs = Needs::of(&[big_cpu, folded]);
    let n = &needs.tasks["align"];
    assert_eq!((n.jobs, n.wall_s), (5, 110.0));
    assert_eq!(
        n.cpus_used, 8.0,
        "CPU time and the wait for a CPU, over wall"
    );
    assert_eq!(n.memory_peak_bytes, (9.0 * GIB) as u64);
    assert_eq!(n.vcpus(0.2), 10);
    assert_eq!(n.bottleneck.as_deref(), Some("cpu-bound"));
}
