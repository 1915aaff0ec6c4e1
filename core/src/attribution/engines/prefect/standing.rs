//! A standing Prefect server (`prefect server start`, or its `--background` child) that flows
//! reach through `PREFECT_API_URL` or a profile. Such a flow starts no server of its own, and
//! its environment is not read; it is recognised by what the kernel shows: one of its TCP
//! connections is one the server process accepted (the same two ends, mirrored, in the same
//! network namespace). A server on another machine or in another namespace holds no such
//! connection here, so its flows are not Prefect runs (and its database could not be read).
use std::{net::SocketAddr, path::PathBuf};

use super::db::FlowRun;
use crate::{
    port::{Host, TcpLink},
    tree::Image,
};

/// Whether a process runs a Prefect API server: `prefect server start` in the foreground
/// (the CLI serves in-process) or the uvicorn process it, or a flow, starts.
pub(crate) fn is_standing_server(image: &Image) -> bool {
    let a = &image.argv;
    super::is_server(image)
        || (0..a.len().saturating_sub(2)).any(|i| {
            crate::attribution::naming::executable_name(&a[i]) == "prefect"
                && a[i + 1] == "server"
                && a[i + 2] == "start"
        })
}

/// Whether a process runs one flow run that a runner or worker started: `python -m
/// prefect.engine` (`flow.serve()`, a process worker's runner) or `prefect flow-run execute`
/// (a worker's job). Its parent is no flow; it is one.
pub(crate) fn runs_a_flow_run(image: &Image) -> bool {
    let a = &image.argv;
    let engine = a
        .windows(2)
        .any(|w| w[0] == "-m" && w[1] == "prefect.engine");
    engine
        || a.windows(3).any(|w| {
            crate::attribution::naming::executable_name(&w[0]) == "prefect"
                && w[1] == "flow-run"
                && w[2] == "execute"
        })
}

/// Whether a process is one of Python's `multiprocessing` helpers (a spawned worker, the
/// resource tracker): `flow.serve()` runs each flow run in a spawned process, which is the
/// flow, not a task of the serving process.
pub(crate) fn is_multiprocessing(image: &Image) -> bool {
    let a = &image.argv;
    a.windows(2)
        .any(|w| w[0] == "-c" && w[1].starts_with("from multiprocessing."))
}

/// An address as one family: a dual-stack server sees an IPv4 client as `::ffff:a.b.c.d`.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

fn mirrored(mine: &TcpLink, theirs: &TcpLink) -> bool {
    canonical(mine.local) == canonical(theirs.remote)
        && canonical(mine.remote) == canonical(theirs.local)
}

fn net_namespace(host: &dyn Host, pid: u32) -> Option<PathBuf> {
    host.read_link(&PathBuf::from(format!("/proc/{pid}/ns/net")))
        .ok()
}

/// The server among `servers` that process `pid` is connected to, if any.
pub(crate) fn server_of(host: &dyn Host, pid: u32, servers: &[u32]) -> Option<u32> {
    let mine = host.tcp_links(pid);
    if mine.is_empty() {
        return None;
    }
    let ns = net_namespace(host, pid);
    servers.iter().copied().filter(|&s| s != pid).find(|&s| {
        let theirs = host.tcp_links(s);
        let linked = mine.iter().any(|m| theirs.iter().any(|t| mirrored(m, t)));
        linked && net_namespace(host, s) == ns
    })
}

/// The flow runs of one flow process among those every client of a standing server started
/// since it did (`runs`, by start): the database says nothing of processes. A process runs
/// its top-level flow runs one after another, so its first one is the first to start, and a
/// later one starts after the one before ended; one that started while another ran is
/// another process's. Subflows follow their parent flow run (`parent_flow`: the flow run of
/// a task run).
pub(crate) fn own_flow_runs(
    runs: &[FlowRun],
    parent_flow: impl Fn(&str) -> Option<String>,
) -> Vec<FlowRun> {
    let mut own: Vec<FlowRun> = Vec::new();
    let mut last_top: Option<&FlowRun> = None;
    for r in runs {
        let take = match &r.parent_task {
            Some(task) => parent_flow(task).is_some_and(|f| own.iter().any(|o| o.id == f)),
            None => last_top.is_none_or(|t| t.end.is_some_and(|e| r.start >= Some(e))),
        };
        if take {
            if r.parent_task.is_none() {
                last_top = Some(r);
            }
            own.push(r.clone());
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::fake::FakeHost;

    fn link(local: &str, remote: &str) -> TcpLink {
        TcpLink {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
        }
    }

    fn image(argv: &[&str]) -> Image {
        Image {
            path: argv[0].into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn flow_run(id: &str, start: u64, end: Option<u64>, parent_task: Option<&str>) -> FlowRun {
        let at = |s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000 + s);
        FlowRun {
            id: id.into(),
            name: id.into(),
            flow: "f".into(),
            start: Some(at(start)),
            end: end.map(at),
            traceparent: None,
            parent_task: parent_task.map(String::from),
        }
    }

    #[test]
    fn another_clients_flow_run_that_starts_while_ours_runs_is_not_ours() {
        let runs = [
            flow_run("mine", 0, Some(10), None),
            flow_run("theirs", 2, None, None),
            flow_run("my-sub", 3, Some(4), Some("my-task")),
            flow_run("their-sub", 5, None, Some("their-task")),
            // Called after the first ended, in the same script.
            flow_run("mine-2", 11, None, None),
            flow_run("theirs-2", 12, None, None),
        ];
        let parent = |t: &str| Some(if t == "my-task" { "mine" } else { "theirs" }.into());
        let own: Vec<String> = (own_flow_runs(&runs, parent).into_iter())
            .map(|r| r.id)
            .collect();
        assert_eq!(own, ["mine", "my-sub", "mine-2"]);
    }

    #[test]
    fn prefect_server_start_is_a_standing_server() {
        for argv in [
            &["/venv/bin/python", "/venv/bin/prefect", "server", "start"][..],
            &["prefect", "server", "start", "--port", "4300"],
            &["python3", "-m", "prefect", "server", "start"],
            &[
                "python",
                "-m",
                "uvicorn",
                "--factory",
                "prefect.server.api.server:create_app",
            ],
        ] {
            assert!(is_standing_server(&image(argv)), "{argv:?}");
        }
        assert!(runs_a_flow_run(&image(&[
            "python3",
            "-m",
            "prefect.engine"
        ])));
        assert!(runs_a_flow_run(&image(&["prefect", "flow-run", "execute"])));
        assert!(!runs_a_flow_run(&image(&["python3", "flow.py"])));
        let spawned = "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=18)";
        assert!(is_multiprocessing(&image(&["python", "-B", "-c", spawned])));
        assert!(!is_multiprocessing(&image(&["python", "-c", "print(1)"])));
        for argv in [
            &["/venv/bin/python", "/venv/bin/prefect", "server", "stop"][..],
            &["python", "flow.py", "server", "start"],
            &["prefect", "worker", "start"],
        ] {
            assert!(!is_standing_server(&image(argv)), "{argv:?}");
        }
    }

    #[test]
    fn a_flow_is_the_servers_whose_accepted_connection_mirrors_its_own() {
        let host = FakeHost::default();
        // The flow talks to the server on 4200 and to a database elsewhere.
        host.set_tcp_links(
            10,
            vec![
                link("127.0.0.1:50000", "10.0.0.9:5432"),
                link("127.0.0.1:50002", "127.0.0.1:4200"),
            ],
        );
        // Another server on 4300, with a client of its own; a dual-stack server on 4200.
        host.set_tcp_links(20, vec![link("127.0.0.1:4300", "127.0.0.1:50010")]);
        host.set_tcp_links(
            30,
            vec![link("[::ffff:127.0.0.1]:4200", "[::ffff:127.0.0.1]:50002")],
        );
        assert_eq!(server_of(&host, 10, &[20, 30]), Some(30));
        assert_eq!(server_of(&host, 10, &[20]), None);
        // A process with no connection is no server's flow.
        assert_eq!(server_of(&host, 11, &[20, 30]), None);
    }
}
