//! One agent per node: a second one on the same state directory is refused, naming the
//! first; `doctor` shows every running agent.
use std::time::{Duration, Instant};

use pipetrace_e2e::{pipetrace, stderr};

#[test]
fn a_second_agent_on_the_node_is_refused_and_doctor_shows_the_running_one() {
    let agent = pipetrace_e2e::Agent::start(&["-o", "/dev/null"]);
    let pid = agent.pid();
    let started = Instant::now();
    let second = pipetrace()
        .args(["-o", "/dev/null", "agent"])
        .output()
        .unwrap();
    assert!(!second.status.success(), "the second agent must not run");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused at once"
    );
    let err = stderr(&second);
    assert!(
        err.contains(&format!("another pipetrace agent (pid {pid})")),
        "says which agent holds the node: {err}"
    );
    assert!(
        err.contains("diagnosis.state_dir"),
        "says how to run a second: {err}"
    );
    // doctor lists the running agent (from the node's registry), not a stale file.
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let o = pipetrace().arg("doctor").output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.contains(&format!("agent: pid {pid}")) || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        out.contains(&format!("agent: pid {pid}, ebpf mode")),
        "{out}"
    );
    agent.stop();
    // Once it stopped, the next one starts.
    let third = pipetrace_e2e::Agent::start(&["-o", "/dev/null"]);
    third.stop();
}
