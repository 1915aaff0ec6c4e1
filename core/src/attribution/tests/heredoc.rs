//! What a shell child runs before it execs: bash expands a here-document's command
//! substitutions in the child it forked for `cat`, which execs `cat` afterwards.
use super::*;

/// `bash pipeline.sh` whose task `bash -c '…; cat <<END … $(bwa 2>&1 | sed …) END'` forks
/// 12 (to become cat), which forks the substitution's subshell 13, which runs bwa (14) and
/// sed (15); 12 reads their output to its end and waits for 13, then execs cat.
fn heredoc() -> Sim {
    let mut s = Sim::new(Mode::Run { root_pid: 10 }, Default::default());
    s.fork(10, 1);
    s.exec(10, "/usr/bin/bash", &["bash", "pipeline.sh"]);
    s.fork(11, 10);
    let script = "bwa mem r.fa a.fq > a.sam; cat <<-END > versions.yml\n$(bwa 2>&1 | sed x)\nEND";
    s.exec(11, "/usr/bin/bash", &["bash", "-c", script]);
    s.fork(12, 11);
    s.fork(13, 12);
    s.fork(14, 13);
    s.exec(14, "/usr/bin/bwa", &["bwa"]);
    s.fork(15, 13);
    s.exec(15, "/usr/bin/sed", &["sed", "x"]);
    for pid in [14, 15, 13] {
        s.exit(pid, 0);
    }
    s.exec(12, "/usr/bin/cat", &["cat"]);
    for pid in [12, 11, 10] {
        s.exit(pid, 0);
    }
    s
}

#[test]
fn a_here_documents_substitutions_hang_under_the_cat_their_shell_child_became() {
    let mut tools = heredoc().tools();
    tools.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        tools,
        [
            ("bwa".to_string(), EntityRef::Tool(key(12))),
            ("cat".to_string(), EntityRef::Task(key(11))),
            ("sed".to_string(), EntityRef::Tool(key(12))),
        ]
    );
}

#[test]
fn a_subshell_that_never_execs_places_its_tools_where_they_stood() {
    let mut s = Sim::new(Mode::Run { root_pid: 10 }, Default::default());
    s.fork(10, 1);
    s.exec(10, "/usr/bin/bash", &["bash", "pipeline.sh"]);
    s.fork(11, 10);
    s.exec(
        11,
        "/usr/bin/bash",
        &["bash", "-c", "(gzip a; gzip b); true"],
    );
    s.fork(12, 11);
    s.fork(13, 12);
    s.exec(13, "/usr/bin/gzip", &["gzip", "a"]);
    s.exit(13, 0);
    for pid in [12, 11, 10] {
        s.exit(pid, 0);
    }
    assert_eq!(s.tools(), [("gzip".to_string(), EntityRef::Task(key(11)))]);
}

#[test]
fn a_run_whose_roots_exec_was_never_seen_is_named_by_its_command() {
    // Polling /proc can see the command's process before it execs and miss the exec.
    let mut s = Sim::new(Mode::Run { root_pid: 10 }, Default::default());
    let argv = ["true".to_string()];
    s.attr = std::mem::replace(
        &mut s.attr,
        Attributor::new(
            Mode::Agent,
            &Default::default(),
            0,
            crate::port::fake::FakeHost::new(0, 1).shared(),
        )
        .unwrap(),
    )
    .with_command(&argv);
    s.fork(10, 1);
    s.exit(10, 0);
    let run = (s.out.iter()).find_map(|f| match f {
        Finished::Run { info, .. } => Some(info.name.clone()),
        _ => None,
    });
    assert_eq!(run.as_deref(), Some("true"), "{:?}", s.out.len());
}
