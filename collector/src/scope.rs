//! Which processes this agent watches: all of the node's, or (`probes.scope_cgroup`) only
//! those in one cgroup and below it, as a sidecar beside one container, pod or Slurm step.
//! A process outside is as if never seen: no span, no metric, no count of it missing; one
//! that enters the scope (a runtime starts it there) is a top-level process of its own.
use std::collections::HashMap;

use crate::{
    event::{Event, ProcKey},
    tree::Tree,
};

pub struct Scope {
    /// The cgroup path watched; `None`: the whole node.
    cgroup: Option<String>,
    /// Running processes outside: the unified cgroup id each was last seen in, and whether
    /// its program starts containers or steps (its children re-read their cgroup).
    outside: HashMap<ProcKey, Outside>,
    /// Events of processes outside passed over.
    pub passed_over: u64,
}

#[derive(Clone, Copy)]
struct Outside {
    cgroup_id: u64,
    runtime: bool,
}

/// Whether any hierarchy's line of a `/proc/PID/cgroup` text places it at `scope` or below.
pub fn contains(scope: &str, proc_cgroup: &str) -> bool {
    let scope = scope.trim_end_matches('/');
    proc_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .any(|path| {
            path.strip_prefix(scope)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
}

/// The cgroup that holds the agent's own: of the unified hierarchy where it is placed there,
/// else of the first v1 hierarchy that places it below the root.
fn own_parent(proc_cgroup: &str) -> Option<String> {
    let paths: Vec<&str> = proc_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .filter(|p| p.len() > 1)
        .collect();
    let own = proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::").filter(|p| p.len() > 1))
        .or(paths.first().copied())?;
    let (parent, _) = own.trim_end_matches('/').rsplit_once('/')?;
    (!parent.is_empty()).then(|| parent.to_string())
}

impl Scope {
    /// `..`: the cgroup around the agent's own (its pod's, as a sidecar in it).
    pub fn new(cgroup: Option<String>) -> Self {
        let cgroup = match cgroup.as_deref() {
            Some("..") => {
                own_parent(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default())
            }
            _ => cgroup,
        };
        Self {
            cgroup,
            outside: HashMap::new(),
            passed_over: 0,
        }
    }

    pub fn whole_node(&self) -> bool {
        self.cgroup.is_none()
    }

    /// Whether process `pid` is in scope now (false once it has ended).
    pub fn holds_pid(&self, pid: u32) -> bool {
        let Some(scope) = &self.cgroup else {
            return true;
        };
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|text| contains(scope, &text))
    }

    /// Marks a process seen at the start (the /proc scan) as outside.
    pub fn leave_out(&mut self, key: ProcKey) {
        let o = Outside {
            cgroup_id: 0,
            runtime: false,
        };
        self.outside.insert(key, o);
    }

    /// Whether the pipeline handles `ev`. `tree`: the processes it watches; `is_runtime`:
    /// whether an exec's program starts containers or steps.
    pub fn admit(
        &mut self,
        ev: &Event,
        tree: &Tree,
        is_runtime: impl Fn(&crate::event::Exec) -> bool,
    ) -> bool {
        if self.whole_node() {
            return true;
        }
        let admitted = match ev {
            Event::Fork { key, parent, .. } => match self.outside.get(parent).copied() {
                // A child starts in its parent's cgroup; a runtime's child is looked at
                // again when it execs.
                Some(o) => {
                    self.outside.insert(*key, o);
                    false
                }
                // Of a parent never seen (a kernel thread's): where it is now.
                None if tree.get(parent).is_none() && !self.holds_pid(key.pid) => {
                    self.leave_out(*key);
                    false
                }
                None => true,
            },
            Event::Exec(e) => match self.outside.get(&e.key).copied() {
                None => true,
                Some(o) => {
                    let moved = o.cgroup_id == 0 || o.cgroup_id != e.cgroup_id || o.runtime;
                    if moved && self.holds_pid(e.key.pid) {
                        self.outside.remove(&e.key);
                        true
                    } else {
                        let runtime = is_runtime(e);
                        let o = Outside {
                            cgroup_id: e.cgroup_id,
                            runtime,
                        };
                        self.outside.insert(e.key, o);
                        false
                    }
                }
            },
            Event::Exit { key, .. } => self.outside.remove(key).is_none(),
            Event::Usage { key, .. } => !self.outside.contains_key(key),
            // By pid: the pipeline ignores pids it does not know.
            Event::Oom { .. } | Event::Signal { .. } => true,
        };
        if !admitted {
            self.passed_over += 1;
        }
        admitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_is_the_cgroup_around_the_agents_own() {
        let pod = "0::/kubepods/burstable/pod1234/abcd\n";
        assert_eq!(
            own_parent(pod).as_deref(),
            Some("/kubepods/burstable/pod1234")
        );
        let v1 = "4:memory:/kubepods/pod9/ef01\n0::/\n";
        assert_eq!(own_parent(v1).as_deref(), Some("/kubepods/pod9"));
        assert_eq!(
            own_parent("0::/lonely\n"),
            None,
            "the root holds everything"
        );
    }

    #[test]
    fn a_scope_holds_its_cgroup_and_those_below_in_any_hierarchy() {
        let text = "12:memory:/libpod_parent/libpod-abc\n0::/user.slice\n";
        assert!(contains("/libpod_parent/libpod-abc", text));
        assert!(contains("/libpod_parent/libpod-abc/", text));
        assert!(contains("/libpod_parent", text));
        assert!(!contains("/libpod_parent/libpod-ab", text), "a sibling");
        assert!(!contains("/libpod_parent/libpod-abcd", text));
        assert!(contains("/user.slice", text));
        assert!(!contains("/system.slice", text));
    }
}
