//! NVML through nvml-wrapper, loaded at run time: no driver, no library, no change.
use std::ffi::OsStr;

use nvml_wrapper::{
    Nvml,
    bitmasks::device::ThrottleReasons,
    enum_wrappers::device::{Clock, TemperatureSensor},
    error::NvmlError,
};

use super::{DeviceFigures, Driver, DriverError, Gpu, Sample};

struct NvmlDriver {
    nvml: Nvml,
}

fn err(e: NvmlError) -> DriverError {
    DriverError(e.to_string())
}

/// NVML from `library` (a name the loader searches for, or a path), or why not: no NVIDIA
/// driver on this node is the usual reason, and nothing GPU is measured then.
pub fn load(library: &str) -> Result<Box<dyn Driver>, DriverError> {
    let nvml = Nvml::builder()
        .lib_path(OsStr::new(library))
        .init()
        .map_err(err)?;
    Ok(Box::new(NvmlDriver { nvml }))
}

impl Driver for NvmlDriver {
    fn gpus(&mut self) -> Result<Vec<Gpu>, DriverError> {
        let n = self.nvml.device_count().map_err(err)?;
        let mut out = Vec::new();
        for index in 0..n {
            let d = self.nvml.device_by_index(index).map_err(err)?;
            out.push(Gpu {
                index,
                uuid: d.uuid().unwrap_or_default(),
                name: d.name().unwrap_or_else(|_| "GPU".into()),
                minor: d.minor_number().ok(),
            });
        }
        Ok(out)
    }

    fn processes(&mut self, index: u32) -> Result<Vec<(u32, Option<u64>)>, DriverError> {
        let d = self.nvml.device_by_index(index).map_err(err)?;
        let mut all = d.running_compute_processes().map_err(err)?;
        // Graphics contexts are rare in pipelines and not every device lists them.
        all.extend(d.running_graphics_processes().unwrap_or_default());
        Ok(all
            .into_iter()
            .map(|p| {
                let bytes = match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                };
                (p.pid, bytes)
            })
            .collect())
    }

    fn samples(&mut self, index: u32, since_us: u64) -> Result<Vec<Sample>, DriverError> {
        let d = self.nvml.device_by_index(index).map_err(err)?;
        match d.process_utilization_stats(since_us) {
            Ok(v) => Ok(v
                .into_iter()
                .map(|s| Sample {
                    pid: s.pid,
                    time_us: s.timestamp,
                    sm: s.sm_util,
                    memory: s.mem_util,
                })
                .collect()),
            // No sample newer than asked: nothing ran since.
            Err(NvmlError::NotFound) => Ok(Vec::new()),
            Err(e) => Err(err(e)),
        }
    }

    fn figures(&mut self, index: u32) -> DeviceFigures {
        let Ok(d) = self.nvml.device_by_index(index) else {
            return DeviceFigures::default();
        };
        let util = d.utilization_rates().ok();
        let memory = d.memory_info().ok();
        DeviceFigures {
            utilization: util.as_ref().map(|u| u.gpu),
            memory_utilization: util.as_ref().map(|u| u.memory),
            memory_used_bytes: memory.as_ref().map(|m| m.used),
            memory_total_bytes: memory.as_ref().map(|m| m.total),
            power_watts: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
            temperature_celsius: d.temperature(TemperatureSensor::Gpu).ok(),
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            throttle_reasons: d
                .current_throttle_reasons()
                .map(reasons)
                .unwrap_or_default(),
        }
    }
}

/// NVML's throttle reasons by name (idle is no throttling).
fn reasons(r: ThrottleReasons) -> Vec<&'static str> {
    [
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications_clocks",
        ),
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake"),
        (ThrottleReasons::DISPLAY_CLOCK_SETTING, "display_clocks"),
    ]
    .into_iter()
    .filter(|(bit, _)| r.contains(*bit))
    .map(|(_, name)| name)
    .collect()
}
