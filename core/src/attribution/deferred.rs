//! A tool whose nearest spanned ancestor is not known yet: bash expands a here-document's
//! command substitutions (`cat <<END … $(bwa 2>&1 | sed …) END`) in the child it forked for
//! `cat`, before that child execs. While such a forked-only ancestor runs, it may still
//! become a program of its own, and the tool belongs under that program, as the kernel ran
//! it. Its span waits for the ancestor's end; at a forced end it goes where it stood.
use super::{Attributor, EntityRef, Finished, Role};
use crate::{
    event::ProcKey,
    tree::{Proc, Tree},
};

impl Attributor {
    /// The forked-only member above `key` that still runs (and so may exec yet), on the
    /// way to the ancestor that gives `key` its place.
    pub(super) fn may_exec_yet(&self, tree: &Tree, key: &ProcKey) -> Option<ProcKey> {
        for a in tree.ancestors(key) {
            let m = self.members.get(&a.key)?;
            match m.role {
                Role::Member if a.image.is_none() && a.exit.is_none() => return Some(a.key),
                Role::Member | Role::Folded if self.transparent(tree, a) => continue,
                _ => return None,
            }
        }
        None
    }

    /// `tool` waits for `ancestor`'s end.
    pub(super) fn defer(&mut self, ancestor: ProcKey, tool: Finished) {
        self.deferred.entry(ancestor).or_default().push(tool);
    }

    /// `ended` (a member) ended: the tools that waited for it, placed from it as it ran.
    pub(super) fn release_deferred(&mut self, tree: &Tree, ended: &Proc) -> Vec<Finished> {
        let Some(tools) = self.deferred.remove(&ended.key) else {
            return Vec::new();
        };
        let transparent = self.transparent(tree, ended);
        // A subshell that never exec'd hands them on to a forked-only one above it.
        if transparent && let Some(above) = self.may_exec_yet(tree, &ended.key) {
            self.deferred.entry(above).or_default().extend(tools);
            return Vec::new();
        }
        let placed = self.members.get(&ended.key).map(|m| match m.role {
            Role::Member if !transparent => EntityRef::Tool(ended.key),
            _ => self.placement(tree, &ended.key, m.run, m.task),
        });
        (tools.into_iter())
            .map(|mut t| {
                if let (Finished::Tool { parent, .. }, Some(p)) = (&mut t, placed) {
                    *parent = p;
                }
                t
            })
            .collect()
    }

    /// `gone` left the tree without its end seen: what waited for it goes where it stood,
    /// with the next output (as what a run held back does).
    pub(super) fn forget_deferred(&mut self, gone: &ProcKey) {
        if let Some(tools) = self.deferred.remove(gone) {
            self.held.release(tools);
        }
    }

    /// A forced end: what still waits goes where it stood.
    pub(super) fn flush_deferred(&mut self) -> Vec<Finished> {
        let all = std::mem::take(&mut self.deferred);
        all.into_values().flatten().collect()
    }
}
