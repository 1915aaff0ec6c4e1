//! Which machine: a real Snakemake run of a CPU-bound, a memory-hungry and an I/O-bound task
//! under `pipetrace run` gets, per task, the cheapest cloud machines that fit what the kernel
//! measured, on demand and on spot; `pipetrace report --json` says the same, and a user's own
//! table replaces the shipped one.
use std::path::Path;

use pipetrace_e2e::{pipetrace, read_jsonl, snakemake::Version, spans::RecvSpan, stderr};
use pipetrace_semconv::attr;
use serde_json::Value;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const GIB: f64 = 1024.0 * 1048576.0;

/// Three rules: 4 threads spinning, 1.5 GiB touched, 4 s of O_DIRECT writes; the writer after
/// the others, so that the spinner's four threads on two CPUs do not hold the CPU its writes
/// wait on between their I/O (it was judged "no single limit" so under the suite's load).
fn snakefile() -> String {
    format!(
        "rule all:\n    input: 'cpu.done', 'mem.done', 'io.done'\n\
         rule cpu:\n    output: 'cpu.done'\n    threads: 4\n\
         \x20   shell: '{WORKLOAD} threads 4 3000; touch {{output}}'\n\
         rule mem:\n    output: 'mem.done'\n    shell: '{WORKLOAD} alloc 1536; touch {{output}}'\n\
         rule io:\n    input: 'cpu.done', 'mem.done'\n    output: 'io.done'\n\
         \x20   shell: '{WORKLOAD} direct big.bin 4000; touch {{output}}'\n"
    )
}

fn task<'a>(spans: &'a [RecvSpan], name: &str) -> &'a RecvSpan {
    (spans.iter())
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn machines_of(json: &Value, name: &str) -> Value {
    let tasks = json["runs"][0]["machines"]["tasks"]
        .as_array()
        .expect("tasks");
    let t = tasks.iter().find(|t| t["task"] == name);
    t.unwrap_or_else(|| panic!("no machines for {name}: {json}"))
        .clone()
}

/// The cheapest on demand, the cheapest spot and the cheapest of each region.
fn every_choice(t: &Value) -> Vec<Value> {
    let mut all = vec![t["cheapest"].clone(), t["cheapest_spot"].clone()];
    all.extend(
        t["by_region"]
            .as_array()
            .expect("by_region")
            .iter()
            .cloned(),
    );
    assert!(all.iter().all(|c| c.is_object()), "a machine fits: {t}");
    all
}

fn report_json(file: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let html = file.with_extension("html");
    (pipetrace().envs(env.iter().copied()))
        .args(["report", "--json", "--html"])
        .arg(&html)
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn cpu_memory_and_io_bound_tasks_each_get_machines_that_fit_with_both_prices() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Snakefile"), snakefile()).unwrap();
    let file = dir.path().join("t.otlp.jsonl");
    let o = (pipetrace().current_dir(dir.path()))
        .args(["run", "--machines", "--output"])
        .arg(&file)
        .arg("--")
        .arg(Version::Seven.program())
        .args(["--cores", "4"])
        .output()
        .unwrap();
    let end = stderr(&o);
    assert!(o.status.success(), "{end}");
    let spans = read_jsonl(&file);
    // The end of the run: each task with a machine on demand and on spot.
    let at = end
        .find("machines that would have run each task")
        .expect(&end);
    for name in ["cpu", "mem", "io"] {
        let line = (end[at..]
            .lines()
            .find(|l| l.starts_with(&format!("{name} "))))
        .unwrap_or_else(|| panic!("no machine line for {name}: {end}"));
        assert_eq!(line.matches("/h").count(), 2, "on demand and spot: {line}");
    }
    let r = report_json(&file, &[]);
    assert!(r.status.success(), "{}", stderr(&r));
    let json: Value = serde_json::from_slice(&r.stdout).unwrap();
    let io = task(&spans, "io");
    assert_eq!(
        io.str(attr::BOTTLENECK),
        "io-bound",
        "{}",
        io.str(attr::BOTTLENECK_REASON)
    );
    each_fits(&spans, &json);
    // Prices on demand and spot, spot the cheaper.
    for name in ["cpu", "mem", "io"] {
        let t = machines_of(&json, name);
        let (od, spot) = (
            &t["cheapest"]["on_demand_usd"],
            &t["cheapest_spot"]["spot_usd"],
        );
        assert!(spot.as_f64().unwrap() < od.as_f64().unwrap(), "{t}");
    }
    // A run of seconds that cost nothing: the page says how to ask for its machines (the
    // terminal and the JSON have them) rather than show them.
    let page = std::fs::read_to_string(file.with_extension("html")).unwrap();
    assert!(
        !page.contains("<h2>Machines</h2>") && page.contains("--machines</code> prints them"),
        "{page}"
    );
    users_table_replaces_the_shipped_one(dir.path(), &file, &spans);
}

/// Every machine offered fits what the kernel measured of its task.
fn each_fits(spans: &[RecvSpan], json: &Value) {
    // Memory: never a machine under the peak the kernel measured.
    let peak = task(spans, "mem").num(attr::MEMORY_PEAK).expect("a peak");
    assert!(
        peak > 1.4 * GIB,
        "the 1.5 GiB touched were measured: {peak}"
    );
    for c in every_choice(&machines_of(json, "mem")) {
        assert!(
            c["memory_gib"].as_f64().unwrap() * GIB >= peak,
            "{peak}: {c}"
        );
    }
    // I/O: local NVMe on every machine offered.
    for c in every_choice(&machines_of(json, "io")) {
        assert!(c["nvme_gib"].as_f64().unwrap() > 0.0, "{c}");
    }
    // CPU: at least the CPUs it kept busy (or waited for), and it kept several busy.
    let cpu = task(spans, "cpu");
    let wall = (cpu.end - cpu.start) as f64 / 1e9;
    let busy = [
        attr::CPU_USER_TIME,
        attr::CPU_SYSTEM_TIME,
        attr::CPU_RUN_QUEUE_DELAY,
    ]
    .iter()
    .map(|k| cpu.num(k).unwrap_or(0.0))
    .sum::<f64>()
        / wall;
    assert!(busy > 1.5, "4 spinning threads kept {busy:.2} CPUs busy");
    for c in every_choice(&machines_of(json, "cpu")) {
        assert!(c["vcpus"].as_f64().unwrap() >= busy.ceil(), "{busy}: {c}");
        assert_eq!(c["gpus"], 0, "{c}");
    }
    // The whole run on one machine fits all three.
    let single = &json["runs"][0]["machines"]["single_node"]["cheapest"];
    assert!(
        single["memory_gib"].as_f64().unwrap() * GIB >= peak,
        "{single}"
    );
    assert!(single["nvme_gib"].as_f64().unwrap() > 0.0, "{single}");
    assert!(single["vcpus"].as_f64().unwrap() >= busy.ceil(), "{single}");
}

/// Small machines, the smaller the cheaper, few with local NVMe: every figure can be got
/// wrong here (the shipped table has no machine under 4 GiB).
const LAB: &str = "lab,rack1,tiny,compute,1,1,0,0,0,10,0.01,0.005
lab,rack1,many,compute,16,1,0,0,0,10,0.015,0.007
lab,rack1,two,general,2,2,0,0,0,10,0.02,0.01
lab,rack1,four,general,4,4,0,0,0,10,0.04,0.02
lab,rack1,eight,compute,8,8,0,0,0,10,0.08,0.04
lab,rack1,disk,storage,2,4,100,0,0,10,0.05,0.03
lab,rack1,bigdisk,storage,8,16,200,0,0,10,0.2,0.1
";

/// The same trace against a table of the user's: its machines, and a broken one refused.
fn users_table_replaces_the_shipped_one(dir: &Path, file: &Path, spans: &[RecvSpan]) {
    let mine = dir.join("mine.csv");
    let header = "cloud,region,type,family,vcpus,memory_gib,nvme_gib,gpus,gpu_memory_gib,\
                  network_gbps,on_demand_usd,spot_usd";
    std::fs::write(&mine, format!("# date: 2026-01-01\n{header}\n{LAB}")).unwrap();
    let path = mine.display().to_string();
    let r = report_json(file, &[("PIPETRACE_SIZING__INSTANCES", &path)]);
    assert!(r.status.success(), "{}", stderr(&r));
    let json: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(json["runs"][0]["machines"]["table"], path.as_str());
    assert_eq!(json["runs"][0]["machines"]["table_date"], "2026-01-01");
    each_fits(spans, &json);
    std::fs::write(
        &mine,
        format!("{header}\nlab,rack1,fat,huge,64,512,0,0,0,100,9,1\n"),
    )
    .unwrap();
    let r = report_json(file, &[("PIPETRACE_SIZING__INSTANCES", &path)]);
    assert_eq!(r.status.code(), Some(2));
    let e = stderr(&r);
    assert!(e.contains("line 2: family `huge` is not one of"), "{e}");
}
