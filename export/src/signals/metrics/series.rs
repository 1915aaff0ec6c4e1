//! Metric series: one per (pipeline, task, tool), bounded in number.
use std::{collections::HashMap, time::SystemTime};

use pipetrace_probes_common::Accumulator;

use pipetrace_core::accounting::{Usage, live::RunningUsage};

/// A series' attribute set. The overflow series has empty names and `overflow` set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub pipeline: String,
    pub task: String,
    pub tool: String,
    pub overflow: bool,
}

/// Monotonic counters, nanoseconds and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    pub net_tx_bytes: u64,
    pub net_rx_bytes: u64,
    pub disk_wait_ns: u64,
    pub run_delay_ns: u64,
    pub oom_kills: u64,
}

impl Counters {
    pub(crate) fn from_usage(u: &Usage) -> Self {
        Self {
            cpu_user_ns: u.cpu_user_ns,
            cpu_system_ns: u.cpu_system_ns,
            disk_read_bytes: u.disk_read_bytes,
            disk_write_bytes: u.disk_write_bytes,
            net_tx_bytes: u.net_tx_bytes,
            net_rx_bytes: u.net_rx_bytes,
            disk_wait_ns: u.blkio_delay_ns,
            run_delay_ns: u.run_delay_ns,
            oom_kills: 0,
        }
    }

    /// `acc`: what the probes summed so far for the process (network bytes, block-I/O waits).
    pub(crate) fn from_live(l: &RunningUsage, acc: &Accumulator) -> Self {
        Self {
            cpu_user_ns: l.cpu_user_ns,
            cpu_system_ns: l.cpu_system_ns,
            disk_read_bytes: l.disk_read_bytes,
            disk_write_bytes: l.disk_write_bytes,
            net_tx_bytes: acc.net_tx_bytes,
            net_rx_bytes: acc.net_rx_bytes,
            disk_wait_ns: acc.blkio_delay_ns,
            run_delay_ns: l.run_delay_ns,
            oom_kills: 0,
        }
    }

    pub(crate) fn add(&mut self, o: &Counters) {
        self.cpu_user_ns += o.cpu_user_ns;
        self.cpu_system_ns += o.cpu_system_ns;
        self.disk_read_bytes += o.disk_read_bytes;
        self.disk_write_bytes += o.disk_write_bytes;
        self.net_tx_bytes += o.net_tx_bytes;
        self.net_rx_bytes += o.net_rx_bytes;
        self.disk_wait_ns += o.disk_wait_ns;
        self.run_delay_ns += o.run_delay_ns;
        self.oom_kills += o.oom_kills;
    }

    pub(crate) fn minus(&self, o: &Counters) -> Counters {
        Counters {
            cpu_user_ns: self.cpu_user_ns.saturating_sub(o.cpu_user_ns),
            cpu_system_ns: self.cpu_system_ns.saturating_sub(o.cpu_system_ns),
            disk_read_bytes: self.disk_read_bytes.saturating_sub(o.disk_read_bytes),
            disk_write_bytes: self.disk_write_bytes.saturating_sub(o.disk_write_bytes),
            net_tx_bytes: self.net_tx_bytes.saturating_sub(o.net_tx_bytes),
            net_rx_bytes: self.net_rx_bytes.saturating_sub(o.net_rx_bytes),
            disk_wait_ns: self.disk_wait_ns.saturating_sub(o.disk_wait_ns),
            run_delay_ns: self.run_delay_ns.saturating_sub(o.run_delay_ns),
            oom_kills: self.oom_kills.saturating_sub(o.oom_kills),
        }
    }

    /// Each counter as max(self, o): a running process's last sample never exceeds its end.
    pub(crate) fn max(&self, o: &Counters) -> Counters {
        Counters {
            cpu_user_ns: self.cpu_user_ns.max(o.cpu_user_ns),
            cpu_system_ns: self.cpu_system_ns.max(o.cpu_system_ns),
            disk_read_bytes: self.disk_read_bytes.max(o.disk_read_bytes),
            disk_write_bytes: self.disk_write_bytes.max(o.disk_write_bytes),
            net_tx_bytes: self.net_tx_bytes.max(o.net_tx_bytes),
            net_rx_bytes: self.net_rx_bytes.max(o.net_rx_bytes),
            disk_wait_ns: self.disk_wait_ns.max(o.disk_wait_ns),
            run_delay_ns: self.run_delay_ns.max(o.run_delay_ns),
            oom_kills: self.oom_kills.max(o.oom_kills),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Series {
    /// Exact figures of processes that ended.
    pub finished: Counters,
    /// Running processes as of the last sample.
    pub live: Counters,
    pub rss_now: u64,
    /// Highest high-water mark seen since the last export.
    pub peak: u64,
    pub start: SystemTime,
    /// What the last export reported (delta temporality) and when.
    pub exported: Counters,
    pub exported_at: SystemTime,
    /// The last export carried its final point: nothing ran in it and nothing was added
    /// since. At the next export it is retired.
    pub final_sent: bool,
}

impl Series {
    fn new(now: SystemTime) -> Self {
        Self {
            finished: Counters::default(),
            live: Counters::default(),
            rss_now: 0,
            peak: 0,
            start: now,
            exported: Counters::default(),
            exported_at: now,
            final_sent: false,
        }
    }

    pub(crate) fn total(&self) -> Counters {
        let mut t = self.finished;
        t.add(&self.live);
        t
    }
}

/// The series table with its bound: past `max` attribute sets, new ones share the overflow
/// series (as the OpenTelemetry SDK does), and each such placement is counted.
pub struct Table {
    pub series: HashMap<SeriesKey, Series>,
    /// Series retired at this export: each gets one point marked "no recorded value" (the
    /// OTLP staleness marker, which Prometheus turns into a stale sample), then is gone.
    pub retired: Vec<(SeriesKey, Series)>,
    max: usize,
    pub overflowed: u64,
}

impl Table {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            series: HashMap::new(),
            retired: Vec::new(),
            max,
            overflowed: 0,
        }
    }

    /// The series of (pipeline, task, tool), begun at `now` if it is new.
    pub(crate) fn get(
        &mut self,
        pipeline: &str,
        task: &str,
        tool: &str,
        now: SystemTime,
    ) -> &mut Series {
        let key = SeriesKey {
            pipeline: pipeline.into(),
            task: task.into(),
            tool: tool.into(),
            overflow: false,
        };
        let key = if self.series.contains_key(&key) || self.series.len() < self.max {
            key
        } else {
            self.overflowed += 1;
            SeriesKey {
                pipeline: String::new(),
                task: String::new(),
                tool: String::new(),
                overflow: true,
            }
        };
        self.series.entry(key).or_insert_with(|| Series::new(now))
    }

    pub(crate) fn key_of(&self, pipeline: &str, task: &str, tool: &str) -> SeriesKey {
        let key = SeriesKey {
            pipeline: pipeline.into(),
            task: task.into(),
            tool: tool.into(),
            overflow: false,
        };
        if self.series.contains_key(&key) || self.series.len() < self.max {
            key
        } else {
            SeriesKey {
                pipeline: String::new(),
                task: String::new(),
                tool: String::new(),
                overflow: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_past_the_bound_share_the_overflow_series() {
        let mut t = Table::new(2);
        t.get("p", "a", "x", SystemTime::now()).finished.cpu_user_ns += 1;
        t.get("p", "b", "x", SystemTime::now()).finished.cpu_user_ns += 1;
        t.get("p", "c", "x", SystemTime::now()).finished.cpu_user_ns += 1;
        t.get("p", "d", "x", SystemTime::now()).finished.cpu_user_ns += 1;
        t.get("p", "a", "x", SystemTime::now()).finished.cpu_user_ns += 1;
        assert_eq!(t.series.len(), 3);
        assert_eq!(t.overflowed, 2);
        let overflow = t.series.iter().find(|(k, _)| k.overflow).unwrap().1;
        assert_eq!(overflow.finished.cpu_user_ns, 2);
    }
}
