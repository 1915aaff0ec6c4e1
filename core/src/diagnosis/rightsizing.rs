//! Rightsizing: a task's observed CPU and memory against what it asked for, and what to ask
//! for instead. Only explicit requests are judged (the engine's threads, a cgroup quota or
//! limit, a cpuset); a task that asked for nothing gets no verdict.
use pipetrace_config::Diagnosis;

use super::gib;
use crate::accounting::{Allocation, GpuFigures};
use crate::sizing::{self, Fit};

/// A task's GPUs against the GPUs it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuRightsizing {
    /// GPUs its devices cgroup allowed.
    pub allocated: u32,
    pub over_allocated: bool,
    pub recommend_gpus: u32,
    /// "train: given 2 GPUs, used 1 with its SMs busy 4% of the time: ask for 1 GPU".
    pub sentence: String,
}

/// `allocated`: NVML indices its devices cgroup allowed (bit per GPU); `used`: its GPU
/// figures. Over-allocated when it never touched some of its GPUs, or kept them busy less
/// than `diagnosis.gpu_starved_below` of its time on them; it should ask for the GPUs it
/// used.
pub fn gpus(
    name: &str,
    allocated: u64,
    used: &GpuFigures,
    wall_ns: u64,
    t: &Diagnosis,
) -> Option<GpuRightsizing> {
    if allocated == 0 || wall_ns < t.min_wall.as_nanos() as u64 {
        return None;
    }
    let given = allocated.count_ones();
    let touched = (used.devices & allocated).count_ones();
    let sm = used.sm_utilization().unwrap_or(0.0);
    let idle = sm < t.gpu_starved_below;
    let plural = |n: u32| if n == 1 { "GPU" } else { "GPUs" };
    let sentence = if idle {
        format!(
            "{name}: given {given} {}, used {touched} with the SMs busy {:.0}% of its time on \
             them: it barely used them; share one (MPS, MIG) or ask for none",
            plural(given),
            100.0 * sm
        )
    } else if touched < given {
        format!(
            "{name}: given {given} {}, used {touched} ({:.0}% busy): ask for {touched} {}",
            plural(given),
            100.0 * sm,
            plural(touched)
        )
    } else {
        format!(
            "{name}: used its {given} {} ({:.0}% busy)",
            plural(given),
            100.0 * sm
        )
    };
    let (over, recommend) = (idle || touched < given, touched);
    Some(GpuRightsizing {
        allocated: given,
        over_allocated: over,
        recommend_gpus: recommend,
        sentence,
    })
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rightsizing {
    pub over_allocated: bool,
    /// It needed more than it asked for: more CPUs busy, or memory within the margin of
    /// its limit.
    pub under_allocated: bool,
    pub recommend_cpus: u32,
    pub recommend_memory: Option<u64>,
    /// "align: peak 1.2 GiB of 8 GiB, 1.9 of 8 CPUs used: ask for 2 CPUs and 1.4 GiB".
    pub sentence: String,
}

/// `run_delay_ns`: time its processes were runnable but waited for a CPU. On a machine
/// someone else keeps busy, a task gets less CPU than it would use: what it wanted is its
/// CPU time plus that wait, and a task is never told to ask for less because of the load.
/// Judged by the rule the run's findings and `suggest` use ([`sizing::fit`]), on this one
/// job: its figures, `diagnosis.headroom` as the margin.
pub fn judge(
    name: &str,
    cpu_ns: u64,
    run_delay_ns: u64,
    peak_bytes: u64,
    wall_ns: u64,
    a: &Allocation,
    t: &Diagnosis,
) -> Option<Rightsizing> {
    if wall_ns < t.min_wall.as_nanos() as u64 {
        return None;
    }
    let explicit_cpus = a.source != "host";
    if !explicit_cpus && a.memory_limit.is_none() {
        return None;
    }
    let used = cpu_ns as f64 / wall_ns as f64;
    let wanted = (cpu_ns + run_delay_ns) as f64 / wall_ns as f64;
    let job = sizing::JobFigures {
        busy: wanted,
        peak: peak_bytes,
        wall: wall_ns as f64 / 1e9,
        asked_cpus: explicit_cpus.then_some(a.cpus),
        asked_memory: a.memory_limit,
        ..Default::default()
    };
    let policy = sizing::Policy {
        percentile: 100.0,
        margin: t.headroom,
        over_share: t.over_allocation,
    };
    let fitted = sizing::fit(&[job], policy);
    let recommend_cpus = fitted.asks.cpus;
    let recommend_memory = a.memory_limit.map(|_| fitted.asks.memory_bytes);
    let any = |f: Fit| fitted.cpus == Some(f) || fitted.memory == Some(f);
    let mut seen = Vec::new();
    if let Some(limit) = a.memory_limit {
        seen.push(format!("peak {} of {}", gib(peak_bytes), gib(limit)));
    }
    if explicit_cpus {
        seen.push(format!("{used:.1} of {} CPUs used", a.cpus));
        if wanted - used >= 0.05 {
            seen.push(format!("{wanted:.1} wanted (it waited for a busy CPU)"));
        }
    }
    let mut ask = Vec::new();
    if explicit_cpus {
        ask.push(format!(
            "{recommend_cpus} CPU{}",
            if recommend_cpus == 1 { "" } else { "s" }
        ));
    }
    if let Some(m) = recommend_memory {
        ask.push(gib(m));
    }
    let verdict = if any(Fit::Over) || any(Fit::Under) {
        format!("ask for {}", ask.join(" and "))
    } else {
        "fits its request".to_string()
    };
    Some(Rightsizing {
        over_allocated: any(Fit::Over),
        under_allocated: any(Fit::Under),
        recommend_cpus,
        recommend_memory,
        sentence: format!("{name}: {}: {verdict}", seen.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(cpus: f64, source: &'static str, mem: Option<u64>) -> Allocation {
        Allocation {
            cpus,
            source,
            memory_limit: mem,
            host_cpus: 64,
            gpus: None,
        }
    }

    #[test]
    fn a_task_that_asks_far_more_than_it_uses() {
        let gb = 1u64 << 30;
        let r = judge(
            "align",
            19_000_000_000,
            0,
            (1.2 * gb as f64) as u64,
            10_000_000_000,
            &alloc(8.0, "engine.threads", Some(8 * gb)),
            &Diagnosis::default(),
        )
        .unwrap();
        assert!(r.over_allocated && !r.under_allocated);
        assert_eq!(r.recommend_cpus, 2);
        assert_eq!(
            r.sentence,
            "align: peak 1.2 GiB of 8.0 GiB, 1.9 of 8 CPUs used: ask for 2 CPUs and 1.4 GiB"
        );
    }

    #[test]
    fn a_task_that_uses_its_request_fits_and_no_request_no_verdict() {
        let d = Diagnosis::default();
        let r = judge(
            "x",
            1_900_000_000,
            0,
            0,
            1_000_000_000,
            &alloc(2.0, "engine.threads", None),
            &d,
        )
        .unwrap();
        assert!(!r.over_allocated, "{r:?}");
        assert!(r.sentence.ends_with("fits its request"));
        assert_eq!(
            judge("x", 0, 0, 0, 5_000_000_000, &alloc(2.0, "host", None), &d),
            None
        );
    }

    #[test]
    fn a_task_starved_by_another_load_is_not_told_to_ask_for_less() {
        let d = Diagnosis::default();
        // Two threads busy over 1.2 s, on a machine where another load took half the CPU:
        // 1.2 s of CPU, 1.1 s waiting for one.
        let r = judge(
            "pair",
            1_200_000_000,
            1_100_000_000,
            0,
            1_200_000_000,
            &alloc(2.0, "engine.threads", None),
            &d,
        )
        .unwrap();
        assert!(!r.over_allocated, "{r:?}");
        assert!(r.sentence.contains("1.9 wanted"), "{}", r.sentence);
        // The same CPU time without the wait: it did not use what it asked for.
        let r = judge(
            "pair",
            1_200_000_000,
            0,
            0,
            1_200_000_000,
            &alloc(4.0, "engine.threads", None),
            &d,
        )
        .unwrap();
        assert!(r.over_allocated, "{r:?}");
    }

    #[test]
    fn a_task_given_gpus_it_barely_used_is_told_so() {
        let d = Diagnosis::default();
        let s = 1_000_000_000;
        let used = |devices, sm: f64| GpuFigures {
            devices,
            on_gpu_us: 10_000_000,
            sm_busy_us: (sm * 1e7) as u64,
            ..Default::default()
        };
        // Two GPUs given, one used and kept busy: ask for one.
        let v = gpus("train", 0b11, &used(0b01, 0.9), 10 * s, &d).unwrap();
        assert!(v.over_allocated && v.recommend_gpus == 1, "{v:?}");
        assert!(
            v.sentence.contains("given 2 GPUs, used 1") && v.sentence.contains("ask for 1 GPU"),
            "{}",
            v.sentence
        );
        // Both used, busy: fits.
        let v = gpus("train", 0b11, &used(0b11, 0.8), 10 * s, &d).unwrap();
        assert!(!v.over_allocated && v.recommend_gpus == 2, "{v:?}");
        // One given, 3% busy: barely used.
        let v = gpus("infer", 0b1, &used(0b1, 0.03), 10 * s, &d).unwrap();
        assert!(
            v.over_allocated && v.sentence.contains("barely used"),
            "{}",
            v.sentence
        );
        // Given one and never touched it.
        let v = gpus("qc", 0b1, &GpuFigures::default(), 10 * s, &d).unwrap();
        assert!(v.over_allocated && v.recommend_gpus == 0, "{v:?}");
        // No GPU given: no verdict.
        assert_eq!(gpus("qc", 0, &used(0b1, 0.9), 10 * s, &d), None);
    }
}
