//! The machines in words: lines under the end-of-run table and a section of the HTML report.
use std::fmt::Write as _;

use super::fit::{Choice, Fit, Sizing, family_words};
use crate::report::esc;
use pipetrace_core::diagnosis::gib;

/// `5 vCPUs, 1.9 GiB, local NVMe, 1 GPU`: what the choice was made on.
fn needs(f: &Fit) -> String {
    let mut s = format!(
        "{} vCPU{}, {}",
        f.vcpus,
        if f.vcpus == 1 { "" } else { "s" },
        gib((f.memory_gib * super::need::GIB) as u64)
    );
    if f.need.local_disk.is_some() {
        s.push_str(", local NVMe");
    }
    if f.need.gpus > 0 {
        let _ = write!(s, ", {} GPU", f.need.gpus);
    }
    s
}

/// `gcp us-central1 n2-highcpu-8 (compute) $0.2868/h`.
fn machine(c: Option<&Choice>, spot: bool) -> String {
    let Some(c) = c else {
        return "none in the table fits".into();
    };
    let i = &c.instance;
    let price = if spot { i.spot_usd } else { i.on_demand_usd };
    format!(
        "{} {} {} ({}) ${price:.4}/h",
        i.cloud,
        i.region,
        i.name,
        family_words(i)
    )
}

fn heading(s: &Sizing) -> String {
    format!(
        "machines that would have run each task, cheapest that fit (instance table {}, \
         approximate prices of {}, USD; needs: used + {:.0}% headroom)",
        s.table,
        s.table_date,
        100.0 * s.headroom
    )
}

/// Lines for the terminal, after the per-task table.
pub fn text(s: &Sizing, out: &mut String) {
    if s.tasks.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}", heading(s));
    let _ = writeln!(
        out,
        "{:<20} {:<30} {:<56} spot",
        "task", "needs", "on demand"
    );
    let mut line = |name: &str, f: &Fit| {
        let _ = writeln!(
            out,
            "{:<20} {:<30} {:<56} {}",
            short(name, 20),
            needs(f),
            machine(f.cheapest.as_ref(), false),
            machine(f.cheapest_spot.as_ref(), true)
        );
    };
    for t in &s.tasks {
        line(&t.task, &t.fit);
    }
    if let Some(f) = &s.single_node {
        line("(whole run, 1 node)", f);
    }
    if let Some(r) = s.per_task.first() {
        let _ = writeln!(
            out,
            "each task on its own machine: ${:.4} on demand, ${:.4} spot for this run ({} {}){}",
            r.on_demand_cost_usd,
            r.spot_cost_usd,
            r.cloud,
            r.region,
            unfitted(&r.unfitted)
        );
    }
    if let Some(c) = s.single_node.as_ref().and_then(|f| f.cheapest.as_ref()) {
        let _ = writeln!(
            out,
            "the whole run on one {}: ${:.4} on demand, ${:.4} spot for its wall time",
            c.instance.name, c.on_demand_cost_usd, c.spot_cost_usd
        );
    }
}

fn short(s: &str, n: usize) -> String {
    match s.chars().count() > n {
        true => s.chars().take(n - 1).chain(['…']).collect(),
        false => s.to_string(),
    }
}

fn unfitted(tasks: &[String]) -> String {
    match tasks.is_empty() {
        true => String::new(),
        false => format!("; no machine there fits {}", tasks.join(", ")),
    }
}

/// The cheapest of `cloud` in `f`, as a cell.
fn cloud_cell(f: &Fit, cloud: &str) -> String {
    match f.by_region.iter().find(|c| c.instance.cloud == cloud) {
        Some(c) => format!(
            "{} {}<br>${:.4} / ${:.4}",
            esc(&c.instance.name),
            esc(&c.instance.region),
            c.instance.on_demand_usd,
            c.instance.spot_usd
        ),
        None => "-".into(),
    }
}

/// A section of the HTML report.
pub fn html(s: &Sizing) -> String {
    let mut out = String::new();
    if s.tasks.is_empty() {
        return out;
    }
    let mut clouds: Vec<&str> = (s.tasks.iter())
        .flat_map(|t| t.fit.by_region.iter().map(|c| c.instance.cloud.as_str()))
        .collect();
    clouds.sort();
    clouds.dedup();
    let _ = write!(
        out,
        "<h2>Machines</h2><p>{}.</p><table><tr><th>task</th><th class=\"l\">needs</th>\
         <th class=\"l\">cheapest on demand</th><th class=\"l\">cheapest spot</th>",
        esc(&heading(s))
    );
    for c in &clouds {
        let _ = write!(
            out,
            "<th class=\"l\">{} (on demand / spot per hour)</th>",
            esc(c)
        );
    }
    out.push_str("</tr>");
    let mut row = |name: &str, f: &Fit| {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            esc(name),
            esc(&needs(f)),
            esc(&machine(f.cheapest.as_ref(), false)),
            esc(&machine(f.cheapest_spot.as_ref(), true))
        );
        for c in &clouds {
            let _ = write!(out, "<td class=\"l\">{}</td>", cloud_cell(f, c));
        }
        out.push_str("</tr>");
    };
    for t in &s.tasks {
        row(&t.task, &t.fit);
    }
    if let Some(f) = &s.single_node {
        row("whole run, one machine", f);
    }
    out.push_str("</table>");
    if let Some(r) = s.per_task.first() {
        let _ = write!(
            out,
            "<p>Each task on its own machine: ${:.4} on demand, ${:.4} spot for this run ({} {}){}.</p>",
            r.on_demand_cost_usd,
            r.spot_cost_usd,
            esc(&r.cloud),
            esc(&r.region),
            esc(&unfitted(&r.unfitted))
        );
    }
    out
}
