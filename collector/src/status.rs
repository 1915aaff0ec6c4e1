//! The running agent's own figures, in a small file beside its state, for `pipetrace doctor`
//! (which cannot ask the agent) and for people reading the host.
use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use serde::{Deserialize, Serialize};

use crate::signals::metrics::AgentFigures;

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

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("agent-status.json")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl AgentStatus {
    pub fn new(mode: &str, exporting_to: String, figures: AgentFigures) -> Self {
        Self {
            pid: std::process::id(),
            updated: now(),
            mode: mode.into(),
            exporting_to,
            figures,
        }
    }

    /// Written whole (temporary file, then rename): a reader never sees half of it.
    pub fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(state_dir)?;
        let tmp = state_dir.join(".agent-status.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path(state_dir))
    }

    pub fn read(state_dir: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(path(state_dir)).ok()?).ok()
    }

    /// Seconds since the last update.
    pub fn age(&self) -> u64 {
        now().saturating_sub(self.updated)
    }

    pub fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}
