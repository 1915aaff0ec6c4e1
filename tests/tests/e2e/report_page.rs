//! The HTML report as a reader meets it, in a real browser: the demo, a failed run and a run
//! with an OOM kill and a signal, each opened in headless Chromium. The page leads with its status and
//! findings, then its failures, lists every job Snakemake's own records list, hides the
//! columns no job has a value for, sorts and filters with its inline script, keeps the jobs
//! table's header in sight, fits a 400-pixel screen, and is photographed wide, narrow (400
//! pixels) and dark into target/report-screenshots/ for a person to look at.
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

/// Scrolls the framed page to its end.
const TO_THE_END: &str = "function measure(){var w=document.getElementById('page').contentWindow;\
w.scrollTo(0,w.document.documentElement.scrollHeight);}";

/// The page wide, narrow (a phone, 400 CSS pixels), in the dark theme and its end (the
/// spreads and the timeline, below a long jobs table), as `name*.png`.
pub(crate) fn screenshots(page: &Path, name: &str) {
    for (suffix, (width, height), extra, script) in [
        // Tall enough for the whole page of a small run: the timeline is near its end.
        ("", (1280, 4800), None, ""),
        ("-narrow", (400, 7200), None, ""),
        ("-dark", (1280, 4800), Some("--force-dark-mode"), ""),
        ("-end", (1280, 3600), None, TO_THE_END),
    ] {
        let png = shots_dir().join(format!("{name}{suffix}.png"));
        let _ = std::fs::remove_file(&png);
        let shot = format!("--screenshot={}", png.display());
        let window = format!("--window-size={width},{height}");
        let args: Vec<&str> = [shot.as_str(), window.as_str()]
            .into_iter()
            .chain(extra)
            .collect();
        // Headless Chromium lays a page out at least 500 pixels wide and crops the shot to
        // the window: the page is put in a frame of the width asked for.
        let framed = framed(page, (width, height), script);
        chromium(&args, &format!("file://{}", framed.display()));
        let len = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{}: {len} bytes", png.display());
    }
}

/// `page` in a frame of `width` by `height` CSS pixels (the page's own viewport: its media
/// queries and `vh` are the frame's), with `script` run in the outer page once the frame
/// has loaded: a page of its own beside `page`, as `srcdoc`, so that the script may read
/// the frame's document.
fn framed(page: &Path, (width, height): (u32, u32), script: &str) -> PathBuf {
    let html = std::fs::read_to_string(page).unwrap();
    let srcdoc = (html.replace('&', "&amp;"))
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    let out = page.with_extension(format!("framed-{width}.html"));
    let onload = if script.is_empty() {
        ""
    } else {
        " onload=\"measure()\""
    };
    let page = format!(
        "<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"page\"{onload} \
         style=\"border:0;display:block;width:{width}px;height:{height}px\" \
         srcdoc=\"{srcdoc}\"></iframe><script>{script}</script></body></html>"
    );
    std::fs::write(&out, page).unwrap();
    out
}

/// Measures the framed page: its width and the width of its content (`scroll`), the
/// elements that reach past its right edge outside any scrolling box (`over`), and, with
/// the jobs table's box scrolled half down, where its header is (`header`: its distance
/// from the box's top, how it is positioned, how far the box scrolled).
const MEASURE: &str = r#"function measure(){
var f=document.getElementById('page'),d=f.contentDocument,w=f.contentWindow,W=w.innerWidth,over=[];
var all=d.body.getElementsByTagName('*');
for(var i=0;i<all.length;i++){var e=all[i];if(e.getBoundingClientRect().right<=W+0.5)continue;
var p=e.parentElement,clipped=false;
for(;p&&p!==d.body;p=p.parentElement)if(w.getComputedStyle(p).overflowX!=='visible'){clipped=true;break;}
if(!clipped&&over.length<20)over.push(e.tagName.toLowerCase()+(e.id?'#'+e.id:'')+(e.className?'.'+e.className:'')+' to '+Math.round(e.getBoundingClientRect().right));}
var r={width:W,scroll:d.documentElement.scrollWidth,over:over,header:null};
var t=d.querySelector('table.jobs'),box=t&&t.closest('.scroll');
if(box){box.scrollTop=(box.scrollHeight-box.clientHeight)/2;var th=box.querySelector('thead th');
r.header={gap:th.getBoundingClientRect().top-box.getBoundingClientRect().top,
position:w.getComputedStyle(th).position,scrolled:box.scrollTop,
hidden_columns:box.scrollWidth>box.clientWidth};}
var m=document.createElement('pre');m.id='measured';m.textContent=JSON.stringify(r);
document.body.appendChild(m);}"#;

/// What [`MEASURE`] found of `page` in a frame of `size`.
fn measured(page: &Path, size: (u32, u32)) -> serde_json::Value {
    let framed = framed(page, size, MEASURE);
    let url = format!("file://{}", framed.display());
    let dom = String::from_utf8_lossy(&chromium(&["--dump-dom"], &url).stdout).into_owned();
    let json = between(&dom, "<pre id=\"measured\">", "</pre>")
        .unwrap_or_else(|| panic!("{}: nothing measured", page.display()));
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

/// At 400 CSS pixels wide nothing of `page` reaches past the screen's edge: tables and
/// drawings scroll in their own box, text wraps.
pub(crate) fn fits_400(page: &Path) {
    let m = measured(page, (400, 800));
    assert_eq!(m["width"], 400, "{m}");
    let scroll = m["scroll"].as_f64().unwrap();
    assert!(
        scroll <= 400.0,
        "{}: {scroll} px wide: {}",
        page.display(),
        m["over"]
    );
}

/// The jobs table's header stays in sight (sticky at the top of its scrolling box) when the
/// table is scrolled, in a window of `size`; `all_columns`: no column hides behind a
/// sideways scroll there.
pub(crate) fn header_stays(page: &Path, size: (u32, u32), all_columns: bool) {
    let m = measured(page, size);
    let header = &m["header"];
    assert!(
        header["scrolled"].as_f64().unwrap() > 0.0,
        "the box scrolls: {m}"
    );
    assert_eq!(header["position"], "sticky", "{m}");
    assert!(
        header["gap"].as_f64().unwrap().abs() < 1.0,
        "the header moved: {m}"
    );
    if all_columns {
        assert_eq!(header["hidden_columns"], false, "{size:?}: {m}");
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
    fits_400(&page);
    // 13 jobs in a short window: the table scrolls in its box, under its header.
    header_stays(&page, (1280, 400), true);
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
    fits_400(&page);
    assert!(html.contains("<div class=\"banner bad\"><strong>Failed: "));
    // The failures right after the findings, before the jobs and the timeline.
    let headings: Vec<&str> = (html.split("<h2 id=\"").skip(1))
        .map(|h| &h[..h.find('"').unwrap()])
        .collect();
    let at = |id: &str| headings.iter().position(|h| *h == id);
    assert_eq!(
        at("failures"),
        at("findings").map(|f| f + 1),
        "{headings:?}"
    );
    assert!(
        at("failures") < at("jobs") && at("jobs") < at("timeline"),
        "{headings:?}"
    );
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
    fits_400(&page);
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
