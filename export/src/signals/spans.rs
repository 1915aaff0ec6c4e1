//! The span of each finished entity: a tool, a task, a run (or a part of a run rooted on
//! another node, which is a task of it).
use opentelemetry::{
    KeyValue, Value,
    trace::{SpanId, Status},
};
use pipetrace_semconv::attr;

use super::{
    Ids, Kind, ReadySpan, SpanBuilder, containers, diagnosis, files, ids, judged_status,
    parse_traceparent, status_of,
    task::{task_attrs, task_span_name},
    usage, wall_ns,
};
use pipetrace_core::attribution::{EntityRef, RunInfo, TaskInfo, Totals, Verdict, naming};
use pipetrace_core::diagnosis::{Judgement, Stall};
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Proc;

impl SpanBuilder {
    pub(super) fn tool_span(
        &self,
        p: &Proc,
        run: ProcKey,
        (parent, verdict, alternatives): (EntityRef, Option<Verdict>, &[String]),
        stalls: &[Stall],
    ) -> ReadySpan {
        let img = p.image.as_ref();
        let exe = img.map(|i| naming::executable_name(&i.path).to_string());
        let tool = naming::proc_tool_name(p);
        // A tool span has about 30 attributes: room for them at once, not grown twice.
        let mut a = Vec::with_capacity(40);
        a.push(KeyValue::new(attr::TOOL_NAME, tool.clone()));
        a.push(KeyValue::new(attr::PROCESS_PARENT_PID, p.ppid as i64));
        if let (Some(img), Some(exe)) = (img, exe) {
            a.push(KeyValue::new(attr::PROCESS_EXECUTABLE_NAME, exe));
            a.push(KeyValue::new(
                attr::PROCESS_EXECUTABLE_PATH,
                img.path.clone(),
            ));
            if img.argv_truncated {
                a.push(KeyValue::new(attr::PROCESS_ARGV_TRUNCATED, true));
            }
        } else {
            a.push(KeyValue::new(attr::PROCESS_FORKED_ONLY, true));
        }
        if !p.earlier.is_empty() {
            let names: Vec<opentelemetry::StringValue> = p
                .earlier
                .iter()
                .map(|path| naming::executable_name(path).to_string().into())
                .collect();
            a.push(KeyValue::new(
                attr::PROCESS_IMAGES,
                Value::Array(names.into()),
            ));
        }
        if !alternatives.is_empty() {
            let ids = alternatives.iter().map(|id| id.clone().into());
            let ids: Vec<opentelemetry::StringValue> = ids.collect();
            a.push(KeyValue::new(
                attr::TOOL_TASK_RUN_ALTERNATIVES,
                Value::Array(ids.into()),
            ));
        }
        self.process_attrs(p, false, &mut a);
        match &p.usage {
            Some(u) => {
                usage::usage_attrs(
                    u,
                    u.peak_bytes(),
                    self.measured,
                    self.host.gpus.get(),
                    &mut a,
                );
                let (m, d) = (self.measured, &self.diagnosis);
                usage::bottleneck_attrs(u, wall_ns(p), 1.0, m, d, &mut a);
                let (cpu, peak) = (u.cpu_ns(), u.peak_bytes());
                usage::cost_attrs(&self.cost, cpu, peak, wall_ns(p), None, &mut a);
                a.push(KeyValue::new(
                    attr::MEMORY_MAXRSS,
                    i64::try_from(u.maxrss_bytes).unwrap_or(i64::MAX),
                ));
                usage::provenance_attrs(u, &mut a);
            }
            None => a.push(KeyValue::new(attr::USAGE_MISSING, 1i64)),
        }
        files::tool_attrs(p.files.as_deref(), &self.redactor, &mut a);
        let status = match diagnosis::end_reason(p, &tool) {
            Some(why) => Status::error(why),
            None => judged_status(p, &tool, verdict),
        };
        let mut span = self.span(
            Ids {
                trace: self.trace_id(run),
                span: self.span_id(EntityRef::Tool(p.key)),
                parent: self.span_id(parent),
                remote: false,
            },
            tool,
            p,
            a,
            status,
        );
        span.events
            .events
            .extend(diagnosis::stall_events(stalls, &self.host));
        ReadySpan {
            kind: Kind::Tool,
            span,
        }
    }

    pub(super) fn task_span(
        &self,
        p: &Proc,
        run: ProcKey,
        info: &TaskInfo,
        (totals, judged): (&Totals, &Judgement),
    ) -> ReadySpan {
        // A task span has 30 attributes or more: room for them at once, not grown four times.
        let mut a = Vec::with_capacity(48);
        a.extend([
            KeyValue::new(attr::CICD_PIPELINE_TASK_NAME, info.name.clone()),
            KeyValue::new(attr::CICD_PIPELINE_TASK_RUN_ID, info.run_id.clone()),
            KeyValue::new(attr::CICD_PIPELINE_RUN_ID, self.run_id(run)),
        ]);
        task_attrs(info, &mut a);
        self.process_attrs(p, true, &mut a);
        let (m, d) = (self.measured, &self.diagnosis);
        let task = Some((info.name.as_str(), judged.quiet_ns));
        usage::totals_attrs(totals, wall_ns(p), task, m, &self.host.gpus, d, &mut a);
        let (cpu, peak) = (totals.rollup.totals.cpu_ns(), totals.rollup.peak_memory());
        let alloc = totals.allocation.as_ref();
        usage::cost_attrs(&self.cost, cpu, peak, wall_ns(p), alloc, &mut a);
        files::task_attrs(&totals.rollup.files, &self.redactor, &mut a);
        files::log_attrs(&info.logs, &self.redactor, &mut a);
        // Every task with a usual says it, so a report compares each task, not only the slow.
        if let Some(u) = &judged.usual {
            a.push(KeyValue::new(attr::HISTORY_USUAL_DURATION, u.usual_s));
            a.push(KeyValue::new(attr::HISTORY_RUNS, u.runs as i64));
        }
        let name = task_span_name(info);
        let what = format!("task {}", info.name);
        let status = match totals.rollup.oom_kills {
            0 => judged_status(p, &what, info.verdict(p)),
            n => Status::error(format!("{what}: {n} process(es) killed by the OOM killer")),
        };
        // Under the engine's own span of the task, where it is in this trace.
        let engines = (info.traceparent.as_deref())
            .and_then(parse_traceparent)
            .filter(|(t, _)| *t == self.trace_id(run));
        let mut span = self.span(
            Ids {
                trace: self.trace_id(run),
                span: self.span_id(EntityRef::Task(p.key)),
                parent: engines.map_or_else(|| self.span_id(EntityRef::Run(run)), |e| e.1),
                remote: engines.is_some(),
            },
            name,
            p,
            a,
            status,
        );
        span.events
            .events
            .extend(diagnosis::stall_events(&judged.stalls, &self.host));
        let by_container = &totals.rollup.containers;
        (span.events.events).extend(containers::lifecycle_events(by_container, &self.host));
        if let Some(slow) = judged.usual.as_ref().filter(|u| u.slower) {
            let at = p.end_ns();
            span.events
                .events
                .push(diagnosis::slower_event(slow, self.host.system_time(at)));
        }
        ReadySpan {
            kind: Kind::Task,
            span,
        }
    }

    pub(super) fn run_span(&self, p: &Proc, info: &RunInfo, totals: &Totals) -> ReadySpan {
        // A part of a run rooted on another node (a Slurm step, a Snakemake cluster
        // job here) is a task of it.
        let part = self.shared.get(&p.key).and_then(|s| s.part.clone());
        let mut a = match &part {
            Some(task) => {
                let mut a = vec![KeyValue::new(
                    attr::CICD_PIPELINE_TASK_NAME,
                    task.name.clone(),
                )];
                if !task.run_id.is_empty() {
                    let id = task.run_id.clone();
                    a.push(KeyValue::new(attr::CICD_PIPELINE_TASK_RUN_ID, id));
                }
                task_attrs(task, &mut a);
                a
            }
            None => vec![KeyValue::new(attr::CICD_PIPELINE_NAME, info.name.clone())],
        };
        a.extend([
            KeyValue::new(attr::CICD_PIPELINE_RUN_ID, self.run_id(p.key)),
            KeyValue::new(attr::RUN_ENGINE, info.engine.as_str()),
            KeyValue::new(attr::RUN_TASKS, info.tasks as i64),
            KeyValue::new(attr::RUN_TASKS_FAILED, info.failed as i64),
        ]);
        if let Some(label) = &info.label {
            a.push(KeyValue::new(attr::RUN_LABEL, label.clone()));
        }
        if let Some(p) = &info.progress {
            a.push(KeyValue::new(attr::RUN_TASKS_PLANNED, i64::from(p.total)));
            a.push(KeyValue::new(attr::RUN_TASKS_DONE, i64::from(p.done)));
            if p.cached > 0 {
                a.push(KeyValue::new(attr::RUN_TASKS_CACHED, i64::from(p.cached)));
            }
        }
        if let Some(v) = &info.engine_version {
            a.push(KeyValue::new(attr::RUN_ENGINE_VERSION, v.clone()));
        }
        if let Some(l) = &info.log {
            a.push(KeyValue::new(attr::RUN_LOG, l.clone()));
        }
        if let Some(m) = self.host.memory_bytes {
            a.push(KeyValue::new(attr::HOST_MEMORY, m as i64));
        }
        self.process_attrs(p, false, &mut a);
        // Where the run was started: its report names the directory it worked in.
        let cwd = (p.first_image.as_ref().or(p.image.as_ref())).and_then(|i| i.cwd.as_ref());
        if let Some(dir) = cwd {
            let dir = self.redactor.text(&dir.to_string_lossy());
            a.push(KeyValue::new(attr::PROCESS_WORKING_DIRECTORY, dir));
        }
        let (m, d) = (self.measured, &self.diagnosis);
        usage::totals_attrs(totals, wall_ns(p), None, m, &self.host.gpus, d, &mut a);
        let (cpu, peak) = (totals.rollup.totals.cpu_ns(), totals.rollup.peak_memory());
        usage::cost_attrs(&self.cost, cpu, peak, wall_ns(p), None, &mut a);
        // The command's (the engine's) own exit code decides; only where it is not
        // known do the tasks.
        let status = match p.exit.as_ref().filter(|e| e.known()) {
            Some(e) => match status_of(Some(e), "run") {
                Status::Error { description } if info.failed > 0 => Status::error(format!(
                    "{description}; {} of {} tasks failed",
                    info.failed, info.tasks
                )),
                st => st,
            },
            None if info.failed > 0 => {
                Status::error(format!("{} of {} tasks failed", info.failed, info.tasks))
            }
            None => status_of(p.exit.as_ref(), "run"),
        };
        let (parent, remote) = match (&part, self.shared.get(&p.key)) {
            (Some(_), Some(s)) => (SpanId::from_bytes(ids::of_identity(&s.identity).1), true),
            _ => match self.joined.get(&p.key) {
                Some(j) => (j.1, true),
                None => (SpanId::INVALID, false),
            },
        };
        let ids = Ids {
            trace: self.trace_id(p.key),
            span: self.span_id(EntityRef::Run(p.key)),
            parent,
            remote,
        };
        let (name, kind) = match (&part, &info.label) {
            (Some(task), _) => (task_span_name(task), Kind::Task),
            (None, Some(label)) => (format!("run {} ({label})", info.name), Kind::Run),
            (None, None) => (format!("run {}", info.name), Kind::Run),
        };
        let mut span = self.span(ids, name, p, a, status);
        let by_container = &totals.rollup.containers;
        (span.events.events).extend(containers::lifecycle_events(by_container, &self.host));
        ReadySpan { kind, span }
    }
}
