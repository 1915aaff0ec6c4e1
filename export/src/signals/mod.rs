//! Signals: finished runs, tasks and tools as OpenTelemetry spans, with the kernel's times.
mod containers;
mod diagnosis;
mod files;
pub mod fold;
pub mod ids;
pub mod metrics;
mod spans;
mod started;
mod task;
mod usage;
pub mod who;

use std::borrow::Cow;

use opentelemetry::{
    KeyValue,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pipetrace_semconv::attr;

use pipetrace_core::accounting::Measured;
use pipetrace_core::attribution::{
    EngineInfo, EntityRef, Finished, Shared, Totals, Verdict, naming,
};
use pipetrace_core::diagnosis::Judgement;
use pipetrace_core::event::ProcKey;
use pipetrace_core::machine::HostInfo;
use pipetrace_core::redact::Redactor;
use pipetrace_core::tree::{Exit, Proc};

#[cfg(test)]
pub(crate) mod tests_support;

/// What a span stands for: the judgement's word for it, which span building decides.
use pipetrace_core::judgement::Kind;

/// A span ready for export, with what the terminal summary needs to place it.
#[derive(Clone, Debug)]
pub struct ReadySpan {
    pub kind: Kind,
    pub span: SpanData,
}

/// Where a span sits: its trace, its own id, its parent's (INVALID for a root).
struct Ids {
    trace: TraceId,
    span: SpanId,
    parent: SpanId,
    /// The parent is the engine's span, not one of ours (a joined trace).
    remote: bool,
}

/// W3C `traceparent` (`00-<trace>-<span>-<flags>`): the trace and span it names.
pub(crate) fn parse_traceparent(tp: &str) -> Option<(TraceId, SpanId)> {
    let mut parts = tp.trim().split('-');
    let (_version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    let trace = TraceId::from_hex(trace)
        .ok()
        .filter(|t| *t != TraceId::INVALID)?;
    let span = SpanId::from_hex(span)
        .ok()
        .filter(|s| *s != SpanId::INVALID)?;
    Some((trace, span))
}

pub struct SpanBuilder {
    host: HostInfo,
    redactor: Redactor,
    scope: opentelemetry::InstrumentationScope,
    measured: Measured,
    diagnosis: pipetrace_config::Diagnosis,
    cost: pipetrace_config::Cost,
    /// Who ran each process, and who pays.
    users: Option<who::Users>,
    centre: who::Centre,
    /// Runs joined to the engine's own trace: its trace, and the engine's span of the run.
    joined: std::collections::HashMap<ProcKey, (TraceId, SpanId)>,
    /// Runs every node names alike (a Slurm job): ids derived from that identity.
    shared: std::collections::HashMap<ProcKey, Shared>,
}

const SIGNALS: [&str; 32] = [
    "",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

pub(crate) fn signal_name(sig: u32) -> String {
    SIGNALS
        .get(sig as usize)
        .filter(|s| !s.is_empty())
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("SIG{sig}"))
}

fn wall_ns(p: &Proc) -> u64 {
    p.exit
        .as_ref()
        .map_or(0, |e| e.time_ns.saturating_sub(p.start_ns))
}

/// A tool's or task's status: a stop its own pipeline chose (a signal from a process of its
/// run) is no failure; its `pipetrace.signal` event names the sender.
/// A task's (or its own process's) status where the engine's listed exit codes may judge
/// it: a code listed as success is no error, one listed as a failure is one, even 0.
fn judged_status(p: &Proc, what: &str, verdict: Option<Verdict>) -> Status {
    match verdict {
        _ if p.ended_on_purpose() => Status::Unset,
        Some(Verdict::Success) => Status::Ok,
        Some(v) => {
            let end = match p.exit.as_ref().and_then(Exit::signal) {
                Some(sig) => format!("killed by {}", signal_name(sig)),
                None => format!("exited with code {}", p.exit.as_ref().map_or(0, Exit::code)),
            };
            Status::error(format!(
                "{what} {end}, which its engine counts as {}",
                v.word()
            ))
        }
        None => status_of(p.exit.as_ref(), what),
    }
}

fn status_of(exit: Option<&Exit>, what: &str) -> Status {
    match exit {
        Some(e) if e.signal().is_some() => Status::error(format!(
            "{what} killed by {}",
            signal_name(e.signal().unwrap_or_default())
        )),
        Some(e) if e.code() != 0 => Status::error(format!("{what} exited with code {}", e.code())),
        Some(_) => Status::Ok,
        None => Status::Unset,
    }
}

impl SpanBuilder {
    pub fn new(host: HostInfo, redactor: Redactor) -> Self {
        let scope = opentelemetry::InstrumentationScope::builder("pipetrace")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Self {
            host,
            redactor,
            scope,
            measured: Measured::default(),
            diagnosis: Default::default(),
            cost: Default::default(),
            users: None,
            centre: Default::default(),
            joined: Default::default(),
            shared: Default::default(),
        }
    }

    /// Prices for the cost attributes (none configured: no cost). Without a configured
    /// `host_type`, the host's detected instance type chooses the row.
    pub fn with_cost(mut self, c: pipetrace_config::Cost) -> Self {
        let detected = self.host.cloud.host_type.as_deref();
        self.cost = c.on_host(detected);
        if !self.cost.prices.is_empty() && self.cost.price().is_none() {
            log::warn!(
                "no cost: cost.prices has no row for this host (type {}) and no `{}` row; \
                 set cost.host_type",
                detected.unwrap_or("not detected"),
                pipetrace_config::Cost::DEFAULT_HOST_TYPE
            );
        }
        self
    }

    /// Users named by the host's database; cost centres as configured.
    pub fn with_who(mut self, host: pipetrace_core::port::SharedHost, centre: who::Centre) -> Self {
        self.users = Some(who::Users::new(host));
        self.centre = centre;
        self
    }

    /// Thresholds for the bottleneck and rightsizing verdicts.
    pub fn with_diagnosis(mut self, d: pipetrace_config::Diagnosis) -> Self {
        self.diagnosis = d;
        self
    }

    pub fn measured(&self) -> Measured {
        self.measured
    }

    /// What the probes measure on this kernel (absent counters are left out of spans).
    pub fn with_measured(mut self, measured: Measured) -> Self {
        self.measured = measured;
        self
    }

    pub fn host(&self) -> &HostInfo {
        &self.host
    }

    fn span_id(&self, r: EntityRef) -> SpanId {
        let (what, key) = match r {
            EntityRef::Run(k) => ("run", k),
            EntityRef::Task(k) => ("task", k),
            EntityRef::Tool(k) => ("tool", k),
            EntityRef::Engine(k) => ("engine", k),
        };
        // The run span of a run named alike everywhere is the same on every node; a part of
        // one (a step on this node) has a span of its own under it.
        if let EntityRef::Run(k) = r
            && let Some(s) = self.shared.get(&k).filter(|s| s.part.is_none())
        {
            return SpanId::from_bytes(ids::of_identity(&s.identity).1);
        }
        SpanId::from_bytes(ids::span_id(&self.host.boot_id, what, key))
    }

    pub fn trace_id(&self, run: ProcKey) -> TraceId {
        if let Some(s) = self.shared.get(&run) {
            return TraceId::from_bytes(ids::of_identity(&s.identity).0);
        }
        match self.joined.get(&run) {
            Some((trace, _)) => *trace,
            None => TraceId::from_bytes(ids::trace_id(&self.host.boot_id, run)),
        }
    }

    /// The run is named alike on every node (`shared.identity`): its trace and run span ids
    /// derive from it. Call before any of its spans is built.
    pub fn share(&mut self, run: ProcKey, shared: Shared) {
        self.shared.insert(run, shared);
    }

    /// The run's spans go into the engine's own trace (`traceparent` of the engine's span of
    /// the run), its run span under the engine's. Call before any of its spans is built.
    pub fn join(&mut self, run: ProcKey, traceparent: &str) {
        if let Some(ctx) = parse_traceparent(traceparent) {
            self.joined.insert(run, ctx);
        }
    }

    /// The run's spans are all built: forget its join.
    pub fn forget(&mut self, run: ProcKey) {
        self.joined.remove(&run);
        self.shared.remove(&run);
    }

    pub(crate) fn run_id(&self, run: ProcKey) -> String {
        if let Some(s) = self.shared.get(&run) {
            return ids::hex(&ids::of_identity(&s.identity).0);
        }
        ids::hex(&ids::trace_id(&self.host.boot_id, run))
    }

    fn command_line(&self, argv: &[String]) -> String {
        naming::command_line(&self.redactor.argv(argv))
    }

    /// Attributes every span of a process carries.
    fn process_attrs(&self, p: &Proc, image_first: bool, out: &mut Vec<KeyValue>) {
        out.push(KeyValue::new(attr::PROCESS_PID, p.key.pid as i64));
        let image = if image_first {
            p.first_image.as_ref()
        } else {
            p.image.as_ref()
        };
        if let Some(img) = image {
            out.push(KeyValue::new(
                attr::PROCESS_COMMAND_LINE,
                self.command_line(&img.argv),
            ));
        }
        if let Some(e) = p.exit.as_ref().filter(|e| e.known()) {
            out.push(KeyValue::new(attr::PROCESS_EXIT_CODE, e.code()));
            if let Some(sig) = e.signal() {
                out.push(KeyValue::new(attr::PROCESS_SIGNAL, signal_name(sig)));
            }
        }
        let mode = if p.seeded { "procfs" } else { "ebpf" };
        out.push(KeyValue::new(attr::COLLECTION_MODE, mode));
        if let Some(c) = &p.container {
            usage::container_attrs(c, out);
        }
        who::who_attrs(p, self.users.as_ref(), &self.centre, out);
    }

    fn span(
        &self,
        ids: Ids,
        name: String,
        p: &Proc,
        attributes: Vec<KeyValue>,
        status: Status,
    ) -> SpanData {
        let events = diagnosis::end_events(p, &self.host);
        let times = (p.start_ns, p.end_ns());
        self.span_at(ids, name, times, events, attributes, status)
    }

    fn span_at(
        &self,
        ids: Ids,
        name: String,
        (start, end): (u64, u64),
        events: Vec<opentelemetry::trace::Event>,
        attributes: Vec<KeyValue>,
        status: Status,
    ) -> SpanData {
        let mut span_events = SpanEvents::default();
        span_events.events = events;
        SpanData {
            span_context: SpanContext::new(
                ids.trace,
                ids.span,
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: ids.parent,
            parent_span_is_remote: ids.remote,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(name),
            start_time: self.host.system_time(start),
            end_time: self.host.system_time(end.max(start)),
            attributes,
            dropped_attributes_count: 0,
            events: span_events,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }

    /// The span of what finished, with diagnosis's verdicts on it.
    pub fn build(&self, f: &Finished, judged: &Judgement) -> ReadySpan {
        match f {
            Finished::Tool {
                proc,
                run,
                parent,
                verdict,
                alternatives,
            } => {
                let placed = (*parent, *verdict, alternatives.as_slice());
                self.tool_span(proc, *run, placed, &judged.stalls)
            }
            Finished::Task {
                proc,
                run,
                info,
                usage,
            } => self.task_span(proc, *run, info, (usage, judged)),
            Finished::Engine { run, info, usage } => self.engine_span(*run, info, usage),
            Finished::Run { proc, info, usage } => self.run_span(proc, info, usage),
        }
    }

    /// The run's engine span: its helpers' count, time and summed usage.
    fn engine_span(&self, run: ProcKey, info: &EngineInfo, totals: &Totals) -> ReadySpan {
        let mut a = vec![
            KeyValue::new(attr::CICD_PIPELINE_RUN_ID, self.run_id(run)),
            KeyValue::new(attr::ENGINE_HELPERS, i64::from(info.helpers)),
            KeyValue::new(attr::ENGINE_HELPERS_FAILED, i64::from(info.failed)),
        ];
        let wall = info.end_ns.saturating_sub(info.start_ns);
        let (m, d) = (self.measured, &self.diagnosis);
        usage::totals_attrs(totals, wall, None, m, &self.host.gpus, d, &mut a);
        let ids = Ids {
            trace: self.trace_id(run),
            span: self.span_id(EntityRef::Engine(run)),
            parent: self.span_id(EntityRef::Run(run)),
            remote: false,
        };
        let name = format!("{} (engine)", info.engine);
        let times = (info.start_ns, info.end_ns);
        let span = self.span_at(ids, name, times, Vec::new(), a, Status::Ok);
        ReadySpan {
            kind: Kind::Engine,
            span,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_and_bad_ones_do_not() {
        let (t, s) =
            parse_traceparent("00-037c10a2d2a81d07d51035f8ed73cf49-df49d4b58fdd35f4-03").unwrap();
        assert_eq!(t.to_string(), "037c10a2d2a81d07d51035f8ed73cf49");
        assert_eq!(s.to_string(), "df49d4b58fdd35f4");
        for bad in [
            "",
            "00-xyz-df49d4b58fdd35f4-01",
            "00-00000000000000000000000000000000-df49d4b58fdd35f4-01",
            "00-037c10a2d2a81d07d51035f8ed73cf49",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
