//! The words around the figures: what each one is and how to read it. No figure is typed
//! here; every one comes from the run that writes the page.

pub fn head(quick: bool, kept_memory: bool) -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "# Performance\n\nWhat pipetrace costs a pipeline's machine (wall time, CPU, memory, \
         events lost, export rate, latency), for whoever decides whether to run it: the latest \
         figures, replaced by each `make bench-perf` run (history is in git).\n\n\
         Measured by `make bench-perf` (`bench-perf{}`) on this machine: {cpus} \
         CPUs, Linux {}, a release build. Figures, not assertions: a shared VM is noisy by a \
         few percent, so ratios are medians over repeats (each traced run against the untraced \
         runs on both sides of it), with a 95% confidence interval for the median and their \
         ranges. Memory is \
         not load-sensitive{}.\n\n",
        match (quick, kept_memory) {
            (true, true) => " --quick --keep-memory",
            (true, false) => " --quick",
            (false, true) => " --keep-memory",
            (false, false) => "",
        },
        kernel.trim(),
        match kept_memory {
            true => ": the memory table is the previous run's, of the same page",
            false => "",
        }
    )
}

/// The memory table (and the agent's last words under it) of a page this bench wrote,
/// found between the memory section's notes and the closing notes.
pub fn kept_memory_table(page: &std::path::Path) -> Result<String, String> {
    let old = std::fs::read_to_string(page)
        .map_err(|e| format!("cannot read {}: {e}; run once without it", page.display()))?;
    let start = old.find(MEMORY).map(|i| i + MEMORY.len());
    // The notes' heading only: their words may change from one version to the next.
    let end = old.find(NOTES_HEADING);
    match (start, end) {
        (Some(s), Some(e)) if s <= e => Ok(old[s..e].to_string()),
        _ => Err(format!(
            "{} holds no memory table in this bench's words (written by another version?); \
             run once without --keep-memory",
            page.display()
        )),
    }
}

pub const MEMORY: &str = "
## Memory at 1k to 1M processes

One agent serves storms until it has seen each count (its figures after each count); one
`pipetrace run` per count (its peak, and its figures at its end, when it holds every task's
aggregates and the report's lists). Both send their spans over OTLP/gRPC to a sink in the
bench that keeps nothing, and `pipetrace run` writes its HTML report as usual.

- *peak RSS*: the resident set's high-water mark (VmHWM; for `pipetrace run` the kernel's
  rusage at its end), what `ps` and most monitors show.
- *real cost at peak*: that mark with the ring buffer counted once. The kernel maps a BPF
  ring buffer's data pages twice, back to back, so that a record wrapping around the end
  reads as one: a ring of N MiB adds 2N MiB to the resident set but N MiB to the machine's
  RAM, and it is resident from the start. This is the figure the 50 MB target is about.
- *private*: anonymous memory (RssAnon): the heap and the stacks, what grows if anything
  grows per process.
- *real cost (Pss)*: the proportional set size (/proc/PID/smaps_rollup): every page divided
  by how many times it is mapped, which counts the ring once and a shared library by its
  share.
- *ring buffer*: its data size, `probes.ring_buffer_bytes`.

";

/// Where the page's hand-written measurements start (after the notes): made by other
/// commands than this bench, kept as they are when it rewrites the page.
pub const BY_HAND_HEADING: &str = "\n## Measured by other commands\n";

/// The hand-written end of a page this bench wrote, from its heading on; none when the
/// page or the heading is not there.
pub fn by_hand(page: &std::path::Path) -> String {
    let old = std::fs::read_to_string(page).unwrap_or_default();
    match old.find(BY_HAND_HEADING) {
        Some(i) => old[i..].to_string(),
        None => String::new(),
    }
}

/// Where the notes start, after the memory table.
const NOTES_HEADING: &str = "\n## Reading the figures\n";

pub const NOTES: &str = "
## Reading the figures

- Targets: storm ratio <= 1.03 in both modes, real pipeline <= 1.01, 0 events lost, memory
  <= 50 MB real cost and flat from 1k to 1M processes, export >= 50k spans/s per core,
  exit-to-backend p99 <= 2 s. A ratio's 95% interval says how far this run's median can
  be from the true one: a median within a target but an interval across it is within
  this VM's noise of the target, not clear of it. The storms alone vary by several per cent
  from one to the next on this VM, so each repeat is paired with its neighbours and the
  interval narrows only with more repeats (`--repeats`). The steal row measures one cause:
  the hypervisor running other guests while this one waits, and how closely the
  untraced storms' wall times follow it. The rows `less steal` take out of every storm,
  traced or not, the wall time that the fit on the untraced storms gives its steal: a
  second estimate with less of the VM's noise, beside the plain ratio, not instead of it.
- The storm is the worst case: nothing but fork, exec and exit, one process after another
  from a shell loop, with five kernel records and a task and a tool span per process. A
  real pipeline spends its time in its tools; the demo pipeline lasts about a second, so
  its ratio mostly shows this VM's noise (the range), not pipetrace. On two CPUs the storm
  keeps one busy and the agent runs on the other, so each microsecond of agent CPU per
  process only partly shows in the wall time; on a busier machine it all would.
- `pipetrace run`'s ratio holds fixed costs the agent's does not: loading and verifying the
  probes, writing the report and the last flush. Every probe is a BTF tracepoint unless
  `files.enabled`: those detach at once, where a classic tracepoint waits for the kernel's
  RCU grace periods (tens of ms at every end).
- Where the time goes, in the kernel: the `probe` rows are the kernel's own counts
  (`kernel.bpf_stats_enabled`) of each program's runs and time inside it; the tracepoint's
  own dispatch is not in them, the storm's own CPU (alone and under the agent) shows it all.
  `sched_switch` and `sched_wakeup` run at every context switch on the machine (block-I/O
  waits, and a dead process's final CPU as its last thread leaves); the exit probe reads a
  process's figures at exit in case the reap-time report (the `free` probe) does not come.
- Where the time goes, in the agent: the perf row lists the functions holding most of the
  agent's CPU, their callees included. The event loop (`Session::ingest`) holds decoding,
  the tree and the attribution; `Session::settle_exits`, `poll` and `emit` hold what a
  process's end costs once its usage report is in: span building (`SpanBuilder::build`),
  the metrics and, per new task still running when its batch is in, reading its cgroup
  (`cgroup::membership`, an open and read of /proc/PID/cgroup; the limits are cached per
  cgroup; a task that already ended gets the host's without a read); the OTLP request is built
  once from the SDK's spans and encoded with prost (`trace_request`, `encode_to_vec`),
  then grouped, queued and sent on the runtime's other threads. The kernel's share is
  those reads, the wake-ups and the writes. The agent reads the ring buffer every 40 ms
  unless the probes wake it (at a quarter full), so a storm comes in batches of about 40
  processes and each read's fixed costs spread over them. The core row is the same work
  without the kernel: the core fed a storm's records on a fake host, measured by its CPU
  time rather than the wall clock, so two builds compare by it within a few per cent on
  this VM where the storms' own times vary by more.
- Where the memory goes: the agent holds what runs now and a task's aggregates until it
  ends; `pipetrace run` also holds the end-of-run tree, table and report (bounded lists).
  Both hold the export's batches in flight (`export.batch_spans` spans each, with their
  encoding), the largest part of what varies from run to run.
- The ring-buffer rows show what a smaller `probes.ring_buffer_bytes` loses at the highest
  exec rate: an exec's record holds only the bytes its command line and file name take, so
  a ring much smaller than the default holds the burst, and each MiB of ring is two MiB of
  resident set and one of RAM (the memory table's last columns).
- Export per core is measured alone (the agent's exporter, fed synthetic tool spans, to
  the rotel collector in another process) and end to end (all of the agent's work per
  process, which includes the export).
- Latency is from the kernel's exit time of a process to its span's arrival: the exit waits
  for the kernel's usage report when the process is reaped, then for a batch
  (`export.batch_timeout`, 500 ms).
";
