//! A standing Prefect server (`prefect server start`, or its `--background` child) that flows
//! reach through `PREFECT_API_URL` or a profile. Such a flow starts no server of its own, and
//! its environment is not read; it is recognised by what the kernel shows: one of its TCP
//! connections is one the server process accepted (the same two ends, mirrored, in the same
//! network namespace). A server on another machine or in another namespace holds no such
//! connection here, so its flows are not Prefect runs (and its database could not be read).
use std::{net::SocketAddr, path::PathBuf};

use crate::{
    host::{Host, TcpLink},
    tree::Image,
};

/// Whether a process runs a Prefect API server: `prefect server start` in the foreground
/// (the CLI serves in-process) or the uvicorn process it, or a flow, starts.
pub fn is_standing_server(image: &Image) -> bool {
    let a = &image.argv;
    super::is_server(image)
        || (0..a.len().saturating_sub(2)).any(|i| {
            crate::attribution::naming::executable_name(&a[i]) == "prefect"
                && a[i + 1] == "server"
                && a[i + 2] == "start"
        })
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
pub fn server_of(host: &dyn Host, pid: u32, servers: &[u32]) -> Option<u32> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake::FakeHost;

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
