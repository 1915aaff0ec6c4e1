//! Running tasks' names as the engines' records tell them so far: read once per look, in
//! one step of the attribution, so that what samples the running tasks (live metrics, the
//! live view) only reads them.
use super::{Attributor, Role, naming};
use crate::{event::ProcKey, tree::Tree};

/// Tasks younger than this are not named yet: most are about to exec (their name would
/// change) or end (their exact name follows at once), and a name once given stays.
const MIN_AGE_NS: u64 = 1_000_000_000;

impl Attributor {
    /// Names the running tasks not named yet, at least [`MIN_AGE_NS`] old at `now_ns`, where
    /// the records (or their tool) tell.
    pub fn name_running(&mut self, tree: &Tree, now_ns: u64) {
        let old = |k: &ProcKey| {
            (tree.get(k)).is_some_and(|p| now_ns.saturating_sub(p.start_ns) >= MIN_AGE_NS)
        };
        let unnamed: Vec<ProcKey> = (self.members.iter())
            .filter(|(k, m)| m.role == Role::TaskRoot && !self.running_names.contains_key(k))
            .filter(|(k, _)| old(k))
            .map(|(k, _)| *k)
            .collect();
        for task in unnamed {
            if let Some(name) = self.provisional_task_name(tree, task) {
                self.running_names.insert(task, name);
            }
        }
    }

    /// The name running task `task` will most likely end with, once [`Self::name_running`]
    /// found one.
    pub fn running_name(&self, task: &ProcKey) -> Option<&str> {
        self.running_names.get(task).map(String::as_str)
    }

    fn provisional_task_name(&mut self, tree: &Tree, task: ProcKey) -> Option<String> {
        let m = self.members.get(&task).copied()?;
        let p = tree.get(&task)?;
        let run = self.runs.get_mut(&m.run)?;
        if let Some(name) = run.rule_names.get(&task) {
            return Some(name.clone());
        }
        run.adapter.provisional(p).map(|n| naming::clean_name(&n))
    }
}
