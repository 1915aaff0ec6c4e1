//! The kernel's own count of how often each of a process's BPF programs ran and for how
//! long (`kernel.bpf_stats_enabled`), by program name through bpftool.
use std::{collections::BTreeMap, process::Command};

pub const INSTALL: &str = "apt-get install -y bpftool";

const STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Turns the kernel's BPF run statistics on while it lives, then back as they were.
pub struct Stats {
    was: String,
}

impl Stats {
    pub fn enable() -> Option<Self> {
        let was = std::fs::read_to_string(STATS).ok()?;
        std::fs::write(STATS, "1").ok()?;
        Some(Self { was })
    }
}

impl Drop for Stats {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS, self.was.trim());
    }
}

/// One program's runs and run time so far.
#[derive(Clone, Debug, Default)]
pub struct Prog {
    pub runs: u64,
    pub ns: u64,
}

/// The ids of the BPF programs `pid` holds open (its fdinfo names them).
fn prog_ids(pid: u32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect()
}

/// `pid`'s programs by name, with their runs and run time; None without bpftool.
pub fn programs(pid: u32) -> Option<BTreeMap<String, Prog>> {
    let ids = prog_ids(pid);
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .ok()?;
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let mut progs = BTreeMap::new();
    for p in all.as_array()? {
        let id = p["id"].as_u64().unwrap_or(0);
        if !ids.contains(&id) {
            continue;
        }
        let name = p["name"].as_str().unwrap_or("?").to_string();
        let e: &mut Prog = progs.entry(name).or_default();
        e.runs += p["run_cnt"].as_u64().unwrap_or(0);
        e.ns += p["run_time_ns"].as_u64().unwrap_or(0);
    }
    Some(progs)
}

/// What ran between two readings.
pub fn delta(
    before: &BTreeMap<String, Prog>,
    after: &BTreeMap<String, Prog>,
) -> Vec<(String, Prog)> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before.get(name).cloned().unwrap_or_default();
            let d = Prog {
                runs: a.runs.saturating_sub(b.runs),
                ns: a.ns.saturating_sub(b.ns),
            };
            (name.clone(), d)
        })
        .filter(|(_, d)| d.runs > 0)
        .collect()
}

/// Each of a fresh agent's programs over an `n`-process storm: runs and run time, by name.
/// None when the statistics cannot be turned on or bpftool is missing.
pub fn under_storm(
    n: usize,
    cfg: &std::path::Path,
    dir: &std::path::Path,
) -> Option<Vec<(String, Prog)>> {
    let out = dir.join("stats.otlp.jsonl");
    let agent = crate::Agent::start(&["-c", cfg.to_str()?, "-o", out.to_str()?]);
    let stats = Stats::enable()?;
    let before = programs(agent.pid())?;
    super::time(super::storm(n));
    let after = programs(agent.pid())?;
    drop(stats);
    agent.stop();
    let _ = std::fs::remove_file(out);
    Some(delta(&before, &after))
}
