//! Flows that talk to a standing Prefect server (`prefect server start`, reached through
//! `PREFECT_API_URL`), started before `pipetrace run` or the agent, or after the agent:
//! judged by that server's database as the flows with Prefect's temporary server are.
use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{Agent, pipetrace, read_jsonl, receiver::Receiver, spans::Trace, stderr};

use super::{assert_tagged_tools_under_their_task_runs, flow, judge, prefect_env, python};

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
    fn start(home: &Path) -> Self {
        Self::start_as(home, false)
    }

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

#[test]
fn pipetrace_run_finds_a_flow_of_a_standing_server() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let mut cmd = pipetrace();
    server.flow(home.path(), &mut cmd);
    let spans = super::failing_flow_under_run(cmd, home.path());
    drop(server);
    judge(home.path(), &spans, true, false);
}

/// When the server starts: before the agent (its first look finds it), after it (its exec is
/// seen), or after it with `--background` (a child of a command that exits at once).
#[derive(Clone, Copy, PartialEq)]
enum Start {
    Before,
    After,
    BackgroundAfter,
}

/// The flow under the agent, its server started as `start` says.
async fn agent_finds_a_flow_of_a_standing_server(start: Start) {
    let rx = Receiver::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut server = (start == Start::Before).then(|| Server::start(home.path()));
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let background = start == Start::BackgroundAfter;
    let server = server.get_or_insert_with(|| Server::start_as(home.path(), background));
    let mut cmd = Command::new(python());
    server.flow(home.path(), &mut cmd);
    let st = cmd
        .arg(flow())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let (spans, traced) = super::flow_run_trace(&rx, home.path()).await;
    // The command that started the server (its port in its command line) is no flow.
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/api");
    assert!(
        !(spans.iter()).any(|s| s.is_run() && s.str("process.command_line").contains(port)),
        "a run of the server's own"
    );
    agent.stop();
    judge(home.path(), &traced, false, false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_of_a_server_started_before_it() {
    agent_finds_a_flow_of_a_standing_server(Start::Before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_of_a_server_started_after_it() {
    agent_finds_a_flow_of_a_standing_server(Start::After).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_of_a_server_started_in_the_background() {
    agent_finds_a_flow_of_a_standing_server(Start::BackgroundAfter).await;
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
#[test]
fn another_clients_flow_on_the_same_server_names_none_of_a_flows_processes() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let (out, mark) = (home.path().join("t.otlp.jsonl"), home.path().join("go"));
    let mut cmd = pipetrace();
    server.flow(home.path(), &mut cmd);
    let traced = cmd
        .args(["-o", out.to_str().unwrap(), "run", "--"])
        .arg(python())
        .arg(data("waits.py"))
        .arg(&mark)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_flow_run(home.path(), "waits");
    let mut other = Command::new(python());
    server.flow(home.path(), &mut other);
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
    drop(server);
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
    let (ours, theirs) = (
        task_runs_of(home.path(), "waits"),
        task_runs_of(home.path(), "mapped"),
    );
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

/// Waits until the server's database says the top flow run ended.
fn wait_for_flow_run_end(home: &Path) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        let db = rusqlite::Connection::open(home.join("prefect.db")).unwrap();
        let state: Option<String> = db
            .query_row(
                "SELECT state_type FROM flow_run WHERE parent_task_run_id IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap_or(None);
        if matches!(state.as_deref(), Some("COMPLETED" | "FAILED" | "CRASHED")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("the served flow run never ended");
}

/// `flow.serve()`: the serving process starts each flow run in a process of its own (one
/// multiprocessing spawns, after its resource tracker), which is the run; the serving
/// process, connected to the server too, is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_finds_a_flow_run_that_flow_serve_starts() {
    let rx = Receiver::start().await;
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let agent = Agent::start(&["--endpoint", &rx.grpc_url()]);
    let mut serve = Command::new(python());
    server.flow(home.path(), &mut serve);
    let mut serving = serve
        .arg(data("served.py"))
        .current_dir(data(""))
        .env("PREFECT_RUNNER_POLL_FREQUENCY", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ask = Command::new(pipetrace_e2e::venv_program("prefect", "prefect"));
    server.flow(home.path(), &mut ask);
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
        server.flow(home.path(), &mut ask);
    }
    wait_for_flow_run_end(home.path());
    let (_, spans) = super::flow_run_trace(&rx, home.path()).await;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(serving.id() as i32, libc::SIGTERM) };
    let _ = serving.wait();
    let run = (spans.iter().find(|s| s.is_run())).expect("the run span");
    assert!(
        run.int("process.pid") != Some(i64::from(serving.id())),
        "the run is the flow-run process, not the serving one: {}",
        run.str("process.command_line")
    );
    agent.stop();
    judge(home.path(), &spans, false, false);
}
