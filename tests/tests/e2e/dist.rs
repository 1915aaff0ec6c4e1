//! The Debian package and the release tarball (scripts/dist.sh, what `make dist` runs) of the
//! binary under test, installed as a user installs them: dpkg in a clean debootstrap'd
//! bookworm root (the agent image's, scripts/rootfs.sh), where the files land where Debian
//! looks for them, the installed /etc/pipetrace/config.yaml validates, `pipetrace doctor`
//! passes and `pipetrace run` traces a shell pipeline with the real probes; the systemd unit
//! installed, not enabled, and passing `systemd-analyze verify`; the man pages render; purge
//! leaves nothing. The debug build `make test` made is packaged, through the same script: no
//! second build.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Instant,
};

use pipetrace_e2e::{pipetrace_bin, read_jsonl, repo, require, stderr};
use pipetrace_semconv::attr;

/// Runs `c`; its stdout, or a panic naming `what` with its stderr.
fn ok(what: &str, c: &mut Command) -> String {
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: start {:?}: {e}", c.get_program()));
    assert!(
        o.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The files the package installs, by their path in the root, and the mode each has.
const INSTALLED: &[(&str, u32)] = &[
    ("usr/bin/pipetrace", 0o755),
    ("usr/lib/systemd/system/pipetrace.service", 0o644),
    ("etc/pipetrace/config.yaml", 0o644),
    ("usr/share/man/man1/pipetrace.1.gz", 0o644),
    ("usr/share/man/man1/pipetrace-run.1.gz", 0o644),
    ("usr/share/man/man1/pipetrace-doctor.1.gz", 0o644),
    ("usr/share/bash-completion/completions/pipetrace", 0o644),
    ("usr/share/zsh/vendor-completions/_pipetrace", 0o644),
    ("usr/share/fish/vendor_completions.d/pipetrace.fish", 0o644),
    ("usr/share/doc/pipetrace/copyright", 0o644),
    (
        "usr/share/doc/pipetrace/examples/pipetrace-sysctl.conf",
        0o644,
    ),
];

/// scripts/dist.sh on the build beside the test's `pipetrace`: the .deb and the tarball.
fn package(out: &Path) -> (PathBuf, PathBuf) {
    require("cargo-deb");
    let bin_dir = pipetrace_bin().parent().unwrap().to_path_buf();
    assert!(
        bin_dir.join("pipetrace-dist-assets").is_file(),
        "no pipetrace-dist-assets in {}: build it first (cargo build -p pipetrace -p pipetrace-dist, as make test does)",
        bin_dir.display()
    );
    let start = Instant::now();
    // --fast: less compression, the same files (a minute less of xz on CI's two CPUs).
    let mut c = Command::new(repo("scripts/dist.sh"));
    let printed = ok("scripts/dist.sh", c.arg("--fast").arg(&bin_dir).arg(out));
    eprintln!("scripts/dist.sh: {:.1} s", start.elapsed().as_secs_f64());
    let paths: Vec<PathBuf> = printed.lines().map(PathBuf::from).collect();
    let [deb, tarball] = paths.as_slice() else {
        panic!("scripts/dist.sh printed {printed:?}, not the .deb and the tarball")
    };
    (deb.clone(), tarball.clone())
}

/// A clean Debian root: the agent image's cached debootstrap'd bookworm, extracted.
fn clean_root() -> tempfile::TempDir {
    require("debootstrap");
    let tar = ok(
        "scripts/rootfs.sh agent",
        Command::new(repo("scripts/rootfs.sh")).arg("agent"),
    );
    let root = tempfile::tempdir().unwrap();
    let mut c = Command::new("tar");
    c.args(["--numeric-owner", "-xf", tar.trim(), "-C"])
        .arg(root.path());
    ok("extract the root", &mut c);
    root
}

/// `args` run by chroot in `root`, in a mount namespace of its own where /proc, /sys (with
/// tracefs and the BPF filesystem under it) and /dev are bound in: the mounts end with the
/// namespace, whatever happens, and the host's mount table never holds them.
fn in_root(root: &Path, args: &[&str]) -> Output {
    let script = r#"set -e; r=$1; shift
        for d in proc sys dev; do mount --rbind "/$d" "$r/$d"; done
        exec chroot "$r" "$@""#;
    Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(root)
        .args(args)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("HOME", "/root")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap_or_else(|e| panic!("unshare: {e}"))
}

/// [`in_root`], which must succeed: its stdout.
fn in_root_ok(root: &Path, args: &[&str]) -> String {
    let o = in_root(root, args);
    assert!(
        o.status.success(),
        "in the root, {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The package installs and runs in a clean root: every file in place, the config valid,
/// doctor satisfied, a pipeline traced by the probes, the unit verified and left disabled. The
/// tarball holds the same files. (One test: packaging takes a while, and is done once.)
#[test]
fn the_package_installs_and_runs_in_a_clean_debian_root() {
    let out = tempfile::tempdir().unwrap();
    let (deb, tarball) = package(out.path());
    tarball_holds_the_package_s_files(&tarball);
    let root = clean_root();
    let r = root.path();
    std::fs::copy(&deb, r.join("tmp/pipetrace.deb")).unwrap();
    in_root_ok(r, &["dpkg", "-i", "/tmp/pipetrace.deb"]);

    for (path, want) in INSTALLED {
        assert_eq!(mode(&r.join(path)), *want, "{path}");
    }
    let conffiles = std::fs::read_to_string(r.join("var/lib/dpkg/info/pipetrace.conffiles"));
    assert!(
        conffiles.is_ok_and(|c| c.lines().any(|l| l == "/etc/pipetrace/config.yaml")),
        "/etc/pipetrace/config.yaml is no conffile: an upgrade would overwrite the admin's"
    );
    // Installed, not enabled: the agent traces the whole node, which its admin turns on.
    let wants = r.join("etc/systemd/system/multi-user.target.wants/pipetrace.service");
    assert!(!wants.exists(), "the package enabled pipetrace.service");

    let validated = in_root_ok(
        r,
        &[
            "pipetrace",
            "config",
            "validate",
            "/etc/pipetrace/config.yaml",
        ],
    );
    eprintln!("config validate: {validated}");
    bash_completes_in(r);
    let doctor = in_root_ok(r, &["pipetrace", "doctor"]);
    assert!(doctor.contains("pipetrace can run here"), "{doctor}");
    assert!(!doctor.contains("FAIL"), "{doctor}");

    traces_a_pipeline_in(r);
    unit_verifies(r);
    man_pages_render(r);

    in_root_ok(r, &["dpkg", "--purge", "pipetrace"]);
    for (path, _) in INSTALLED {
        assert!(!r.join(path).exists(), "{path} stays after dpkg --purge");
    }
}

/// bash's completion, as installed, loads and completes `pipetrace do` (bash is in every
/// Debian root).
fn bash_completes_in(r: &Path) {
    let script = "source /usr/share/bash-completion/completions/pipetrace
        COMP_WORDS=(pipetrace do); COMP_CWORD=1; COMP_LINE='pipetrace do'; COMP_POINT=12
        _pipetrace pipetrace do pipetrace; printf '%s\\n' \"${COMPREPLY[@]}\"";
    let complete = in_root_ok(r, &["bash", "-c", script]);
    assert_eq!(
        complete.trim(),
        "doctor",
        "the completion of `pipetrace do`"
    );
}

/// `pipetrace run` of the installed binary, in the root: the run and its tools, from eBPF.
fn traces_a_pipeline_in(r: &Path) {
    let script = "printf 'b\\na\\n' | sort | wc -l";
    let args = [
        "pipetrace",
        "run",
        "--output",
        "/tmp/t.otlp.jsonl",
        "--",
        "/bin/sh",
        "-c",
        script,
    ];
    let printed = in_root_ok(r, &args);
    assert_eq!(printed.trim(), "2", "the pipeline's own output");
    let spans = read_jsonl(&r.join("tmp/t.otlp.jsonl"));
    let run = spans.iter().find(|s| s.is_run()).expect("a run span");
    assert_eq!(run.str(attr::COLLECTION_MODE), "ebpf", "{run:?}");
    for tool in ["sort", "wc"] {
        let s = spans
            .iter()
            .find(|s| s.is_tool() && s.name == tool)
            .unwrap_or_else(|| panic!("no {tool} span in {:#?}", names(&spans)));
        assert_eq!(s.trace_id, run.trace_id, "{tool} outside the run's trace");
        assert_eq!(s.str(attr::COLLECTION_MODE), "ebpf", "{s:?}");
    }
}

fn names(spans: &[pipetrace_e2e::spans::RecvSpan]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

/// `systemd-analyze verify` of the unit as installed, against the root's own files: its keys,
/// its commands (the package's /usr/bin/pipetrace). The clean root has no systemd, so none of
/// systemd's own units its dependencies name (sysinit.target): errors in those are not the
/// unit's (`--recursive-errors=no`); an unknown key or a missing binary still fails.
fn unit_verifies(r: &Path) {
    require("systemd-analyze");
    let root = format!("--root={}", r.display());
    let mut c = Command::new("systemd-analyze");
    c.args(["verify", "--man=no", "--recursive-errors=no", &root]);
    c.arg("/usr/lib/systemd/system/pipetrace.service");
    ok("systemd-analyze verify", &mut c);
}

/// The installed man pages, read by man: the subcommands in the main page's text.
fn man_pages_render(r: &Path) {
    require("man");
    let page = r.join("usr/share/man/man1/pipetrace.1.gz");
    let mut c = Command::new("man");
    c.arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100");
    let text = ok("man -l pipetrace.1.gz", &mut c);
    for needle in ["SYNOPSIS", "doctor", "run", "--config"] {
        assert!(
            text.contains(needle),
            "the man page lacks {needle}:\n{text}"
        );
    }
}

/// The tarball holds what the package installs, under one directory, the unit under usr/.
fn tarball_holds_the_package_s_files(tarball: &Path) {
    let listing = ok("tar -tzf", Command::new("tar").arg("-tzf").arg(tarball));
    let version = env!("CARGO_PKG_VERSION");
    let name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    let top = name.strip_suffix(".tar.gz").unwrap();
    assert!(top.starts_with(&format!("pipetrace-{version}-")), "{name}");
    for (path, _) in INSTALLED {
        let want = format!("{top}/{path}");
        assert!(
            listing.lines().any(|l| l == want),
            "{want} not in the tarball:\n{listing}"
        );
    }
    for l in listing.lines() {
        assert!(l.starts_with(&format!("{top}/")), "{l} outside {top}/");
        assert!(
            !l.starts_with(&format!("{top}/lib/")),
            "{l}: /lib may be a symlink"
        );
    }
    // The binary in it runs.
    let dir = tempfile::tempdir().unwrap();
    let mut x = Command::new("tar");
    x.arg("-xzf").arg(tarball).arg("-C").arg(dir.path());
    ok("tar -xzf", &mut x);
    let bin = dir.path().join(top).join("usr/bin/pipetrace");
    let said = ok("pipetrace --version", Command::new(&bin).arg("--version"));
    assert_eq!(said.trim(), format!("pipetrace {version}"));
}
