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
    pub const TASK_WILDCARDS: &str = "pipetrace.task.wildcards";
    pub const TASK_THREADS: &str = "pipetrace.task.threads";
    pub const PROCESS_PID: &str = "process.pid";
    pub const PROCESS_PARENT_PID: &str = "process.parent_pid";
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    pub const PROCESS_EXECUTABLE_PATH: &str = "process.executable.path";
    pub const PROCESS_COMMAND_LINE: &str = "process.command_line";
    pub const PROCESS_EXIT_CODE: &str = "process.exit.code";
    pub const TOOL_NAME: &str = "pipetrace.tool.name";
    pub const PROCESS_SIGNAL: &str = "pipetrace.process.signal";
    pub const PROCESS_ARGV_TRUNCATED: &str = "pipetrace.process.argv_truncated";
    pub const PROCESS_IMAGES: &str = "pipetrace.process.images";
    pub const PROCESS_FORKED_ONLY: &str = "pipetrace.process.forked_only";
    pub const COLLECTION_MODE: &str = "pipetrace.collection.mode";
    pub const SERVICE_NAME: &str = "service.name";
    pub const HOST_NAME: &str = "host.name";
    pub const HOST_ID: &str = "host.id";

    /// Every attribute above, for the registry checks.
    pub const ALL: &[&str] = &[
        CICD_PIPELINE_NAME,
        CICD_PIPELINE_RUN_ID,
        CICD_PIPELINE_TASK_NAME,
        CICD_PIPELINE_TASK_RUN_ID,
        RUN_ENGINE,
        RUN_TASKS,
        RUN_TASKS_FAILED,
        TASK_WILDCARDS,
        TASK_THREADS,
        PROCESS_PID,
        PROCESS_PARENT_PID,
        PROCESS_EXECUTABLE_NAME,
        PROCESS_EXECUTABLE_PATH,
        PROCESS_COMMAND_LINE,
        PROCESS_EXIT_CODE,
        TOOL_NAME,
        PROCESS_SIGNAL,
        PROCESS_ARGV_TRUNCATED,
        PROCESS_IMAGES,
        PROCESS_FORKED_ONLY,
        COLLECTION_MODE,
        SERVICE_NAME,
        HOST_NAME,
        HOST_ID,
    ];
}

/// Span kinds pipetrace emits: the registry's `span.pipetrace.*` groups.
pub mod span {
    pub const RUN: &str = "span.pipetrace.run";
    pub const TASK: &str = "span.pipetrace.task";
    pub const TOOL: &str = "span.pipetrace.tool";
    pub const ALL: &[&str] = &[RUN, TASK, TOOL];
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
