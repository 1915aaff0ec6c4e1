//! Loading and attaching the eBPF programs, and reading what they produce.
mod attach;
mod offsets;
mod reader;

use std::path::{Path, PathBuf};

use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, RingBuf},
};
use pipetrace_probes_common::{
    ABSENT, ACC_MAP, Accumulator, EVENTS_MAP, IO_WAIT_MAP, KIND_SLOTS, KernelOffsets,
    LOST_ACCUMULATOR, LOST_MAP, OFFSETS_GLOBAL, WAKE_GLOBAL,
};

use attach::Links;
pub use offsets::{OffsetError, resolve as resolve_offsets};
pub use reader::{EventReader, TICK};

/// The probes object, built by build.rs from probes/ebpf.
static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/pipetrace-probes"));

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Offsets(#[from] OffsetError),
    // Mounting needs CAP_SYS_ADMIN, which the agent needs for nothing else: mounting it
    // beforehand (systemd does at boot) is the fix, not the capability.
    #[error(
        "tracefs is not mounted at {TRACEFS} and mounting it failed ({0}); mount it \
         (mount -t tracefs nodev {TRACEFS}, as systemd does at boot), or run as root (with \
         CAP_SYS_ADMIN pipetrace mounts it)"
    )]
    Tracefs(std::io::Error),
    #[error(
        "tracefs is mounted at {0} but this user cannot read it (permission denied: it is \
         mounted mode 0700, as the kernel mounts it by default); make it readable \
         (mount -o remount,mode=755 {0}), or add CAP_DAC_READ_SEARCH to the agent's \
         capabilities, or run as root"
    )]
    TracefsDenied(String),
    #[error(
        "loading the eBPF probes failed: {0}; run as root or grant CAP_BPF and CAP_PERFMON \
         (see `pipetrace doctor`)"
    )]
    Load(String),
    #[error("attaching {hook} failed: {reason}; see `pipetrace doctor`")]
    Attach { hook: &'static str, reason: String },
    #[error("the probes object has no {0}: the build is inconsistent, rebuild pipetrace")]
    Missing(&'static str),
}

/// Mounts tracefs if nothing is mounted there yet; tracepoint ids are read from it.
pub fn ensure_tracefs() -> Result<PathBuf, ProbeError> {
    let root = Path::new(TRACEFS);
    let debugfs = Path::new("/sys/kernel/debug/tracing");
    for dir in [root, debugfs] {
        match std::fs::metadata(dir.join("events")) {
            Ok(m) if m.is_dir() => return Ok(dir.to_path_buf()),
            // Mounted, but closed to this user: mounting again would not help. (debugfs is
            // root's alone, whether or not tracing is under it.)
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && dir == root => {
                return Err(ProbeError::TracefsDenied(dir.display().to_string()));
            }
            _ => {}
        }
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, dst, fs) = (c("nodev"), c(TRACEFS), c("tracefs"));
    // SAFETY: valid C strings; mount(2) does not keep the pointers.
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(ProbeError::Tracefs(std::io::Error::last_os_error()));
    }
    Ok(root.to_path_buf())
}

/// vmlinux's BTF for the BTF tracepoints' attach ids. Mapped where the kernel allows it
/// (Linux 6.16+): sysfs hands the file out a page at a time, and reading its megabytes
/// took thousands of reads, the largest part of a start after verifying the programs.
fn kernel_btf() -> Result<Btf, ProbeError> {
    let failed = |e: &dyn std::fmt::Display| ProbeError::Load(format!("{BTF_PATH}: {e}"));
    let file = std::fs::File::open(BTF_PATH).map_err(|e| failed(&e))?;
    // SAFETY: a private read-only mapping of a file the kernel never changes while it runs.
    let parsed = match unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) } {
        Ok(map) => Btf::parse(&map, aya::Endianness::default()),
        Err(_) => Btf::parse(
            &std::fs::read(BTF_PATH).map_err(|e| failed(&e))?,
            aya::Endianness::default(),
        ),
    };
    parsed.map_err(|e| failed(&e))
}

/// The sizes of the probes' maps, as the configuration sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSizes {
    /// The ring buffer's bytes: a power of two, at least a page.
    pub ring_buffer_bytes: u32,
    /// Processes with per-process sums at once (and threads asleep in I/O wait).
    pub accumulator_entries: u32,
}

impl From<&pipetrace_config::Probes> for MapSizes {
    fn from(p: &pipetrace_config::Probes) -> Self {
        Self {
            ring_buffer_bytes: p.ring_buffer_bytes,
            accumulator_entries: p.accumulator_entries,
        }
    }
}

/// The probes object with its maps, the kernel offsets and vmlinux's BTF for the attach
/// ids. Our reads of vmlinux's BTF (the offsets, then the attach ids) run beside the
/// loader's, each about a fifth of a start: the offsets go to the loader as soon as they
/// are known; the attach ids wait until the loader has dropped its parse, so that the two
/// parses never add up in the start's peak.
fn load_with_btf(
    sizes: MapSizes,
    tracefs: PathBuf,
) -> Result<(Ebpf, KernelOffsets, Btf), ProbeError> {
    std::thread::scope(|s| {
        let (offsets_tx, offsets_rx) = std::sync::mpsc::sync_channel(1);
        let (dropped_tx, dropped_rx) = std::sync::mpsc::sync_channel(1);
        let ours = s.spawn(move || {
            let offsets = resolve_offsets(Path::new(BTF_PATH), &tracefs);
            let resolved = offsets.is_ok();
            let _ = offsets_tx.send(offsets);
            let _ = dropped_rx.recv();
            resolved.then(kernel_btf)
        });
        let ebpf = load_object(sizes, offsets_rx, dropped_tx);
        let btf = ours.join().expect("the BTF thread does not panic");
        let (ebpf, offsets) = ebpf?;
        let btf = btf.ok_or(ProbeError::Missing("offsets"))??;
        Ok((ebpf, offsets, btf))
    })
}

/// The probes object with its maps, once the offsets come. The loader parses vmlinux's
/// BTF on its own (10 MB) for CO-RE relocations, which Rust probes never carry: dropped
/// at once, and `dropped` says so.
fn load_object(
    sizes: MapSizes,
    offsets: std::sync::mpsc::Receiver<Result<KernelOffsets, OffsetError>>,
    dropped: std::sync::mpsc::SyncSender<()>,
) -> Result<(Ebpf, KernelOffsets), ProbeError> {
    let mut loader = EbpfLoader::new();
    loader.btf(None);
    let _ = dropped.send(());
    let offsets = offsets
        .recv()
        .map_err(|_| ProbeError::Missing("offsets"))??;
    let wake_bytes = u64::from(sizes.ring_buffer_bytes / 4);
    let ebpf = loader
        .override_global(OFFSETS_GLOBAL, &offsets, true)
        .override_global(WAKE_GLOBAL, &wake_bytes, true)
        .map_max_entries(EVENTS_MAP, sizes.ring_buffer_bytes)
        .map_max_entries(ACC_MAP, sizes.accumulator_entries)
        .map_max_entries(IO_WAIT_MAP, sizes.accumulator_entries)
        .load(PROBES)
        .map_err(|e| ProbeError::Load(format!("{e:#}")))?;
    Ok((ebpf, offsets))
}

/// The BTF tracepoint programs this kernel will get, by program and tracepoint.
fn btf_programs(o: &KernelOffsets) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("sched_process_fork", "sched_process_fork"),
        ("sched_process_exec", "sched_process_exec"),
        ("sched_process_free", "sched_process_free"),
        ("mark_victim", "mark_victim"),
        ("signal_generate", "signal_generate"),
    ];
    if o.exit_tp_group_dead != 0 {
        v.push(("sched_process_exit_btf", "sched_process_exit"));
    }
    if o.sock_family != ABSENT {
        v.extend([
            ("sock_send_length", "sock_send_length"),
            ("sock_recv_length", "sock_recv_length"),
        ]);
    }
    if o.task_in_iowait != ABSENT {
        v.extend([
            ("sched_switch", "sched_switch"),
            ("sched_wakeup", "sched_wakeup"),
        ]);
    }
    v
}

/// What the loaded probes can measure on this kernel.
#[derive(Clone, Copy, Debug)]
pub struct Capabilities {
    /// sock tracepoints attached: network bytes are measured.
    pub network: bool,
    /// Delay accounting on: memory waits are measured.
    pub delay_accounting: bool,
    /// sched_switch and sched_wakeup attached: block-I/O waits are measured.
    pub io_wait: bool,
    /// The openat tracepoints attached: the files each process opened are reported.
    pub files: bool,
}

/// Loaded, attached probes. Dropping this detaches them.
pub struct Probes {
    /// First field: dropped first, so the programs are detached before their maps go.
    _links: Links,
    _ebpf: Ebpf,
    lost: PerCpuArray<MapData, u64>,
    acc: HashMap<MapData, u32, Accumulator>,
    ring: Option<RingBuf<MapData>>,
    pub capabilities: Capabilities,
}

impl Probes {
    /// Loads and attaches every probe; the open probes only when `files` is asked for.
    pub fn load(sizes: MapSizes, files: bool) -> Result<Self, ProbeError> {
        // The agent's own span (`self_telemetry.traces`): how long loading took, and why it failed.
        let span = tracing::info_span!(
            "pipetrace.probes.attach",
            files,
            error = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
        .entered();
        let loaded = Self::load_and_attach(sizes, files);
        if let Err(e) = &loaded {
            span.record("otel.status_code", "error");
            span.record("error", e.to_string());
        }
        loaded
    }

    fn load_and_attach(sizes: MapSizes, files: bool) -> Result<Self, ProbeError> {
        keep_large_buffers_mapped();
        let tracefs = ensure_tracefs()?;
        raise_memlock();
        let (mut ebpf, offsets, btf) = load_with_btf(sizes, tracefs)?;
        // Each program's verification is a syscall of its own: side by side, on every CPU.
        attach::load_all(&mut ebpf, &btf, &btf_programs(&offsets));
        let mut links = Links::default();
        for name in [
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_free",
        ] {
            links.btf_tracepoint(&mut ebpf, &btf, name)?;
        }
        // A kernel that says whether an exit ends the thread group says it in both.
        match offsets.exit_tp_group_dead != 0 {
            true => {
                let (program, tracepoint) = ("sched_process_exit_btf", "sched_process_exit");
                links.btf_program(&mut ebpf, &btf, program, tracepoint)?
            }
            false => links.tracepoint(&mut ebpf, "sched", "sched_process_exit")?,
        }
        // Network bytes need the sock tracepoints (Linux 6.3+); without them the rest works.
        let network = offsets.sock_family != ABSENT && attach_sock(&mut ebpf, &btf, &mut links);
        if !network {
            log::warn!(
                "this kernel has no sock:sock_send_length tracepoint (Linux 6.3+): network \
                 bytes are not measured"
            );
        }
        let delay_accounting = enable_delay_accounting();
        let io_wait =
            offsets.task_in_iowait != ABSENT && attach_io_wait(&mut ebpf, &btf, &mut links);
        // Diagnosis hooks; a kernel without them loses OOM or signal events, nothing else.
        if let Err(e) = links.btf_tracepoint(&mut ebpf, &btf, "mark_victim") {
            log::warn!("oom:mark_victim not attached ({e}): OOM kills are not reported");
        }
        if let Err(e) = links.btf_tracepoint(&mut ebpf, &btf, "signal_generate") {
            log::warn!("signal:signal_generate not attached ({e}): fatal signals are not reported");
        }
        let files = files && attach_open(&mut ebpf, &offsets, &mut links);
        drop(btf);
        release_freed_heap();
        let ring = RingBuf::try_from(
            ebpf.take_map(EVENTS_MAP)
                .ok_or(ProbeError::Missing("EVENTS"))?,
        )
        .map_err(|e| ProbeError::Load(e.to_string()))?;
        let lost =
            PerCpuArray::try_from(ebpf.take_map(LOST_MAP).ok_or(ProbeError::Missing("LOST"))?)
                .map_err(|e| ProbeError::Load(e.to_string()))?;
        let acc = HashMap::try_from(ebpf.take_map(ACC_MAP).ok_or(ProbeError::Missing("ACC"))?)
            .map_err(|e| ProbeError::Load(e.to_string()))?;
        Ok(Self {
            _links: links,
            _ebpf: ebpf,
            lost,
            acc,
            ring: Some(ring),
            capabilities: Capabilities {
                network,
                delay_accounting,
                io_wait,
                files,
            },
        })
    }

    /// The ring buffer, to be read by one [`EventReader`].
    pub(crate) fn take_reader(&mut self) -> Result<EventReader, ProbeError> {
        let ring = self
            .ring
            .take()
            .ok_or(ProbeError::Missing("EVENTS (already taken)"))?;
        EventReader::new(ring).map_err(|e| ProbeError::Load(e.to_string()))
    }

    /// The counters these probes measure on this kernel.
    pub fn measured(&self) -> pipetrace_core::accounting::Measured {
        pipetrace_core::accounting::Measured {
            network: self.capabilities.network,
            delay_accounting: self.capabilities.delay_accounting,
            io_wait: self.capabilities.io_wait,
        }
    }

    /// What the kernel has summed so far for a live process (network bytes, exited
    /// threads' delays); zero when it has nothing.
    pub(crate) fn accumulated(&self, tgid: u32) -> Accumulator {
        self.acc.get(&tgid, 0).unwrap_or_default()
    }

    /// Per-process accumulator updates dropped because the map was full.
    pub(crate) fn lost_accumulator_updates(&self) -> u64 {
        self.lost
            .get(&LOST_ACCUMULATOR, 0)
            .map(|per_cpu| per_cpu.iter().sum::<u64>())
            .unwrap_or(0)
    }

    /// Records the kernel could not queue because the ring buffer was full, summed over CPUs.
    pub(crate) fn lost_events(&self) -> u64 {
        (1..KIND_SLOTS)
            .filter_map(|k| self.lost.get(&k, 0).ok())
            .map(|per_cpu| per_cpu.iter().sum::<u64>())
            .sum()
    }
}

fn attach_sock(ebpf: &mut Ebpf, btf: &Btf, links: &mut Links) -> bool {
    ["sock_send_length", "sock_recv_length"]
        .into_iter()
        .all(|name| links.btf_tracepoint(ebpf, btf, name).is_ok())
}

/// Block-I/O waits from the scheduler's own hooks (see probes/ebpf/src/iowait.rs for why
/// not from delay accounting), and a dead process's final CPU (final_cpu.rs); a kernel
/// without them loses those figures, nothing else.
fn attach_io_wait(ebpf: &mut Ebpf, btf: &Btf, links: &mut Links) -> bool {
    let attached = ["sched_switch", "sched_wakeup"]
        .into_iter()
        .try_for_each(|name| links.btf_tracepoint(ebpf, btf, name));
    if let Err(e) = &attached {
        log::warn!(
            "tp_btf/sched_switch or sched_wakeup not attached ({e}): block-I/O waits are not \
             measured, and figures taken at exit lack the exit's own CPU"
        );
    }
    attached.is_ok()
}

/// The files processes open, from the openat syscall's entry and exit; a kernel without
/// those tracepoints (no CONFIG_FTRACE_SYSCALLS) loses the files, nothing else.
fn attach_open(
    ebpf: &mut Ebpf,
    offsets: &pipetrace_probes_common::KernelOffsets,
    links: &mut Links,
) -> bool {
    if offsets.tp_openat_filename == ABSENT || offsets.tp_openat_ret == ABSENT {
        log::warn!(
            "this kernel has no syscalls:sys_enter_openat tracepoint: files are not reported"
        );
        return false;
    }
    let attached = ["sys_enter_openat", "sys_exit_openat"]
        .into_iter()
        .try_for_each(|name| links.tracepoint(ebpf, "syscalls", name));
    if let Err(e) = &attached {
        log::warn!(
            "syscalls:sys_enter_openat / sys_exit_openat not attached ({e}): files are not reported"
        );
    }
    attached.is_ok()
}

const DELAYACCT: &str = "/proc/sys/kernel/task_delayacct";

/// Memory waits come from the kernel's delay accounting, off by default on
/// most distributions. Turning it on costs a clock read per wait; it is left on afterwards
/// because another agent or tool may rely on it by then. Writing it needs CAP_SYS_ADMIN, so
/// a least-privilege agent relies on the sysctl being set already.
fn enable_delay_accounting() -> bool {
    match std::fs::read_to_string(DELAYACCT) {
        Ok(v) if v.trim() == "1" => true,
        Ok(_) => match std::fs::write(DELAYACCT, "1") {
            Ok(()) => true,
            Err(e) => {
                log::warn!(
                    "cannot turn on delay accounting ({DELAYACCT}: {e}): memory \
                     waits are not measured; set kernel.task_delayacct = 1 in \
                     /etc/sysctl.d (deploy/systemd/pipetrace-sysctl.conf), or grant \
                     CAP_SYS_ADMIN"
                );
                false
            }
        },
        Err(_) => {
            log::warn!("this kernel has no delay accounting: memory waits are not measured");
            false
        }
    }
}

/// Large buffers mapped and unmapped on their own, for the process's life. glibc raises its
/// mmap threshold to the size of the largest mapped buffer freed: the loader's parse of
/// vmlinux's BTF (about 17 MB for a moment) would have every later export batch and
/// encoding buffer come from the heap, whose freed pages stay resident between long-lived
/// allocations (20 MB at once, then more with every process).
fn keep_large_buffers_mapped() {
    #[cfg(target_env = "gnu")]
    // SAFETY: a plain allocator setting (glibc's default value, fixed).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Hands what the loader freed in the heap back to the kernel.
fn release_freed_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: glibc only returns free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; later ones ignore it. Raising the
/// hard limit needs CAP_SYS_RESOURCE, so deployments raise it instead (systemd's
/// LimitMEMLOCK, compose's ulimits) and this call is then a no-op or harmlessly refused.
fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer; failure is harmless on cgroup-accounted kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mapped parse gives the BTF tracepoints the same attach ids as an independent
    /// parser of the same file.
    #[test]
    fn mapped_kernel_btf_names_the_tracepoints_as_btf_rs_does() {
        if !Path::new(BTF_PATH).exists() {
            eprintln!("skipped: this kernel has no BTF");
            return;
        }
        let btf = kernel_btf().expect("vmlinux BTF");
        let other = btf_rs::Btf::from_file(BTF_PATH).expect("btf_rs parse");
        for name in ["sched_process_exec", "sched_process_free", "sched_switch"] {
            let typedef = format!("btf_trace_{name}");
            let id = btf
                .id_by_type_name_kind(&typedef, aya_obj::btf::BtfKind::Typedef)
                .expect(&typedef);
            let ids = other.resolve_ids_by_name(&typedef).expect(&typedef);
            assert!(ids.contains(&id), "{typedef}: aya {id}, btf_rs {ids:?}");
        }
    }
}
