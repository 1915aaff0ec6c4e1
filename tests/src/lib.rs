//! Support for the end-to-end tests: a real OTLP receiver, the pipetrace binary, and the
//! demo pipeline in a scratch directory.
pub mod bench;
pub mod cgroup;
pub mod examples;
pub mod fake_gpu;
pub mod jaeger;
pub mod metrics;
pub mod nextflow;
pub mod podman;
pub mod progress;
pub mod prometheus;
pub mod receiver;
pub mod snakemake;
pub mod snapshot;
pub mod spans;
pub mod tempo;
pub mod tls;
mod tls_server;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// A path in the repository (`deploy/helm`, `scripts/dist.sh`).
pub fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// Panics, saying how to install it, when `program` is missing: nothing is skipped.
pub fn require(program: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{program} is not installed: run scripts/setup.sh (as root), which installs it"
    );
}

/// The pipetrace binary of this build (`PIPETRACE_BIN` overrides).
pub fn pipetrace_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPETRACE_BIN") {
        return PathBuf::from(p);
    }
    // Tests run from target/<profile>/deps/, the bench from target/<profile>/.
    let exe = std::env::current_exe().expect("test executable path");
    let found = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("pipetrace"))
        .find(|b| b.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "no pipetrace binary beside {}: build it first (`cargo build -p pipetrace`, or `make test`)",
            exe.display()
        )
    })
}

pub fn pipetrace() -> Command {
    let mut c = Command::new(pipetrace_bin());
    // The tests choose their own endpoints; the caller's environment must not leak in.
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k.starts_with("PIPETRACE_") && k != "PIPETRACE_BIN" {
            c.env_remove(k);
        }
    }
    // Task history of this test process only: other tests' runs must not make it "usual".
    c.env("PIPETRACE_DIAGNOSIS__STATE_DIR", state_dir());
    // Files a run writes by default (reports) land there too, not in the source tree.
    c.current_dir(state_dir());
    c
}

/// A state directory for this test process, removed with it.
pub fn state_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("state dir"))
        .path()
}

/// The demo pipeline (collector/demo) copied into a fresh directory.
pub fn demo_pipeline() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../collector/demo");
    copy_dir(&src, dir.path());
    dir
}

/// A directory holding tests/data/cwl/wf.cwl, its input `in.txt` and its job `job.yml`:
/// `cwltool --no-container --outdir results wf.cwl job.yml` runs it there.
pub fn cwl_workflow() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/cwl/wf.cwl");
    std::fs::copy(&wf, dir.path().join("wf.cwl")).expect("copy wf.cwl");
    std::fs::write(dir.path().join("in.txt"), "pear\napple\nfig\n").expect("write in.txt");
    let job = "text: {class: File, path: in.txt}\n";
    std::fs::write(dir.path().join("job.yml"), job).expect("write job.yml");
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read demo dir") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).expect("copy");
        }
    }
}

/// `pipetrace run --output DIR/t.otlp.jsonl -- sh -c SCRIPT`: its spans and its output.
pub fn run_script(dir: &Path, script: &str) -> (Vec<spans::RecvSpan>, Output) {
    run_script_with(dir, script, &[])
}

/// [`run_script`] with extra environment for pipetrace (settings as `PIPETRACE_*`).
pub fn run_script_with(
    dir: &Path,
    script: &str,
    env: &[(&str, &str)],
) -> (Vec<spans::RecvSpan>, Output) {
    run_shell(dir, "sh", script, env)
}

/// [`run_script_with`] in another shell (`bash`, whose job control and builtins a test needs).
pub fn run_shell(
    dir: &Path,
    shell: &str,
    script: &str,
    env: &[(&str, &str)],
) -> (Vec<spans::RecvSpan>, Output) {
    let out = dir.join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(env.iter().copied())
        .arg("run")
        .arg("--output")
        .arg(&out)
        .args(["--", shell, "-c", script])
        .output()
        .expect("run pipetrace");
    (read_jsonl(&out), o)
}

/// Waits (up to 30 s) until a process named `comm` runs with `dir` as its working directory:
/// other tests run their own processes of the same name elsewhere.
pub fn wait_for_process(dir: &Path, comm: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|e| e.ok())
            .any(|e| {
                let p = e.path();
                std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == comm)
                    && std::fs::read_link(p.join("cwd")).is_ok_and(|c| c == dir)
            });
        if found {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{comm} never ran in {}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `program` of a venv scripts/setup.sh makes under ~/.local/share/pipetrace (Snakemake 9,
/// Prefect), or a panic that says how to install it.
pub fn venv_program(venv: &str, program: &str) -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    let p = Path::new(&home)
        .join(".local/share/pipetrace")
        .join(venv)
        .join("bin")
        .join(program);
    assert!(
        p.exists(),
        "{} is not installed: run scripts/setup.sh",
        p.display()
    );
    p
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Spans of an OTLP JSON lines file, as the receiver would have them.
pub fn read_jsonl(path: &Path) -> Vec<spans::RecvSpan> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    spans_of_lines(&text)
}

/// The spans of OTLP JSON lines, each line one export request.
fn spans_of_lines(text: &str) -> Vec<spans::RecvSpan> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let req: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
            serde_json::from_str(line)
                .expect("each line is an OTLP JSON ExportTraceServiceRequest");
        out.extend(spans::flatten(req));
    }
    out
}

/// The spans of the complete lines of a trace file being written (none before it exists).
pub fn spans_so_far(path: &Path) -> Vec<spans::RecvSpan> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    spans_of_lines(text.rfind('\n').map_or("", |end| &text[..end]))
}

/// Asks `what` every 100 ms until it answers, for at most `limit`: a wait on the thing
/// itself, not a guess at how long it takes. Panics naming what never came.
pub fn wait_until<T>(
    limit: std::time::Duration,
    waited_for: &str,
    mut what: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = what() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited {limit:?} for {waited_for}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Waits (up to 30 s) until the agent writing `out` has exported the run span of each of
/// `runs` (by `cicd.pipeline.name`): it has seen them end.
pub fn wait_for_runs(out: &Path, runs: &[&str]) {
    let what = format!("the run spans of {runs:?} in {}", out.display());
    wait_until(std::time::Duration::from_secs(30), &what, || {
        let spans = spans_so_far(out);
        let has =
            |r: &&str| (spans.iter()).any(|s| s.is_run() && s.str("cicd.pipeline.name") == *r);
        runs.iter().all(has).then_some(())
    });
}

/// Waits (up to 30 s) until the agent writing `out` has exported a run span that `is` holds
/// true of (`waited_for` says which): it has seen that run end.
pub fn wait_for_run_where(out: &Path, waited_for: &str, is: impl Fn(&spans::RecvSpan) -> bool) {
    let what = format!("{waited_for} in {}", out.display());
    wait_until(std::time::Duration::from_secs(30), &what, || {
        (spans_so_far(out).iter())
            .any(|s| s.is_run() && is(s))
            .then_some(())
    });
}

/// Waits until the agent writing `out` has exported the run span of Slurm job `job`.
pub fn wait_for_job(out: &Path, job: &str) {
    let what = format!("the run span of Slurm job {job}");
    wait_for_run_where(out, &what, |s| {
        s.str(pipetrace_semconv::attr::SLURM_JOB_ID) == job
    });
}

/// Runs pipetrace ARGS as user `nobody` holding only `caps` (setpriv's names: `bpf`,
/// `perfmon`; none: empty), from a copy `nobody` can reach wherever the build directory is.
pub fn as_nobody_with_caps(caps: &[&str], args: &[&str], env: &[(&str, &str)]) -> Output {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("pipetrace");
    std::fs::copy(pipetrace_bin(), &bin).unwrap();
    let set: String = caps.iter().map(|c| format!(",+{c}")).collect();
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all{set}"))
        .arg(format!("--ambient-caps=-all{set}"))
        .arg("--")
        .arg(&bin)
        .args(args)
        .env("HOME", dir.path())
        .envs(env.iter().copied())
        .output()
        .expect("setpriv (util-linux)")
}

/// A shell loop running in the background until dropped: another user's load beside a test.
pub struct Background(std::process::Child);

impl Background {
    pub fn shell(script: &str) -> Self {
        let child = Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap_or_else(|e| panic!("start `{script}`: {e}"));
        Self(child)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A second CPU load on the machine (one core kept busy), until dropped: verdicts must not
/// change because someone else uses the machine.
pub struct CpuLoad;

impl CpuLoad {
    pub fn start() -> Background {
        Background::shell("while :; do :; done")
    }
}

/// Calls `each` with every span of an OTLP JSON lines file, one request line at a time: a
/// file of a storm's hundreds of thousands of spans is never held whole.
pub fn each_jsonl_span(path: &Path, mut each: impl FnMut(spans::RecvSpan)) {
    use std::io::BufRead;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in std::io::BufReader::new(file).lines() {
        let line = line.expect("read a line");
        if line.trim().is_empty() {
            continue;
        }
        let req: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
            serde_json::from_str(&line)
                .expect("each line is an OTLP JSON ExportTraceServiceRequest");
        spans::flatten(req).into_iter().for_each(&mut each);
    }
}

/// A running `pipetrace agent`, stopped (and checked) by [`Agent::stop`].
pub struct Agent {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Agent {
    /// Starts `pipetrace ARGS agent` and returns once it watches the host.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with(args, &[])
    }

    /// As [`Agent::start`], with environment variables of its own (a second agent's state
    /// directory).
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        use std::io::BufRead;
        let mut child = pipetrace()
            .env("PIPETRACE_LOG", "info")
            .envs(env.iter().copied())
            .args(args)
            .arg("agent")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start pipetrace agent");
        let stderr = child.stderr.take().expect("agent stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut said = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.contains("pipetrace agent watching") => break,
                Ok(line) => said.push(line),
                Err(_) => panic!(
                    "the agent never said it was watching; it said:\n{}",
                    said.join("\n")
                ),
            }
        }
        Self { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged since it said it was watching (or since the last call).
    pub fn said(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// SIGKILL: a crash, or an OOM kill of the agent itself; nothing is flushed.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, as systemd or Kubernetes would stop it; asserts a clean exit and returns
    /// the agent's final report.
    pub fn stop(mut self) -> String {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().expect("agent exit");
        assert!(st.success(), "the agent exits cleanly on SIGTERM: {st:?}");
        self.lines
            .iter()
            .find_map(|l| l.split("stopped: ").nth(1).map(str::to_string))
            .unwrap_or_else(|| "(no final report)".into())
    }
}

/// A test that fails before [`Agent::stop`] leaves no agent running behind it.
impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The independent rotel collector (PyPI), from $ROTEL_AGENT or where pip put it.
pub fn rotel_agent() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        return p.into();
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .output()
        .expect("python3");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && std::path::Path::new(&path).exists(),
        "the rotel collector is not installed: run scripts/setup.sh (pip install --pre rotel)"
    );
    path.into()
}

/// A single-node Slurm on this machine (scripts/slurm-up.sh; idempotent).
pub fn slurm_up() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/slurm-up.sh");
    let o = Command::new("bash").arg(script).output().unwrap();
    assert!(
        o.status.success(),
        "a single-node Slurm: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An agent of its own (as another node's, or beside another test's): config `yaml`, its own
/// state directory and output file, all named `name` under `dir`. Returns it and its file.
pub fn own_agent(dir: &Path, name: &str, yaml: &str) -> (Agent, PathBuf) {
    let cfg = dir.join(format!("{name}.yaml"));
    std::fs::write(&cfg, yaml).unwrap();
    let state = dir.join(format!("{name}-state"));
    std::fs::create_dir_all(&state).unwrap();
    let out = dir.join(format!("{name}.otlp.jsonl"));
    let agent = Agent::start_with(
        &["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()],
        &[("PIPETRACE_DIAGNOSIS__STATE_DIR", state.to_str().unwrap())],
    );
    (agent, out)
}

/// A node's agent under host id `node`, watching only cgroup `scope` (as if only what runs
/// there ran on its node).
pub fn node_agent(dir: &Path, node: &str, scope: &str) -> (Agent, PathBuf) {
    let yaml =
        format!("resource_attributes:\n  host.id: {node}\nprobes:\n  scope_cgroup: {scope}\n");
    own_agent(dir, node, &yaml)
}

/// The host id a span's resource names.
pub fn host_id(s: &spans::RecvSpan) -> &str {
    match s.resource.get("host.id") {
        Some(spans::Val::Str(id)) => id,
        other => panic!("host.id {other:?}"),
    }
}

/// This machine's short host name (Slurm's node name here).
pub fn short_hostname() -> String {
    let o = Command::new("hostname").arg("-s").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Waits (up to a minute) until `squeue -h FILTER...` lists no job, then a second more: a
/// job's last processes end a moment after Slurm lets it go.
pub fn slurm_wait_gone(filter: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let q = Command::new("squeue")
            .arg("-h")
            .args(filter)
            .output()
            .unwrap();
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
}
