//! Where tasks start: a process of a run that no task holds yet is a task, the engine's
//! own work, or neither yet, as a task rule or the run's engine says at its exec. Every
//! exec decides again: a process is what it executed last.
use super::{
    Attributor, Class, EntityRef, Membership, Mode, Place, ProcKey, Role, naming,
    placement::runner, runs,
};
use crate::{
    accounting::Rollup,
    tree::{Image, Tree},
};

impl Attributor {
    /// Whether an exec needs the process's working directory (a readlink per exec, so
    /// only where it is used): a run root's (engine workdir, name), a member's with a
    /// relative path or when task rules may match on it, an exec that may start a run.
    pub fn wants_cwd(&self, tree: &Tree, e: &crate::event::Exec) -> bool {
        let member = self.members.get(&e.key).copied().or_else(|| {
            let parent = tree.by_pid(e.ppid)?;
            self.members.get(&parent.key).copied()
        });
        if let Some(m) = member {
            let engine_asks = || {
                let run = self.runs.get(&m.run);
                m.task.is_none() && run.is_some_and(|r| r.adapter.needs_cwd(&e.argv))
            };
            return m.role == Role::RunRoot
                || !e.filename.starts_with('/')
                || !self.task_rules.is_empty()
                || engine_asks();
        }
        match self.mode {
            Mode::Run { root_pid } => root_pid == e.key.pid,
            Mode::Agent => {
                let image = Image {
                    path: e.filename.clone(),
                    argv: e.argv.clone(),
                    ..Default::default()
                };
                // A step's first process: its directory may say what it is (a Nextflow
                // task's); one not seen before its exec entered an agent's scope here.
                let step_start = (tree.get(&e.key)).is_none_or(|p| runs::started_by_stepd(tree, p));
                self.engines.detect(&image).is_some() || !self.run_rules.is_empty() || step_start
            }
        }
    }

    /// A member of a run exec'd `image`: the engine's plumbing, a task, or what it was.
    pub(super) fn member_exec(&mut self, tree: &Tree, key: ProcKey, m: Membership, image: &Image) {
        if self.plumbing_exec(tree, key, m, image) {
            return;
        }
        if m.task.is_some() {
            return self.maybe_helper_in_task(tree, key, m.run, image);
        }
        if self.under_scheduler(m.run)
            && let Some(e) = self.engines.detect(image)
            && let Some(p) = tree.get(&key)
        {
            return self.engine_under_scheduler(p, m.run, e);
        }
        self.maybe_start_task(tree, key, m.run, image);
    }

    /// Whether `image` is the engine's own per-task plumbing (a task wrapper's staging,
    /// output capture, metrics sampling), made a helper: never a tool, never a failure.
    fn plumbing_exec(&mut self, tree: &Tree, key: ProcKey, m: Membership, image: &Image) -> bool {
        let Some((runner, runs)) = runner(tree, &key) else {
            return false;
        };
        let run = self.runs.get(&m.run);
        if !run.is_some_and(|r| {
            (r.adapter.wrapper()).is_some_and(|w| w.plumbing(image, runs, runner.key == m.run))
        }) {
            return false;
        }
        let helper = Membership {
            task: None,
            role: Role::Helper,
            ..m
        };
        self.members.insert(key, helper);
        true
    }

    /// A helper exec'd `image`. One the engine classified itself (its parent is the run's
    /// root or undecided) is decided again; one that inherited the role from a helper
    /// stays one, unless it runs a task's own script, which is the task's work.
    pub(super) fn helper_exec(&mut self, tree: &Tree, key: ProcKey, m: Membership, image: &Image) {
        let Some(p) = tree.get(&key) else { return };
        let parent = p.parent.and_then(|k| self.members.get(&k).copied());
        let classified = parent
            .is_some_and(|pm| pm.task.is_none() && matches!(pm.role, Role::RunRoot | Role::Member));
        let script = (self.runs.get(&m.run))
            .is_some_and(|r| r.adapter.wrapper().is_some_and(|w| w.task_script(image)));
        if !classified && !script {
            return;
        }
        let task = match script {
            true => (tree.ancestors(&key))
                .map(|a| (a.key, self.members.get(&a.key)))
                .find(|(_, am)| am.is_some_and(|am| am.role == Role::TaskRoot && am.run == m.run))
                .map(|(k, _)| k),
            false => None,
        };
        let member = Membership {
            task,
            role: Role::Member,
            ..m
        };
        self.members.insert(key, member);
        self.member_exec(tree, key, member, image);
    }

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
            && let Some(tp) = run.adapter.task_runs().and_then(|t| t.trace_parent())
        {
            run.joined = true;
            self.effects.joins.push((run_key, tp));
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
            self.effects.started.push(key);
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
            r.adapter.folds_helpers()
                && (r.adapter.wrapper()).is_some_and(|w| w.helper_in_task(image, parent_image))
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
