//! What each key means, for `pipetrace config print-default`: the defaults as YAML with a
//! comment above every key, as the OpenTelemetry Collector documents its configuration. A
//! test holds this table and the model to each other: no key without its comment, no
//! comment of a key that does not exist.
use serde_yaml::Value;

/// Every key of the configuration by its dotted path, with what it means.
pub const KEYS: &[(&str, &str)] = &[
    (
        "service_name",
        "OTel service.name of what is exported (OTEL_SERVICE_NAME); null: pipetrace.",
    ),
    (
        "resource_attributes",
        "Extra resource attributes on everything exported (OTEL_RESOURCE_ATTRIBUTES), e.g. host.id: node-7.",
    ),
    ("probes", "The kernel probes."),
    (
        "probes.ring_buffer_bytes",
        "Kernel ring buffer size in bytes: a power of two, at least one page. Counted twice in the agent's resident set (the kernel maps it twice), once in RAM.",
    ),
    (
        "probes.accumulator_entries",
        "Processes the kernel keeps per-process sums for at once (network bytes, exited threads' waits and I/O, threads in I/O wait); past it those updates are dropped and counted in pipetrace.agent.accumulator.lost.",
    ),
    (
        "probes.usage_wait",
        "How long an exited process waits for the kernel's report of its usage (sent when its parent reaps it) before the figures taken at its exit stand in.",
    ),
    (
        "probes.strict",
        "Refuse to start without eBPF instead of falling back to polling /proc.",
    ),
    (
        "probes.poll_interval",
        "How often /proc is read when falling back to polling (shorter processes may be missed).",
    ),
    (
        "probes.scope_cgroup",
        "Watch only the processes in this cgroup and below (a path as /proc/PID/cgroup shows it; `..`: the cgroup around the agent's own), as a sidecar beside one container, pod or Slurm step; null: the whole node.",
    ),
    ("export", "Where and how spans and metrics leave."),
    (
        "export.otlp",
        "The OTLP backend (OTEL_EXPORTER_OTLP_*); none set: the file below.",
    ),
    (
        "export.otlp.endpoint",
        "Base endpoint, e.g. http://localhost:4317 (gRPC) or :4318 (HTTP, /v1/traces and /v1/metrics appended) (OTEL_EXPORTER_OTLP_ENDPOINT).",
    ),
    (
        "export.otlp.protocol",
        "grpc or http/protobuf (OTEL_EXPORTER_OTLP_PROTOCOL); null: grpc.",
    ),
    (
        "export.otlp.headers",
        "Headers sent with every export, e.g. an API key (OTEL_EXPORTER_OTLP_HEADERS).",
    ),
    (
        "export.otlp.timeout",
        "How long one export may take (OTEL_EXPORTER_OTLP_TIMEOUT); null: {otlp_timeout}.",
    ),
    (
        "export.otlp.compression",
        "none, gzip or zstd (OTEL_EXPORTER_OTLP_COMPRESSION); null: none.",
    ),
    (
        "export.otlp.certificate",
        "PEM file of the CA that signed the backend's certificate (OTEL_EXPORTER_OTLP_CERTIFICATE).",
    ),
    (
        "export.otlp.client_key",
        "PEM private key for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_KEY).",
    ),
    (
        "export.otlp.client_certificate",
        "PEM certificate chain for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE).",
    ),
    (
        "export.otlp.traces",
        "Settings for traces only (OTEL_EXPORTER_OTLP_TRACES_*), over the ones above; its endpoint is used as is.",
    ),
    ("export.otlp.traces.endpoint", "Full URL traces go to."),
    (
        "export.otlp.traces.protocol",
        "grpc or http/protobuf, for traces.",
    ),
    (
        "export.otlp.traces.headers",
        "Headers sent with trace exports.",
    ),
    (
        "export.otlp.traces.timeout",
        "How long one trace export may take.",
    ),
    (
        "export.otlp.traces.compression",
        "none, gzip or zstd, for traces.",
    ),
    (
        "export.otlp.traces.certificate",
        "CA of the traces backend, PEM.",
    ),
    (
        "export.otlp.traces.client_key",
        "Private key for mutual TLS with the traces backend, PEM.",
    ),
    (
        "export.otlp.traces.client_certificate",
        "Certificate chain for mutual TLS with the traces backend, PEM.",
    ),
    (
        "export.otlp.metrics",
        "Settings for metrics only (OTEL_EXPORTER_OTLP_METRICS_*), over the ones above; its endpoint is used as is.",
    ),
    ("export.otlp.metrics.endpoint", "Full URL metrics go to."),
    (
        "export.otlp.metrics.protocol",
        "grpc or http/protobuf, for metrics.",
    ),
    (
        "export.otlp.metrics.headers",
        "Headers sent with metric exports.",
    ),
    (
        "export.otlp.metrics.timeout",
        "How long one metric export may take.",
    ),
    (
        "export.otlp.metrics.compression",
        "none, gzip or zstd, for metrics.",
    ),
    (
        "export.otlp.metrics.certificate",
        "CA of the metrics backend, PEM.",
    ),
    (
        "export.otlp.metrics.client_key",
        "Private key for mutual TLS with the metrics backend, PEM.",
    ),
    (
        "export.otlp.metrics.client_certificate",
        "Certificate chain for mutual TLS with the metrics backend, PEM.",
    ),
    (
        "export.file",
        "OTLP JSON lines file; metrics and the report go beside it. Written when set, and by default when no endpoint is set (pipetrace run: {run_trace_file}; the agent: {agent_trace_file}).",
    ),
    (
        "export.limits",
        "OpenTelemetry's span and attribute limits, as its OTEL_*_LIMIT variables name them, applied as spans are encoded (the file and OTLP alike). A value cut to its length is listed in the span's (event's, link's) pipetrace.attributes.truncated; attributes, events and links past a count are dropped and counted in the span's dropped counts. Grafana Tempo cuts values over its max_attribute_bytes (2048 by default): set attribute_value_length: 2048 (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=2048) to cut them here, marked.",
    ),
    (
        "export.limits.attribute_value_length",
        "Bytes of a string value (and of each string of an array) at most, cut at a UTF-8 character boundary (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT); null: no limit, the specification's default.",
    ),
    (
        "export.limits.attribute_count",
        "Attributes per span, event and link at most (OTEL_ATTRIBUTE_COUNT_LIMIT); null: {default_count}.",
    ),
    (
        "export.limits.span_attribute_value_length",
        "As attribute_value_length, for spans (their events and links too), over it (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT).",
    ),
    (
        "export.limits.span_attribute_count",
        "Attributes per span, over attribute_count (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT).",
    ),
    (
        "export.limits.span_event_count",
        "Events per span (OTEL_SPAN_EVENT_COUNT_LIMIT); null: {default_count}.",
    ),
    (
        "export.limits.span_link_count",
        "Links per span (OTEL_SPAN_LINK_COUNT_LIMIT); null: {default_count}.",
    ),
    (
        "export.limits.event_attribute_count",
        "Attributes per span event, over attribute_count (OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT).",
    ),
    (
        "export.limits.link_attribute_count",
        "Attributes per span link, over attribute_count (OTEL_LINK_ATTRIBUTE_COUNT_LIMIT).",
    ),
    (
        "export.queue_spans",
        "Finished spans waiting to be batched, at most; past it, spans are dropped and counted.",
    ),
    (
        "export.queue_bytes",
        "Encoded batches waiting to be sent, at most, traces and metrics each; past it they go to the spool, or are dropped and counted.",
    ),
    ("export.batch_spans", "Spans per export request, at most."),
    (
        "export.batch_timeout",
        "How long a span waits for its batch to fill.",
    ),
    (
        "export.flush_timeout",
        "How long pipetrace run (and a stopping agent) waits at the end for telemetry to leave.",
    ),
    (
        "export.retry",
        "Retries of exports the backend refused for a while (OTLP's retryable answers), with exponential backoff.",
    ),
    ("export.retry.enabled", "Retry at all."),
    (
        "export.retry.initial_interval",
        "The first wait before a retry.",
    ),
    (
        "export.retry.max_interval",
        "The longest wait between retries.",
    ),
    (
        "export.spool",
        "Batches that could not be sent, kept on disk (bounded, every drop counted) and sent later by this or the next pipetrace (also after a restart).",
    ),
    (
        "export.spool.enabled",
        "Keep batches on disk at all (off: what cannot be sent is dropped and counted).",
    ),
    (
        "export.spool.dir",
        "Where; null: spool/ in diagnosis.state_dir (no spool when that is null too). A default folder that cannot be used is warned of and left out; one set here stops pipetrace with exit code 2 (125 under pipetrace run).",
    ),
    (
        "export.spool.max_size",
        "Past this, new batches are dropped and counted.",
    ),
    (
        "export.memory_limit",
        "Past this resident memory, telemetry waiting in memory goes to the spool, or is dropped and counted.",
    ),
    (
        "export.max_trace_bytes",
        "A run's trace at most, as OTLP protobuf (Grafana Tempo's max_bytes_per_trace is 5000000 by default). Past half of it, repeated short spans fold; what still does not fit goes into further traces linked to the run span (docs/trace-size.md). 0: no limit.",
    ),
    (
        "export.fold_under",
        "Spans shorter than this may fold with their repeats once a trace is past half its budget; longer ones keep their own span.",
    ),
    ("attribution", "What becomes a run, a task and a tool."),
    (
        "attribution.engines",
        "Engines whose processes start runs in agent mode, each named from the engine's own records; unset, every engine in [engines.md](engines.md) (Slurm jobs and Argo workflows always start runs). A name pipetrace does not model is an error.",
    ),
    (
        "attribution.run_rules",
        "Processes that start a run in agent mode besides the engines: a match (executable, argv regex, cwd regex) and a name template ({tool}, {executable}, {argv0}..{argv9}, {cwd}, {cwd_name}).",
    ),
    (
        "attribution.task_rules",
        "Processes of a run that start a task, before the engine decides: a match and a name template, as run_rules.",
    ),
    (
        "redaction",
        "Secrets in command lines and paths, replaced before anything leaves.",
    ),
    (
        "redaction.enabled",
        "Redact at all (tokens, passwords, keys and URLs with credentials by default).",
    ),
    (
        "redaction.patterns",
        "Extra regexes; every match becomes [REDACTED].",
    ),
    (
        "files",
        "The files each tool opened for reading and for writing (paths only, never contents).",
    ),
    (
        "files.enabled",
        "Capture them at all (two syscall tracepoints on every openat of the node; see docs/performance.md for the cost).",
    ),
    (
        "files.max_per_tool",
        "Paths listed per tool for reading and for writing, each; the rest are counted.",
    ),
    (
        "files.max_per_task",
        "Inputs and outputs listed per task, each; the rest are counted.",
    ),
    (
        "files.system",
        "Keep system paths too (/proc, /sys, /dev, /usr, /etc, shared libraries, caches, engines' bookkeeping).",
    ),
    (
        "files.include",
        "Globs a path must match to be kept (empty: every path).",
    ),
    (
        "files.exclude",
        "Globs of paths left out, beside the system ones.",
    ),
    ("summary", "What pipetrace run prints on the terminal."),
    (
        "summary.max_tasks",
        "Tasks the end-of-run tree lists one by one; a run of more folds its jobs per task (`run --all` lists them all).",
    ),
    (
        "summary.max_tools_per_task",
        "Tools listed under each task in that tree.",
    ),
    (
        "summary.live",
        "On a terminal, the running tasks in the terminal's last lines while the command runs, updated every second (its output scrolls above them).",
    ),
    (
        "summary.live_tasks",
        "Running tasks the live view lists before it says \"and N more\".",
    ),
    (
        "metrics",
        "Live OTLP metrics of running tasks and tools, and the agent's own.",
    ),
    (
        "metrics.enabled",
        "Export metrics at all (stalls are judged either way).",
    ),
    (
        "metrics.interval",
        "How often running processes are sampled and metrics exported (OTEL_METRIC_EXPORT_INTERVAL, milliseconds there).",
    ),
    (
        "metrics.temporality",
        "cumulative or delta (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE).",
    ),
    (
        "metrics.max_series",
        "Attribute sets (pipeline, task, tool) kept at most; the rest share one overflow series, so no total is lost.",
    ),
    (
        "metrics.prometheus",
        "The same metrics served for Prometheus to scrape, named as Prometheus' own OTLP translation names them, so one set of rules and dashboards serves both paths.",
    ),
    (
        "metrics.prometheus.listen",
        "Address:port of a GET /metrics endpoint (OpenMetrics text), e.g. 127.0.0.1:9464; null: none. Needs metrics.enabled.",
    ),
    (
        "metrics.prometheus.promote_resource_attributes",
        "Resource attributes put on every series as labels (dots become underscores), as Prometheus' otlp.promote_resource_attributes does; every resource attribute is on target_info.",
    ),
    (
        "metrics.prometheus.keep_ended",
        "How long the counters of a series whose work ended (a tool killed a second after it started) stay at their final value: at least two scrape intervals, so that a scrape sees it and alerts on counters fire.",
    ),
    (
        "diagnosis",
        "Verdicts on tasks and tools: bottlenecks, rightsizing, stalls, slower than usual.",
    ),
    (
        "diagnosis.min_wall",
        "Tasks and tools that ran shorter than this get no verdict.",
    ),
    (
        "diagnosis.cpu_bound",
        "cpu-bound: runnable CPUs (on a CPU or waiting for one) per allocated CPU at least this.",
    ),
    (
        "diagnosis.io_bound",
        "io-bound: seconds waiting for block I/O per second at least this.",
    ),
    (
        "diagnosis.memory_bound",
        "memory-bound: seconds waiting for memory (reclaim, swap, thrashing) per second at least this.",
    ),
    (
        "diagnosis.network_bound_bytes_per_s",
        "network-bound: bytes sent and received per second at least this, with the CPU not busy.",
    ),
    (
        "diagnosis.idle_below",
        "idle: busy CPUs per allocated CPU below this, with no wait above its threshold.",
    ),
    (
        "diagnosis.over_allocation",
        "over-allocated: a task used at most this share of the CPUs or memory it asked for.",
    ),
    (
        "diagnosis.headroom",
        "Headroom added to observed peaks in recommendations.",
    ),
    (
        "diagnosis.stall_after",
        "stall: a running task or tool with no CPU, no I/O and no process starting or ending for this long.",
    ),
    (
        "diagnosis.state_dir",
        "Where task history is kept, per pipeline and task, with the last 50 runs of `pipetrace run` for `pipetrace compare` (and the agent's lock: one agent per state directory); null: no history.",
    ),
    (
        "diagnosis.history_runs",
        "Runs of each task the history keeps.",
    ),
    (
        "diagnosis.slower_factor",
        "slower than usual: at least this many times the median of the task's earlier runs (and min_wall longer), once 3 runs have it.",
    ),
    (
        "diagnosis.gpu_bound",
        "gpu-bound: its kernels kept the GPU's streaming multiprocessors busy at least this share of its time on the GPU (NVML's per-process samples).",
    ),
    (
        "diagnosis.gpu_starved_below",
        "gpu-starved: it held a GPU whose SMs were busy less than this share of the time, while its CPU, storage or memory was the limit: the GPU waits on the rest.",
    ),
    (
        "cost",
        "A price on runs, tasks and tools; off until prices has an entry.",
    ),
    ("cost.currency", "The currency the prices are in."),
    (
        "cost.host_type",
        "Which row of prices applies on this host; default: the row of the detected instance type (host.type) when there is one, else the default row.",
    ),
    (
        "cost.prices",
        "Rows by host type: cpu_hour (per CPU-hour) and gib_hour (per GiB-hour of memory).",
    ),
    (
        "cost.centre_attribute",
        "The resource attribute (resource_attributes, OTEL_RESOURCE_ATTRIBUTES) whose value is the cost centre (pipetrace.cost.centre) of what runs here, where no Slurm account or container label says.",
    ),
    (
        "cost.centre_label",
        "The container label whose value is the cost centre of what runs in that container.",
    ),
    (
        "report",
        "The self-contained HTML report pipetrace run writes at the end.",
    ),
    ("report.html", "Write it at all."),
    (
        "report.path",
        "Where; null: beside the trace file (X.report.html), or ./pipetrace-<time>.report.html when traces go only over OTLP.",
    ),
    (
        "report.failure_log_lines",
        "The last lines of a failed job's own log (Snakemake's log: files, Nextflow's .command.err) under its finding on the terminal, the page and report --json; 0: pipetrace reads no log. Redacted as command lines are; never exported over OTLP.",
    ),
    (
        "sizing",
        "Which cloud machines would have run each task and the whole run, cheapest first, from a table of instance shapes and on-demand and spot prices (docs/sizing.md); never a network call.",
    ),
    (
        "sizing.enabled",
        "Show the machines in the end-of-run table and the report.",
    ),
    (
        "sizing.instances",
        "Your own table of instances (the shipped table's CSV format, docs/sizing.md); null: the table shipped with pipetrace.",
    ),
    (
        "sizing.clouds",
        "Choose only from these clouds (aws, gcp, azure, or your table's own); empty: all.",
    ),
    (
        "sizing.regions",
        "Choose only from these regions (us-east-1, europe-west4, eastus, ...); empty: all.",
    ),
    ("host", "The node itself, as a node agent judges it."),
    (
        "host.idle_after",
        "Idle (no run, almost no CPU) for this long before pipetrace.host.idle leaves 0.",
    ),
    (
        "host.idle_cpu_below",
        "The whole host's busy CPUs (averaged over each metrics.interval) below which it counts as idle.",
    ),
    (
        "cpu_policy",
        "The scheduling policy of pipetrace's own threads: batch (SCHED_BATCH: the same fair share of CPU, but its wake-ups never preempt the pipeline's processes; the ring buffer holds events until a CPU is free) or normal (SCHED_OTHER). Applied only when pipetrace starts with the default policy; the command of pipetrace run starts with the policy pipetrace started with.",
    ),
    (
        "gpu",
        "Per-process GPU figures (which GPUs, GPU memory, SM and memory-controller utilisation) from NVIDIA's driver, looked at only while a run's process holds a GPU context.",
    ),
    (
        "gpu.enabled",
        "Load NVML at start when it is there; without an NVIDIA driver nothing changes.",
    ),
    (
        "gpu.library",
        "The NVML library: a name the dynamic loader searches for, or a path.",
    ),
    (
        "self_telemetry",
        "pipetrace's own work, as telemetry of its own beside the pipelines'.",
    ),
    (
        "self_telemetry.traces",
        "Export pipetrace's own spans (probe load and attach, each OTLP export attempt with its retries, spool replays) over the same OTLP connection as the traces, as service and instrumentation scope pipetrace.self: never inside a pipeline's trace, never to the trace file. Needs an OTLP traces endpoint (PIPETRACE_SELF_TELEMETRY__TRACES=true).",
    ),
];

/// The key's comment, its defaults named ({name}) filled from the code.
pub(crate) fn comment(path: &str) -> Option<String> {
    let text = KEYS.iter().find(|(k, _)| *k == path).map(|(_, c)| *c)?;
    Some(crate::defaults::fill(text))
}

/// `value` (the defaults) as YAML, each key under its comment, nested sections indented.
pub(crate) fn commented(value: &Value) -> String {
    let mut out = String::new();
    if let Value::Mapping(m) = value {
        section(m, "", 0, &mut out);
    }
    out
}

fn section(m: &serde_yaml::Mapping, path: &str, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    for (k, v) in m {
        let key = k.as_str().unwrap_or_default();
        let full = match path {
            "" => key.to_string(),
            p => format!("{p}.{key}"),
        };
        if let Some(c) = comment(&full) {
            for line in wrap(&c, 92 - pad.len()) {
                out.push_str(&format!("{pad}# {line}\n"));
            }
        }
        match v {
            Value::Mapping(inner) if !inner.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                section(inner, &full, depth + 1, out);
            }
            other => {
                let text = serde_yaml::to_string(other).unwrap_or_default();
                let text = text.trim_end();
                // A sequence goes in block form even with one entry (`key: - a` is no YAML).
                let block = matches!(other, Value::Sequence(s) if !s.is_empty());
                match block || text.contains('\n') {
                    true => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        for l in text.lines() {
                            out.push_str(&format!("{pad}{l}\n"));
                        }
                    }
                    false => out.push_str(&format!("{pad}{key}: {text}\n")),
                }
            }
        }
        if depth == 0 {
            out.push('\n');
        }
    }
}

/// Words of `text` in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in text.split_whitespace() {
        let last = lines.last_mut().expect("one line");
        if !last.is_empty() && last.len() + 1 + w.len() > width {
            lines.push(w.to_string());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(w);
        }
    }
    lines
}

#[cfg(test)]
mod tests;
