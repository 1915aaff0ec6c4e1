//! Where tasks start: a process of a run that no task holds yet is a task, the engine's
//! own work, or neither yet, as a task rule or the run's engine says at its exec.
use super::{Attributor, Class, EntityRef, Membership, Place, ProcKey, Role, naming};
use crate::{
    accounting::Rollup,
    tree::{Image, Tree},
};

impl Attributor {
    pub(super) fn maybe_start_task(
        &mut self,
        tree: &Tree,
        key: ProcKey,
        run_key: ProcKey,
        image: &Image,
    ) {
        let rule_name = self
            .task_rules
            .iter()
            .find(|r| r.matches(image))
            .map(|r| naming::clean_name(&r.name(image)));
        let place = Place {
            parent_is_root: tree.get(&key).and_then(|p| p.parent) == Some(run_key),
            under_run: self.placement(tree, &key, run_key, None) == EntityRef::Run(run_key),
        };
        let (Some(p), Some(run)) = (tree.get(&key), self.runs.get_mut(&run_key)) else {
            return;
        };
        let class = match rule_name {
            Some(name) => {
                run.rule_names.insert(key, name);
                Class::Task
            }
            None => run.adapter.classify(p, image, place),
        };
        self.share_if_named(run_key);
        let Some(run) = self.runs.get_mut(&run_key) else {
            return;
        };
        let role = match class {
            Class::Task => Role::TaskRoot,
            Class::Helper => Role::Helper,
            Class::Undecided => return,
        };
        if !run.joined
            && let Some(tp) = run.adapter.trace_parent()
        {
            run.joined = true;
            self.joins.push((run_key, tp));
        }
        let task = (role == Role::TaskRoot).then_some(key);
        self.members.insert(
            key,
            Membership {
                run: run_key,
                task,
                role,
            },
        );
        if role == Role::TaskRoot {
            self.rollups.insert(key, Rollup::default());
            self.started.push(key);
        }
    }

    /// A task's process the engine started for its own work (a job run by an engine
    /// subprocess starts the scheduler too): a helper, not a tool of the task.
    pub(super) fn maybe_helper_in_task(
        &mut self,
        tree: &Tree,
        key: ProcKey,
        run: ProcKey,
        image: &Image,
    ) {
        // Judged by what the process was started as: a job's shell later exec'ing its
        // command stays the job's.
        let Some(p) = tree.get(&key).filter(|p| p.earlier.is_empty()) else {
            return;
        };
        let parent = p.parent.and_then(|k| tree.get(&k));
        let Some(parent_image) = parent.and_then(|p| p.image.as_ref()) else {
            return;
        };
        let helper = self.runs.get(&run).is_some_and(|r| {
            r.adapter.folds_helpers() && r.adapter.helper_in_task(image, parent_image)
        });
        if helper {
            let m = Membership {
                run,
                task: None,
                role: Role::Helper,
            };
            self.members.insert(key, m);
        }
    }
}
