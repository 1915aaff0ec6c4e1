//! Which processes this agent watches: all of the node's, or (`probes.scope_cgroup`) only
//! those in one cgroup and below it, as a sidecar beside one container, pod or Slurm step.
//! A process outside is as if never seen: no span, no metric, no count of it missing; one
//! that enters the scope (a runtime starts it there) is a top-level process of its own.
use std::collections::HashMap;

use pipetrace_core::event::{Event, ProcKey};
use pipetrace_core::port::Host;
use pipetrace_core::tree::Tree;

pub struct Scope {
    /// The cgroup path watched; `None`: the whole node.
    cgroup: Option<String>,
    /// Running processes outside: the unified cgroup id each was last seen in, and whether
    /// its program starts containers or steps (its children re-read their cgroup).
    outside: HashMap<ProcKey, Outside>,
}

#[derive(Clone, Copy)]
struct Outside {
    cgroup_id: u64,
    runtime: bool,
}

/// Whether any hierarchy's line of a `/proc/PID/cgroup` text places it at `scope` or below.
pub(crate) fn contains(scope: &str, proc_cgroup: &str) -> bool {
    let scope = scope.trim_end_matches('/');
    proc_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .any(|path| {
            path.strip_prefix(scope)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
}

#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    #[error(
        "probes.scope_cgroup `..`: the agent's cgroup has no parent to watch ({0}); run it in \
         the host's cgroup namespace (a pod with hostPID and the node's /sys/fs/cgroup), or give \
         the cgroup's path as /proc/PID/cgroup shows it on the host"
    )]
    NoParent(String),
    #[error(
        "probes.scope_cgroup: the agent runs in a cgroup namespace of its own, so other \
         processes' cgroup paths read relative to it and none would match; run it in the \
         host's cgroup namespace (docker/podman --cgroupns=host; Kubernetes: hostPID with the \
         node's cgroups)"
    )]
    PrivateNamespace,
}

/// The cgroup path `probes.scope_cgroup` names: `..` is the cgroup around the agent's own
/// (its pod's, as a sidecar in it). A scope in a private cgroup namespace is refused: paths
/// read there would be relative to it.
pub(crate) fn resolve(cgroup: Option<&str>) -> Result<Option<String>, ScopeError> {
    let Some(cg) = cgroup else { return Ok(None) };
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/cgroup")).ok();
    // Where PID 1's namespace cannot be read, nothing tells: the paths are trusted.
    if let (Some(own), Some(init)) = (ns("self"), ns("1"))
        && own != init
    {
        return Err(ScopeError::PrivateNamespace);
    }
    if cg != ".." {
        return Ok(Some(cg.to_string()));
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    match own_parent(&own) {
        Some(p) => Ok(Some(p)),
        None => Err(ScopeError::NoParent(own.trim().replace('\n', ", "))),
    }
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
    /// `cgroup`: as [`resolve`] gives it.
    pub(crate) fn new(cgroup: Option<String>) -> Self {
        Self {
            cgroup,
            outside: HashMap::new(),
        }
    }

    pub(crate) fn whole_node(&self) -> bool {
        self.cgroup.is_none()
    }

    /// Whether process `pid` is in scope now (false once it has ended).
    pub(crate) fn holds_pid(&self, host: &dyn Host, pid: u32) -> bool {
        self.holds(host, pid).unwrap_or(false)
    }

    /// Whether process `pid` is in scope now; `None` when its cgroup cannot be read (ended).
    fn holds(&self, host: &dyn Host, pid: u32) -> Option<bool> {
        let Some(scope) = &self.cgroup else {
            return Some(true);
        };
        let path = format!("/proc/{pid}/cgroup");
        let text = host.read_to_string(std::path::Path::new(&path)).ok()?;
        Some(contains(scope, &text))
    }

    /// Marks a process seen at the start (the /proc scan) as outside.
    pub(crate) fn leave_out(&mut self, key: ProcKey) {
        let o = Outside {
            cgroup_id: 0,
            runtime: false,
        };
        self.outside.insert(key, o);
    }

    /// Whether the pipeline handles `ev`. `tree`: the processes it watches.
    pub(crate) fn admit(&mut self, host: &dyn Host, ev: &Event, tree: &Tree) -> bool {
        if self.whole_node() {
            return true;
        }
        match ev {
            // Seeded already (it forked between the probes opening and the /proc scan).
            Event::Fork { key, .. } if tree.get(key).is_some() => true,
            Event::Fork { key, parent, .. } => match self.outside.get(parent).copied() {
                // A child starts in its parent's cgroup; a runtime's child is looked at
                // again when it execs.
                Some(o) => {
                    self.outside.insert(*key, o);
                    false
                }
                // Of a parent never seen (a kernel thread's): where it is now.
                None if tree.get(parent).is_none() && !self.holds_pid(host, key.pid) => {
                    self.leave_out(*key);
                    false
                }
                None => true,
            },
            Event::Exec(e) => {
                let moved = match self.outside.get(&e.key) {
                    None if tree.get(&e.key).is_some() => return true,
                    // Never seen (its fork was lost): where it is now.
                    None => true,
                    Some(o) => o.cgroup_id == 0 || o.cgroup_id != e.cgroup_id || o.runtime,
                };
                let held = if moved {
                    self.holds(host, e.key.pid)
                } else {
                    Some(false)
                };
                if held == Some(true) {
                    self.outside.remove(&e.key);
                    true
                } else {
                    // Unreadable (it ended): its children look again when they exec.
                    let o = Outside {
                        cgroup_id: if held.is_none() { 0 } else { e.cgroup_id },
                        runtime: pipetrace_core::containers::runs_runtime(&e.filename, &e.argv),
                    };
                    self.outside.insert(e.key, o);
                    false
                }
            }
            Event::Exit { key, .. } => self.outside.remove(key).is_none(),
            Event::Usage { key, .. } | Event::Open { key, .. } => !self.outside.contains_key(key),
            // By pid, or after the exit that forgot the process: the pipeline ignores
            // processes it does not know.
            Event::Oom { .. } | Event::Signal { .. } | Event::FinalCpu { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_host::LiveHost;

    fn exec(pid: u32) -> Event {
        Event::Exec(pipetrace_core::event::Exec {
            key: ProcKey {
                pid,
                start_ticks: 1,
            },
            start_ns: 0,
            time_ns: 0,
            ppid: 1,
            uid: 0,
            cgroup_id: 7,
            filename: "/bin/true".into(),
            argv: vec!["true".into()],
            argv_truncated: false,
        })
    }

    #[test]
    fn a_process_never_seen_is_let_in_only_if_it_is_in_scope_now() {
        let tree = Tree::default();
        let me = std::process::id();
        let mut elsewhere = Scope::new(Some("/pipetrace-no-such-cgroup".into()));
        assert!(
            !elsewhere.admit(&LiveHost, &exec(me), &tree),
            "its fork was lost"
        );
        // Gone before it was read: left out, looked at again at its next exec.
        assert!(!elsewhere.admit(&LiveHost, &exec(u32::MAX - 1), &tree));
        let k = ProcKey {
            pid: u32::MAX - 1,
            start_ticks: 1,
        };
        assert_eq!(elsewhere.outside[&k].cgroup_id, 0);
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let path = own
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .next()
            .unwrap();
        let mut here = Scope::new(Some(path.to_string()));
        assert!(here.admit(&LiveHost, &exec(me), &tree));
    }

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
