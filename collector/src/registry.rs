//! The running agent's own figures, in a small file beside its state and in the node's
//! registry of agents, for `pipetrace doctor` (which cannot ask the agent) and for people
//! reading the host; and the lock that keeps one agent per state directory (per node, with
//! the default one).
use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use serde::{Deserialize, Serialize};

use pipetrace_export::signals::metrics::AgentFigures;

#[derive(Debug, Serialize, Deserialize)]
pub struct AgentStatus {
    pub pid: u32,
    /// Unix seconds of the last update.
    pub updated: u64,
    /// `ebpf`, or `procfs` when it fell back to polling.
    pub mode: String,
    pub exporting_to: String,
    pub figures: AgentFigures,
}

pub(crate) fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("agent-status.json")
}

/// Every running agent of the node keeps its status here too, one file per pid, so that
/// `doctor` shows each agent, whatever its state directory.
pub const REGISTRY: &str = "/run/pipetrace/agents";

fn registry_file(pid: u32) -> PathBuf {
    Path::new(REGISTRY).join(format!("{pid}.json"))
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another pipetrace agent (pid {pid}) already watches this node with state directory \
         {dir}: one agent per node sees every process already. Stop it first (`systemctl stop \
         pipetrace`, or `kill {pid}`), or, to run a second one on purpose, give it a \
         diagnosis.state_dir of its own"
    )]
    Held { pid: String, dir: String },
    #[error(
        "cannot take the agent lock {path}: {source}; check that the state directory is writable"
    )]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// The agent's hold on its state directory: released when the agent exits, however it ends
/// (the kernel drops the lock with the process).
pub struct AgentLock {
    _file: std::fs::File,
}

impl AgentLock {
    /// Takes `state_dir/agent.lock`, or says which agent holds it.
    pub(crate) fn take(state_dir: &Path) -> Result<Self, LockError> {
        use std::{io::Write, os::fd::AsRawFd};
        let path = state_dir.join("agent.lock");
        let io = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor we own; non-blocking.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(err));
            }
            let pid = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(LockError::Held {
                pid: pid.trim().to_string(),
                dir: state_dir.display().to_string(),
            });
        }
        file.set_len(0).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { _file: file })
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl AgentStatus {
    pub(crate) fn new(mode: &str, exporting_to: String, figures: AgentFigures) -> Self {
        Self {
            pid: std::process::id(),
            updated: now(),
            mode: mode.into(),
            exporting_to,
            figures,
        }
    }

    /// Written whole (temporary file, then rename): a reader never sees half of it.
    pub(crate) fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(state_dir)?;
        let tmp = state_dir.join(".agent-status.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path(state_dir))
    }

    pub(crate) fn read(state_dir: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(path(state_dir)).ok()?).ok()
    }

    /// Also in the node's registry; best effort (a debug line when /run is not writable).
    pub(crate) fn register(&self, state_dir: Option<&Path>) {
        let entry = Registered {
            state_dir: state_dir.map(|d| d.display().to_string()),
            status: self,
        };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(REGISTRY)?;
            let tmp = Path::new(REGISTRY).join(format!(".{}.json.tmp", self.pid));
            std::fs::write(
                &tmp,
                serde_json::to_vec_pretty(&entry).map_err(std::io::Error::other)?,
            )?;
            std::fs::rename(tmp, registry_file(self.pid))
        };
        if let Err(e) = write() {
            log::debug!("cannot register the agent in {REGISTRY}: {e}");
        }
    }

    /// Leaves the registry (at a clean stop; a crashed agent's entry is skipped as not alive).
    pub(crate) fn unregister() {
        let pid = std::process::id();
        for f in [registry_file(pid), runs_file(pid), want_file(pid)] {
            let _ = std::fs::remove_file(f);
        }
    }

    /// Every agent in the node's registry that still runs, oldest pid first, with its
    /// state directory.
    pub(crate) fn running() -> Vec<(Option<String>, Self)> {
        let Ok(dir) = std::fs::read_dir(REGISTRY) else {
            return Vec::new();
        };
        let mut out: Vec<(Option<String>, Self)> = dir
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<Owned>(&b).ok())
            .filter(|o| o.status.alive() && o.status.is_pipetrace())
            .map(|o| (o.state_dir, o.status))
            .collect();
        out.sort_by_key(|(_, s)| s.pid);
        out
    }

    /// Seconds since the last update.
    pub(crate) fn age(&self) -> u64 {
        now().saturating_sub(self.updated)
    }

    pub(crate) fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// Its pid is still a pipetrace process (an agent killed outright leaves its entry; the
    /// pid may have gone to another program since).
    fn is_pipetrace(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/comm", self.pid))
            .is_ok_and(|c| c.trim_end().starts_with("pipetrace"))
    }
}

#[derive(Serialize)]
struct Registered<'a> {
    state_dir: Option<String>,
    #[serde(flatten)]
    status: &'a AgentStatus,
}

#[derive(Deserialize)]
struct Owned {
    state_dir: Option<String>,
    #[serde(flatten)]
    status: AgentStatus,
}

/// What an agent's runs are doing now, for `pipetrace status` and `top`: beside its entry in
/// the registry, readable by the agent's user only (names of tasks and tools). Written only
/// while someone asks (a reader touches `<pid>.want`), so an agent nobody watches reads no
/// more of /proc than its metrics need.
fn runs_file(pid: u32) -> PathBuf {
    Path::new(REGISTRY).join(format!("{pid}.runs"))
}

fn want_file(pid: u32) -> PathBuf {
    Path::new(REGISTRY).join(format!("{pid}.want"))
}

/// How long after a reader asked the agent keeps writing its runs.
const WANTED_FOR: std::time::Duration = std::time::Duration::from_secs(10);

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Whether a reader asked for this agent's runs lately.
pub(crate) fn runs_wanted() -> bool {
    let asked = modified(&want_file(std::process::id()));
    asked.is_some_and(|t| t.elapsed().is_ok_and(|e| e < WANTED_FOR))
}

/// Writes this agent's runs now (replaced whole, never half-written).
pub(crate) fn write_runs(runs: &[crate::live_view::Now]) {
    let pid = std::process::id();
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(REGISTRY)?;
        let json = serde_json::to_vec(runs).map_err(std::io::Error::other)?;
        pipetrace_host::store::replace_whole(&runs_file(pid), &json)
    };
    if let Err(e) = write() {
        log::debug!("cannot write the agent's runs to {REGISTRY}: {e}");
    }
}

/// What one agent answered: its runs, or why there are none to show.
pub type Answer = Result<Vec<crate::live_view::Now>, String>;

/// Asks every agent in `pids` for its runs at once, then reads each answer, waiting up to
/// `wait` (in all, not per agent) for answers newer than the question: each view is of a
/// moment after it was asked, however many agents run.
pub(crate) fn read_runs(pids: &[u32], wait: std::time::Duration) -> Vec<Answer> {
    let denied = |p: &Path| {
        format!(
            "cannot use {}: the agent's runs are for its own user only (run as root)",
            p.display()
        )
    };
    let asked = SystemTime::now();
    let asks: Vec<Result<(), String>> = (pids.iter())
        .map(|&pid| {
            let want = want_file(pid);
            std::fs::write(&want, b"").map_err(|_| denied(&want))
        })
        .collect();
    let deadline = std::time::Instant::now() + wait;
    let waiting = |pid: &u32| modified(&runs_file(*pid)).is_none_or(|t| t < asked);
    while std::time::Instant::now() < deadline
        && (pids.iter().zip(&asks)).any(|(pid, a)| a.is_ok() && waiting(pid))
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (pids.iter().zip(asks))
        .map(|(&pid, asked)| {
            asked?;
            let path = runs_file(pid);
            let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => denied(&path),
                _ => format!(
                    "no answer from the agent (pid {pid}) yet: it writes what runs every 2 s \
                     while asked (a pipetrace older than `status` never does)"
                ),
            })?;
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_agent_on_the_same_state_directory_is_refused_with_the_holders_pid() {
        let d = tempfile::tempdir().unwrap();
        let first = AgentLock::take(d.path()).expect("the first takes it");
        // flock locks belong to the open file: a second open in this process conflicts too.
        let err = AgentLock::take(d.path())
            .err()
            .expect("the second is refused");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("diagnosis.state_dir"), "{msg}");
        drop(first);
        assert!(
            AgentLock::take(d.path()).is_ok(),
            "free once the first is gone"
        );
    }
}
