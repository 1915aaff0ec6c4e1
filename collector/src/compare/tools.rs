//! The tools that explain a task's move: its tools by name, new, gone, slower or waiting
//! more for I/O, the ones that cost the most extra time first.
use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    judge::judge,
    model::{Figures, Metric, Tool},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    New,
    Gone,
    Slower,
    Faster,
    MoreIoWait,
    /// Nothing beyond noise.
    Same,
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolChange {
    pub name: String,
    pub change: Change,
    /// Processes of it in A and in B.
    pub count: (u64, u64),
    /// Seconds of CPU and waits more in B (less: negative): what orders the tools.
    pub extra_s: f64,
    pub a: Option<Figures>,
    pub b: Option<Figures>,
    /// The figures that moved beyond noise.
    pub moved: Vec<Metric>,
}

fn get(f: Option<&Figures>, m: Metric) -> f64 {
    f.and_then(|f| f.get(&m)).copied().unwrap_or(0.0)
}

/// Seconds a tool held or waited for the machine: CPU plus I/O and memory waits.
fn busy(f: Option<&Figures>) -> f64 {
    [Metric::Cpu, Metric::DiskWait, Metric::MemoryWait]
        .iter()
        .map(|m| get(f, *m))
        .sum()
}

pub(crate) fn compare(a: &BTreeMap<String, Tool>, b: &BTreeMap<String, Tool>) -> Vec<ToolChange> {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out: Vec<ToolChange> = names
        .into_iter()
        .map(|name| one(name, a.get(name), b.get(name)))
        .collect();
    out.sort_by(|x, y| {
        (y.extra_s.abs())
            .total_cmp(&x.extra_s.abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    out
}

fn one(name: &str, a: Option<&Tool>, b: Option<&Tool>) -> ToolChange {
    let (fa, fb) = (a.map(|t| &t.figures), b.map(|t| &t.figures));
    let moved: Vec<Metric> = match (fa, fb) {
        (Some(fa), Some(fb)) => (Metric::ALL.iter().copied())
            .filter(|m| fa.contains_key(m) || fb.contains_key(m))
            .filter(|m| judge(*m, get(Some(fa), *m), get(Some(fb), *m), None).moved)
            .collect(),
        _ => Vec::new(),
    };
    let up = |m: Metric| moved.contains(&m) && get(fb, m) > get(fa, m);
    let gain = |m: Metric| get(fb, m) - get(fa, m);
    let more = |x: Metric, y: Metric| gain(x) >= gain(y);
    let down = |m: Metric| moved.contains(&m) && get(fb, m) < get(fa, m);
    let change = match (a, b) {
        (None, _) => Change::New,
        (_, None) => Change::Gone,
        // Both up: the one that took more of the extra time names it.
        _ if up(Metric::DiskWait) && !(up(Metric::Cpu) && more(Metric::Cpu, Metric::DiskWait)) => {
            Change::MoreIoWait
        }
        _ if up(Metric::Cpu) || up(Metric::Wall) => Change::Slower,
        _ if down(Metric::Cpu) || down(Metric::Wall) => Change::Faster,
        _ => Change::Same,
    };
    ToolChange {
        name: name.to_string(),
        change,
        count: (a.map_or(0, |t| t.count), b.map_or(0, |t| t.count)),
        extra_s: busy(fb) - busy(fa),
        a: fa.cloned(),
        b: fb.cloned(),
        moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(cpu: f64, wall: f64, io_wait: f64) -> Tool {
        Tool {
            count: 1,
            figures: [
                (Metric::Cpu, cpu),
                (Metric::Wall, wall),
                (Metric::DiskWait, io_wait),
            ]
            .into(),
        }
    }

    #[test]
    fn the_tool_that_took_the_extra_time_comes_first_and_new_and_gone_are_named() {
        let a: BTreeMap<String, Tool> = [
            ("bash".into(), tool(0.01, 1.0, 0.0)),
            ("gzip".into(), tool(0.5, 0.6, 0.0)),
            ("cat".into(), tool(0.1, 0.1, 0.0)),
            ("old".into(), tool(0.1, 0.1, 0.0)),
        ]
        .into();
        let b: BTreeMap<String, Tool> = [
            ("bash".into(), tool(0.01, 12.0, 0.0)),
            ("gzip".into(), tool(11.0, 11.5, 2.0)),
            ("cat".into(), tool(0.1, 0.2, 3.0)),
            ("new".into(), tool(2.0, 2.0, 0.0)),
        ]
        .into();
        let c = compare(&a, &b);
        let of = |n: &str| c.iter().find(|t| t.name == n).unwrap();
        assert_eq!(c[0].name, "gzip");
        assert_eq!(of("gzip").change, Change::Slower);
        assert_eq!(of("cat").change, Change::MoreIoWait);
        // gzip waited 2 s more for the disk, but its 10 s more CPU is what slowed it.
        assert_eq!(
            of("gzip").moved,
            [Metric::Wall, Metric::Cpu, Metric::DiskWait]
        );
        assert_eq!(of("new").change, Change::New);
        assert_eq!(of("old").change, Change::Gone);
        // The shell waited on gzip: slower by wall, yet it used no more of the machine.
        assert_eq!(of("bash").change, Change::Slower);
        assert!(of("bash").extra_s.abs() < 0.01);
    }

    #[test]
    fn a_tool_within_noise_is_the_same() {
        let a: BTreeMap<String, Tool> = [("sort".into(), tool(1.0, 1.2, 0.0))].into();
        let b: BTreeMap<String, Tool> = [("sort".into(), tool(1.2, 1.5, 0.1))].into();
        let c = compare(&a, &b);
        assert_eq!(c[0].change, Change::Same);
        assert!(c[0].moved.is_empty());
    }
}
