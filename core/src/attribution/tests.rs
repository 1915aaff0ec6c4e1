//! Attribution over synthetic event sequences shaped like real ones (see the e2e tests for
//! the real thing).
use super::*;
use crate::event::Exec;
use naming::{executable_name, tool_name_of};

mod heredoc;
mod nextflow;
mod standing;

struct Sim {
    tree: Tree,
    attr: Attributor,
    out: Vec<Finished>,
    /// Runs named alike on every node, as the steps handed them back.
    shares: Vec<(ProcKey, super::engines::Shared)>,
    t: u64,
}

fn key(pid: u32) -> ProcKey {
    ProcKey {
        pid,
        start_ticks: pid as u64,
    }
}

impl Sim {
    fn new(mode: Mode, cfg: pipetrace_config::Attribution) -> Self {
        // A machine of memory: no /proc, no records but what a test writes.
        Self::on(
            mode,
            cfg,
            crate::port::fake::FakeHost::new(0, 1_000_000_000),
        )
    }

    /// On a fake machine the test keeps a handle to.
    fn on(
        mode: Mode,
        cfg: pipetrace_config::Attribution,
        host: crate::port::fake::FakeHost,
    ) -> Self {
        let attr = Attributor::new(mode, &cfg, 0, host.shared()).unwrap();
        Self {
            tree: Tree::default(),
            attr,
            out: Vec::new(),
            shares: Vec::new(),
            t: 0,
        }
    }

    fn fork(&mut self, pid: u32, parent: u32) {
        self.t += 1;
        self.tree.fork(key(pid), self.t, key(parent), "x".into());
        let e = self.attr.on_fork(&self.tree, key(pid));
        self.shares.extend(e.shares);
    }

    fn exec(&mut self, pid: u32, path: &str, argv: &[&str]) {
        self.exec_in(pid, path, argv, "/work/proj");
    }

    fn exec_in(&mut self, pid: u32, path: &str, argv: &[&str], cwd: &str) {
        self.t += 1;
        let e = Exec {
            key: key(pid),
            start_ns: 0,
            time_ns: self.t,
            ppid: 0,
            uid: 0,
            cgroup_id: 0,
            filename: path.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_truncated: false,
        };
        self.tree.exec(e, Some(cwd.into()));
        let e = self.attr.on_exec(&self.tree, key(pid));
        self.shares.extend(e.shares);
    }

    fn exit(&mut self, pid: u32, code: u32) {
        self.t += 1;
        self.tree.exit(&key(pid), self.t, code << 8);
        self.tree.settle(&key(pid), None);
        let settled = self.attr.on_exit(&self.tree, key(pid));
        self.out.extend(settled.finished);
        self.shares.extend(settled.effects.shares);
        let dropped = self.tree.release(key(pid));
        self.attr.forget(&dropped);
    }

    fn tools(&self) -> Vec<(String, EntityRef)> {
        self.out
            .iter()
            .filter_map(|f| match f {
                Finished::Tool { proc, parent, .. } => {
                    let img = proc.image.as_ref().unwrap();
                    Some((tool_name_of(executable_name(&img.path), &img.argv), *parent))
                }
                _ => None,
            })
            .collect()
    }

    fn tasks(&self) -> Vec<(u32, String)> {
        self.out
            .iter()
            .filter_map(|f| match f {
                Finished::Task { proc, info, .. } => Some((proc.key.pid, info.name.clone())),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn plain_script_children_are_tasks_and_wrappers_vanish() {
    let mut s = Sim::new(Mode::Run { root_pid: 10 }, Default::default());
    s.fork(10, 1);
    s.exec(10, "/usr/bin/bash", &["bash", "pipeline.sh"]);
    // bwa | samtools: two forked children of the script
    s.fork(11, 10);
    s.exec(11, "/usr/bin/bwa", &["bwa", "mem", "r.fa"]);
    // a subshell (fork, no exec) wrapping `sh -c "samtools index"` which forks samtools
    s.fork(12, 10);
    s.fork(13, 12);
    s.exec(13, "/bin/sh", &["sh", "-c", "samtools index a.bam"]);
    s.fork(14, 13);
    s.exec(14, "/usr/bin/samtools", &["samtools", "index", "a.bam"]);
    for pid in [11, 14, 13, 12] {
        s.exit(pid, 0);
    }
    s.exit(10, 0);
    let tasks = s.tasks();
    assert_eq!(
        tasks,
        [(11, "bwa".to_string()), (13, "samtools".to_string())]
    );
    let tools = s.tools();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert_eq!(tools[0], ("bwa".into(), EntityRef::Task(key(11))));
    // samtools hangs directly under the `sh -c` task: the wrapper adds no level.
    assert_eq!(tools[1], ("samtools".into(), EntityRef::Task(key(13))));
    let Finished::Run { info, .. } = s.out.last().unwrap() else {
        panic!("run last")
    };
    assert_eq!(
        (info.tasks, info.failed, info.name.as_str()),
        (2, 0, "pipeline.sh")
    );
}

#[test]
fn snakemake_jobs_are_shell_children_and_helpers_are_not() {
    let mut s = Sim::new(Mode::Agent, Default::default());
    s.fork(20, 1);
    s.exec(
        20,
        "/usr/bin/snakemake",
        &["/usr/bin/python3", "/usr/bin/snakemake", "-c4"],
    );
    s.fork(21, 20);
    s.exec(21, "/usr/bin/cbc", &["cbc", "/tmp/x.lp"]);
    s.fork(22, 20);
    s.exec(
        22,
        "/usr/bin/bash",
        &[
            "/usr/bin/bash",
            "-c",
            "set -euo pipefail;  bwa mem r | samtools sort -o a.bam -",
        ],
    );
    s.fork(23, 22);
    s.exec(23, "/usr/bin/bwa", &["bwa", "mem", "r"]);
    s.fork(24, 22);
    s.exec(
        24,
        "/usr/bin/samtools",
        &["samtools", "sort", "-o", "a.bam", "-"],
    );
    // exec-optimised job: bash becomes samtools itself
    s.fork(25, 20);
    s.exec(
        25,
        "/usr/bin/bash",
        &[
            "/usr/bin/bash",
            "-c",
            "set -euo pipefail;  samtools index a.bam",
        ],
    );
    s.exec(25, "/usr/bin/samtools", &["samtools", "index", "a.bam"]);
    s.exit(23, 0);
    s.exit(24, 0);
    s.exit(22, 0);
    s.exit(25, 1);
    s.exit(21, 0);
    s.exit(20, 1);
    // No Snakemake log here: the job spans wait for one, and the run span for them.
    assert!(s.tasks().is_empty() && !s.out.iter().any(|f| matches!(f, Finished::Run { .. })));
    assert_eq!(s.attr.pending(), 3);
    // A job's own process waits with it: its name brings the exit codes that judge both.
    let own = |s: &Sim| {
        s.tools()
            .contains(&("samtools".into(), EntityRef::Task(key(25))))
    };
    assert!(!own(&s), "the job's own process waits for the job's name");
    let rest = s.attr.poll(true, &Default::default());
    s.out.extend(rest.finished);
    assert_eq!(s.attr.pending(), 0);
    assert!(own(&s));
    let tools = s.tools();
    assert!(
        tools.contains(&("bwa".into(), EntityRef::Task(key(22)))),
        "{tools:?}"
    );
    assert!(tools.contains(&("samtools".into(), EntityRef::Task(key(22)))));
    assert!(tools.contains(&("samtools".into(), EntityRef::Task(key(25)))));
    assert!(
        !tools.iter().any(|(t, _)| t == "cbc"),
        "the solver is no tool"
    );
    let engine = s.out.iter().find_map(|f| match f {
        Finished::Engine { info, usage, .. } => Some((info.helpers, usage.rollup.processes)),
        _ => None,
    });
    assert_eq!(
        engine,
        Some((1, 1)),
        "the solver is counted in the engine span"
    );
    // Without a log, a job is named by its command's first program.
    let names: Vec<String> = s.tasks().into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["bwa", "samtools"]);
    let Finished::Run { info, .. } = s.out.last().unwrap() else {
        panic!("run last")
    };
    assert_eq!(
        (info.engine.as_str(), info.tasks, info.failed),
        ("snakemake", 2, 1)
    );
    assert_eq!(info.name, "proj");
    assert_eq!(s.attr.tracked(), 0, "everything forgotten once exported");
}

#[test]
fn task_rules_name_tasks_anywhere_in_the_run() {
    let cfg = pipetrace_config::Attribution {
        task_rules: vec![pipetrace_config::Rule {
            matches: pipetrace_config::Match {
                executable: Some("step.py".into()),
                ..Default::default()
            },
            name: "step {argv2}".into(),
        }],
        ..Default::default()
    };
    let mut s = Sim::new(Mode::Run { root_pid: 30 }, cfg);
    s.fork(30, 1);
    s.exec(30, "/usr/bin/make", &["make"]);
    s.fork(31, 30);
    s.exec(31, "/usr/bin/python3", &["python3", "step.py", "S1"]);
    s.exit(31, 2);
    s.exit(30, 2);
    assert_eq!(s.tasks(), [(31, "step S1".to_string())]);
    let Finished::Run { info, .. } = s.out.last().unwrap() else {
        panic!("run last")
    };
    assert_eq!(info.failed, 1);
}

#[test]
fn agent_ignores_processes_outside_runs() {
    let mut s = Sim::new(Mode::Agent, Default::default());
    s.fork(40, 1);
    s.exec(40, "/usr/bin/ls", &["ls"]);
    s.exit(40, 0);
    assert!(s.out.is_empty());
    assert!(s.tree.is_empty());
}

#[test]
fn an_engine_found_stays_when_its_launcher_execs_on() {
    let mut s = Sim::new(Mode::Run { root_pid: 50 }, Default::default());
    s.fork(50, 1);
    s.exec(
        50,
        "/usr/bin/env",
        &["env", "NXF_VER=24", "nextflow", "run", "nf-core/rnaseq"],
    );
    s.exec(
        50,
        "/usr/local/bin/nextflow",
        &["bash", "/usr/local/bin/nextflow", "run", "nf-core/rnaseq"],
    );
    s.exec(
        50,
        "/usr/bin/java",
        &["java", "-cp", "x.jar", "nextflow.cli.Launcher", "run"],
    );
    s.exit(50, 0);
    let Finished::Run { info, .. } = s.out.last().unwrap() else {
        panic!("run span")
    };
    assert_eq!(
        (info.engine.as_str(), info.name.as_str()),
        ("nextflow", "nf-core/rnaseq")
    );
}

#[test]
fn a_script_that_runs_a_tool_before_its_prefect_flow_is_still_a_prefect_run() {
    let mut s = Sim::new(Mode::Run { root_pid: 60 }, Default::default());
    s.fork(60, 1);
    s.exec(60, "/usr/bin/python3", &["python3", "flow.py"]);
    // A setup step before the flow is called: a task of the plain command so far.
    s.fork(61, 60);
    s.exec(61, "/usr/bin/git", &["git", "rev-parse", "HEAD"]);
    s.exit(61, 0);
    // Calling the flow starts Prefect's temporary server: the command runs Prefect.
    s.fork(62, 60);
    s.exec(
        62,
        "/usr/bin/python3",
        &[
            "python3",
            "-m",
            "uvicorn",
            "--factory",
            "prefect.server.api.server:create_app",
        ],
    );
    s.exit(62, 15);
    s.exit(60, 0);
    s.out
        .extend(s.attr.poll(true, &Default::default()).finished);
    let tasks = s.tasks();
    assert!(
        !tasks.iter().any(|(pid, _)| *pid == 62),
        "the server is Prefect's own work, no task: {tasks:?}"
    );
    assert_eq!(tasks, [(61, "git".to_string())], "the setup step stays");
    let run = s.out.iter().find_map(|f| match f {
        Finished::Run { info, .. } => Some(info.engine),
        _ => None,
    });
    assert_eq!(run, Some(engines::prefect::KIND));
}

#[test]
fn a_shims_plumbing_folds_into_the_tool_it_becomes() {
    let mut s = Sim::new(Mode::Run { root_pid: 60 }, Default::default());
    s.fork(60, 1);
    s.exec(
        60,
        "/usr/bin/bash",
        &["bash", "-c", "python3 a.py; python3 b.py"],
    );
    s.fork(61, 60);
    // python3 is a pyenv shim: a bash script that forks readlink and friends, then execs
    // the real interpreter.
    s.exec(
        61,
        "/usr/bin/bash",
        &["bash", "/root/.pyenv/shims/python3", "a.py"],
    );
    s.fork(62, 61);
    s.exec(
        62,
        "/usr/bin/readlink",
        &["readlink", "/root/.pyenv/shims/python3"],
    );
    s.exit(62, 1);
    s.exec(
        61,
        "/root/.pyenv/libexec/pyenv",
        &["bash", "/root/.pyenv/libexec/pyenv", "exec"],
    );
    s.fork(63, 61);
    s.exec(63, "/usr/bin/basename", &["basename", "x"]);
    s.exit(63, 0);
    s.exec(
        61,
        "/root/.pyenv/versions/3.11.7/bin/python3.11",
        &["python3", "a.py"],
    );
    s.fork(64, 61);
    s.exec(64, "/usr/bin/sort", &["sort", "x"]);
    s.exit(64, 0);
    s.exit(61, 0);
    s.exit(60, 0);
    assert_eq!(
        s.tools(),
        [
            ("sort".to_string(), EntityRef::Tool(key(61))),
            ("a.py".to_string(), EntityRef::Task(key(61)))
        ],
        "the shim's readlink and basename are no tools; what the real program starts is"
    );
    let Some(Finished::Task { usage, .. }) =
        s.out.iter().find(|f| matches!(f, Finished::Task { .. }))
    else {
        panic!("task")
    };
    assert_eq!(
        usage.rollup.processes, 4,
        "folded processes still count in the task"
    );
}

#[test]
fn an_engine_subprocess_running_a_job_has_helpers_too() {
    let mut s = Sim::new(Mode::Run { root_pid: 70 }, Default::default());
    s.fork(70, 1);
    s.exec(
        70,
        "/usr/bin/snakemake",
        &["/usr/bin/python3", "/usr/bin/snakemake", "-c2"],
    );
    // A `run:` job: sh -c 'cd DIR && python3 -m snakemake --target-jobs ...'
    s.fork(71, 70);
    s.exec(
        71,
        "/bin/sh",
        &[
            "/bin/sh",
            "-c",
            "cd /w && /usr/bin/python3 -m snakemake --target-jobs 'run_wc:s=a' --cores 2",
        ],
    );
    s.fork(72, 71);
    s.exec(
        72,
        "/usr/bin/python3",
        &[
            "/usr/bin/python3",
            "-m",
            "snakemake",
            "--target-jobs",
            "run_wc:s=a",
        ],
    );
    s.fork(73, 72);
    s.exec(73, "/usr/bin/cbc", &["cbc", "/tmp/x.mps"]);
    s.exit(73, 0);
    s.fork(74, 72);
    s.exec(
        74,
        "/usr/bin/bash",
        &["/usr/bin/bash", "-c", "set -euo pipefail; cp a b"],
    );
    s.exec(74, "/usr/bin/cp", &["cp", "a", "b"]);
    s.exit(74, 0);
    s.exit(72, 0);
    s.exit(71, 0);
    s.exit(70, 0);
    let names: Vec<String> = s.tools().into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        names,
        ["cp", "snakemake"],
        "cbc of the job's Snakemake is a helper"
    );
    let task = s.out.iter().find_map(|f| match f {
        Finished::Task { info, .. } => Some(info.clone()),
        _ => None,
    });
    let task = task.expect("the run: job is a task");
    assert_eq!(
        (
            task.name.as_str(),
            task.wildcards.as_deref(),
            task.in_engine
        ),
        ("run_wc", Some("s=a"), true),
        "named from the engine's own --target-jobs argument"
    );
}

#[test]
fn different_commands_keep_different_histories() {
    let key_of = |argv: &[&str]| {
        let mut s = Sim::new(Mode::Run { root_pid: 80 }, Default::default());
        s.fork(80, 1);
        s.exec(80, "/usr/bin/bash", argv);
        s.attr.run_key(key(80)).unwrap().to_string()
    };
    let a = key_of(&["bash", "-c", "sleep 5; true"]);
    let b = key_of(&["bash", "-c", "sleep 1; false"]);
    assert_ne!(a, b);
    assert_eq!(
        a,
        key_of(&["bash", "-c", "sleep 5; true"]),
        "the same command, the same key"
    );
}

/// A Snakemake cluster head is named alike on every node by the run directory its first
/// submission makes: what ended before (a local rule's tool) waits for it, and goes in the
/// shared trace once it is known; the submission is the head's own work.
#[test]
fn a_cluster_heads_spans_wait_for_its_first_submission() {
    let mut s = Sim::new(Mode::Agent, Default::default());
    s.fork(30, 1);
    let head = [
        "/usr/bin/python3",
        "/usr/bin/snakemake",
        "--cluster",
        "sbatch",
        "-j2",
    ];
    s.exec(30, "/usr/bin/snakemake", &head);
    assert!(
        std::mem::take(&mut s.shares).is_empty(),
        "no identity before a submission"
    );
    // A local rule's job and its tool.
    s.fork(31, 30);
    s.exec(
        31,
        "/usr/bin/bash",
        &["bash", "-c", "set -euo pipefail;  seq 3 | sort"],
    );
    s.fork(32, 31);
    s.exec(32, "/usr/bin/seq", &["seq", "3"]);
    s.exit(32, 0);
    assert!(
        s.tools().is_empty(),
        "held until the run knows its identity"
    );
    // The first submission names the run's directory.
    s.fork(33, 30);
    let submit = "sbatch /work/proj/.snakemake/tmp.4s7uhwm5/snakejob.count.2.sh";
    s.exec(33, "/bin/sh", &["/bin/sh", "-c", submit]);
    let shares = std::mem::take(&mut s.shares);
    assert_eq!(shares.len(), 1, "{shares:?}");
    assert_eq!(shares[0].0, key(30));
    assert_eq!(
        shares[0].1.identity,
        "snakemake//work/proj/.snakemake/tmp.4s7uhwm5"
    );
    assert_eq!(shares[0].1.part, None, "the head roots the run");
    let role = s.attr.membership(&key(33)).map(|m| m.role);
    assert_eq!(role, Some(Role::Helper), "the head's own work");
    s.exit(33, 0);
    assert_eq!(s.tools(), [("seq".to_string(), EntityRef::Task(key(31)))]);
    assert!(
        s.tasks().iter().all(|(pid, _)| *pid != 33),
        "a submission is no task"
    );
}

/// A cluster job's `snakemake --target-jobs` is a part of the head's run: a task of it,
/// named by its rule and wildcards, whose processes are its tools.
#[test]
fn a_cluster_job_is_a_task_of_the_heads_run() {
    let mut s = Sim::new(Mode::Agent, Default::default());
    s.fork(40, 1);
    let job = [
        "/usr/bin/python3",
        "-m",
        "snakemake",
        "--snakefile",
        "/work/proj/Snakefile",
        "--target-jobs",
        "count:s=A",
        "--wait-for-files",
        "/work/proj/.snakemake/tmp.4s7uhwm5",
        "out/ref.txt",
        "--mode",
        "2",
    ];
    s.exec(40, "/usr/bin/python3", &job);
    let shares = std::mem::take(&mut s.shares);
    assert_eq!(shares.len(), 1, "{shares:?}");
    let part = shares[0].1.part.clone().expect("a part");
    assert_eq!(
        shares[0].1.identity,
        "snakemake//work/proj/.snakemake/tmp.4s7uhwm5"
    );
    assert_eq!(
        (part.name.as_str(), part.wildcards.as_deref()),
        ("count", Some("s=A"))
    );
    s.fork(41, 40);
    s.exec(
        41,
        "/usr/bin/bash",
        &["bash", "-c", "set -euo pipefail;  wc -l out/ref.txt"],
    );
    s.fork(42, 41);
    s.exec(42, "/usr/bin/wc", &["wc", "-l", "out/ref.txt"]);
    for pid in [42, 41, 40] {
        s.exit(pid, 0);
    }
    assert!(
        s.tasks().is_empty(),
        "the part is the task: {:?}",
        s.tasks()
    );
    let tools = s.tools();
    assert!(tools.iter().any(|(t, _)| t == "wc"), "{tools:?}");
    let Finished::Run { info, .. } = s.out.last().unwrap() else {
        panic!("run last")
    };
    assert_eq!(info.name, "proj", "named by the head's working directory");
}
