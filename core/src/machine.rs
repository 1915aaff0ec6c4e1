//! What the machine is, as data: its identity and kind (`HostInfo`, `Cloud`), and the GPUs
//! found at start (`GpuInventory`). The host crate detects them; the resource and span
//! building read them as they are handed in, never from the machine.
use std::sync::{Arc, OnceLock};

use crate::port::system_time;

/// OTel `os.type`: the only one pipetrace runs on.
pub const OS_TYPE: &str = "linux";

/// What the machine tells of its cloud. Each is None where nothing offline tells it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cloud {
    /// OTel `cloud.provider`: aws, gcp, azure, oracle_cloud, alibaba_cloud.
    pub provider: Option<&'static str>,
    /// OTel `host.type`: the instance type, where DMI names it (EC2 Nitro: `m5.large`).
    pub host_type: Option<String>,
    /// OTel `cloud.region`, from cloud-init's instance data when it names the same cloud.
    pub region: Option<String>,
}

/// Who this host is and what it is, detected once at start.
#[derive(Clone, Debug)]
pub struct HostInfo {
    pub boot_id: String,
    pub host_id: String,
    pub host_name: String,
    /// OTel `host.arch`: the kernel's machine (`uname -m`) in OTel's words.
    pub arch: Option<String>,
    /// OTel `os.version`: the kernel release (`uname -r`).
    pub os_version: Option<String>,
    /// The cloud, instance type and region, where the machine tells them offline.
    pub cloud: Cloud,
    /// The memory the kernel manages (`MemTotal`), bytes.
    pub memory_bytes: Option<u64>,
    /// Add to a CLOCK_BOOTTIME timestamp to get Unix time, nanoseconds.
    pub boot_to_unix_ns: i128,
    /// The node's GPUs, as the GPU sampler finds them at its start.
    pub gpus: GpuInventory,
}

impl HostInfo {
    pub fn system_time(&self, boot_ns: u64) -> std::time::SystemTime {
        system_time(boot_ns, self.boot_to_unix_ns)
    }
}

/// One GPU as the driver names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// NVML's index.
    pub index: u32,
    pub uuid: String,
    pub name: String,
    /// Its device file's minor number (/dev/nvidiaN), as a devices cgroup names it.
    pub minor: Option<u32>,
}

/// A device's own figures, each absent where the device does not report it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceFigures {
    /// Percent of the last period any kernel ran, and the memory controller was busy.
    pub utilization: Option<u32>,
    pub memory_utilization: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub power_watts: Option<f64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    /// Why its clocks are held down now (NVML's reasons, by name).
    pub throttle_reasons: Vec<&'static str>,
}

/// A GPU's own figures at the last look, with who of the runs used it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceNow {
    pub gpu: Gpu,
    pub figures: DeviceFigures,
}

/// The node's GPUs, set once by the GPU sampler when it starts and read by span building,
/// which names a task's GPUs by them: one handle, cloned to both, in place of a global.
#[derive(Clone, Debug, Default)]
pub struct GpuInventory(Arc<OnceLock<Vec<Gpu>>>);

impl GpuInventory {
    /// The GPUs found; a second call changes nothing.
    pub fn set(&self, gpus: &[Gpu]) {
        let _ = self.0.set(gpus.to_vec());
    }

    /// The GPUs found, none before the sampler started (or without one).
    pub fn get(&self) -> &[Gpu] {
        self.0.get().map(Vec::as_slice).unwrap_or(&[])
    }

    /// The NVML indices of the GPUs whose device minors are in `minors` (bit N:
    /// /dev/nvidiaN); a GPU whose minor is unknown is taken to have its index as minor.
    /// Without an inventory, the minors themselves.
    pub fn indices_of_minors(&self, minors: u64) -> u64 {
        let by_minor = |g: &Gpu| g.minor.unwrap_or(g.index);
        match self.get() {
            [] => minors,
            gpus => (gpus.iter())
                .filter(|g| by_minor(g) < 64 && minors & (1 << by_minor(g)) != 0)
                .fold(0, |m, g| m | 1u64.checked_shl(g.index).unwrap_or(0)),
        }
    }
}

/// Who a fake host is, as the resource and span builder see it (node `node1`).
#[cfg(any(test, feature = "fake-host"))]
pub fn fake_info(fake: &crate::port::fake::FakeHost) -> HostInfo {
    let boot = fake
        .wall(0)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    HostInfo {
        boot_id: "b".into(),
        host_id: "h".into(),
        host_name: "node1".into(),
        arch: None,
        os_version: None,
        cloud: Default::default(),
        memory_bytes: None,
        boot_to_unix_ns: boot.as_nanos() as i128,
        gpus: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, minor: Option<u32>) -> Gpu {
        let (uuid, name) = (format!("GPU-{index}"), "A100".to_string());
        Gpu {
            index,
            uuid,
            name,
            minor,
        }
    }

    #[test]
    fn a_tasks_device_minors_name_the_gpus_by_their_index_once_the_inventory_is_set() {
        let inv = GpuInventory::default();
        // Before the sampler: the minors as they are.
        assert_eq!(inv.indices_of_minors(0b100), 0b100);
        // /dev/nvidia2 is NVML's GPU 0; GPU 1 has no known minor (its index stands in).
        inv.set(&[gpu(0, Some(2)), gpu(1, None)]);
        let clone = inv.clone();
        assert_eq!(clone.indices_of_minors(0b100), 0b01);
        assert_eq!(clone.indices_of_minors(0b110), 0b11);
        inv.set(&[]);
        assert_eq!(clone.get().len(), 2, "set once");
    }
}
