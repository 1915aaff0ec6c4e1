//! Bad input, as a new user gives it: each refused with one line that names the setting and
//! how to mend it, before anything starts, and nothing left behind; pipetrace's own
//! failures under `run` never taken for the command's (exit 125); a closed output never
//! costs the run.
use std::{path::Path, process::Command};

use pipetrace_e2e::{pipetrace, pipetrace_bin, read_jsonl, stderr};

/// The names in `dir`, sorted: what a refused command left there.
fn left_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `pipetrace ARGS` in an empty folder, with `env` set.
fn in_empty_dir(args: &[&str], env: &[(&str, &str)]) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let o = pipetrace()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .output()
        .unwrap();
    (dir, o)
}

#[test]
fn an_unknown_flag_after_run_is_refused_and_nothing_runs() {
    for flag in ["--bogus", "--version", "-x"] {
        let (dir, o) = in_empty_dir(&["run", flag, "touch", "ran"], &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{flag}: {err}");
        assert!(err.contains(flag) && err.contains("pipetrace run"), "{err}");
        assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{flag}: {err}");
    }
    // After the command's own name, its flags are its own.
    let (dir, o) = in_empty_dir(&["run", "touch", "-c", "ran"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!dir.path().join("ran").exists(), "touch -c creates nothing");
}

#[test]
fn a_bad_or_missing_flag_value_under_run_is_runs_own_failure() {
    let cases: [&[&str]; 4] = [
        &["run", "--protocol", "grpcc", "--", "touch", "ran"],
        &["run", "-o"],
        &["run", "--endpoint"],
        &["-o", "run", "run", "--bogus"],
    ];
    for args in cases {
        let (dir, o) = in_empty_dir(args, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert!(err.contains("error:"), "{args:?} says why: {err}");
        assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{args:?}: {err}");
    }
    // Elsewhere a bad flag is bad input (2).
    let (_, o) = in_empty_dir(&["report", "--bogus"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let (_, o) = in_empty_dir(
        &["provenance", "t.jsonl", "--license", "not a license"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("neither an SPDX license identifier"),
        "{}",
        stderr(&o)
    );
}

/// A command line, its environment and the exit code it must end with.
type Refused<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], i32);

/// Refused on the command line, in the configuration or on its input: each error said to a
/// closed stderr keeps its exit code (125 under `run`, 2 elsewhere), never SIGPIPE's 141.
#[test]
fn a_closed_stderr_never_turns_an_exit_code_into_sigpipes() {
    let cases: [Refused; 4] = [
        (&["run", "--bogus"], &[], 125),
        (&["report", "--bogus"], &[], 2),
        (
            &["run", "--", "true"],
            &[("PIPETRACE_EXPORT__BATCH_SPAN", "10")],
            125,
        ),
        (&["report", "missing.jsonl"], &[], 2),
    ];
    for (args, env, code) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut child = pipetrace()
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Both read ends closed before pipetrace writes a word (as `2>&1 | true`).
        drop(child.stdout.take());
        drop(child.stderr.take());
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(code), "{args:?} {env:?}: {st:?}");
    }
}

/// `pipetrace report FILE | head -1`: the reader goes after the first line; the rest of the
/// text is lost quietly, and the exit code is still report's (here `--fail-on`'s 3).
#[test]
fn a_reader_that_goes_early_costs_report_only_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let (_, o) = pipetrace_e2e::run_script(dir.path(), "exit 4");
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let trace = dir.path().join("t.otlp.jsonl");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = pipetrace()
        .args(["report", trace.to_str().unwrap(), "--fail-on", "failed"])
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}

/// Every option naming a file or folder to read refuses a missing one as bad input (2),
/// naming the option and the path, before anything is read or written: `provenance --dir`,
/// `--workflow`, `--cwl-outputs`, and `suggest --cwl-workflow` whatever the format.
#[test]
fn a_missing_path_given_to_an_option_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (_, o) = pipetrace_e2e::run_script(dir.path(), "true");
    assert!(o.status.success(), "{}", stderr(&o));
    let t = dir.path().join("t.otlp.jsonl");
    let t = t.to_str().unwrap();
    let no_run = dir.path().join("no-run-here");
    let cases: [(&[&str], &str); 5] = [
        (
            &["provenance", t, "--dir", no_run.to_str().unwrap()],
            "--dir",
        ),
        (
            &["provenance", t, "--workflow", "missing.smk"],
            "--workflow missing.smk",
        ),
        (
            &["provenance", t, "--cwl-outputs", "missing.json"],
            "--cwl-outputs missing.json",
        ),
        (
            &["suggest", t, "--cwl-workflow", "missing.cwl"],
            "--cwl-workflow missing.cwl",
        ),
        (
            &[
                "suggest",
                t,
                "--format",
                "table",
                "--cwl-workflow",
                "missing.cwl",
            ],
            "--cwl-workflow missing.cwl",
        ),
    ];
    for (args, says) in cases {
        let o = pipetrace()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && err.contains("no such"),
            "{args:?}: {err}"
        );
        assert!(err.contains("give the"), "says what to give: {err}");
        assert!(!no_run.exists(), "{args:?}: no folder made");
        let crate_file = dir.path().join("ro-crate-metadata.json");
        assert!(!crate_file.exists(), "{args:?}: nothing written");
    }
}

/// A folder that cannot be made (none can be under /proc, even as root) fails report (1)
/// before it prints a line, naming the path and what to do.
#[test]
fn a_page_that_cannot_be_written_fails_report_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let (_, o) = pipetrace_e2e::run_script(dir.path(), "true");
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = dir.path().join("t.otlp.jsonl");
    let nowhere = "/proc/pipetrace-no-such-folder/x.html";
    let t = trace.to_str().unwrap();
    // (compare's alike is in compare.rs, on runs with tasks in common.)
    for json in [false, true] {
        let mut args = vec!["report", t, "--html", nowhere];
        args.extend(json.then_some("--json"));
        let o = pipetrace().args(&args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(nowhere), "names the path: {err}");
        assert!(
            err.contains("give a path in a folder you can write"),
            "says what to do: {err}"
        );
        assert!(
            o.stdout.is_empty(),
            "nothing printed before the failure: {args:?}"
        );
    }
}

/// Every command that writes a file it is given makes the file's missing folders, alike:
/// `run -o`, `suggest -o`, `report --html`, `compare --html`. (`provenance --dir` names the
/// run's directory, which it reads: a missing one is bad input, in exit_semantics.rs.)
#[test]
fn every_command_writing_a_named_file_makes_its_missing_folder() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf");
    std::fs::create_dir(&wf).unwrap();
    std::fs::write(
        wf.join("Snakefile"),
        "rule all:\n    output: 'done.txt'\n    shell: 'echo hi > {output}'\n",
    )
    .unwrap();
    let at = |rel: &str| dir.path().join(rel).to_str().unwrap().to_string();
    let trace = at("run/deep/t.otlp.jsonl");
    let cases: [(Vec<String>, String); 4] = [
        (
            [
                "run",
                "--no-summary",
                "-o",
                &trace,
                "--",
                "snakemake",
                "-c1",
            ]
            .map(String::from)
            .to_vec(),
            trace.clone(),
        ),
        (
            ["suggest", &trace, "-o", &at("profile/a/config.yaml")]
                .map(String::from)
                .to_vec(),
            at("profile/a/config.yaml"),
        ),
        (
            ["report", &trace, "--html", &at("report/a/r.html")]
                .map(String::from)
                .to_vec(),
            at("report/a/r.html"),
        ),
        (
            ["compare", &trace, &trace, "--html", &at("compare/a/c.html")]
                .map(String::from)
                .to_vec(),
            at("compare/a/c.html"),
        ),
    ];
    for (args, made) in cases {
        let o = pipetrace().args(&args).current_dir(&wf).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let len = std::fs::metadata(&made).map(|m| m.len());
        assert!(
            len.as_ref().is_ok_and(|n| *n > 0),
            "{made} written: {len:?}"
        );
    }
}

#[test]
fn a_misspelt_top_level_variable_is_refused_naming_the_right_one() {
    let (dir, o) = in_empty_dir(
        &["run", "--", "touch", "ran"],
        &[("PIPETRACE_SERVICE_NAM", "x")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("variable PIPETRACE_SERVICE_NAM:"),
        "names the variable: {err}"
    );
    assert!(
        err.contains("did you mean PIPETRACE_SERVICE_NAME?"),
        "{err}"
    );
    assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{err}");
    // Other programs' variables (the collector's, in deploy/) are no typo of ours.
    let (_, o) = in_empty_dir(&["run", "--", "true"], &[("PIPETRACE_KEEP_PERCENT", "10")]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `PIPETRACE_RESOURCE_ATTRIBUTES` as docs/configuration.md gives it, whole (as OTel's
/// variable, values percent-encoded) and a name at a time: on the resource of every span.
#[test]
fn resource_attributes_from_pipetraces_variables_are_on_every_span() {
    let env = [
        (
            "PIPETRACE_RESOURCE_ATTRIBUTES",
            "team=genomics,site=north%20wing",
        ),
        ("PIPETRACE_RESOURCE_ATTRIBUTES__COST", "lab-7"),
    ];
    let (dir, o) = in_empty_dir(&["-o", "t.otlp.jsonl", "run", "--", "true"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&dir.path().join("t.otlp.jsonl"));
    assert!(!spans.is_empty());
    for s in &spans {
        let r = |k: &str| s.resource.get(k).map(|v| v.str().to_string());
        assert_eq!(r("team").as_deref(), Some("genomics"), "{:?}", s.resource);
        assert_eq!(r("site").as_deref(), Some("north wing"), "{:?}", s.resource);
        assert_eq!(r("cost").as_deref(), Some("lab-7"), "{:?}", s.resource);
    }
}

#[test]
fn config_validate_names_its_own_argument_and_the_yaml_at_fault() {
    let (dir, o) = in_empty_dir(&["config", "validate", "missing.yaml"], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("missing.yaml") && err.contains("`config validate`"),
        "{err}"
    );
    assert!(
        !err.contains("--config"),
        "the path came from no --config: {err}"
    );
    std::fs::write(
        dir.path().join("bad.yaml"),
        "export:\n  batch_spans: 5\n bad: [\n",
    )
    .unwrap();
    let o = pipetrace()
        .args(["config", "validate", "bad.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.yaml") && err.contains("not valid YAML"),
        "{err}"
    );
    assert!(err.contains("line"), "says where: {err}");
    assert!(!err.contains("key ``"), "no empty key named: {err}");
}

#[test]
fn a_prometheus_listen_address_that_cannot_work_is_refused_before_the_run() {
    let cases = [
        (
            "PIPETRACE_METRICS__PROMETHEUS__LISTEN",
            "localhost-9464",
            "metrics.prometheus.listen",
        ),
        (
            "PIPETRACE_METRICS__ENABLED",
            "false",
            "metrics.prometheus.listen",
        ),
    ];
    for (var, value, key) in cases {
        let mut env = vec![(var, value)];
        if var == "PIPETRACE_METRICS__ENABLED" {
            env.push(("PIPETRACE_METRICS__PROMETHEUS__LISTEN", "127.0.0.1:0"));
        }
        let (dir, o) = in_empty_dir(&["run", "--", "touch", "ran"], &env);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{var}={value}: {err}");
        assert!(err.contains(key), "{err}");
        assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{err}");
    }
}

/// `pipetrace run -- cmd 2>&1 | head -1`: the reader is gone before pipetrace's last lines.
/// They are lost; the run, its trace and the command's exit code are not.
#[test]
fn a_closed_stdout_and_stderr_lose_text_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(pipetrace_bin())
        .args(["-o", "t.otlp.jsonl", "run", "--", "sh", "-c", "exit 3"])
        .current_dir(dir.path())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(o.code(), Some(3), "the command's code, no panic (101)");
    let spans = read_jsonl(&dir.path().join("t.otlp.jsonl"));
    assert!(spans.iter().any(|s| s.is_run()), "{spans:?}");
}

/// With only the capabilities the docs offer for eBPF (CAP_BPF + CAP_PERFMON) as a user who
/// cannot read tracefs (mounted 0700, the kernel's default): doctor says it is mounted but
/// closed, and how to open it, not that it is missing.
#[test]
fn doctor_tells_a_closed_tracefs_from_a_missing_one() {
    use std::os::unix::fs::PermissionsExt;
    let tracefs = std::path::Path::new("/sys/kernel/tracing");
    assert!(tracefs.join("events").is_dir(), "tracefs is mounted here");
    // Closed to others as the kernel mounts it (root, which the other tests run as, still
    // reads it); its mode is put back after.
    let mode = std::fs::metadata(tracefs).unwrap().permissions().mode() & 0o7777;
    std::fs::set_permissions(tracefs, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = pipetrace_e2e::as_nobody_with_caps(&["bpf", "perfmon"], &["doctor"], &[]);
    std::fs::set_permissions(tracefs, std::fs::Permissions::from_mode(mode)).unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = (out.lines())
        .find(|l| l.contains("tracefs"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("FAIL"), "{out}");
    assert!(
        line.contains("cannot read it") && !line.contains("not mounted"),
        "{out}"
    );
    assert!(out.contains("mode=755"), "the fix: {out}");
    assert!(
        out.contains("CAP_BPF + CAP_PERFMON"),
        "the capabilities are seen: {out}"
    );
}

/// doctor checks the settings as run and agent load them: a missing config file or a
/// misspelt variable is a FAIL naming it, and the verdict is no longer "can run here".
#[test]
fn doctor_fails_on_settings_run_would_refuse() {
    let run = |args: &[&str], var: Option<(&str, &str)>| {
        let mut c = pipetrace_e2e::pipetrace();
        c.args(args).arg("doctor");
        if let Some((k, v)) = var {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
        )
    };
    let (code, out) = run(&["-c", "/missing.yaml"], None);
    assert_eq!(code, Some(1), "{out}");
    let line = (out.lines()).find(|l| l.contains("config:")).expect(&out);
    assert!(
        line.contains("FAIL") && line.contains("/missing.yaml"),
        "{out}"
    );
    assert!(
        out.contains("pipetrace cannot start with these settings"),
        "{out}"
    );
    assert!(!out.contains("can run here"), "{out}");
    let (code, out) = run(&[], Some(("PIPETRACE_EXPORT__BATCH_SPAN", "10")));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("PIPETRACE_EXPORT__BATCH_SPAN"), "{out}");
    // Settings that load: the check passes and the rest decides.
    let (code, out) = run(&[], None);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ok    config:"), "{out}");
    assert!(out.ends_with("pipetrace can run here\n"), "{out}");
}
