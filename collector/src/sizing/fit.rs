//! Fitting needs to machines: the cheapest instance of each cloud and region that gives a
//! task at least what it used, so that no figure becomes a worse bottleneck than it was.
use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    need::{GIB, Need, Needs},
    table::{Catalog, Instance},
};

/// One machine for a task, in one cloud region.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    #[serde(flatten)]
    pub instance: Instance,
    /// What it would have cost for the wall time it stands for, on demand and on spot.
    pub on_demand_cost_usd: f64,
    pub spot_cost_usd: f64,
}

/// What a task (or the whole run on one machine) needed and the machines that fit it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    pub need: Need,
    /// The asks the choice was made on: vCPUs and memory with headroom.
    pub vcpus: u32,
    pub memory_gib: f64,
    /// The cheapest on demand, over every cloud and region in the table.
    pub cheapest: Option<Choice>,
    /// The cheapest on spot (the same type as `cheapest`, or another).
    pub cheapest_spot: Option<Choice>,
    /// The cheapest per cloud and region, cheapest first.
    pub by_region: Vec<Choice>,
}

/// A task's fit, by the task's name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskFit {
    pub task: String,
    #[serde(flatten)]
    pub fit: Fit,
}

/// Each task on a machine of its own, summed per cloud region: one region's total.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionTotal {
    pub cloud: String,
    pub region: String,
    pub on_demand_cost_usd: f64,
    pub spot_cost_usd: f64,
    /// Tasks no instance of this region fits (not in the sum).
    pub unfitted: Vec<String>,
}

/// The machines for one run: per task, for the run on one machine, and per task summed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sizing {
    /// The table's date and origin (`built-in` or the user's file).
    pub table_date: String,
    pub table: String,
    pub headroom: f64,
    pub tasks: Vec<TaskFit>,
    /// One machine that fits the largest of each figure over the tasks, for the run's wall.
    pub single_node: Option<Fit>,
    /// Each task on its own cheapest machine, per region; cheapest region first.
    pub per_task: Vec<RegionTotal>,
}

/// Whether `i` gives `need` at least what it used.
pub(crate) fn fits(i: &Instance, need: &Need, headroom: f64) -> bool {
    let grown = 1.0 + headroom;
    let local = need.local_disk.is_none()
        || (i.nvme_gib > 0.0 && i.nvme_gib * GIB >= need.disk_written_bytes as f64);
    let net = need.network_bytes_per_s * grown * 8.0 <= i.network_gbps * 1e9;
    // A GPU machine for a task that used none would be paid for and left idle.
    let gpu = match need.gpus {
        0 => i.gpus == 0,
        g => {
            let memory = i.gpu_memory_gib * GIB * f64::from(i.gpus);
            i.gpus >= g && memory >= need.gpu_memory_peak_bytes as f64 * grown
        }
    };
    i.vcpus >= need.vcpus(headroom)
        && i.memory_gib >= need.memory_gib(headroom)
        && local
        && net
        && gpu
}

fn choice(i: &Instance, wall_s: f64) -> Choice {
    let hours = wall_s / 3600.0;
    Choice {
        instance: i.clone(),
        on_demand_cost_usd: i.on_demand_usd * hours,
        spot_cost_usd: i.spot_usd * hours,
    }
}

/// By on-demand price, then spot, then the fewest resources, then name: the same table
/// always gives the same answer.
fn cheaper(a: &Instance, b: &Instance) -> std::cmp::Ordering {
    let key = |i: &Instance| (i.on_demand_usd, i.spot_usd, i.vcpus, i.memory_gib);
    key(a)
        .partial_cmp(&key(b))
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| a.name.cmp(&b.name))
}

/// The machines that fit `need`, for `wall_s` seconds.
pub(crate) fn fit(need: &Need, wall_s: f64, catalog: &Catalog, headroom: f64) -> Fit {
    let fitting: Vec<&Instance> = (catalog.instances.iter())
        .filter(|i| fits(i, need, headroom))
        .collect();
    let mut best: BTreeMap<(&str, &str), &Instance> = BTreeMap::new();
    for &i in &fitting {
        let at = best
            .entry((i.cloud.as_str(), i.region.as_str()))
            .or_insert(i);
        if cheaper(i, at).is_lt() {
            *at = i;
        }
    }
    let mut by_region: Vec<&Instance> = best.into_values().collect();
    by_region.sort_by(|a, b| cheaper(a, b));
    let spot = (fitting.iter().copied()).min_by(|a, b| {
        a.spot_usd
            .total_cmp(&b.spot_usd)
            .then_with(|| cheaper(a, b))
    });
    Fit {
        need: need.clone(),
        vcpus: need.vcpus(headroom),
        memory_gib: need.memory_gib(headroom),
        cheapest: by_region.first().map(|i| choice(i, wall_s)),
        cheapest_spot: spot.map(|i| choice(i, wall_s)),
        by_region: by_region.iter().map(|i| choice(i, wall_s)).collect(),
    }
}

/// Every task's fit, the run on one machine and the per-task sums per region.
pub(crate) fn size(needs: &Needs, catalog: &Catalog, headroom: f64) -> Sizing {
    let tasks: Vec<TaskFit> = (needs.tasks.iter())
        .map(|(task, need)| TaskFit {
            task: task.clone(),
            fit: fit(need, need.wall_s, catalog, headroom),
        })
        .collect();
    let single_node = (!tasks.is_empty()).then(|| {
        let largest = Need::largest(needs.tasks.values());
        let wall =
            (needs.run_wall_s).unwrap_or_else(|| needs.tasks.values().map(|n| n.wall_s).sum());
        fit(&largest, wall, catalog, headroom)
    });
    Sizing {
        table_date: catalog.date.clone(),
        table: catalog.origin.clone(),
        headroom,
        per_task: per_task(&tasks, catalog),
        tasks,
        single_node,
    }
}

/// Per region of the table: each task's cheapest machine there, costs summed.
fn per_task(tasks: &[TaskFit], catalog: &Catalog) -> Vec<RegionTotal> {
    let mut regions: Vec<(&str, &str)> = (catalog.instances.iter())
        .map(|i| (i.cloud.as_str(), i.region.as_str()))
        .collect();
    regions.sort();
    regions.dedup();
    let mut totals: Vec<RegionTotal> = regions
        .into_iter()
        .map(|(cloud, region)| {
            let mut t = RegionTotal {
                cloud: cloud.into(),
                region: region.into(),
                on_demand_cost_usd: 0.0,
                spot_cost_usd: 0.0,
                unfitted: Vec::new(),
            };
            for task in tasks {
                let here = (task.fit.by_region.iter())
                    .find(|c| c.instance.cloud == cloud && c.instance.region == region);
                match here {
                    Some(c) => {
                        t.on_demand_cost_usd += c.on_demand_cost_usd;
                        t.spot_cost_usd += c.spot_cost_usd;
                    }
                    None => t.unfitted.push(task.task.clone()),
                }
            }
            t
        })
        .collect();
    // Regions that fit every task first, then the cheapest.
    totals.sort_by(|a, b| {
        (a.unfitted.len(), a.on_demand_cost_usd)
            .partial_cmp(&(b.unfitted.len(), b.on_demand_cost_usd))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    totals
}

/// The family words for a choice, for the table: `compute`, `storage+NVMe`.
pub(crate) fn family_words(i: &Instance) -> String {
    match i.nvme_gib > 0.0 {
        true => format!("{}+NVMe", i.family.as_str()),
        false => i.family.as_str().into(),
    }
}
