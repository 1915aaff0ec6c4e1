//! Flows that talk to a standing Prefect server (`prefect server start`, reached through
//! `PREFECT_API_URL`), started before `pipetrace run` or the agent, or after the agent:
//! judged by that server's database as the flows with Prefect's temporary server are.
//!
//! A server takes tens of seconds to start, so the cases share servers: one test runs them
//! in sequence (see [`flows_of_standing_servers`]), each judged by its own flow runs only.
use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    net::{Ipv4Addr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use pipetrace_e2e::{Agent, pipetrace, read_jsonl, receiver::Receiver, spans::Trace, stderr};

use super::{
    assert_tagged_tools_under_their_task_runs, flow, judge, prefect_env, python, top_flow_runs,
};

fn data(script: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/prefect")
        .join(script)
}

/// `prefect server start` on a port of its own, its database in `home`: stopped on drop.
struct Server {
    /// The foreground server, our child; else the background one's pid.
    child: Option<Child>,
    pid: u32,
    url: String,
}

impl Server {
    /// `--background`: the command starts the server as its child and exits.
    fn start_as(home: &Path, background: bool) -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(pipetrace_e2e::venv_program("prefect", "prefect"));
        cmd.args(["server", "start", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(background.then_some("--background"))
            .envs(prefect_env(home))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let (child, pid) = if background {
            assert!(cmd.status().unwrap().success());
            let pid = std::fs::read_to_string(home.join("server.pid")).unwrap();
            (None, pid.trim().parse().unwrap())
        } else {
            let child = cmd.spawn().unwrap();
            let pid = child.id();
            (Some(child), pid)
        };
        let server = Self {
            child,
            pid,
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

    fn gone(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            // SAFETY: signal 0 only asks whether the process is there.
            None => (unsafe { libc::kill(self.pid as i32, 0) }) != 0,
        }
    }

    /// `flow.py` as a client of this server.
    fn flow(&self, home: &Path, cmd: &mut Command) {
        cmd.envs(prefect_env(home))
            .env("PREFECT_API_URL", &self.url);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signalling the server this test started.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.gone() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        if let Some(c) = self.child.as_mut() {
            let _ = c.wait();
        }
    }
}

impl Server {
    /// The port, as in the server's command line.
    fn port(&self) -> &str {
        (self.url.rsplit(':').next().unwrap()).trim_end_matches("/api")
    }
}

/// The one top flow run that `home`'s database holds beyond `before`: the case's own.
fn new_flow_run(home: &Path, before: &BTreeSet<String>) -> String {
    let new: Vec<_> = top_flow_runs(home).difference(before).cloned().collect();
    assert_eq!(new.len(), 1, "one new top flow run: {new:?}");
    new.into_iter().next().unwrap()
}

/// A state directory of its own for one case's agent or `pipetrace run`, as a test of its
/// own would have: no other case's task history.
fn own_state() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Every case on as few servers as they allow: agent 1 watches before server A (foreground)
/// and server C (`--background`) start; agent 2 starts after A. Each case runs, and a failed
/// one is named at the end; each judges only the flow runs it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_of_standing_servers() {
    let (home_a, home_c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a_dir, c_dir) = (home_a.path().to_path_buf(), home_c.path().to_path_buf());
    let mut failed = Vec::new();
    let rx = Arc::new(Receiver::start().await);
    let (agent, _state) = agent_of(&rx);
    let (a, c) = (a_dir.clone(), c_dir.clone());
    let a = std::thread::spawn(move || Server::start_as(&a, false));
    let c = std::thread::spawn(move || Server::start_as(&c, true));
    let (a, c) = (Arc::new(a.join().unwrap()), Arc::new(c.join().unwrap()));
    let after = agent_finds_a_flow(rx.clone(), a.clone(), a_dir.clone());
    case(&mut failed, "a server started after the agent", after).await;
    let bg = agent_finds_a_flow(rx.clone(), c.clone(), c_dir.clone());
    case(&mut failed, "a server started in the background", bg).await;
    drop(c);
    agent.stop();
    let rx = Arc::new(Receiver::start().await);
    let (agent, _state) = agent_of(&rx);
    let before = agent_finds_a_flow(rx.clone(), a.clone(), a_dir.clone());
    case(&mut failed, "a server started before the agent", before).await;
    let served = flow_serve(rx.clone(), a.clone(), a_dir.clone());
    case(&mut failed, "a flow run that flow.serve() starts", served).await;
    agent.stop();
    let (s, h) = (a.clone(), a_dir.clone());
    let run = async move { pipetrace_run_finds_a_flow(&s, &h) };
    case(&mut failed, "pipetrace run", run).await;
    let (s, h) = (a.clone(), a_dir.clone());
    let other = async move { another_clients_flow_names_none_of_a_flows_processes(&s, &h) };
    case(
        &mut failed,
        "another client's flow on the same server",
        other,
    )
    .await;
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
}

/// An agent that sends to `rx`, with a state directory of its own (kept while it runs).
fn agent_of(rx: &Receiver) -> (Agent, tempfile::TempDir) {
    let state = own_state();
    let dir = (
        "PIPETRACE_DIAGNOSIS__STATE_DIR",
        state.path().to_str().unwrap(),
    );
    let agent = Agent::start_with(&["--endpoint", &rx.grpc_url()], &[dir]);
    (agent, state)
}

/// Runs one case to its end; a panic (its message printed above) is noted in `failed`.
async fn case(failed: &mut Vec<String>, name: &str, f: impl Future<Output = ()> + Send + 'static) {
    eprintln!("== case: {name}");
    if let Err(e) = tokio::spawn(f).await {
        let p = e.into_panic();
        let msg = (p.downcast_ref::<String>().cloned())
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        failed.push(format!("{name}: {msg}"));
    }
}

/// The failing flow under `pipetrace run`, a client of `server`.
fn pipetrace_run_finds_a_flow(server: &Server, home: &Path) {
    let before = top_flow_runs(home);
    let state = own_state();
    let mut cmd = pipetrace();
    cmd.env("PIPETRACE_DIAGNOSIS__STATE_DIR", state.path());
    server.flow(home, &mut cmd);
    let spans = super::failing_flow_under_run(cmd, home, super::Prefect::Pinned);
    judge(home, &new_flow_run(home, &before), &spans, true, false);
}

/// The flow under the agent that sends to `rx`, a client of `server`, which started before
/// or after the agent or in the background.
async fn agent_finds_a_flow(rx: Arc<Receiver>, server: Arc<Server>, home: PathBuf) {
    let before = top_flow_runs(&home);
    let mut cmd = Command::new(python());
    server.flow(&home, &mut cmd);
    let st = cmd
        .arg(flow())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let run = new_flow_run(&home, &before);
    let (spans, traced) = super::flow_run_trace(&rx, &home, &run).await;
    // The command that started the server (its port in its command line) is no flow.
    assert!(
        !(spans.iter())
            .any(|s| s.is_run() && s.str("process.command_line").contains(server.port())),
        "a run of the server's own"
    );
    judge(&home, &run, &traced, false, false);
}

/// Task runs of flow `flow`'s runs (and their subflows') that ran, by id -> name.
fn task_runs_of(home: &Path, flow: &str) -> BTreeMap<String, String> {
    let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
    let mut stmt = db
        .prepare(
            "WITH RECURSIVE runs(id) AS (SELECT fr.id FROM flow_run fr JOIN flow f \
             ON f.id = fr.flow_id WHERE f.name = ?1 AND fr.parent_task_run_id IS NULL \
             UNION SELECT c.id FROM flow_run c JOIN task_run t ON t.id = c.parent_task_run_id \
             JOIN runs ON runs.id = t.flow_run_id) \
             SELECT tr.id, tr.name FROM task_run tr JOIN runs ON runs.id = tr.flow_run_id \
             WHERE tr.state_name IS NOT 'Cached' AND NOT EXISTS \
             (SELECT 1 FROM flow_run c WHERE c.parent_task_run_id = tr.id)",
        )
        .unwrap();
    stmt.query_map([flow], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Waits until the server's database holds a run of flow `flow`.
fn wait_for_flow_run(home: &Path, flow: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
        let n: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM flow_run fr JOIN flow f ON f.id = fr.flow_id \
                 WHERE f.name = ?1",
                [flow],
                |r| r.get(0),
            )
            .unwrap_or(0);
        if n > 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("no run of flow {flow}");
}

/// A standing server's database holds every client's runs: another client's flow (ten
/// mapped task runs on four threads) that runs while a traced flow's body starts processes
/// between its own task runs names none of them.
fn another_clients_flow_names_none_of_a_flows_processes(server: &Server, home: &Path) {
    // Its own output file: the server's home holds other cases' too.
    let state = own_state();
    let (out, mark) = (state.path().join("t.otlp.jsonl"), state.path().join("go"));
    let mut cmd = pipetrace();
    cmd.env("PIPETRACE_DIAGNOSIS__STATE_DIR", state.path());
    server.flow(home, &mut cmd);
    let traced = cmd
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(python())
        .arg(data("waits.py"))
        .arg(&mark)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_flow_run(home, "waits");
    let mut other = Command::new(python());
    server.flow(home, &mut other);
    let st = other
        .arg(data("mapped.py"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(&mark, "").unwrap();
    let o = traced.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&out);
    let t = Trace::new(&spans);
    t.assert_well_formed();
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(
        (
            run.str("pipetrace.run.engine"),
            run.str("cicd.pipeline.name")
        ),
        ("prefect", "waits")
    );
    let (ours, theirs) = (task_runs_of(home, "waits"), task_runs_of(home, "mapped"));
    assert_eq!(theirs.len(), 10);
    let mut found = BTreeMap::new();
    for task in t.tasks() {
        let id = task.str("cicd.pipeline.task.run.id").to_string();
        let name = task.str("cicd.pipeline.task.name").to_string();
        assert!(!theirs.contains_key(&id), "{name} is the other client's");
        if ours.contains_key(&id) {
            found.insert(id, name);
        }
    }
    assert_eq!(found, ours, "each task run of the flow, named by it");
    assert_eq!(assert_tagged_tools_under_their_task_runs(&t), 2);
    let body = (spans.iter()).filter(|s| s.str("process.command_line").contains("BODY"));
    assert!(body.count() > 5, "the body ran while the other flow did");
}

/// Waits until the server's database holds one top flow run beyond `before` and says it
/// ended: its id.
fn wait_for_flow_run_end(home: &Path, before: &BTreeSet<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        let new: Vec<_> = top_flow_runs(home).difference(before).cloned().collect();
        if let [run] = new.as_slice() {
            let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
            let state: Option<String> = db
                .query_row(
                    "SELECT state_type FROM flow_run WHERE id = ?1",
                    [run],
                    |r| r.get(0),
                )
                .unwrap_or(None);
            if matches!(state.as_deref(), Some("COMPLETED" | "FAILED" | "CRASHED")) {
                return run.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("the served flow run never ended");
}

/// A child process killed (and reaped) on drop, so that a failed case leaves none behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// `flow.serve()`: the serving process starts each flow run in a process of its own (one
/// multiprocessing spawns, after its resource tracker), which is the run; the serving
/// process, connected to the server too, is none.
async fn flow_serve(rx: Arc<Receiver>, server: Arc<Server>, home: PathBuf) {
    let home = home.as_path();
    let before = top_flow_runs(home);
    let mut serve = Command::new(python());
    server.flow(home, &mut serve);
    let serving = serve
        .arg(data("served.py"))
        .current_dir(data(""))
        .env("PREFECT_RUNNER_POLL_FREQUENCY", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serving = Reaped(serving);
    let mut ask = Command::new(pipetrace_e2e::venv_program("prefect", "prefect"));
    server.flow(home, &mut ask);
    // The deployment exists once the serving process has registered it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let st = (ask.args(["deployment", "run", "lab-pipeline/served"]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if st.success() {
            break;
        }
        assert!(Instant::now() < deadline, "no deployment to run");
        std::thread::sleep(Duration::from_secs(1));
        ask = Command::new(pipetrace_e2e::venv_program("prefect", "prefect"));
        server.flow(home, &mut ask);
    }
    let run = wait_for_flow_run_end(home, &before);
    let (_, spans) = super::flow_run_trace(&rx, home, &run).await;
    let serving_pid = serving.0.id();
    drop(serving);
    let run_span = (spans.iter().find(|s| s.is_run())).expect("the run span");
    assert!(
        run_span.int("process.pid") != Some(i64::from(serving_pid)),
        "the run is the flow-run process, not the serving one: {}",
        run_span.str("process.command_line")
    );
    judge(home, &run, &spans, false, false);
}
