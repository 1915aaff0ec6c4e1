//! The main command of a task whose process is a shell that only wraps it (`sh -c 'grep x
//! f'`, a cwltool ShellCommandRequirement step whose shell forked it): the shell passes on
//! its exit, so the engine judges the command's exit as the task's. Its span waits for the
//! task's end, when the task's exit codes and the shell's own exit are known.
use super::{Attributor, EntityRef, Finished, Membership, Proc, TaskInfo, naming};
use crate::tree::Tree;

impl Attributor {
    /// A member ended: its tool span, or none yet for a task's main command.
    pub(super) fn member_ended(
        &mut self,
        tree: &Tree,
        p: &Proc,
        m: Membership,
    ) -> Option<Finished> {
        let parent = self.placement(tree, &p.key, m.run, m.task);
        let tool = Finished::Tool {
            proc: p.clone(),
            run: m.run,
            parent,
            verdict: None,
            alternatives: Vec::new(),
        };
        if let Some(ancestor) = self.may_exec_yet(tree, &p.key) {
            self.defer(ancestor, tool);
            return None;
        }
        let root = m
            .task
            .filter(|t| p.parent == Some(*t) && parent == EntityRef::Task(*t));
        match root.and_then(|t| tree.get(&t)) {
            // One command, one child: a second is no main command of it.
            Some(root)
                if Self::wraps_one_command(root)
                    && !self.groups_tasks(m.run)
                    && !self.mains.contains_key(&root.key) =>
            {
                self.mains.insert(root.key, tool);
                None
            }
            _ => Some(tool),
        }
    }

    /// A task root that is a shell around one command, which it did not exec.
    fn wraps_one_command(root: &Proc) -> bool {
        fn script(img: &crate::tree::Image) -> Option<&str> {
            naming::shell_command(&img.argv).map(naming::strip_shell_prefix)
        }
        let first = root.first_image.as_ref().and_then(script);
        first.is_some_and(naming::is_single_command)
            && root.image.as_ref().and_then(script).is_some()
    }

    /// The held main command of the task of process `root`, judged as the task is where the
    /// shell passed on its very exit status.
    pub(super) fn main_of(&mut self, root: &Proc, info: &TaskInfo) -> Option<Finished> {
        let mut main = self.mains.remove(&root.key)?;
        if let Finished::Tool { proc, verdict, .. } = &mut main {
            let status = |p: &Proc| p.exit.as_ref().map(|e| e.status);
            let passed = status(proc).is_some() && status(proc) == status(root);
            *verdict = passed.then(|| info.verdict(proc)).flatten();
        }
        Some(main)
    }
}
