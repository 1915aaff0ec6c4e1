//! Flows that talk to a standing Prefect server (`prefect server start`, reached through
//! `PREFECT_API_URL`), started before `pipetrace run` or the agent, or after the agent:
//! judged by that server's database as the flows with Prefect's temporary server are.
use std::{
    net::{Ipv4Addr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{Agent, pipetrace, read_jsonl, receiver::Receiver, spans::RecvSpan, stderr};

use super::{flow, judge, prefect_env, python, records};

/// `prefect server start` on a port of its own, its database in `home`: stopped on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(home: &Path) -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(pipetrace_e2e::venv_program("prefect", "prefect"))
            .args(["server", "start", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .envs(prefect_env(home))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self {
            child,
            url: format!("http://127.0.0.1:{port}/api"),
        };
        // It listens once its database is migrated and its services run.
        let deadline = Instant::now() + Duration::from_secs(180);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the Prefect server never listened"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        server
    }

    /// `flow.py` as a client of this server.
    fn flow(&self, home: &Path, cmd: &mut Command) {
        cmd.envs(prefect_env(home))
            .env("PREFECT_API_URL", &self.url);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn pipetrace_run_finds_a_flow_of_a_standing_server() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let out = home.path().join("t.otlp.jsonl");
    let mut cmd = pipetrace();
    server.flow(home.path(), &mut cmd);
    let o = cmd
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(python())
        .arg(flow())
        .arg("fail")
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "the flow fails on purpose: {}",
        stderr(&o)
    );
    drop(server);
    judge(home.path(), &read_jsonl(&out), true, false);
}

/// The flow under the agent, the server started before the agent (its first look finds
/// it) or after it (its exec is seen).
async fn agent_finds_a_flow_of_a_standing_server(server_first: bool) {
    let rx = Receiver::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut server = server_first.then(|| Server::start(home.path()));
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let server = server.get_or_insert_with(|| Server::start(home.path()));
    let mut cmd = Command::new(python());
    server.flow(home.path(), &mut cmd);
    let st = cmd
        .arg(flow())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let (_, flow_run, _) = records(home.path());
    let ours = |s: &RecvSpan| s.is_run() && s.str("pipetrace.run.label") == flow_run;
    let spans = rx
        .wait_for(Duration::from_secs(30), |s| s.iter().any(ours))
        .await;
    let trace = (spans.iter().find(|s| ours(s)))
        .unwrap_or_else(|| panic!("no run span of flow run {flow_run}"))
        .trace_id
        .clone();
    let spans: Vec<_> = spans.into_iter().filter(|s| s.trace_id == trace).collect();
    agent.stop();
    judge(home.path(), &spans, false, false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_of_a_server_started_before_it() {
    agent_finds_a_flow_of_a_standing_server(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_of_a_server_started_after_it() {
    agent_finds_a_flow_of_a_standing_server(false).await;
}
