//! A roll-up's processes grouped by the container they ran in: the container as an entity
//! of its own, with when its first process (of this task or run) started and its last ended.
use std::{collections::BTreeMap, sync::Arc};

use super::{Rollup, Usage};
use crate::containers::Container;

/// Containers kept per roll-up; processes of any further one are counted, not grouped.
pub const MAX_CONTAINERS: usize = 32;

/// One container's share of a roll-up.
#[derive(Clone, Debug)]
pub struct ContainerPart {
    pub container: Arc<Container>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub rollup: Rollup,
}

#[derive(Clone, Debug, Default)]
pub struct ByContainer {
    /// By container id, in id order (a stable order of events).
    pub parts: BTreeMap<String, ContainerPart>,
    /// Processes in containers past [`MAX_CONTAINERS`].
    pub ungrouped: u64,
}

impl ByContainer {
    /// Counts a process that ran in `c` (a Slurm step outside any container is no container).
    pub(crate) fn add(
        &mut self,
        c: &Arc<Container>,
        start: u64,
        end: u64,
        tool: &str,
        u: Option<&Usage>,
    ) {
        if c.id.is_empty() {
            return;
        }
        if !self.parts.contains_key(&c.id) && self.parts.len() >= MAX_CONTAINERS {
            self.ungrouped += 1;
            return;
        }
        let part = self
            .parts
            .entry(c.id.clone())
            .or_insert_with(|| ContainerPart {
                container: c.clone(),
                start_ns: start,
                end_ns: end,
                rollup: Rollup::default(),
            });
        part.start_ns = part.start_ns.min(start);
        part.end_ns = part.end_ns.max(end);
        part.rollup.add_process(start, end, tool, u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(id: &str) -> Arc<Container> {
        Arc::new(Container {
            id: id.to_string(),
            slurm: None,
            runtime: Some("podman"),
            pod_uid: None,
            details: Default::default(),
        })
    }

    #[test]
    fn a_containers_processes_roll_up_to_it_from_first_start_to_last_end() {
        let (a, b) = (container("aaa"), container("bbb"));
        let mut by = ByContainer::default();
        let u = Usage {
            cpu_user_ns: 5,
            maxrss_bytes: 100,
            ..Default::default()
        };
        by.add(&a, 20, 30, "cat", Some(&u));
        by.add(&a, 10, 25, "sh", Some(&u));
        by.add(&b, 40, 50, "sleep", None);
        let pa = &by.parts["aaa"];
        assert_eq!((pa.start_ns, pa.end_ns, pa.rollup.processes), (10, 30, 2));
        assert_eq!(pa.rollup.totals.cpu_user_ns, 10);
        assert_eq!(pa.rollup.peak_memory(), 200, "both alive from 20 to 25");
        assert_eq!(by.parts["bbb"].rollup.missing, 1);
    }

    #[test]
    fn past_the_bound_processes_are_counted_not_grouped_and_steps_are_no_containers() {
        let mut by = ByContainer::default();
        for i in 0..MAX_CONTAINERS + 3 {
            by.add(&container(&format!("{i:03}")), 0, 1, "true", None);
        }
        assert_eq!((by.parts.len(), by.ungrouped), (MAX_CONTAINERS, 3));
        by.add(&container("000"), 0, 2, "true", None);
        assert_eq!(
            by.parts["000"].rollup.processes, 2,
            "a known one still counts"
        );
        let mut step = ByContainer::default();
        step.add(&container(""), 0, 1, "srun", None);
        assert!(step.parts.is_empty());
    }
}
