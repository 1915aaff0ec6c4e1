//! The HTML report as a reader meets it, in a real browser: the demo, a failed run and a run
//! with an OOM kill and a signal, each opened in headless Chromium. The page leads with its status and
//! findings, lists every job Snakemake's own records list, hides the columns no job has a
//! value for, sorts and filters with its inline script, and is photographed wide, narrow and
//! dark into target/report-screenshots/ for a person to look at.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use pipetrace_e2e::{
    cgroup::MemoryCgroup, demo_pipeline, pipetrace, read_jsonl, snakemake, spans::RecvSpan, stderr,
};
use pipetrace_semconv::attr;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

/// Where the screenshots are kept: the workspace's target/report-screenshots/.
fn shots_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/report-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn chromium(args: &[&str], url: &str) -> std::process::Output {
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (scripts/setup.sh installs it)");
    assert!(o.status.success(), "chromium: {}", stderr(&o));
    o
}

/// The page wide, narrow (a phone) and in the dark theme, as `name*.png`.
pub(crate) fn screenshots(page: &Path, name: &str) {
    let url = format!("file://{}", page.display());
    for (suffix, size, extra) in [
        // Tall enough for the whole page: the timeline is near its end.
        ("", "1280,4800", None),
        ("-narrow", "420,7200", None),
        ("-dark", "1280,4800", Some("--force-dark-mode")),
    ] {
        let png = shots_dir().join(format!("{name}{suffix}.png"));
        let _ = std::fs::remove_file(&png);
        let shot = format!("--screenshot={}", png.display());
        let window = format!("--window-size={size}");
        let args: Vec<&str> = [shot.as_str(), window.as_str()]
            .into_iter()
            .chain(extra)
            .collect();
        chromium(&args, &url);
        let len = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{}: {len} bytes", png.display());
    }
}

/// The page's DOM after its script ran, opened with `query` in the address.
fn dom(page: &Path, query: &str) -> String {
    let url = format!("file://{}?{query}", page.display());
    String::from_utf8_lossy(&chromium(&["--dump-dom"], &url).stdout).into_owned()
}

/// A jobs table row as the page (or the DOM) has it.
#[derive(Debug)]
struct Row {
    task: String,
    hidden: bool,
    /// The row's cells by column key, as (data-v, text).
    cells: BTreeMap<String, (Option<f64>, String)>,
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let a = s.find(open)? + open.len();
    Some(&s[a..a + s[a..].find(close)?])
}

/// The jobs table's column keys and rows, in document order.
fn job_rows(html: &str) -> (Vec<String>, Vec<Row>) {
    let table = between(html, "<table class=\"jobs\">", "</table>").expect("the jobs table");
    let head = between(table, "<thead>", "</thead>").unwrap();
    let keys: Vec<String> = (head.split("data-k=\"").skip(1))
        .map(|h| h[..h.find('"').unwrap()].to_string())
        .collect();
    let body = between(table, "<tbody>", "</tbody>").unwrap();
    let rows = (body.split("<tr ").skip(1))
        .map(|r| {
            let cells: Vec<(Option<f64>, String)> = (r.split("<td").skip(1))
                .map(|c| {
                    let v = between(c, "data-v=\"", "\"").map(|v| v.parse().unwrap());
                    let text = between(c, ">", "</td>").unwrap().to_string();
                    (v, text)
                })
                .collect();
            let head_of_row = &r[..r.find('>').unwrap()];
            Row {
                task: cells[0].1.clone(),
                hidden: head_of_row.contains("hidden"),
                cells: keys.iter().cloned().zip(cells).collect(),
            }
        })
        .collect();
    (keys, rows)
}

/// The jobs Snakemake itself recorded, per rule: one record per output, a job's outputs
/// sharing its job hash.
fn recorded_jobs(dir: &Path) -> BTreeMap<String, usize> {
    let mut jobs: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (_, m) in snakemake::metadata(dir) {
        let rule = m["rule"].as_str().unwrap().to_string();
        jobs.entry(rule)
            .or_default()
            .insert(m["job_hash"].to_string());
    }
    jobs.into_iter().map(|(r, s)| (r, s.len())).collect()
}

fn per_task(rows: &[Row]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for r in rows {
        *n.entry(r.task.clone()).or_default() += 1;
    }
    n
}

/// A column the page hides when empty is shown exactly where a job span has the figure.
fn columns_follow_the_trace(keys: &[String], spans: &[RecvSpan]) {
    let tasks: Vec<&RecvSpan> = spans.iter().filter(|s| s.is_task()).collect();
    let any = |k: &str| tasks.iter().any(|t| t.num(k).unwrap_or(0.0) > 0.0);
    for (key, attr) in [
        ("cost", attr::COST),
        ("mem_wait", attr::MEMORY_WAIT_TIME),
        ("disk_wait", attr::DISK_WAIT_TIME),
        ("gpu", attr::GPU_TIME),
        ("write", attr::DISK_WRITE_BYTES),
    ] {
        assert_eq!(keys.iter().any(|k| k == key), any(attr), "{key}: {keys:?}");
    }
    let net = any(attr::NETWORK_RECEIVE_BYTES) || any(attr::NETWORK_TRANSMIT_BYTES);
    assert_eq!(keys.iter().any(|k| k == "net"), net, "{keys:?}");
}

/// The findings list's items, as HTML.
fn findings(html: &str) -> Vec<&str> {
    let list = between(html, "<ol class=\"findings\">", "</ol>").unwrap_or_default();
    list.split("<li").skip(1).collect()
}

#[test]
fn the_demo_page_lists_every_job_and_sorts_and_filters_them() {
    let dir = tempfile::tempdir().unwrap();
    let o = pipetrace()
        .args(["demo", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = dir.path().join("trace.report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    screenshots(&page, "demo");
    // The status first, then the findings, then the jobs.
    let (banner, found, jobs) = (
        html.find("<div class=\"banner good\"><strong>Succeeded"),
        html.find("id=\"findings\""),
        html.find("id=\"jobs\""),
    );
    assert!(banner.unwrap() < found.unwrap() && found.unwrap() < jobs.unwrap());
    // The run's facts name the directory Snakemake ran in, as the kernel saw it.
    let fact = format!("<dt>directory</dt><dd>{}</dd>", dir.path().display());
    assert!(html.contains(&fact), "no {fact}");
    // The engine's version as it says it, and the host the run had.
    let said = pipetrace_e2e::snakemake::Version::Seven.says_version();
    assert!(html.contains(&format!("<dt>engine</dt><dd>snakemake {said}</dd>")));
    let cpus = std::thread::available_parallelism().unwrap();
    let host = format!("<dt>host</dt><dd>{cpus} CPUs, ");
    let memory = between(&html, &host, "</dd>").unwrap_or_else(|| panic!("no {host}"));
    assert!(memory.ends_with(" of memory"), "{memory}");
    let (keys, rows) = job_rows(&html);
    assert_eq!(per_task(&rows), recorded_jobs(dir.path()), "{keys:?}");
    columns_follow_the_trace(&keys, &read_jsonl(&dir.path().join("trace.otlp.jsonl")));
    // Self-contained: the one script is inline.
    assert!(!html.contains("<script src") && !html.contains("<link"));

    // Sorted by wall time, longest first, by the page's own script.
    let (_, sorted) = job_rows(&dom(&page, "sort=wall&desc"));
    let walls: Vec<f64> = sorted.iter().map(|r| r.cells["wall"].0.unwrap()).collect();
    assert!(walls.windows(2).all(|w| w[0] >= w[1]), "{walls:?}");
    let longest = rows
        .iter()
        .map(|r| r.cells["wall"].0.unwrap())
        .fold(0.0, f64::max);
    assert_eq!(walls[0], longest);
    // Filtered: only align's rows stay visible.
    let (_, filtered) = job_rows(&dom(&page, "filter=align"));
    let shown: Vec<&str> = (filtered.iter())
        .filter(|r| !r.hidden)
        .map(|r| r.task.as_str())
        .collect();
    let aligned = recorded_jobs(dir.path())["align"];
    assert_eq!(shown.len(), aligned, "{shown:?}");
    assert!(shown.iter().all(|t| *t == "align"), "{shown:?}");
}

#[test]
fn a_failed_runs_page_says_so_and_names_the_exit_code_first() {
    let dir = demo_pipeline();
    let out = dir.path().join("failed.otlp.jsonl");
    let o = pipetrace()
        .arg("-o")
        .arg(&out)
        .args(["run", "--", "snakemake", "--cores", "2", "--keep-going"])
        .args(["--config", "fail=B"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let page = dir.path().join("failed.report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    screenshots(&page, "failed");
    assert!(html.contains("<div class=\"banner bad\"><strong>Failed: "));
    let items = findings(&html);
    let first = items.first().expect("a finding");
    assert!(
        first.starts_with(" class=\"failure\"><a href=\"#job-")
            && first.contains(">stats sample=B</a>"),
        "{first}"
    );
    assert!(first.contains("code 3"), "{first}");
    // The link leads to the job's row, which says how it ended.
    let anchor = between(first, "href=\"#", "\"").unwrap();
    let row = between(&html, &format!("<tr id=\"{anchor}\""), "</tr>").unwrap();
    assert!(
        row.contains("class=\"bad\"") && row.contains(">exit 3<"),
        "{row}"
    );
    let (keys, rows) = job_rows(&html);
    // Snakemake records a failed job's output as incomplete, not done: it is counted apart.
    let mut recorded = recorded_jobs(dir.path());
    *recorded.entry("stats".into()).or_default() += 1;
    assert_eq!(per_task(&rows), recorded, "{keys:?}");
}

#[test]
fn an_oom_killed_job_is_the_first_finding_with_its_peak_and_limit_then_a_signal_with_its_sender() {
    let cg = MemoryCgroup::new(64 << 20);
    let dir = tempfile::tempdir().unwrap();
    let snakefile = format!(
        r#"rule all:
    input: "oom.done", "term.done", expand("burn.{{n}}", n=[1, 2, 3, 4])

# Its tool is ended by a signal its shell sends.
rule term:
    output: "term.done"
    shell: "echo $$ > shpid; {w} sleep 30000 & p=$!; sleep 0.3; kill -TERM $p; wait $p; touch {{output}}"

# Four jobs of one task, one far longer than the rest.
rule burn:
    output: "burn.{{n}}"
    shell: "{w} burn $(( {{wildcards.n}} == 4 ? 1500 : 300 )) && touch {{output}}"

# Asks for 2 CPUs, uses none.
rule ask:
    output: "ask.done"
    threads: 2
    shell: "{w} sleep 1200 && touch {{output}}"

# More memory than its cgroup allows.
rule oom:
    input: "ask.done"
    output: "oom.done"
    shell: "echo $$ > {cg}/cgroup.procs && {w} alloc 256 && touch {{output}}"
"#,
        w = WORKLOAD,
        cg = cg.0.display()
    );
    std::fs::write(dir.path().join("Snakefile"), snakefile).unwrap();
    let out = dir.path().join("oom.otlp.jsonl");
    let o = pipetrace()
        .arg("-o")
        .arg(&out)
        .args(["run", "--", "snakemake", "--cores", "2", "--keep-going"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let page = dir.path().join("oom.report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    screenshots(&page, "oom");
    let items = findings(&html);
    let first = items.first().expect("a finding");
    assert!(
        first.starts_with(" class=\"oom\"><a href=\"#job-") && first.contains(">oom</a>"),
        "{first}"
    );
    assert!(first.contains("over its limit of 64 MiB"), "{first}");
    let peak = between(first, "at a peak of ", " MiB").expect(first);
    assert!(peak.parse::<f64>().unwrap() >= 60.0, "{first}");
    // The signal, and the process that sent it.
    let sender = std::fs::read_to_string(dir.path().join("shpid")).unwrap();
    let term = (items.iter())
        .find(|f| f.contains(">term</a>"))
        .unwrap_or_else(|| panic!("no finding of term: {items:?}"));
    assert!(term.starts_with(" class=\"failure\""), "{term}");
    let said = format!("ended by SIGTERM from process {}", sender.trim());
    assert!(term.contains(&said), "{term}");
    let (keys, rows) = job_rows(&html);
    let mut recorded = recorded_jobs(dir.path());
    *recorded.entry("oom".into()).or_default() += 1;
    *recorded.entry("term".into()).or_default() += 1;
    assert_eq!(per_task(&rows), recorded, "{keys:?}");
    let oom = rows.iter().find(|r| r.task == "oom").unwrap();
    assert_eq!(oom.cells["exit"].1, "SIGKILL (OOM)", "{oom:?}");
    let term = rows.iter().find(|r| r.task == "term").unwrap();
    assert_eq!(term.cells["exit"].1, "SIGTERM", "{term:?}");
    columns_follow_the_trace(&keys, &read_jsonl(&out));
}
