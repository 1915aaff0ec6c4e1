//! Flows of a standing Prefect server: recognised by their connection to the server, their
//! tasks named by the server's database.
use std::{net::SocketAddr, path::Path};

use super::*;
use crate::port::{ProcSnapshot, TcpLink, fake::FakeHost};

const SERVER: u32 = 500;

fn server_argv() -> Vec<String> {
    ["/venv/bin/python", "/venv/bin/prefect", "server", "start"]
        .map(String::from)
        .to_vec()
}

/// `flow` holds a connection the server accepted (and one to elsewhere).
fn connect(host: &FakeHost, flow: u32) {
    let a = |s: &str| s.parse::<SocketAddr>().unwrap();
    let link = |l, r| TcpLink {
        local: a(l),
        remote: a(r),
    };
    host.set_tcp_links(
        flow,
        vec![
            link("10.0.0.5:41000", "10.0.0.9:443"),
            link("127.0.0.1:41002", "127.0.0.1:4200"),
        ],
    );
    host.set_tcp_links(SERVER, vec![link("127.0.0.1:4200", "127.0.0.1:41002")]);
}

/// A server started before `pipetrace run`: only a look at the host's processes finds it.
fn running_server(host: &FakeHost) {
    host.add_process(ProcSnapshot {
        pid: SERVER,
        ppid: 1,
        start_ticks: 7,
        comm: "prefect".into(),
        exe: Some("/usr/bin/python3.11".into()),
        argv: server_argv(),
        cwd: None,
        uid: None,
    });
}

fn run_engine(s: &Sim) -> Option<engines::EngineKind> {
    s.out.iter().find_map(|f| match f {
        Finished::Run { info, .. } => Some(info.engine),
        _ => None,
    })
}

fn flow_with_a_task(s: &mut Sim, root: u32) {
    s.fork(root, 1);
    s.exec(root, "/usr/bin/python3", &["python3", "flow.py"]);
    s.fork(root + 1, root);
    s.exec(root + 1, "/usr/bin/sort", &["sort", "/etc/services"]);
    s.exit(root + 1, 0);
    s.exit(root, 0);
    s.out
        .extend(s.attr.poll(true, &Default::default()).finished);
}

#[test]
fn pipetrace_run_finds_a_flow_by_its_connection_to_a_standing_server() {
    let host = FakeHost::new(0, 1_000_000_000);
    running_server(&host);
    connect(&host, 60);
    let mut s = Sim::on(Mode::Run { root_pid: 60 }, Default::default(), host);
    flow_with_a_task(&mut s, 60);
    assert_eq!(run_engine(&s), Some(engines::prefect::KIND));
    // No database the server has open: the task is named by its program, not guessed.
    assert_eq!(s.tasks(), [(61, "sort".to_string())]);
}

#[test]
fn a_python_process_connected_to_no_server_stays_a_plain_command() {
    let host = FakeHost::new(0, 1_000_000_000);
    running_server(&host);
    connect(&host, 60);
    // Its connection is to another process, not the server's accepted one.
    host.set_tcp_links(SERVER, Vec::new());
    let mut s = Sim::on(Mode::Run { root_pid: 60 }, Default::default(), host);
    flow_with_a_task(&mut s, 60);
    assert_eq!(run_engine(&s), Some(engines::EngineKind::COMMAND));
}

#[test]
fn the_agent_finds_a_flow_of_a_server_it_saw_start() {
    let host = FakeHost::new(0, 1_000_000_000);
    connect(&host, 70);
    let mut s = Sim::on(Mode::Agent, Default::default(), host);
    s.fork(SERVER, 1);
    let argv = server_argv();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    s.exec(SERVER, "/venv/bin/prefect", &argv);
    flow_with_a_task(&mut s, 70);
    assert_eq!(run_engine(&s), Some(engines::prefect::KIND));
    assert_eq!(s.tasks(), [(71, "sort".to_string())]);
}

/// The server's database, as Prefect 3 keeps it (the columns pipetrace reads), with one
/// flow run and one task run over the test's first second.
fn prefect_db(path: &Path) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE flow (id TEXT, name TEXT);
         CREATE TABLE flow_run (id TEXT, name TEXT, flow_id TEXT, start_time TEXT,
           created TEXT, labels TEXT, parent_task_run_id TEXT, end_time TEXT);
         CREATE TABLE task_run (id TEXT, name TEXT, flow_run_id TEXT, start_time TEXT,
           end_time TEXT, labels TEXT);
         CREATE TABLE task_run_state (task_run_id TEXT, type TEXT, timestamp TEXT);
         INSERT INTO flow VALUES ('f1', 'lab-pipeline');
         INSERT INTO flow_run VALUES ('fr1', 'modest-anteater', 'f1',
           '1970-01-01 00:00:00.000000', '1970-01-01 00:00:00.000000', NULL, NULL, NULL);
         INSERT INTO task_run VALUES ('tr1', 'sort_words-1b4', 'fr1',
           '1970-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000', NULL);
         INSERT INTO task_run_state VALUES ('tr1', 'RUNNING', '1970-01-01 00:00:00.000000'),
           ('tr1', 'COMPLETED', '1970-01-01 00:00:01.000000');",
    )
    .unwrap();
}

/// Another client's flow run started while ours ran, with a task run that holds our process
/// and started before ours (processes start 5 s into the test's clock).
fn another_clients_flow_run(path: &Path) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "UPDATE flow_run SET start_time = '1970-01-01 00:00:03.500000';
         UPDATE task_run SET start_time = '1970-01-01 00:00:04.500000',
           end_time = '1970-01-01 00:00:10.000000';
         DELETE FROM task_run_state;
         INSERT INTO flow VALUES ('f2', 'their-pipeline');
         INSERT INTO flow_run VALUES ('fr2', 'other-run', 'f2',
           '1970-01-01 00:00:04.000000', '1970-01-01 00:00:04.000000', NULL, NULL, NULL);
         INSERT INTO task_run VALUES ('tr2', 'their_task-9z9', 'fr2',
           '1970-01-01 00:00:04.200000', '1970-01-01 00:00:05.000001', NULL);",
    )
    .unwrap();
}

#[test]
fn another_clients_flow_runs_on_the_same_server_name_none_of_ours() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("prefect.db");
    prefect_db(&db);
    another_clients_flow_run(&db);
    let host = FakeHost::new(0, 1_000_000_000);
    running_server(&host);
    connect(&host, 60);
    host.set_open_files(SERVER, vec![db]);
    host.open_databases_with(crate::disk_host::sqlite);
    let mut s = Sim::on(Mode::Run { root_pid: 60 }, Default::default(), host);
    s.t = 5_000_000_000;
    flow_with_a_task(&mut s, 60);
    assert_eq!(s.tasks(), [(61, "sort_words-1b4".to_string())]);
}

#[test]
fn a_standing_servers_database_names_the_flows_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("prefect.db");
    prefect_db(&db);
    let host = FakeHost::new(0, 1_000_000_000);
    running_server(&host);
    connect(&host, 60);
    host.set_open_files(SERVER, vec![db]);
    host.open_databases_with(crate::disk_host::sqlite);
    let mut s = Sim::on(Mode::Run { root_pid: 60 }, Default::default(), host);
    flow_with_a_task(&mut s, 60);
    assert_eq!(s.tasks(), [(61, "sort_words-1b4".to_string())]);
    let run = s.out.iter().find_map(|f| match f {
        Finished::Run { info, .. } => Some(info.clone()),
        _ => None,
    });
    let run = run.unwrap();
    assert_eq!(
        (run.engine, run.name.as_str()),
        (engines::prefect::KIND, "lab-pipeline")
    );
}

#[test]
fn prefect_server_start_in_the_background_is_no_flow() {
    let mut s = Sim::new(Mode::Agent, Default::default());
    s.fork(80, 1);
    s.exec(
        80,
        "/venv/bin/prefect",
        &["/venv/bin/prefect", "server", "start", "--background"],
    );
    // It starts the server as its child (as a flow starts the temporary one) and exits.
    s.fork(81, 80);
    s.exec(
        81,
        "/venv/bin/python",
        &[
            "/venv/bin/python",
            "-m",
            "uvicorn",
            "--factory",
            "prefect.server.api.server:create_app",
        ],
    );
    s.exit(80, 0);
    s.exit(81, 0);
    s.out
        .extend(s.attr.poll(true, &Default::default()).finished);
    assert_eq!(run_engine(&s), None, "no run: {:?}", s.tasks());
}

#[test]
fn a_flow_run_that_flow_serve_starts_is_the_flow_not_the_serving_process() {
    let host = FakeHost::new(0, 1_000_000_000);
    // Both the serving process and the flow-run process it starts talk to the server.
    connect(&host, 90);
    connect(&host, 91);
    let mut s = Sim::on(Mode::Agent, Default::default(), host);
    s.fork(SERVER, 1);
    let argv = server_argv();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    s.exec(SERVER, "/venv/bin/prefect", &argv);
    s.fork(90, 1);
    s.exec(90, "/usr/bin/python3", &["python3", "serve.py"]);
    // Prefect 3.8 runs a served flow run in a process multiprocessing spawns, after its
    // resource tracker; a worker's runner in `python -m prefect.engine`.
    s.fork(89, 90);
    let tracker = "from multiprocessing.resource_tracker import main;main(17)";
    s.exec(89, "/usr/bin/python3", &["python3", "-B", "-c", tracker]);
    s.fork(91, 90);
    let spawned = "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=18)";
    s.exec(91, "/usr/bin/python3", &["python3", "-B", "-c", spawned]);
    s.fork(92, 91);
    s.exec(92, "/usr/bin/sort", &["sort", "/etc/services"]);
    s.exit(92, 0);
    s.exit(91, 0);
    s.out
        .extend(s.attr.poll(true, &Default::default()).finished);
    let roots: Vec<u32> = (s.out.iter())
        .filter_map(|f| match f {
            Finished::Run { proc, .. } => Some(proc.key.pid),
            _ => None,
        })
        .collect();
    assert_eq!(roots, [91], "the flow-run process is the run");
    assert_eq!(s.tasks(), [(92, "sort".to_string())]);
}
