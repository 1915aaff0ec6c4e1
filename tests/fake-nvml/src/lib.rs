//! A test NVML library: the functions pipetrace calls, with NVML's C ABI (the types are
//! nvml-wrapper-sys's, made from NVML's header), answering from a JSON file named by
//! `FAKE_NVML_STATE` and read again at every call, so a test changes the "hardware" while
//! the agent samples it. Each call's name is appended to `$FAKE_NVML_STATE.calls`.
//!
//! Utilisation samples come every 100 ms of wall time for each listed process whose `sm` or
//! `mem` is above 0 (an idle context gets none, as on real GPUs), since the time asked.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::{
    ffi::{c_char, c_uint, c_ulonglong},
    io::Write,
    time::{SystemTime, UNIX_EPOCH},
};

use nvml_wrapper_sys::bindings::*;
use serde::Deserialize;

const SUCCESS: nvmlReturn_t = 0;
const INVALID_ARGUMENT: nvmlReturn_t = 2;
const NOT_FOUND: nvmlReturn_t = 6;
const INSUFFICIENT_SIZE: nvmlReturn_t = 7;
const DRIVER_NOT_LOADED: nvmlReturn_t = 9;
const GPU_IS_LOST: nvmlReturn_t = 15;
/// The period of the driver's utilisation samples, microseconds.
const PERIOD_US: u64 = 100_000;

#[derive(Deserialize, Default)]
#[serde(default)]
struct State {
    driver: String,
    devices: Vec<Device>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Device {
    uuid: String,
    name: String,
    /// Fallen off the bus: every call about it fails.
    lost: bool,
    memory_total: u64,
    memory_used: u64,
    util_gpu: u32,
    util_mem: u32,
    power_mw: u32,
    temp_c: u32,
    sm_clock_mhz: u32,
    throttle: u64,
    processes: Vec<Process>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Process {
    pid: u32,
    used: u64,
    sm: u32,
    mem: u32,
    graphics: bool,
}

fn path() -> Option<String> {
    std::env::var("FAKE_NVML_STATE").ok()
}

fn state() -> Option<State> {
    let text = std::fs::read_to_string(path()?).ok()?;
    serde_json::from_str(&text).ok()
}

fn called(name: &str) {
    if let Some(p) = path()
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(format!("{p}.calls"))
    {
        let _ = writeln!(f, "{name}");
    }
}

/// The device a handle stands for (handles are index + 1), or the error to return.
fn with_device<T>(
    dev: nvmlDevice_t,
    f: impl FnOnce(&Device) -> Result<T, nvmlReturn_t>,
) -> Result<T, nvmlReturn_t> {
    let st = state().ok_or(DRIVER_NOT_LOADED)?;
    let i = (dev as usize).checked_sub(1).ok_or(INVALID_ARGUMENT)?;
    let d = st.devices.get(i).ok_or(GPU_IS_LOST)?;
    if d.lost {
        return Err(GPU_IS_LOST);
    }
    f(d)
}

fn ret(r: Result<(), nvmlReturn_t>) -> nvmlReturn_t {
    r.err().unwrap_or(SUCCESS)
}

unsafe fn put_str(s: &str, out: *mut c_char, len: c_uint) -> Result<(), nvmlReturn_t> {
    if out.is_null() || (s.len() + 1) > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, out, s.len());
        *out.add(s.len()) = 0;
    }
    Ok(())
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    called("nvmlInitWithFlags");
    if state().is_some() {
        SUCCESS
    } else {
        DRIVER_NOT_LOADED
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    nvmlInitWithFlags(0)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(_r: nvmlReturn_t) -> *const c_char {
    c"fake NVML error".as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(out: *mut c_char, len: c_uint) -> nvmlReturn_t {
    let Some(st) = state() else {
        return DRIVER_NOT_LOADED;
    };
    ret(unsafe { put_str(&st.driver, out, len) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    called("nvmlDeviceGetCount_v2");
    let Some(st) = state() else {
        return DRIVER_NOT_LOADED;
    };
    unsafe { *count = st.devices.len() as c_uint };
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    i: c_uint,
    dev: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let Some(st) = state() else {
        return DRIVER_NOT_LOADED;
    };
    if i as usize >= st.devices.len() {
        return INVALID_ARGUMENT;
    }
    unsafe { *dev = (i as usize + 1) as nvmlDevice_t };
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(dev: nvmlDevice_t, i: *mut c_uint) -> nvmlReturn_t {
    ret(with_device(dev, |_| {
        unsafe { *i = (dev as usize - 1) as c_uint };
        Ok(())
    }))
}

/// /dev/nvidiaN: the minor is the index here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    dev: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |_| {
        unsafe { *minor = (dev as usize - 1) as c_uint };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    dev: nvmlDevice_t,
    out: *mut c_char,
    len: c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| unsafe { put_str(&d.name, out, len) }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    dev: nvmlDevice_t,
    out: *mut c_char,
    len: c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| unsafe { put_str(&d.uuid, out, len) }))
}

/// NVML's two-call protocol: too small a buffer says how many there are.
unsafe fn processes(
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
    graphics: bool,
) -> nvmlReturn_t {
    called(if graphics {
        "GraphicsRunningProcesses"
    } else {
        "ComputeRunningProcesses"
    });
    ret(with_device(dev, |d| {
        let list: Vec<&Process> = d
            .processes
            .iter()
            .filter(|p| p.graphics == graphics)
            .collect();
        let room = unsafe { *count } as usize;
        unsafe { *count = list.len() as c_uint };
        if list.len() > room || (infos.is_null() && !list.is_empty()) {
            return Err(INSUFFICIENT_SIZE);
        }
        for (k, p) in list.iter().enumerate() {
            let info = nvmlProcessInfo_t {
                pid: p.pid,
                usedGpuMemory: p.used,
                gpuInstanceId: u32::MAX,
                computeInstanceId: u32::MAX,
            };
            unsafe { *infos.add(k) = info };
        }
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    unsafe { processes(dev, count, infos, false) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    unsafe { processes(dev, count, infos, true) }
}

/// Samples every 100 ms after `since` (at most the last second when 0) up to now, oldest
/// first, for each process with activity.
fn samples(d: &Device, since: u64) -> Vec<nvmlProcessUtilizationSample_t> {
    let now = now_us();
    let from = if since == 0 {
        now.saturating_sub(1_000_000)
    } else {
        since
    };
    let mut out = Vec::new();
    let mut t = (from / PERIOD_US + 1) * PERIOD_US;
    while t <= now {
        for p in d.processes.iter().filter(|p| p.sm > 0 || p.mem > 0) {
            out.push(nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: t,
                smUtil: p.sm,
                memUtil: p.mem,
                encUtil: 0,
                decUtil: 0,
            });
        }
        t += PERIOD_US;
    }
    out
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    dev: nvmlDevice_t,
    out: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    since: c_ulonglong,
) -> nvmlReturn_t {
    called("nvmlDeviceGetProcessUtilization");
    ret(with_device(dev, |d| {
        let all = samples(d, since);
        if all.is_empty() {
            unsafe { *count = 0 };
            return Err(NOT_FOUND);
        }
        if out.is_null() {
            unsafe { *count = all.len() as c_uint };
            return Err(INSUFFICIENT_SIZE);
        }
        // The oldest that fit: what is left comes at the next call, after the newest given.
        let n = all.len().min(unsafe { *count } as usize);
        for (k, s) in all.into_iter().take(n).enumerate() {
            unsafe { *out.add(k) = s };
        }
        unsafe { *count = n as c_uint };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    dev: nvmlDevice_t,
    u: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    called("nvmlDeviceGetUtilizationRates");
    ret(with_device(dev, |d| {
        unsafe {
            *u = nvmlUtilization_t {
                gpu: d.util_gpu,
                memory: d.util_mem,
            }
        };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    dev: nvmlDevice_t,
    m: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| {
        let version = unsafe { (*m).version };
        unsafe {
            *m = nvmlMemory_v2_t {
                version,
                total: d.memory_total,
                reserved: 0,
                free: d.memory_total.saturating_sub(d.memory_used),
                used: d.memory_used,
            }
        };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    dev: nvmlDevice_t,
    mw: *mut c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| {
        unsafe { *mw = d.power_mw };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    dev: nvmlDevice_t,
    _sensor: nvmlTemperatureSensors_t,
    t: *mut c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| {
        unsafe { *t = d.temp_c };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    dev: nvmlDevice_t,
    _kind: nvmlClockType_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| {
        unsafe { *mhz = d.sm_clock_mhz };
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    dev: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    ret(with_device(dev, |d| {
        unsafe { *reasons = d.throttle };
        Ok(())
    }))
}
