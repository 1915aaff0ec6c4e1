//! Where a span hangs: the nearest ancestor with a span of its own. Shells that only wrap
//! one command and subshells that never exec'd add no level; a task root that is a job
//! script is the task span itself.
use super::{
    Attributor, EntityRef, ProcKey, Role,
    naming::{self, is_single_command, shell_command},
};
use crate::tree::{Image, Proc, Tree};

/// The nearest ancestor of `key` that exec'd (a forked subshell runs its parent's program),
/// with its image.
pub(super) fn runner<'t>(tree: &'t Tree, key: &ProcKey) -> Option<(&'t Proc, &'t Image)> {
    tree.ancestors(key)
        .find_map(|a| a.image.as_ref().map(|img| (a, img)))
}

impl Attributor {
    /// A member whose span would be empty: a subshell that never exec'd, or a shell that
    /// only wraps one command.
    pub(super) fn transparent(&self, tree: &Tree, p: &Proc) -> bool {
        match &p.image {
            // A subshell of a subshell runs the shell that forked the first; one forked
            // before its parent exec'd (a here-document's substitution, forked by the child
            // that then execs `cat`) ran what the parent had then.
            None => (tree.ancestors(&p.key))
                .find_map(|a| a.image.as_ref().filter(|_| a.exec_ns <= p.start_ns))
                .is_some_and(naming::runs_shell),
            Some(img) => {
                shell_command(&img.argv).is_some_and(is_single_command)
                    || naming::is_wrapper(img)
                    || self.is_task_script(p.key, img)
            }
        }
    }

    /// Whether `img`, run by member `key`, is its task's own script as the engine's wrapper
    /// starts it (a Nextflow task's `.command.sh`): the task span stands for it.
    fn is_task_script(&self, key: ProcKey, img: &crate::tree::Image) -> bool {
        let run = self.members.get(&key).and_then(|m| self.runs.get(&m.run));
        run.is_some_and(|r| r.adapter.wrapper().is_some_and(|w| w.task_script(img)))
    }

    /// A task root that is a `sh -c` job script: the task span stands for it. Judged by what
    /// it started as: a script's shell may exec its last command at the end (`...; touch x`),
    /// while a single-command job's shell execs the command at once and is that tool.
    pub(super) fn task_root_is_script(p: &Proc) -> bool {
        let first = p.first_image.as_ref();
        let script = first.and_then(|img| shell_command(&img.argv).map(naming::strip_shell_prefix));
        // A shell running a script file (`bash -ue .command.run`) is a script too, while it
        // runs one (a version manager's shim execs the program it stands for).
        let file = (p.image.as_ref())
            .is_some_and(|img| naming::runs_shell(img) && shell_command(&img.argv).is_none());
        match script {
            Some(script) if !is_single_command(script) => true,
            None if file => true,
            _ => p
                .image
                .as_ref()
                .is_some_and(|img| shell_command(&img.argv).is_some()),
        }
    }

    /// The nearest ancestor with a span of its own.
    pub(super) fn placement(
        &self,
        tree: &Tree,
        key: &ProcKey,
        run: ProcKey,
        task: Option<ProcKey>,
    ) -> EntityRef {
        for a in tree.ancestors(key) {
            let Some(m) = self.members.get(&a.key) else {
                break;
            };
            match m.role {
                Role::RunRoot => return EntityRef::Run(a.key),
                // A process of an engine task of several is a tool of that task.
                Role::TaskRoot if Self::task_root_is_script(a) && !self.groups_tasks(m.run) => {
                    return EntityRef::Task(a.key);
                }
                Role::TaskRoot => return EntityRef::Tool(a.key),
                // The task's work the engine's plumbing started (a task script its metrics
                // wrapper runs) hangs under its task.
                Role::Helper if task.is_some() => continue,
                Role::Helper => return EntityRef::Engine(m.run),
                Role::Member | Role::Folded if self.transparent(tree, a) => continue,
                Role::Member | Role::Folded => return EntityRef::Tool(a.key),
            }
        }
        task.map(EntityRef::Task).unwrap_or(EntityRef::Run(run))
    }
}
