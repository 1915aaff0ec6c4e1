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
        engines::{Claim, Context, Watch, prefect},
        naming,
    },
    event::ProcKey,
    port::Host,
    tree::{Image, Proc, Tree},
};

/// How long a process found connected to no server is not asked again.
const RECHECK: Duration = Duration::from_secs(1);
/// How often `pipetrace run` looks through the host's processes for servers.
const RESCAN: Duration = Duration::from_secs(5);
/// Processes remembered as connected to no server, at most.
const CHECKED: usize = 4096;

/// The standing servers this machine runs, and the flows found talking to them.
#[derive(Default)]
pub(super) struct Servers {
    /// The standing servers' processes.
    known: Vec<ProcKey>,
    /// When the host's processes were last looked through.
    scanned: Option<Duration>,
    /// Processes found connected to no server, and when.
    checked: HashMap<ProcKey, Duration>,
}

pub(super) fn watch() -> Box<dyn Watch> {
    Box::new(Servers::default())
}

impl Watch for Servers {
    fn exec(&mut self, tree: &Tree, key: ProcKey, cx: &Context, host: &dyn Host) -> Option<Claim> {
        let image = tree.get(&key)?.image.as_ref()?;
        self.note(key, image);
        self.flow_of_standing_server(tree, key, cx, host)
    }

    fn forget(&mut self, dropped: &[Proc]) {
        for p in dropped {
            self.known.retain(|k| *k != p.key);
            self.checked.remove(&p.key);
        }
    }
}

impl Servers {
    /// Notes a process that execs (or was found running) a standing Prefect server.
    fn note(&mut self, key: ProcKey, image: &Image) {
        if prefect::is_standing_server(image) && !self.known.contains(&key) {
            self.known.push(key);
        }
    }

    /// At `child`'s exec: whether its parent is a flow talking to a standing Prefect server;
    /// then the parent is that flow's Prefect run, and `child` its first process.
    fn flow_of_standing_server(
        &mut self,
        tree: &Tree,
        child: ProcKey,
        cx: &Context,
        host: &dyn Host,
    ) -> Option<Claim> {
        let parent = tree.get(&child)?.parent.and_then(|k| tree.get(&k))?;
        // A runner's or worker's flow-run process, or one `flow.serve()` spawns: it is the
        // flow, found by its own children.
        let child_image = tree.get(&child).and_then(|p| p.image.as_ref());
        let apart = |i: &Image| prefect::runs_a_flow_run(i) || prefect::is_multiprocessing(i);
        if child_image.is_some_and(apart) {
            return None;
        }
        let now = host.uptime();
        let recent = (self.checked.get(&parent.key)).is_some_and(|t| now < *t + RECHECK);
        if recent || !may_be_flow(parent, cx) {
            return None;
        }
        let servers = self.candidates(now, cx, host);
        if servers.is_empty() {
            return None;
        }
        let Some(server) = prefect::server_of(host, parent.key.pid, &servers) else {
            if self.checked.len() >= CHECKED {
                self.checked.clear();
            }
            self.checked.insert(parent.key, now);
            return None;
        };
        Some(Claim {
            parent: parent.key,
            server: Some(server),
        })
    }

    /// The standing servers' pids: under `pipetrace run` looked up among the host's
    /// processes now and then, as one may have started before the run.
    fn candidates(&mut self, now: Duration, cx: &Context, host: &dyn Host) -> Vec<u32> {
        if !cx.agent && self.scanned.is_none_or(|t| now >= t + RESCAN) {
            self.scanned = Some(now);
            self.known.clear();
            for s in host.processes() {
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
                self.note(key, &image);
            }
        }
        self.known.iter().map(|k| k.pid).collect()
    }
}

/// A Python process (or a worker's `prefect flow-run execute`) that may become a run (the
/// root of a plain command's run, or in no run under the agent), and no server.
fn may_be_flow(p: &Proc, cx: &Context) -> bool {
    let Some(image) = p.image.as_ref() else {
        return false;
    };
    let python = naming::is_python(naming::program_name(&image.path, &image.argv));
    let flow = python || prefect::runs_a_flow_run(image);
    flow && !prefect::is_standing_server(image) && (cx.may_become_run)(p.key)
}
