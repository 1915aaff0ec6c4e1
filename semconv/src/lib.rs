//! Names pipetrace emits, as constants. model/registry.yaml documents each one; the tests
//! keep this file and the registry equal, so a name cannot be emitted undocumented.
pub mod registry;

pub mod attr {
    pub const CICD_PIPELINE_NAME: &str = "cicd.pipeline.name";
    pub const CICD_PIPELINE_RUN_ID: &str = "cicd.pipeline.run.id";
    pub const CICD_PIPELINE_TASK_NAME: &str = "cicd.pipeline.task.name";
    pub const CICD_PIPELINE_TASK_RUN_ID: &str = "cicd.pipeline.task.run.id";
    pub const RUN_ENGINE: &str = "pipetrace.run.engine";
    pub const RUN_TASKS: &str = "pipetrace.run.tasks";
    pub const RUN_TASKS_FAILED: &str = "pipetrace.run.tasks_failed";
    pub const RUN_TASKS_PLANNED: &str = "pipetrace.run.tasks_planned";
    pub const RUN_TASKS_DONE: &str = "pipetrace.run.tasks_done";
    pub const RUN_LABEL: &str = "pipetrace.run.label";
    pub const RUN_ENGINE_VERSION: &str = "pipetrace.run.engine_version";
    pub const RUN_TASKS_CACHED: &str = "pipetrace.run.tasks_cached";
    pub const RUN_FINDINGS: &str = "pipetrace.run.findings";
    pub const RUN_LOG: &str = "pipetrace.run.log";
    pub const FINDING_KIND: &str = "pipetrace.finding.kind";
    pub const FINDING_TEXT: &str = "pipetrace.finding.text";
    pub const FINDING_JOB: &str = "pipetrace.finding.job";
    pub const FINDING_SPAN_ID: &str = "pipetrace.finding.span_id";
    pub const HOST_MEMORY: &str = "pipetrace.host.memory";
    pub const STARTED_NAME: &str = "pipetrace.started.name";
    pub const TASK_WILDCARDS: &str = "pipetrace.task.wildcards";
    pub const TASK_THREADS: &str = "pipetrace.task.threads";
    pub const TASK_TIME_LIMIT: &str = "pipetrace.task.time_limit";
    pub const TASK_IN_ENGINE: &str = "pipetrace.task.in_engine";
    pub const TASK_TAG: &str = "pipetrace.task.tag";
    pub const TASK_LOGS: &str = "pipetrace.task.logs";
    pub const ENGINE_HELPERS: &str = "pipetrace.engine.helpers";
    pub const ENGINE_HELPERS_FAILED: &str = "pipetrace.engine.helpers_failed";
    pub const PROCESS_PID: &str = "process.pid";
    pub const PROCESS_PARENT_PID: &str = "process.parent_pid";
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    pub const PROCESS_EXECUTABLE_PATH: &str = "process.executable.path";
    pub const PROCESS_COMMAND_LINE: &str = "process.command_line";
    pub const PROCESS_WORKING_DIRECTORY: &str = "process.working_directory";
    pub const PROCESS_EXIT_CODE: &str = "process.exit.code";
    pub const TOOL_NAME: &str = "pipetrace.tool.name";
    pub const TOOL_TASK_RUN_ALTERNATIVES: &str = "pipetrace.tool.task_run.alternatives";
    pub const PROCESS_SIGNAL: &str = "pipetrace.process.signal";
    pub const PROCESS_ARGV_TRUNCATED: &str = "pipetrace.process.argv_truncated";
    pub const PROCESS_IMAGES: &str = "pipetrace.process.images";
    pub const PROCESS_FORKED_ONLY: &str = "pipetrace.process.forked_only";
    pub const COLLECTION_MODE: &str = "pipetrace.collection.mode";
    pub const ATTRIBUTES_TRUNCATED: &str = "pipetrace.attributes.truncated";
    pub const SERVICE_NAME: &str = "service.name";
    pub const HOST_NAME: &str = "host.name";
    pub const HOST_ID: &str = "host.id";
    pub const HOST_ARCH: &str = "host.arch";
    pub const HOST_TYPE: &str = "host.type";
    pub const OS_TYPE: &str = "os.type";
    pub const OS_VERSION: &str = "os.version";
    pub const CLOUD_PROVIDER: &str = "cloud.provider";
    pub const CLOUD_REGION: &str = "cloud.region";
    pub const CONTAINER_ID: &str = "container.id";
    pub const CONTAINER_RUNTIME: &str = "container.runtime";
    pub const CONTAINER_NAME: &str = "container.name";
    pub const CONTAINER_IMAGE_NAME: &str = "container.image.name";
    /// A template: `container.label.<key>`.
    pub const CONTAINER_LABEL: &str = "container.label";
    pub const K8S_POD_UID: &str = "k8s.pod.uid";
    pub const K8S_NAMESPACE_NAME: &str = "k8s.namespace.name";
    pub const K8S_POD_NAME: &str = "k8s.pod.name";
    pub const K8S_CONTAINER_NAME: &str = "k8s.container.name";
    pub const SLURM_JOB_ID: &str = "pipetrace.slurm.job.id";
    pub const SLURM_STEP_ID: &str = "pipetrace.slurm.step.id";
    pub const SLURM_TASK_ID: &str = "pipetrace.slurm.task.id";
    pub const SLURM_USER_ID: &str = "pipetrace.slurm.user.id";
    pub const SLURM_USER_NAME: &str = "pipetrace.slurm.user.name";
    pub const SLURM_ARRAY_JOB_ID: &str = "pipetrace.slurm.array.job.id";
    pub const SLURM_ARRAY_TASK_ID: &str = "pipetrace.slurm.array.task.id";
    pub const ARGO_WORKFLOW_NAME: &str = "pipetrace.argo.workflow.name";
    pub const ARGO_NODE_NAME: &str = "pipetrace.argo.node.name";
    pub const CPU_USER_TIME: &str = "pipetrace.cpu.user_time";
    pub const CPU_SYSTEM_TIME: &str = "pipetrace.cpu.system_time";
    pub const CPU_RUN_QUEUE_DELAY: &str = "pipetrace.cpu.run_queue_delay";
    pub const CPU_ALLOCATED: &str = "pipetrace.cpu.allocated";
    pub const CPU_ALLOCATION_SOURCE: &str = "pipetrace.cpu.allocation_source";
    pub const CPU_UTILIZATION: &str = "pipetrace.cpu.utilization";
    pub const MEMORY_PEAK: &str = "pipetrace.memory.peak";
    pub const GPU_IDS: &str = "pipetrace.gpu.ids";
    pub const GPU_NAMES: &str = "pipetrace.gpu.names";
    pub const GPU_MEMORY_PEAK: &str = "pipetrace.gpu.memory.peak";
    pub const GPU_UTILIZATION: &str = "pipetrace.gpu.utilization";
    pub const GPU_MEMORY_UTILIZATION: &str = "pipetrace.gpu.memory_utilization";
    pub const GPU_TIME: &str = "pipetrace.gpu.time";
    pub const GPU_THROTTLE_REASON: &str = "pipetrace.gpu.throttle_reason";
    pub const GPU_ALLOCATED: &str = "pipetrace.gpu.allocated";
    pub const GPU_RIGHTSIZING: &str = "pipetrace.gpu.rightsizing";
    pub const GPU_RECOMMENDATION: &str = "pipetrace.gpu.recommendation";
    pub const GPU_RECOMMENDATION_COUNT: &str = "pipetrace.gpu.recommendation.count";
    pub const HW_ID: &str = "hw.id";
    pub const HW_NAME: &str = "hw.name";
    pub const HW_TYPE: &str = "hw.type";
    pub const MEMORY_MAXRSS: &str = "pipetrace.memory.maxrss";
    pub const MEMORY_LIMIT: &str = "pipetrace.memory.limit";
    pub const MEMORY_MINOR_FAULTS: &str = "pipetrace.memory.minor_faults";
    pub const MEMORY_MAJOR_FAULTS: &str = "pipetrace.memory.major_faults";
    pub const MEMORY_WAIT_TIME: &str = "pipetrace.memory.wait_time";
    pub const CONTEXT_SWITCHES_VOLUNTARY: &str = "pipetrace.context_switches.voluntary";
    pub const CONTEXT_SWITCHES_INVOLUNTARY: &str = "pipetrace.context_switches.involuntary";
    pub const IO_READ_BYTES: &str = "pipetrace.io.read_bytes";
    pub const IO_WRITE_BYTES: &str = "pipetrace.io.write_bytes";
    pub const IO_READ_CALLS: &str = "pipetrace.io.read_calls";
    pub const IO_WRITE_CALLS: &str = "pipetrace.io.write_calls";
    pub const DISK_READ_BYTES: &str = "pipetrace.disk.read_bytes";
    pub const DISK_WRITE_BYTES: &str = "pipetrace.disk.write_bytes";
    pub const DISK_CANCELLED_WRITE_BYTES: &str = "pipetrace.disk.cancelled_write_bytes";
    pub const DISK_WAIT_TIME: &str = "pipetrace.disk.wait_time";
    pub const NETWORK_TRANSMIT_BYTES: &str = "pipetrace.network.transmit_bytes";
    pub const NETWORK_RECEIVE_BYTES: &str = "pipetrace.network.receive_bytes";
    pub const USAGE_PROCESSES: &str = "pipetrace.usage.processes";
    pub const FOLD_SPANS: &str = "pipetrace.fold.spans";
    pub const FOLD_SLOWEST_PID: &str = "pipetrace.fold.slowest.pid";
    pub const FOLD_SLOWEST_DURATION: &str = "pipetrace.fold.slowest.duration";
    pub const TRACE_PART: &str = "pipetrace.trace.part";
    pub const TRACE_PARTS: &str = "pipetrace.trace.parts";
    pub const USAGE_MISSING: &str = "pipetrace.usage.missing";
    pub const USAGE_AT_EXIT: &str = "pipetrace.usage.at_exit";
    pub const USAGE_IMPOSSIBLE: &str = "pipetrace.usage.impossible";
    pub const CPU_MODE: &str = "cpu.mode";
    pub const DISK_IO_DIRECTION: &str = "disk.io.direction";
    pub const NETWORK_IO_DIRECTION: &str = "network.io.direction";
    pub const OTEL_METRIC_OVERFLOW: &str = "otel.metric.overflow";
    pub const OOM_RSS: &str = "pipetrace.oom.rss";
    pub const OOM_CGROUP: &str = "pipetrace.oom.cgroup";
    pub const OOM_TRIGGER_PID: &str = "pipetrace.oom.trigger_pid";
    pub const OOM_TRIGGER: &str = "pipetrace.oom.trigger";
    pub const SIGNAL_ORIGIN: &str = "pipetrace.signal.origin";
    pub const SIGNAL_SENDER_PID: &str = "pipetrace.signal.sender_pid";
    pub const SIGNAL_SENDER: &str = "pipetrace.signal.sender";
    pub const STALL_DURATION: &str = "pipetrace.stall.duration";
    pub const HISTORY_USUAL_DURATION: &str = "pipetrace.history.usual_duration";
    pub const HISTORY_RUNS: &str = "pipetrace.history.runs";
    pub const HISTORY_FACTOR: &str = "pipetrace.history.factor";
    pub const COST: &str = "pipetrace.cost";
    pub const COST_ALLOCATED: &str = "pipetrace.cost.allocated";
    pub const COST_CURRENCY: &str = "pipetrace.cost.currency";
    pub const COST_CENTRE: &str = "pipetrace.cost.centre";
    pub const USER_ID: &str = "user.id";
    pub const USER_NAME: &str = "user.name";
    pub const BOTTLENECK: &str = "pipetrace.bottleneck";
    pub const BOTTLENECK_REASON: &str = "pipetrace.bottleneck.reason";
    pub const RIGHTSIZING: &str = "pipetrace.rightsizing";
    pub const RECOMMENDATION: &str = "pipetrace.recommendation";
    pub const RECOMMENDATION_CPUS: &str = "pipetrace.recommendation.cpus";
    pub const RECOMMENDATION_MEMORY: &str = "pipetrace.recommendation.memory";
    pub const FILES_READ: &str = "pipetrace.files.read";
    pub const FILES_READ_COUNT: &str = "pipetrace.files.read.count";
    pub const FILES_WRITTEN: &str = "pipetrace.files.written";
    pub const FILES_WRITTEN_COUNT: &str = "pipetrace.files.written.count";
    pub const TASK_INPUTS: &str = "pipetrace.task.inputs";
    pub const TASK_INPUTS_COUNT: &str = "pipetrace.task.inputs.count";
    pub const TASK_OUTPUTS: &str = "pipetrace.task.outputs";
    pub const TASK_OUTPUTS_COUNT: &str = "pipetrace.task.outputs.count";

    /// Every attribute above, for the registry checks.
    pub const ALL: &[&str] = &[
        CICD_PIPELINE_NAME,
        CICD_PIPELINE_RUN_ID,
        CICD_PIPELINE_TASK_NAME,
        CICD_PIPELINE_TASK_RUN_ID,
        RUN_ENGINE,
        RUN_TASKS,
        RUN_TASKS_FAILED,
        RUN_TASKS_PLANNED,
        RUN_TASKS_DONE,
        RUN_ENGINE_VERSION,
        RUN_TASKS_CACHED,
        RUN_FINDINGS,
        RUN_LOG,
        FINDING_KIND,
        FINDING_TEXT,
        FINDING_JOB,
        FINDING_SPAN_ID,
        HOST_MEMORY,
        RUN_LABEL,
        STARTED_NAME,
        TASK_WILDCARDS,
        TASK_THREADS,
        TASK_TIME_LIMIT,
        TASK_IN_ENGINE,
        TASK_TAG,
        TASK_LOGS,
        ENGINE_HELPERS,
        ENGINE_HELPERS_FAILED,
        PROCESS_PID,
        PROCESS_PARENT_PID,
        PROCESS_EXECUTABLE_NAME,
        PROCESS_EXECUTABLE_PATH,
        PROCESS_COMMAND_LINE,
        PROCESS_WORKING_DIRECTORY,
        PROCESS_EXIT_CODE,
        TOOL_NAME,
        TOOL_TASK_RUN_ALTERNATIVES,
        PROCESS_SIGNAL,
        PROCESS_ARGV_TRUNCATED,
        PROCESS_IMAGES,
        PROCESS_FORKED_ONLY,
        COLLECTION_MODE,
        ATTRIBUTES_TRUNCATED,
        SERVICE_NAME,
        HOST_NAME,
        HOST_ID,
        HOST_ARCH,
        HOST_TYPE,
        OS_TYPE,
        OS_VERSION,
        CLOUD_PROVIDER,
        CLOUD_REGION,
        CONTAINER_ID,
        CONTAINER_RUNTIME,
        CONTAINER_NAME,
        CONTAINER_IMAGE_NAME,
        CONTAINER_LABEL,
        K8S_POD_UID,
        K8S_NAMESPACE_NAME,
        K8S_POD_NAME,
        K8S_CONTAINER_NAME,
        SLURM_JOB_ID,
        SLURM_STEP_ID,
        SLURM_TASK_ID,
        SLURM_USER_ID,
        SLURM_USER_NAME,
        SLURM_ARRAY_JOB_ID,
        SLURM_ARRAY_TASK_ID,
        ARGO_WORKFLOW_NAME,
        ARGO_NODE_NAME,
        CPU_USER_TIME,
        CPU_SYSTEM_TIME,
        CPU_RUN_QUEUE_DELAY,
        CPU_ALLOCATED,
        CPU_ALLOCATION_SOURCE,
        CPU_UTILIZATION,
        MEMORY_PEAK,
        GPU_IDS,
        GPU_NAMES,
        GPU_MEMORY_PEAK,
        GPU_UTILIZATION,
        GPU_MEMORY_UTILIZATION,
        GPU_TIME,
        GPU_THROTTLE_REASON,
        GPU_ALLOCATED,
        GPU_RIGHTSIZING,
        GPU_RECOMMENDATION,
        GPU_RECOMMENDATION_COUNT,
        HW_ID,
        HW_NAME,
        HW_TYPE,
        MEMORY_MAXRSS,
        MEMORY_LIMIT,
        MEMORY_MINOR_FAULTS,
        MEMORY_MAJOR_FAULTS,
        MEMORY_WAIT_TIME,
        CONTEXT_SWITCHES_VOLUNTARY,
        CONTEXT_SWITCHES_INVOLUNTARY,
        IO_READ_BYTES,
        IO_WRITE_BYTES,
        IO_READ_CALLS,
        IO_WRITE_CALLS,
        DISK_READ_BYTES,
        DISK_WRITE_BYTES,
        DISK_CANCELLED_WRITE_BYTES,
        DISK_WAIT_TIME,
        NETWORK_TRANSMIT_BYTES,
        NETWORK_RECEIVE_BYTES,
        USAGE_PROCESSES,
        FOLD_SPANS,
        FOLD_SLOWEST_PID,
        FOLD_SLOWEST_DURATION,
        TRACE_PART,
        TRACE_PARTS,
        USAGE_MISSING,
        USAGE_AT_EXIT,
        USAGE_IMPOSSIBLE,
        CPU_MODE,
        DISK_IO_DIRECTION,
        NETWORK_IO_DIRECTION,
        OTEL_METRIC_OVERFLOW,
        OOM_RSS,
        OOM_CGROUP,
        OOM_TRIGGER_PID,
        OOM_TRIGGER,
        SIGNAL_ORIGIN,
        SIGNAL_SENDER_PID,
        SIGNAL_SENDER,
        STALL_DURATION,
        HISTORY_USUAL_DURATION,
        HISTORY_RUNS,
        HISTORY_FACTOR,
        COST,
        COST_ALLOCATED,
        COST_CURRENCY,
        COST_CENTRE,
        USER_ID,
        USER_NAME,
        BOTTLENECK,
        BOTTLENECK_REASON,
        RIGHTSIZING,
        RECOMMENDATION,
        RECOMMENDATION_CPUS,
        RECOMMENDATION_MEMORY,
        FILES_READ,
        FILES_READ_COUNT,
        FILES_WRITTEN,
        FILES_WRITTEN_COUNT,
        TASK_INPUTS,
        TASK_INPUTS_COUNT,
        TASK_OUTPUTS,
        TASK_OUTPUTS_COUNT,
    ];
}

/// Metric names pipetrace emits: the registry's `metric.*` groups.
pub mod metric {
    pub const PROCESS_CPU_TIME: &str = "process.cpu.time";
    pub const PROCESS_MEMORY_USAGE: &str = "process.memory.usage";
    pub const PROCESS_DISK_IO: &str = "process.disk.io";
    pub const PROCESS_NETWORK_IO: &str = "process.network.io";
    pub const MEMORY_PEAK: &str = "pipetrace.process.memory.peak";
    pub const DISK_WAIT_TIME: &str = "pipetrace.process.disk.wait_time";
    pub const RUN_QUEUE_DELAY: &str = "pipetrace.process.cpu.run_queue_delay";
    pub const TASK_MEMORY_LIMIT: &str = "pipetrace.task.memory.limit";
    pub const OOM_KILLS: &str = "pipetrace.process.oom_kills";
    pub const TASKS_RUNNING: &str = "pipetrace.tasks.running";
    pub const TASKS_STALLED: &str = "pipetrace.tasks.stalled";
    pub const TASKS_FAILED: &str = "pipetrace.tasks.failed";
    pub const FINDINGS: &str = "pipetrace.findings";
    pub const TASKS_DONE: &str = "pipetrace.tasks.done";
    pub const TASKS_TOTAL: &str = "pipetrace.tasks.total";
    pub const TASKS_QUEUED: &str = "pipetrace.tasks.queued";
    pub const PROCESS_GPU_MEMORY_USAGE: &str = "pipetrace.process.gpu.memory.usage";
    pub const HW_GPU_UTILIZATION: &str = "hw.gpu.utilization";
    pub const HW_GPU_MEMORY_UTILIZATION: &str = "hw.gpu.memory.utilization";
    pub const HW_GPU_MEMORY_USAGE: &str = "hw.gpu.memory.usage";
    pub const HW_GPU_MEMORY_LIMIT: &str = "hw.gpu.memory.limit";
    pub const HW_POWER: &str = "hw.power";
    pub const HW_TEMPERATURE: &str = "hw.temperature";
    pub const GPU_CLOCK_SM: &str = "pipetrace.gpu.clock.sm";
    pub const GPU_THROTTLED: &str = "pipetrace.gpu.throttled";
    pub const HOST_IDLE: &str = "pipetrace.host.idle";
    pub const AGENT_EVENTS_LOST: &str = "pipetrace.agent.events.lost";
    pub const AGENT_ACCUMULATOR_LOST: &str = "pipetrace.agent.accumulator.lost";
    pub const AGENT_RECORDS_UNDECODABLE: &str = "pipetrace.agent.records.undecodable";
    pub const AGENT_SPANS_DROPPED: &str = "pipetrace.agent.spans.dropped";
    pub const AGENT_EXPORT_FAILURES: &str = "pipetrace.agent.export.failures";
    pub const AGENT_METRIC_EXPORTS_FAILED: &str = "pipetrace.agent.metric_exports.failed";
    pub const AGENT_METRIC_EXPORTS_DROPPED: &str = "pipetrace.agent.metric_exports.dropped";
    pub const AGENT_METRIC_EXPORTS_SPOOLED: &str = "pipetrace.agent.metric_exports.spooled";
    pub const AGENT_USAGE_MISSING: &str = "pipetrace.agent.usage.missing";
    pub const AGENT_USAGE_AT_EXIT: &str = "pipetrace.agent.usage.at_exit";
    pub const AGENT_GPU_ERRORS: &str = "pipetrace.agent.gpu.errors";
    pub const AGENT_FIGURES_DROPPED: &str = "pipetrace.agent.figures.dropped";
    pub const AGENT_SERIES_OVERFLOWED: &str = "pipetrace.agent.metric_series.overflowed";
    pub const AGENT_PROCESSES_KNOWN: &str = "pipetrace.agent.processes.known";
    pub const AGENT_PROCESSES_TRACKED: &str = "pipetrace.agent.processes.tracked";
    pub const AGENT_MEMORY_RSS: &str = "pipetrace.agent.memory.rss";
    pub const AGENT_EXPORT_RETRIES: &str = "pipetrace.agent.export.retries";
    pub const AGENT_SPANS_SPOOLED: &str = "pipetrace.agent.spans.spooled";
    pub const AGENT_ATTRIBUTES_TRUNCATED: &str = "pipetrace.agent.attributes.truncated";
    pub const AGENT_LIMITS_DROPPED: &str = "pipetrace.agent.limits.dropped";
    pub const AGENT_EXPORT_QUEUE_USAGE: &str = "pipetrace.agent.export.queue.usage";
    pub const ALL: &[&str] = &[
        PROCESS_CPU_TIME,
        PROCESS_MEMORY_USAGE,
        PROCESS_DISK_IO,
        PROCESS_NETWORK_IO,
        MEMORY_PEAK,
        DISK_WAIT_TIME,
        RUN_QUEUE_DELAY,
        TASK_MEMORY_LIMIT,
        OOM_KILLS,
        TASKS_RUNNING,
        TASKS_STALLED,
        TASKS_FAILED,
        FINDINGS,
        TASKS_DONE,
        TASKS_TOTAL,
        TASKS_QUEUED,
        PROCESS_GPU_MEMORY_USAGE,
        HW_GPU_UTILIZATION,
        HW_GPU_MEMORY_UTILIZATION,
        HW_GPU_MEMORY_USAGE,
        HW_GPU_MEMORY_LIMIT,
        HW_POWER,
        HW_TEMPERATURE,
        GPU_CLOCK_SM,
        GPU_THROTTLED,
        HOST_IDLE,
        AGENT_EVENTS_LOST,
        AGENT_ACCUMULATOR_LOST,
        AGENT_RECORDS_UNDECODABLE,
        AGENT_SPANS_DROPPED,
        AGENT_EXPORT_FAILURES,
        AGENT_METRIC_EXPORTS_FAILED,
        AGENT_METRIC_EXPORTS_DROPPED,
        AGENT_METRIC_EXPORTS_SPOOLED,
        AGENT_USAGE_MISSING,
        AGENT_USAGE_AT_EXIT,
        AGENT_GPU_ERRORS,
        AGENT_FIGURES_DROPPED,
        AGENT_SERIES_OVERFLOWED,
        AGENT_PROCESSES_KNOWN,
        AGENT_PROCESSES_TRACKED,
        AGENT_MEMORY_RSS,
        AGENT_EXPORT_RETRIES,
        AGENT_SPANS_SPOOLED,
        AGENT_ATTRIBUTES_TRUNCATED,
        AGENT_LIMITS_DROPPED,
        AGENT_EXPORT_QUEUE_USAGE,
    ];
}

/// Span event names pipetrace emits: the registry's `event.*` groups.
pub mod event {
    pub const OOM_KILL: &str = "pipetrace.oom_kill";
    pub const SIGNAL: &str = "pipetrace.signal";
    pub const STALL: &str = "pipetrace.stall";
    pub const SLOWER_THAN_USUAL: &str = "pipetrace.slower_than_usual";
    pub const CONTAINER_START: &str = "pipetrace.container.start";
    pub const CONTAINER_END: &str = "pipetrace.container.end";
    pub const FINDING: &str = "pipetrace.finding";
    pub const ALL: &[&str] = &[
        OOM_KILL,
        SIGNAL,
        STALL,
        SLOWER_THAN_USUAL,
        CONTAINER_START,
        CONTAINER_END,
        FINDING,
    ];
}

/// Span kinds pipetrace emits: the registry's `span.pipetrace.*` groups.
pub mod span {
    pub const RUN: &str = "span.pipetrace.run";
    pub const TASK: &str = "span.pipetrace.task";
    pub const TOOL: &str = "span.pipetrace.tool";
    pub const ENGINE: &str = "span.pipetrace.engine";
    pub const ALL: &[&str] = &[RUN, TASK, TOOL, ENGINE];
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn constants_and_registry_name_the_same_attributes() {
        let reg = registry::Registry::embedded();
        let in_registry: BTreeSet<&str> = reg.attribute_ids().collect();
        let in_code: BTreeSet<&str> = attr::ALL.iter().copied().collect();
        let undocumented: Vec<_> = in_code.difference(&in_registry).collect();
        let unused: Vec<_> = in_registry.difference(&in_code).collect();
        assert!(
            undocumented.is_empty(),
            "emitted but not in registry.yaml: {undocumented:?}"
        );
        assert!(
            unused.is_empty(),
            "in registry.yaml but no constant: {unused:?}"
        );
    }

    #[test]
    fn metric_constants_and_registry_agree() {
        let reg = registry::Registry::embedded();
        let ids: BTreeSet<&str> = reg.attribute_ids().collect();
        let in_registry: BTreeSet<&str> = reg
            .groups
            .iter()
            .filter(|g| g.r#type == "metric")
            .filter_map(|g| g.metric_name.as_deref())
            .collect();
        let in_code: BTreeSet<&str> = metric::ALL.iter().copied().collect();
        assert_eq!(in_code, in_registry);
        for g in reg.groups.iter().filter(|g| g.r#type == "metric") {
            assert!(g.unit.is_some() && g.instrument.is_some(), "{}", g.id);
            for r in &g.attributes {
                let id = r.r#ref.as_deref().expect("metric groups list refs");
                assert!(ids.contains(id), "{} refers to unknown {id}", g.id);
            }
        }
    }

    #[test]
    fn event_constants_and_registry_agree() {
        let reg = registry::Registry::embedded();
        let in_registry: BTreeSet<&str> = reg
            .groups
            .iter()
            .filter(|g| g.r#type == "event")
            .filter_map(|g| g.name.as_deref())
            .collect();
        assert_eq!(in_registry, event::ALL.iter().copied().collect());
    }

    #[test]
    fn span_groups_exist_and_reference_known_attributes() {
        let reg = registry::Registry::embedded();
        let ids: BTreeSet<&str> = reg.attribute_ids().collect();
        for s in span::ALL {
            let g = reg
                .groups
                .iter()
                .find(|g| g.id == *s)
                .expect("span group in registry");
            for r in &g.attributes {
                let id = r.r#ref.as_deref().expect("span groups list refs");
                assert!(ids.contains(id), "{s} refers to unknown {id}");
            }
        }
    }

    #[test]
    fn every_attribute_is_documented() {
        for g in &registry::Registry::embedded().groups {
            for a in g.attributes.iter().filter(|a| a.id.is_some()) {
                assert!(
                    a.brief.as_deref().is_some_and(|b| !b.is_empty()),
                    "{:?}",
                    a.id
                );
                assert!(a.r#type.is_some() && a.stability.is_some(), "{:?}", a.id);
                let otel_reuse = a
                    .brief
                    .as_deref()
                    .unwrap_or("")
                    .contains("Reused from OTel");
                let ours = a.id.as_deref().unwrap_or("").starts_with("pipetrace.");
                assert!(
                    otel_reuse || ours,
                    "{:?} must be OTel's or under pipetrace.",
                    a.id
                );
            }
        }
    }

    #[test]
    fn generated_docs_are_current() {
        let want = registry::Registry::embedded().to_markdown();
        let have = include_str!("../docs/registry.md");
        assert!(
            have == want,
            "semconv/docs/registry.md is stale: cargo run -p pipetrace-semconv --bin semconv-docs"
        );
    }
}
