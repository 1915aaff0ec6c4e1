//! `pipetrace doctor`: can this machine run the agent, and if not, what to do about it.
use std::path::Path;

use pipetrace_host::probes::{BTF_PATH, Probes, TRACEFS, resolve_offsets};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// One check's outcome, as `--json` gives it.
#[derive(serde::Serialize)]
struct Check {
    check: String,
    /// `ok`, `note` (works, with less) or `fail`.
    status: &'static str,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// The checks, printed as they come (the probes take a moment) or kept for JSON.
struct Report {
    failed: bool,
    json: bool,
    checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, check: &str, status: &'static str, detail: String, fix: Option<String>) {
        if !self.json {
            let mark = match status {
                "ok" => "ok  ",
                "note" => "note",
                _ => "FAIL",
            };
            outln!("  {mark}  {check}: {detail}");
            if let Some(fix) = &fix {
                outln!("        fix: {fix}");
            }
        }
        let check = check.to_string();
        (self.checks).push(Check {
            check,
            status,
            detail,
            fix,
        });
    }

    fn ok(&mut self, what: &str, detail: String) {
        self.add(what, "ok", detail, None);
    }

    fn note(&mut self, what: &str, good: bool, yes: &str, no: &str) {
        match good {
            true => self.add(what, "ok", yes.into(), None),
            false => self.add(what, "note", no.into(), None),
        }
    }

    fn fail(&mut self, what: &str, detail: String, fix: &str) {
        self.failed = true;
        self.add(what, "fail", detail, Some(fix.into()));
    }

    /// A line under the last check (the agent's figures).
    fn more(&mut self, line: String) {
        if !self.json {
            outln!("        {line}");
        }
        if let Some(last) = self.checks.last_mut() {
            last.detail = format!("{}; {line}", last.detail);
        }
    }
}

fn kernel_version() -> Option<(u32, u32, String)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim().to_string();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor, release))
}

fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// Every agent running on this node, each with its own status (from the node's registry),
/// and what the agent of this state directory last said if it is not among them.
fn agent_section(r: &mut Report, state_dir: &Path) {
    let running = crate::registry::AgentStatus::running();
    if running.len() > 1 {
        r.add(
            "agents",
            "note",
            format!(
                "{} agents run on this node (each with its own state directory); one sees \
                 every process already",
                running.len()
            ),
            None,
        );
    }
    for (dir, s) in &running {
        print_agent(r, s, dir.as_deref());
    }
    let shown = |pid: u32| running.iter().any(|(_, s)| s.pid == pid);
    let file = crate::registry::path(state_dir);
    let last = match crate::registry::AgentStatus::read(state_dir) {
        Some(s) if shown(s.pid) => return,
        // Running, but /run was not writable for its registry entry.
        Some(s) if s.alive() && s.age() < 30 => return print_agent(r, &s, None),
        Some(s) => format!(
            "not running (last status from pid {}, {} s ago, in {})",
            s.pid,
            s.age(),
            file.display()
        ),
        None if running.is_empty() => format!("none running ({} absent)", file.display()),
        None => return,
    };
    r.add("agent", "note", last, None);
}

fn print_agent(r: &mut Report, s: &crate::registry::AgentStatus, dir: Option<&str>) {
    let f = &s.figures;
    r.ok(
        "agent",
        format!(
            "pid {}, {} mode, exporting to {}, status {} s old{}",
            s.pid,
            s.mode,
            s.exporting_to,
            s.age(),
            dir.map(|d| format!(", state in {d}")).unwrap_or_default()
        ),
    );
    r.more(format!(
        "lost {} kernel events and {} updates of per-process sums, {} undecodable; \
         spans: {} dropped, {} failed, {} spooled; metric exports: {} dropped, {} failed, \
         {} spooled; {} export retries; {} bytes queued",
        f.lost_events,
        f.accumulator_lost,
        f.undecodable,
        f.spans_dropped,
        f.export_failures,
        f.spans_spooled,
        f.metric_exports_dropped,
        f.metric_exports_failed,
        f.metric_exports_spooled,
        f.export_retries,
        f.export_queue_bytes
    ));
    r.more(format!(
        "{} processes known, {} in runs, {} without usage, {} with figures from exit, {} \
         impossible figures dropped; memory {} MiB",
        f.processes_known,
        f.processes_tracked,
        f.usage_missing,
        f.usage_at_exit,
        f.figures_dropped,
        f.rss_bytes >> 20
    ));
    let lost = f.lost_events
        + f.accumulator_lost
        + f.spans_dropped
        + f.export_failures
        + f.metric_exports_dropped
        + f.metric_exports_failed;
    if lost > 0 {
        r.add(
            "agent losses",
            "note",
            "the agent lost or dropped data".into(),
            Some(
                "raise probes.ring_buffer_bytes, export.queue_bytes, or set export.spool.dir; \
                 check the backend"
                    .into(),
            ),
        );
    }
}

/// `pipetrace doctor [--json]`: exit 1 when eBPF cannot run here.
/// `config`: the settings as `run` and `agent` would load them, or why they would refuse.
pub(crate) fn run(state_dir: &Path, config: Result<(), String>, json: bool) -> i32 {
    let mut r = Report {
        failed: false,
        json,
        checks: Vec::new(),
    };
    if !json {
        outln!("pipetrace doctor");
    }
    let config_ok = config.is_ok();
    match config {
        Ok(()) => r.ok(
            "config",
            "the settings load as run and agent read them".into(),
        ),
        Err(e) => r.fail(
            "config",
            e,
            "run and agent refuse to start with it: fix what it names (`pipetrace config \
             validate FILE` checks a file)",
        ),
    }
    check_kernel(&mut r);
    check_privileges(&mut r);
    check_pid_namespace(&mut r);
    check_probes(&mut r);
    agent_section(&mut r, state_dir);
    let verdict = if !config_ok {
        "pipetrace cannot start with these settings: fix the lines marked FAIL"
    } else if r.failed {
        "eBPF cannot run here: pipetrace would fall back to polling /proc (degraded: short \
         processes missed, sampled figures), or refuse with probes.strict; fix the lines \
         marked FAIL"
    } else {
        "pipetrace can run here"
    };
    if json {
        let all = serde_json::json!({ "ok": !r.failed, "checks": r.checks, "verdict": verdict });
        outln!("{all:#}");
    } else {
        outln!("{verdict}");
    }
    i32::from(r.failed)
}

/// The kernel's version and its BTF.
fn check_kernel(r: &mut Report) {
    match kernel_version() {
        Some((maj, min, rel)) if (maj, min) >= (5, 8) => r.ok("kernel", rel),
        Some((_, _, rel)) => r.fail(
            "kernel",
            format!("{rel} is older than 5.8 (no BPF ring buffer)"),
            "run on Linux 5.8 or newer",
        ),
        None => r.fail(
            "kernel",
            "cannot read /proc/sys/kernel/osrelease".into(),
            "mount /proc",
        ),
    }
    if Path::new(BTF_PATH).exists() {
        match resolve_offsets(Path::new(BTF_PATH), Path::new(TRACEFS)) {
            Ok(o) => r.ok(
                "BTF",
                format!(
                    "{BTF_PATH} (task_struct.start_boottime at {})",
                    o.task_start_boottime
                ),
            ),
            Err(e) => r.fail(
                "BTF",
                e.to_string(),
                "use a kernel with CONFIG_DEBUG_INFO_BTF=y",
            ),
        }
    } else {
        r.fail(
            "BTF",
            format!("{BTF_PATH} is missing"),
            "use a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        );
    }
}

/// tracefs and the capabilities the probes need.
fn check_privileges(r: &mut Report) {
    match pipetrace_host::probes::ensure_tracefs() {
        Ok(p) => r.ok("tracefs", p.display().to_string()),
        Err(e) => {
            let fix = match &e {
                pipetrace_host::probes::ProbeError::TracefsDenied(at) => {
                    format!("mount -o remount,mode=755 {at}")
                }
                _ => format!("mount -t tracefs nodev {TRACEFS}"),
            };
            r.fail("tracefs", e.to_string(), &fix)
        }
    }
    match effective_caps() {
        Some(caps) => {
            let has = |c: u32| caps & (1 << c) != 0;
            let bpf = has(CAP_BPF) && has(CAP_PERFMON);
            if has(CAP_SYS_ADMIN) || bpf {
                let how = if bpf {
                    "CAP_BPF + CAP_PERFMON"
                } else {
                    "CAP_SYS_ADMIN"
                };
                r.ok("capabilities", how.into());
            } else {
                r.fail(
                    "capabilities",
                    format!("effective set {caps:#x} lacks CAP_BPF and CAP_PERFMON"),
                    "run as root, or grant CAP_BPF and CAP_PERFMON (setcap cap_bpf,cap_perfmon+ep pipetrace)",
                );
            }
        }
        None => r.fail(
            "capabilities",
            "cannot read /proc/self/status".into(),
            "mount /proc",
        ),
    }
}

/// The real probes, loaded and attached, and what they can measure here.
/// The probes report host PIDs: in a PID namespace of its own (a container or pod without
/// hostPID) pipetrace cannot find them in its /proc.
fn check_pid_namespace(r: &mut Report) {
    match pipetrace_host::pidns::check() {
        Ok(()) => r.ok("PID namespace", "the host's".into()),
        Err(e) => r.fail(
            "PID namespace",
            e.0.clone(),
            "run it in the host's PID namespace: hostPID: true in Kubernetes, --pid=host with \
             podman or docker, pid: host in compose (the agent refuses to start without it; \
             pipetrace run polls /proc)",
        ),
    }
}

fn check_probes(r: &mut Report) {
    // The definitive check: load and attach the real probes, then let them go.
    let sizes = pipetrace_config::Probes {
        ring_buffer_bytes: 1 << 20,
        ..Default::default()
    };
    match Probes::load((&sizes).into(), true) {
        Ok(p) => {
            r.ok(
                "probes",
                "loaded and attached (fork, exec, exit, free; ring buffer)".into(),
            );
            let m = p.measured();
            // Optional measurements: say what is missing, without failing the check.
            r.note(
                "network bytes",
                m.network,
                "sock:sock_send_length/sock_recv_length attached",
                "this kernel has no sock length tracepoints (Linux 6.3+): network bytes are not measured",
            );
            r.note(
                "block-I/O waits",
                m.io_wait,
                "tp_btf/sched_switch and sched_wakeup attached",
                "sched_switch/sched_wakeup could not be attached: block-I/O waits are not measured",
            );
            r.note(
                "files",
                p.capabilities.files,
                "syscalls:sys_enter_openat/sys_exit_openat attached (files.enabled)",
                "the openat syscall tracepoints could not be attached: files are not reported",
            );
            r.note(
                "memory waits",
                m.delay_accounting,
                "delay accounting on (kernel.task_delayacct = 1)",
                "delay accounting is off and could not be turned on: sysctl -w kernel.task_delayacct=1",
            );
        }
        Err(e) => r.fail("probes", e.to_string(), "see the lines above"),
    }
}
