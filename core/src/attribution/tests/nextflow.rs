//! A Nextflow run as a real JVM starts it: tasks through `jspawnhelper` (exec'd again in the
//! same pid), `.command.run`'s own plumbing, and its metrics wrapper around the script.
use super::*;

const WORK: &str = "/launch/work/3f/9a1c0e5d2b7f84c6a0e1d9b2c4f6a8";

/// A run of the `nextflow` launcher (pid 10) exec'ing a JVM, on a machine where one task's
/// work directory holds its `.command.run`.
fn jvm_run() -> Sim {
    let host = crate::port::fake::FakeHost::new(0, 1_000_000_000);
    let header = "#!/bin/bash\n### ---\n### name: 'ALIGN (s1)'\n### ...\nset -e\n";
    host.write(format!("{WORK}/.command.run"), header);
    let mut s = Sim::on(Mode::Run { root_pid: 10 }, Default::default(), host);
    s.fork(10, 1);
    s.exec_in(
        10,
        "/bin/bash",
        &["bash", "/usr/bin/nextflow", "run", "main.nf"],
        "/launch",
    );
    s.exec_in(
        10,
        "/usr/bin/java",
        &["java", "-cp", "nf.jar", "nextflow.cli.Launcher"],
        "/launch",
    );
    s
}

/// `.command.run` (pid 20) as the JVM's POSIX_SPAWN starts it: `jspawnhelper`, then the
/// wrapper in the same pid.
fn spawned_task(s: &mut Sim) {
    s.fork(20, 10);
    s.exec_in(
        20,
        "/usr/lib/jvm/java-17/lib/jspawnhelper",
        &["jspawnhelper", "5:6:7"],
        "/launch",
    );
    s.exec_in(20, "/bin/bash", &["/bin/bash", "-ue", ".command.run"], WORK);
}

fn plumbing(s: &mut Sim, pid: u32, parent: u32, argv: &[&str]) {
    s.fork(pid, parent);
    s.exec_in(pid, &format!("/usr/bin/{}", argv[0]), argv, WORK);
    s.exit(pid, 0);
}

#[test]
fn a_task_the_jvm_spawns_is_found_and_its_wrappers_plumbing_is_no_tool() {
    let mut s = jvm_run();
    spawned_task(&mut s);
    plumbing(&mut s, 21, 20, &["date", "+%s%3N"]);
    plumbing(&mut s, 22, 20, &["touch", ".command.begin"]);
    // (nxf_launch | tee .command.out) ...: subshells that never exec, a tee, the launch.
    s.fork(23, 20);
    s.fork(24, 23);
    plumbing(&mut s, 25, 24, &["tee", ".command.out"]);
    s.fork(26, 24);
    s.exec_in(
        26,
        "/bin/bash",
        &["/bin/bash", "-ue", &format!("{WORK}/.command.sh")],
        WORK,
    );
    s.fork(27, 26);
    s.exec_in(27, "/usr/bin/bwa", &["bwa", "mem", "r.fa"], WORK);
    s.exit(27, 0);
    // A grep on a process that just ended: the wrapper's, never a failure of the task.
    plumbing(&mut s, 28, 20, &["grep", "-c", "x"]);
    s.exit(28, 1);
    for pid in [26, 24, 23, 20, 10] {
        s.exit(pid, 0);
    }
    assert_eq!(s.tasks(), [(20, "ALIGN".to_string())]);
    assert_eq!(
        s.tools(),
        [("bwa".to_string(), EntityRef::Task(key(20)))],
        "the script's own command alone, under its task; no .command.run, .command.sh, tee"
    );
    let helpers = s.out.iter().find_map(|f| match f {
        Finished::Engine { info, .. } => Some(info.helpers),
        _ => None,
    });
    assert_eq!(
        helpers,
        Some(4),
        "date, touch, tee and grep in the engine span"
    );
}

#[test]
fn with_task_metrics_on_the_script_under_the_sampler_is_still_the_tasks() {
    let mut s = jvm_run();
    spawned_task(&mut s);
    // nxf_launch runs the wrapper again: `bash .command.run nxf_trace`.
    s.fork(21, 20);
    s.exec_in(
        21,
        "/bin/bash",
        &["/bin/bash", &format!("{WORK}/.command.run"), "nxf_trace"],
        WORK,
    );
    plumbing(&mut s, 22, 21, &["awk", "{print $2}"]);
    s.fork(23, 21);
    s.exec_in(
        23,
        "/bin/bash",
        &["/bin/bash", "-ue", &format!("{WORK}/.command.sh")],
        WORK,
    );
    s.fork(24, 23);
    s.exec_in(
        24,
        "/usr/bin/samtools",
        &["samtools", "sort", "a.bam"],
        WORK,
    );
    // The sampler: a subshell of the wrapper forking ps every second.
    s.fork(25, 21);
    plumbing(&mut s, 26, 25, &["ps", "-o", "pid="]);
    s.exit(24, 0);
    for pid in [23, 25, 21, 20, 10] {
        s.exit(pid, 0);
    }
    assert_eq!(s.tasks(), [(20, "ALIGN".to_string())]);
    assert_eq!(
        s.tools(),
        [("samtools".to_string(), EntityRef::Task(key(20)))]
    );
}

#[test]
fn a_helper_that_execs_again_is_decided_again_and_wrappers_add_no_level() {
    let mut s = Sim::new(Mode::Run { root_pid: 10 }, Default::default());
    s.fork(10, 1);
    s.exec(
        10,
        "/bin/bash",
        &["bash", "-c", "nice -n 5 env A=1 sort x; time gzip y"],
    );
    // nice, then env, then sort, all in one pid: it is sort.
    s.fork(11, 10);
    s.exec(
        11,
        "/usr/bin/nice",
        &["nice", "-n", "5", "env", "A=1", "sort", "x"],
    );
    s.exec(11, "/usr/bin/env", &["env", "A=1", "sort", "x"]);
    s.exec(11, "/usr/bin/sort", &["sort", "x"]);
    s.exit(11, 0);
    // A task's script runs time, which forks its command and waits: the command is the
    // task's tool, time no level.
    s.fork(12, 10);
    s.exec(12, "/bin/bash", &["bash", "job.sh"]);
    s.fork(13, 12);
    s.exec(13, "/usr/bin/time", &["time", "gzip", "y"]);
    s.fork(14, 13);
    s.exec(14, "/usr/bin/gzip", &["gzip", "y"]);
    for pid in [14, 13, 12, 10] {
        s.exit(pid, 0);
    }
    let names: Vec<String> = s.tasks().into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["sort", "job.sh"]);
    assert_eq!(
        s.tools(),
        [
            ("sort".to_string(), EntityRef::Task(key(11))),
            ("gzip".to_string(), EntityRef::Task(key(12))),
        ],
        "no span of time's own, nor of the script the task span stands for"
    );
}
