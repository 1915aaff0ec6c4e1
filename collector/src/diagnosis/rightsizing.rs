//! Rightsizing: a task's observed CPU and memory against what it asked for, and what to ask
//! for instead. Only explicit requests are judged (the engine's threads, a cgroup quota or
//! limit, a cpuset); a task that asked for nothing gets no verdict.
use pipetrace_config::Diagnosis;

use super::gib;
use crate::accounting::Allocation;

#[derive(Clone, Debug, PartialEq)]
pub struct Rightsizing {
    pub over_allocated: bool,
    pub recommend_cpus: u32,
    pub recommend_memory: Option<u64>,
    /// "align: peak 1.2 GiB of 8 GiB, 1.9 of 8 CPUs used: ask for 2 CPUs and 1.5 GiB".
    pub sentence: String,
}

/// Memory recommendations round up to this.
const MEMORY_STEP: u64 = 64 << 20;

/// `run_delay_ns`: time its processes were runnable but waited for a CPU. On a machine
/// someone else keeps busy, a task gets less CPU than it would use: what it wanted is its
/// CPU time plus that wait, and a task is never told to ask for less because of the load.
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
    let recommend_cpus = ((wanted * (1.0 + t.headroom)).ceil() as u32).max(1);
    let cpu_over =
        explicit_cpus && wanted <= a.cpus * t.over_allocation && f64::from(recommend_cpus) < a.cpus;
    let recommend_memory = a.memory_limit.map(|_| {
        let want = (peak_bytes as f64 * (1.0 + t.headroom)) as u64;
        want.div_ceil(MEMORY_STEP).max(1) * MEMORY_STEP
    });
    let mem_over = match (a.memory_limit, recommend_memory) {
        (Some(limit), Some(rec)) => {
            (peak_bytes as f64) <= limit as f64 * t.over_allocation && rec < limit
        }
        _ => false,
    };
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
    let verdict = if cpu_over || mem_over {
        format!("ask for {}", ask.join(" and "))
    } else {
        "fits its request".to_string()
    };
    Some(Rightsizing {
        over_allocated: cpu_over || mem_over,
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
        assert!(r.over_allocated);
        assert_eq!(r.recommend_cpus, 3);
        assert_eq!(
            r.sentence,
            "align: peak 1.2 GiB of 8.0 GiB, 1.9 of 8 CPUs used: ask for 3 CPUs and 1.5 GiB"
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
}
