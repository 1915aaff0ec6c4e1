//! Whether a figure moved beyond noise. With a history of the task (at least
//! [`MIN_RUNS`](pipetrace_core::diagnosis::MIN_RUNS) earlier runs) the noise is what the task's runs
//! usually spread by; without one, a floor per measurement (see docs/compare.md).
use serde::Serialize;

use super::model::Metric;

/// Robust standard deviations (1.4826 × MAD) a move must exceed, judged by history.
pub const SPREADS: f64 = 3.0;

/// The spread of a figure over a task's earlier runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub runs: usize,
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

impl Spread {
    /// None with fewer than `MIN_RUNS` runs: too few to tell their spread.
    pub(crate) fn of(values: &[f64]) -> Option<Self> {
        if values.len() < pipetrace_core::diagnosis::MIN_RUNS {
            return None;
        }
        let median = median(values.to_vec());
        let mad = median_of(values.iter().map(|v| (v - median).abs()));
        Some(Self {
            runs: values.len(),
            median,
            mad,
        })
    }
}

fn median_of(v: impl Iterator<Item = f64>) -> f64 {
    median(v.collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    pipetrace_core::diagnosis::median(&mut v)
}

/// The smallest change that is not noise, whatever the history says, and the share of
/// the smaller figure that a change must also exceed where there is no history: the
/// measurements' own resolution and the jitter of a shared machine.
pub(crate) fn floor(m: Metric) -> (f64, f64) {
    const MIB: f64 = 1048576.0;
    match m {
        // Engines start jobs on a poll; a loaded machine moves a job by a second or two.
        Metric::Wall => (2.0, 0.25),
        Metric::Cpu => (1.0, 0.25),
        // The allocator and page cache move a peak by tens of MiB run to run.
        Metric::PeakMemory => (64.0 * MIB, 0.25),
        Metric::DiskRead | Metric::DiskWrite => (64.0 * MIB, 0.25),
        // Waits are small sums of many short delays: they vary the most.
        Metric::RunQueueDelay | Metric::DiskWait | Metric::MemoryWait => (1.0, 0.5),
        Metric::Cost => (0.01, 0.25),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Basis {
    /// The task's earlier runs.
    History { runs: usize, median: f64, mad: f64 },
    /// The measurement's floor (no history of the task, or too short a one).
    Floor,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Changes up to this much are noise.
    pub noise: f64,
    pub basis: Basis,
    pub moved: bool,
}

/// Judges the move from `a` to `b`.
pub(crate) fn judge(m: Metric, a: f64, b: f64, spread: Option<&Spread>) -> Verdict {
    let (abs, rel) = floor(m);
    let (noise, basis) = match spread {
        Some(s) => (
            (SPREADS * 1.4826 * s.mad).max(abs),
            Basis::History {
                runs: s.runs,
                median: s.median,
                mad: s.mad,
            },
        ),
        None => (abs.max(rel * a.abs().min(b.abs())), Basis::Floor),
    };
    Verdict {
        noise,
        basis,
        moved: (b - a).abs() > noise,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_history_small_absolute_changes_are_noise_however_large_in_percent() {
        // 0.1 s to 0.9 s is 9x, yet under the wall floor.
        assert!(!judge(Metric::Wall, 0.1, 0.9, None).moved);
        assert!(judge(Metric::Wall, 1.0, 12.0, None).moved);
        // A long task: 25 % of the smaller figure is its noise.
        assert!(!judge(Metric::Wall, 100.0, 120.0, None).moved);
        assert!(judge(Metric::Wall, 100.0, 130.0, None).moved);
        let mib = 1048576.0;
        assert!(!judge(Metric::PeakMemory, 10.0 * mib, 60.0 * mib, None).moved);
        assert!(judge(Metric::PeakMemory, 100.0 * mib, 900.0 * mib, None).moved);
        // Faster moves too.
        assert!(judge(Metric::Cpu, 20.0, 5.0, None).moved);
    }

    #[test]
    fn a_history_with_a_tight_spread_flags_what_a_floor_would_not_and_a_wide_one_the_reverse() {
        let tight = Spread::of(&[100.0, 101.0, 99.0, 100.0, 100.5]).unwrap();
        // 20 % slower: within the 25 % floor, far beyond this task's usual spread.
        assert!(!judge(Metric::Wall, 100.0, 120.0, None).moved);
        let v = judge(Metric::Wall, 100.0, 120.0, Some(&tight));
        assert!(v.moved, "{v:?}");
        assert!(matches!(v.basis, Basis::History { runs: 5, .. }));
        let wide = Spread::of(&[50.0, 150.0, 100.0, 60.0, 140.0]).unwrap();
        assert!(!judge(Metric::Wall, 100.0, 160.0, Some(&wide)).moved);
        // Never below the floor: identical runs (MAD 0) do not make a 1 s change news.
        let same = Spread::of(&[5.0, 5.0, 5.0]).unwrap();
        assert!(!judge(Metric::Wall, 5.0, 6.0, Some(&same)).moved);
    }

    #[test]
    fn too_short_a_history_is_no_spread() {
        assert_eq!(Spread::of(&[1.0, 2.0]), None);
        assert_eq!(Spread::of(&[1.0, 2.0, 9.0]).unwrap().median, 2.0);
    }
}
