//! Kernel struct offsets from the running kernel's BTF, and tracepoint record offsets from
//! tracefs: Rust eBPF cannot emit CO-RE relocations, so these are found at load time.
use std::{cell::RefCell, collections::HashMap, path::Path, rc::Rc};

use btf_rs::{Btf, Type};
use pipetrace_probes_common::{ABSENT, KernelOffsets, pipetrace_io};

#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    #[error(
        "cannot read kernel BTF at {path}: {reason}; pipetrace needs a kernel built with \
         CONFIG_DEBUG_INFO_BTF=y (most distribution kernels since 5.4)"
    )]
    Btf { path: String, reason: String },
    #[error("kernel BTF has no struct {0}")]
    NoStruct(String),
    #[error("kernel BTF has no field {0}.{1}")]
    NoField(String, String),
}

fn peel(btf: &Btf, mut t: Type) -> Option<Type> {
    // Typedefs and qualifiers stand between a member and its struct.
    for _ in 0..16 {
        t = match t {
            Type::Typedef(_) | Type::Const(_) | Type::Volatile(_) | Type::Restrict(_) => {
                btf.resolve_chained_type(t.as_btf_type()?).ok()?
            }
            other => return Some(other),
        };
    }
    None
}

/// `field` in `members` and its bit offset there, descending into anonymous structs and
/// unions.
fn find(btf: &Btf, members: &[btf_rs::Member], field: &str) -> Option<(u32, btf_rs::Member)> {
    for m in members {
        let name = btf.resolve_name(m).unwrap_or_default();
        if name == field {
            return Some((m.bit_offset(), m.clone()));
        }
        if name.is_empty() {
            let inner = peel(btf, btf.resolve_chained_type(m).ok()?)?;
            if let Type::Struct(s) | Type::Union(s) = inner
                && let Some((off, found)) = find(btf, &s.members, field)
            {
                return Some((m.bit_offset() + off, found));
            }
        }
    }
    None
}

/// Kernel structs, each looked up by name once: a lookup scans every type of vmlinux
/// (milliseconds each), and looking one up per field made every start 100 ms longer.
pub struct Structs<'a> {
    btf: &'a Btf,
    seen: RefCell<HashMap<String, Option<Rc<btf_rs::Struct>>>>,
}

impl<'a> Structs<'a> {
    pub(crate) fn new(btf: &'a Btf) -> Self {
        Self {
            btf,
            seen: RefCell::default(),
        }
    }

    fn get(&self, strukt: &str) -> Result<Rc<btf_rs::Struct>, OffsetError> {
        let mut seen = self.seen.borrow_mut();
        let found = seen.entry(strukt.to_string()).or_insert_with(|| {
            let types = self.btf.resolve_types_by_name(strukt).ok()?;
            types.into_iter().find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(Rc::new(s)),
                _ => None,
            })
        });
        found
            .clone()
            .ok_or_else(|| OffsetError::NoStruct(strukt.into()))
    }

    /// Bit offset of a field and its width in bits where it is a bitfield.
    fn member(&self, strukt: &str, field: &str) -> Result<(u32, Option<u32>), OffsetError> {
        let s = self.get(strukt)?;
        let (bit, m) = find(self.btf, &s.members, field)
            .ok_or_else(|| OffsetError::NoField(strukt.into(), field.into()))?;
        Ok((bit, m.bitfield_size().filter(|&b| b != 0)))
    }

    /// The type of a field, typedefs and qualifiers peeled.
    pub(crate) fn field_type(&self, strukt: &str, field: &str) -> Option<Type> {
        let s = self.get(strukt).ok()?;
        let (_, m) = find(self.btf, &s.members, field)?;
        peel(self.btf, self.btf.resolve_chained_type(&m).ok()?)
    }

    /// The name of a struct, union or other named type.
    pub(crate) fn type_name(&self, t: &Type) -> Option<String> {
        self.btf.resolve_name(t.as_btf_type()?).ok()
    }

    pub(crate) fn field_offset(&self, strukt: &str, field: &str) -> Result<u32, OffsetError> {
        self.member(strukt, field).map(|(bit, _)| bit / 8)
    }

    /// A one-bit field: the byte that holds it and its bit there (little-endian bit order,
    /// as on every architecture pipetrace loads on); `None` for anything wider.
    pub(crate) fn flag_bit(&self, strukt: &str, field: &str) -> Option<(u32, u32)> {
        match self.member(strukt, field).ok()? {
            (bit, Some(1)) => Some((bit / 8, bit % 8)),
            _ => None,
        }
    }

    /// The value of enumerator `name` of enum `enumeration`.
    pub(crate) fn enumerator(&self, enumeration: &str, name: &str) -> Option<u32> {
        let types = self.btf.resolve_types_by_name(enumeration).ok()?;
        types.into_iter().find_map(|t| match t {
            Type::Enum(e) => (e.members.iter())
                .find(|m| self.btf.resolve_name(*m).is_ok_and(|n| n == name))
                .map(|m| m.val()),
            _ => None,
        })
    }

    /// Byte size of a struct.
    pub(crate) fn size(&self, strukt: &str) -> Option<u32> {
        self.get(strukt).ok().map(|s| s.size() as u32)
    }
}

/// Offset of a named field in a tracepoint record, from its tracefs `format` file.
pub(crate) fn tracepoint_field(format: &str, field: &str) -> Option<u32> {
    format.lines().find_map(|line| {
        let decl = line.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        let name = decl.rsplit([' ', '*']).next()?;
        if name != field {
            return None;
        }
        rest.trim()
            .strip_prefix("offset:")?
            .split(';')
            .next()?
            .parse()
            .ok()
    })
}

pub fn resolve(btf_path: &Path, tracefs: &Path) -> Result<KernelOffsets, OffsetError> {
    // Mmap: look up a handful of fields without building all of vmlinux's types in memory.
    // Kernels before 6.16 refuse to map /sys/kernel/btf/vmlinux (ENODEV): read it whole.
    let btf = Btf::from_file_with_backend(btf_path, btf_rs::Backend::Mmap)
        .or_else(|_| Btf::from_file(btf_path))
        .map_err(|e| OffsetError::Btf {
            path: btf_path.display().to_string(),
            reason: e.to_string(),
        })?;
    let structs = Structs::new(&btf);
    let mut o = required(&structs)?;
    accounting(&structs, &mut o);
    tracepoints(tracefs, &mut o);
    o.open_not_data = (libc::O_DIRECTORY | libc::O_PATH) as u32;
    Ok(o)
}

/// What every probe needs: without one of these, the agent cannot trace.
fn required(structs: &Structs) -> Result<KernelOffsets, OffsetError> {
    let task = |f| structs.field_offset("task_struct", f);
    let mm = |f| structs.field_offset("mm_struct", f);
    Ok(KernelOffsets {
        ready: 1,
        task_pid: task("pid")?,
        task_tgid: task("tgid")?,
        task_start_boottime: task("start_boottime")?,
        task_real_parent: task("real_parent")?,
        task_group_leader: task("group_leader")?,
        task_mm: task("mm")?,
        task_exit_code: task("exit_code")?,
        mm_arg_start: mm("arg_start")?,
        mm_arg_end: mm("arg_end")?,
        ..KernelOffsets::default()
    })
}

/// Accounting fields are optional: a kernel without one loses that value, not the agent.
fn accounting(structs: &Structs, o: &mut KernelOffsets) {
    let opt = |strukt: &str, field: &str| structs.field_offset(strukt, field).unwrap_or(ABSENT);
    let within = |strukt: &str, member: &str, inner: &str, field: &str| match (
        structs.field_offset(strukt, member),
        structs.field_offset(inner, field),
    ) {
        (Ok(a), Ok(b)) => a + b,
        _ => ABSENT,
    };
    let sig = |f| opt("signal_struct", f);
    let task = |f| opt("task_struct", f);
    let delay = |f| opt("task_delay_info", f);
    o.mm_hiwater_rss = opt("mm_struct", "hiwater_rss");
    o.mm_total_vm = opt("mm_struct", "total_vm");
    (o.mm_rss_stat, o.percpu_counter_count, o.percpu_counter_size) =
        rss_counters(structs).unwrap_or((ABSENT, ABSENT, ABSENT));
    o.task_signal = task("signal");
    o.task_run_delay = within("task_struct", "sched_info", "sched_info", "run_delay");
    o.task_delays = task("delays");
    o.sig_live = sig("live");
    o.sig_nr_threads = sig("nr_threads");
    o.sig_stats_seq = stats_sequence(structs);
    (o.sig_utime, o.sig_stime) = (sig("utime"), sig("stime"));
    o.sig_sum_sched_runtime = sig("sum_sched_runtime");
    o.sig_prev_utime = within("signal_struct", "prev_cputime", "prev_cputime", "utime");
    o.sig_prev_stime = within("signal_struct", "prev_cputime", "prev_cputime", "stime");
    o.sig_maxrss = sig("maxrss");
    (o.sig_min_flt, o.sig_maj_flt) = (sig("min_flt"), sig("maj_flt"));
    (o.sig_nvcsw, o.sig_nivcsw) = (sig("nvcsw"), sig("nivcsw"));
    (o.task_utime, o.task_stime) = (task("utime"), task("stime"));
    o.task_sum_exec_runtime = within("task_struct", "se", "sched_entity", "sum_exec_runtime");
    (o.task_min_flt, o.task_maj_flt) = (task("min_flt"), task("maj_flt"));
    (o.task_nvcsw, o.task_nivcsw) = (task("nvcsw"), task("nivcsw"));
    o.task_io =
        pipetrace_io::FIELDS.map(|f| within("task_struct", "ioac", "task_io_accounting", f));
    (o.task_in_iowait, o.task_in_iowait_bit) = structs
        .flag_bit("task_struct", "in_iowait")
        .unwrap_or((ABSENT, 0));
    o.delay_swapin = delay("swapin_delay");
    o.delay_freepages = delay("freepages_delay");
    o.delay_thrashing = delay("thrashing_delay");
    o.delay_compact = delay("compact_delay");
    o.binprm_filename = opt("linux_binprm", "filename");
    o.siginfo_code = opt("kernel_siginfo", "si_code");
    o.sk_family = within("sock", "__sk_common", "sock_common", "skc_family");
    memory_cgroup(structs, o);
}

/// Where a task's memory cgroup and its limit are (see `KernelOffsets::task_cgroups`): all
/// or none, as the OOM probe needs every step.
fn memory_cgroup(structs: &Structs, o: &mut KernelOffsets) {
    let steps = || {
        let id = structs.enumerator("cgroup_subsys_id", "memory_cgrp_id")?;
        let pointer = u32::try_from(std::mem::size_of::<usize>()).ok()?;
        let at = |s: &str, f: &str| structs.field_offset(s, f).ok();
        Some([
            at("task_struct", "cgroups")?,
            at("css_set", "subsys")? + id * pointer,
            at("mem_cgroup", "css")?,
            at("mem_cgroup", "memory")?,
            at("page_counter", "max")?,
            at("page_counter", "parent")?,
        ])
    };
    [
        o.task_cgroups,
        o.css_set_memory,
        o.memcg_css,
        o.memcg_memory,
        o.page_counter_max,
        o.page_counter_parent,
    ] = steps().unwrap_or([ABSENT; 6]);
}

/// Where the rss counters of `mm_struct.rss_stat` are: the first one's value, where the
/// value sits in each, and the stride. Since 6.2 an array of `percpu_counter` (its `count`);
/// before, `struct mm_rss_stat`, an array of atomic_long_t (8 bytes, the value first).
fn rss_counters(structs: &Structs) -> Option<(u32, u32, u32)> {
    let at = structs.field_offset("mm_struct", "rss_stat").ok()?;
    match structs.field_type("mm_struct", "rss_stat")? {
        Type::Array(_) => Some((
            at,
            structs.field_offset("percpu_counter", "count").ok()?,
            structs.size("percpu_counter")?,
        )),
        t @ Type::Struct(_) if structs.type_name(&t).as_deref() == Some("mm_rss_stat") => Some((
            at + structs.field_offset("mm_rss_stat", "count").ok()?,
            0,
            8,
        )),
        _ => None,
    }
}

/// `signal_struct.stats_lock.seqcount.seqcount.sequence`: each a first member (seqlock_t is
/// an unnamed struct, its first member at 0 as C lays them out); ABSENT if the kernel nests
/// them otherwise.
fn stats_sequence(structs: &Structs) -> u32 {
    let first =
        |strukt: &str, field: &str| structs.field_offset(strukt, field).is_ok_and(|at| at == 0);
    match structs.field_offset("signal_struct", "stats_lock") {
        Ok(at) if first("seqcount_spinlock", "seqcount") && first("seqcount", "sequence") => at,
        _ => ABSENT,
    }
}

/// Fields of the classic tracepoints' records, from their formats in tracefs. Each is
/// optional: a kernel without one loses what it carries.
fn tracepoints(tracefs: &Path, o: &mut KernelOffsets) {
    let format = |path: &str| std::fs::read_to_string(tracefs.join(path)).unwrap_or_default();
    let field = |format: &str, f| tracepoint_field(format, f).unwrap_or(ABSENT);
    let exit = format("events/sched/sched_process_exit/format");
    // 0, not ABSENT: the exit probe reads it as "no such field".
    o.exit_tp_group_dead = tracepoint_field(&exit, "group_dead").unwrap_or(0);
    o.sock_family = field(&format("events/sock/sock_send_length/format"), "family");
    // The record gained the victim's memory when the prototype became (task, uid).
    let oom = format("events/oom/mark_victim/format");
    o.oom_task_arg = u32::from(tracepoint_field(&oom, "total_vm").is_some());
    let open_enter = format("events/syscalls/sys_enter_openat/format");
    o.tp_openat_filename = field(&open_enter, "filename");
    o.tp_openat_flags = field(&open_enter, "flags");
    let open_exit = format("events/syscalls/sys_exit_openat/format");
    o.tp_openat_ret = field(&open_exit, "ret");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_format_fields() {
        let f = "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:bool group_dead;\toffset:32;\tsize:1;\tsigned:0;\n";
        assert_eq!(tracepoint_field(f, "group_dead"), Some(32));
        assert_eq!(tracepoint_field(f, "pid"), Some(24));
        assert_eq!(tracepoint_field(f, "prio"), None);
    }

    #[test]
    fn running_kernel_offsets_are_plausible() {
        let path = Path::new("/sys/kernel/btf/vmlinux");
        if !path.exists() {
            eprintln!("skipped: this kernel has no BTF");
            return;
        }
        let o = resolve(path, Path::new("/sys/kernel/tracing")).expect("resolve offsets");
        // tgid follows pid in task_struct on every kernel since 2.6.
        assert_eq!(o.task_tgid, o.task_pid + 4);
        assert!(o.mm_arg_end == o.mm_arg_start + 8, "{o:?}");
        assert!(o.task_start_boottime > o.task_pid);
        // The ioac counters sit in kernel order, 8 bytes apart, inside signal_struct.
        assert_eq!(o.task_io[1], o.task_io[0] + 8, "{o:?}");
        assert_eq!(o.task_io[5], o.task_io[4] + 8, "{o:?}");
        assert_eq!(o.sig_stime, o.sig_utime + 8, "{o:?}");
        assert!(o.sig_live != ABSENT && o.sig_live < o.sig_utime, "{o:?}");
        assert!(
            o.sig_nr_threads != ABSENT && o.sig_stats_seq != ABSENT,
            "{o:?}"
        );
        assert_eq!(o.task_stime, o.task_utime + 8, "{o:?}");
        assert_eq!(o.task_nivcsw, o.task_nvcsw + 8, "{o:?}");
        assert!(
            o.task_sum_exec_runtime != ABSENT && o.task_min_flt != ABSENT,
            "{o:?}"
        );
        assert!(
            o.task_signal != ABSENT && o.task_run_delay != ABSENT,
            "{o:?}"
        );
        // in_iowait is one bit among task_struct's flag bits, past the scheduling fields.
        assert!(
            o.task_in_iowait != ABSENT && o.task_in_iowait > o.task_pid / 2,
            "{o:?}"
        );
        assert!(o.task_in_iowait_bit < 8, "{o:?}");
        // A memory cgroup's limit: its page counter's max is past its usage (first).
        assert!(
            o.task_cgroups != ABSENT && o.css_set_memory != ABSENT,
            "{o:?}"
        );
        assert!(
            o.page_counter_max > 0 && o.page_counter_parent > o.page_counter_max,
            "{o:?}"
        );
        let btf = Btf::from_file(path).expect("btf");
        let structs = Structs::new(&btf);
        assert_eq!(
            structs.flag_bit("task_struct", "pid"),
            None,
            "pid is no flag"
        );
    }
}
