use std::sync::{Arc, Mutex};

use super::*;

/// A driver whose GPUs the test sets: processes (pid, bytes, SM %), samples every 100 ms.
#[derive(Clone, Default)]
struct Script(Arc<Mutex<ScriptState>>);

/// (pid, GPU memory bytes, SM %) of a process on a GPU.
type OnGpu = (u32, u64, u32);

#[derive(Default)]
struct ScriptState {
    /// Each GPU, its processes, and whether it is lost.
    gpus: Vec<(Gpu, Vec<OnGpu>, bool)>,
    now_us: u64,
    sample_calls: u32,
}

impl Script {
    fn with(gpus: usize) -> Self {
        let s = Script::default();
        for index in 0..gpus as u32 {
            let g = Gpu {
                index,
                uuid: format!("GPU-{index}"),
                name: "Test GPU".into(),
                minor: Some(index),
            };
            s.0.lock().unwrap().gpus.push((g, Vec::new(), false));
        }
        s
    }
    fn set(&self, gpu: usize, procs: Vec<OnGpu>) {
        self.0.lock().unwrap().gpus[gpu].1 = procs;
    }
    fn lose(&self, gpu: usize) {
        self.0.lock().unwrap().gpus[gpu].2 = true;
    }
    fn at(&self, now_us: u64) {
        self.0.lock().unwrap().now_us = now_us;
    }
}

impl Driver for Script {
    fn gpus(&mut self) -> Result<Vec<Gpu>, DriverError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .gpus
            .iter()
            .map(|g| g.0.clone())
            .collect())
    }
    fn processes(&mut self, index: u32) -> Result<Vec<(u32, Option<u64>)>, DriverError> {
        let st = self.0.lock().unwrap();
        let g = &st.gpus[index as usize];
        if g.2 {
            return Err(DriverError("GPU is lost".into()));
        }
        Ok(g.1.iter().map(|(pid, b, _)| (*pid, Some(*b))).collect())
    }
    fn samples(&mut self, index: u32, since_us: u64) -> Result<Vec<Sample>, DriverError> {
        let mut st = self.0.lock().unwrap();
        st.sample_calls += 1;
        let now = st.now_us;
        let g = &st.gpus[index as usize];
        let mut out = Vec::new();
        let mut t = (since_us / 100_000 + 1) * 100_000;
        while t <= now {
            for (pid, _, sm) in g.1.iter().filter(|p| p.2 > 0) {
                out.push(Sample {
                    pid: *pid,
                    time_us: t,
                    sm: *sm,
                    memory: sm / 2,
                });
            }
            t += 100_000;
        }
        Ok(out)
    }
    fn figures(&mut self, _index: u32) -> DeviceFigures {
        DeviceFigures {
            utilization: Some(50),
            ..Default::default()
        }
    }
}

const S: u64 = 1_000_000;

fn sampler(script: &Script) -> GpuSampler {
    GpuSampler::new(Box::new(script.clone()), &GpuInventory::default()).unwrap()
}

#[test]
fn the_sampler_sets_the_inventory_it_is_handed() {
    let inventory = GpuInventory::default();
    assert!(inventory.get().is_empty());
    let s = GpuSampler::new(Box::new(Script::with(2)), &inventory).unwrap();
    assert_eq!(inventory.get(), s.gpus());
    assert_eq!(inventory.get().len(), 2);
}

#[test]
fn a_busy_and_an_idle_process_are_told_apart_and_their_memory_peaks_kept() {
    let script = Script::with(1);
    let mut s = sampler(&script);
    let ours = |pid: u32| pid < 1000;
    // 101 busy at 90%, 102 holding a context and idle; 5000 is no process of a run.
    script.set(
        0,
        vec![(101, 4 << 30, 90), (102, 1 << 30, 0), (5000, 9 << 30, 100)],
    );
    for k in 1..=10 {
        script.at(100 * S + k * S);
        s.tick(&ours, 100 * S + k * S, S);
        if k == 5 {
            script.set(
                0,
                vec![(101, 6 << 30, 90), (102, 1 << 30, 0), (5000, 9 << 30, 100)],
            );
        }
    }
    let busy = s.take(101).unwrap();
    let idle = s.take(102).unwrap();
    assert_eq!(s.take(5000), None, "not a run's process");
    let sm = busy.sm_utilization().unwrap();
    assert!((sm - 0.9).abs() < 0.05, "{sm} {busy:?}");
    assert_eq!(idle.sm_utilization(), Some(0.0));
    assert_eq!(
        (busy.memory_peak_bytes, idle.memory_peak_bytes),
        (6 << 30, 1 << 30)
    );
    assert_eq!(busy.indices().collect::<Vec<_>>(), [0]);
    assert_eq!(s.devices.len(), 1, "the GPU a run used is reported");
}

#[test]
fn a_gpu_no_run_uses_is_not_sampled() {
    let script = Script::with(1);
    let mut s = sampler(&script);
    script.set(0, vec![(5000, 1 << 30, 100)]);
    for k in 1..=3 {
        script.at(k * S);
        s.tick(&|pid| pid < 1000, k * S, S);
    }
    assert_eq!(script.0.lock().unwrap().sample_calls, 0);
    assert!(s.devices.is_empty());
}

#[test]
fn samples_are_read_once_however_the_looks_fall() {
    let script = Script::with(1);
    let mut s = sampler(&script);
    script.set(0, vec![(101, 1 << 20, 50)]);
    // Looks at uneven times: each sample counts once, for the time it stands for.
    for t in [S, 1_300_000, 1_350_000, 2_900_000, 3_000_000, 5_000_000] {
        script.at(t);
        s.tick(&|_| true, t, S);
    }
    let f = s.take(101).unwrap();
    let sm = f.sm_utilization().unwrap();
    assert!((sm - 0.5).abs() < 0.03, "{sm} {f:?}");
}

#[test]
fn a_lost_gpu_keeps_what_was_taken_and_the_others_go_on() {
    let script = Script::with(2);
    let mut s = sampler(&script);
    script.set(0, vec![(101, 2 << 30, 80)]);
    script.set(1, vec![(102, 3 << 30, 60)]);
    for k in 1..=3 {
        script.at(k * S);
        s.tick(&|_| true, k * S, S);
    }
    script.lose(0);
    for k in 4..=6 {
        script.at(k * S);
        s.tick(&|_| true, k * S, S);
    }
    assert_eq!(s.errors, 1, "counted once, then left alone");
    let (a, b) = (s.take(101).unwrap(), s.take(102).unwrap());
    assert_eq!(a.memory_peak_bytes, 2 << 30);
    assert_eq!(a.on_gpu_us, 3 * S, "looked at until it was lost");
    assert_eq!(b.on_gpu_us, 6 * S);
}

#[test]
fn a_process_that_ends_between_looks_keeps_its_figures() {
    let script = Script::with(1);
    let mut s = sampler(&script);
    script.set(0, vec![(101, 1 << 30, 70), (102, 1 << 29, 70)]);
    script.at(S);
    s.tick(&|_| true, S, S);
    script.set(0, vec![(102, 1 << 29, 70)]);
    script.at(2 * S);
    s.tick(&|_| true, 2 * S, S);
    let gone = s.take(101).unwrap();
    assert_eq!(gone.memory_peak_bytes, 1 << 30);
    assert_eq!(s.now(102).map(|n| n.0), Some(1 << 29));
}

#[test]
fn a_driver_clock_ahead_of_the_look_by_varying_delays_loses_no_busy_time() {
    let script = Script::with(1);
    let mut s = sampler(&script);
    script.set(0, vec![(101, 1 << 20, 93)]);
    // Under load the driver answers a varying while after the look read its clock: its
    // samples run ahead of the look's time, by 0 to 300 ms.
    let delays = [0, 300_000, 50_000, 250_000, 0, 300_000, 100_000, 280_000];
    for k in 1..=40u64 {
        let t = 10 * S + k * 200_000;
        script.at(t + delays[k as usize % delays.len()]);
        s.tick(&|_| true, t, 200_000);
    }
    let f = s.take(101).unwrap();
    let sm = f.sm_utilization().unwrap();
    assert!((sm - 0.93).abs() < 0.03, "{sm} {f:?}");
}
