//! Flows that talk to a server started apart from them: a standing Prefect server
//! (`prefect server start`), reached through `PREFECT_API_URL` or a profile. Such a flow starts
//! no server child (which is how a flow with Prefect's temporary server is recognised), and its
//! environment is never read; so a Python process outside any engine's run becomes a Prefect
//! run when one of its children execs while it holds a connection the server accepted (see
//! `engines::prefect::server_of`). The servers are those seen to start, or found running by
//! a look through the host's processes (`pipetrace run` sees none that started before it).
use std::{collections::HashMap, time::Duration};

use crate::{
    attribution::{
        Attributor, Mode, Role,
        engines::{EngineKind, prefect},
        naming,
    },
    event::ProcKey,
    tree::{Image, Proc, Tree},
};

/// How long a process found connected to no server is not asked again.
const RECHECK: Duration = Duration::from_secs(1);
/// How often `pipetrace run` looks through the host's processes for servers.
const RESCAN: Duration = Duration::from_secs(5);
/// Processes remembered as connected to no server, at most.
const CHECKED: usize = 4096;

#[derive(Default)]
pub(in crate::attribution) struct Servers {
    /// The standing servers' processes.
    known: Vec<ProcKey>,
    /// When the host's processes were last looked through.
    scanned: Option<Duration>,
    /// Processes found connected to no server, and when.
    checked: HashMap<ProcKey, Duration>,
}

impl Servers {
    pub(in crate::attribution) fn forget(&mut self, dropped: &[Proc]) {
        for p in dropped {
            self.known.retain(|k| *k != p.key);
            self.checked.remove(&p.key);
        }
    }
}

impl Attributor {
    fn prefect_on(&self) -> bool {
        self.engines.has(prefect::KIND)
    }

    /// Notes a process that execs (or was found running) a standing Prefect server.
    pub(in crate::attribution) fn note_server(&mut self, key: ProcKey, image: &Image) {
        let on = self.prefect_on();
        let known = &mut self.servers.known;
        if on && prefect::is_standing_server(image) && !known.contains(&key) {
            known.push(key);
        }
    }

    /// At `child`'s exec: whether its parent is a flow talking to a standing Prefect server;
    /// then the parent is that flow's Prefect run, and `child` its first process.
    pub(in crate::attribution) fn flow_of_standing_server(&mut self, tree: &Tree, child: ProcKey) {
        let parent = tree.get(&child).and_then(|p| p.parent);
        let Some(parent) = parent.and_then(|k| tree.get(&k)) else {
            return;
        };
        // A runner's or worker's flow-run process, or one `flow.serve()` spawns: it is the
        // flow, found by its own children.
        let child_image = tree.get(&child).and_then(|p| p.image.as_ref());
        let apart = |i: &Image| prefect::runs_a_flow_run(i) || prefect::is_multiprocessing(i);
        if child_image.is_some_and(apart) {
            return;
        }
        let now = self.host.uptime();
        let recent = (self.servers.checked.get(&parent.key)).is_some_and(|t| now < *t + RECHECK);
        if recent || !self.may_be_flow(parent) {
            return;
        }
        let servers = self.server_candidates(now);
        if servers.is_empty() {
            return;
        }
        let Some(server) = prefect::server_of(&*self.host, parent.key.pid, &servers) else {
            if self.servers.checked.len() >= CHECKED {
                self.servers.checked.clear();
            }
            self.servers.checked.insert(parent.key, now);
            return;
        };
        self.engine_by_child(parent, child, &prefect::ENGINE);
        if let Some(run) = self.runs.get_mut(&parent.key)
            && run.info.engine == super::KIND
        {
            run.adapter.served_by(server);
        }
    }

    /// A Python process (or a worker's `prefect flow-run execute`) that is the root of a
    /// plain command's run (`pipetrace run`), or in no run at all (the agent), and no server.
    fn may_be_flow(&self, p: &Proc) -> bool {
        let Some(image) = p.image.as_ref() else {
            return false;
        };
        let python = naming::is_python(naming::program_name(&image.path, &image.argv));
        let flow = python || prefect::runs_a_flow_run(image);
        if !flow || prefect::is_standing_server(image) || !self.prefect_on() {
            return false;
        }
        match self.members.get(&p.key).map(|m| m.role) {
            Some(Role::RunRoot) => {
                (self.runs.get(&p.key)).is_some_and(|r| r.info.engine == EngineKind::COMMAND)
            }
            None => matches!(self.mode, Mode::Agent),
            Some(_) => false,
        }
    }

    /// The standing servers' pids: under `pipetrace run` looked up among the host's
    /// processes now and then, as one may have started before the run.
    fn server_candidates(&mut self, now: Duration) -> Vec<u32> {
        let run = matches!(self.mode, Mode::Run { .. });
        if run && self.servers.scanned.is_none_or(|t| now >= t + RESCAN) {
            self.servers.scanned = Some(now);
            self.servers.known.clear();
            for s in self.host.processes() {
                let path = s.exe.as_ref().map(|e| e.display().to_string());
                let image = Image {
                    path: path.or_else(|| s.argv.first().cloned()).unwrap_or_default(),
                    argv: s.argv,
                    ..Default::default()
                };
                let key = ProcKey {
                    pid: s.pid,
                    start_ticks: s.start_ticks,
                };
                self.note_server(key, &image);
            }
        }
        self.servers.known.iter().map(|k| k.pid).collect()
    }
}
