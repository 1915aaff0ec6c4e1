//! The agent needs only the capabilities the systemd unit grants. Run as systemd runs it (root
//! with exactly that bounding set, no new privileges), it loads its probes and measures a real
//! command as exactly as wait4 does; each capability on the list is needed for something; the
//! Helm chart and the compose stack grant the same list and nothing privileged; with only
//! CAP_BPF and CAP_PERFMON `pipetrace run` still loads its probes and measures.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Child, Command, Output},
    time::{Duration, Instant},
};

use pipetrace_e2e::{pipetrace, read_jsonl, stderr};
use pipetrace_semconv::attr;
use serde_json::Value;
use serde_yaml::Value as Yaml;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const RUSAGE_OF: &str = env!("CARGO_BIN_EXE_rusage-of");

/// `nobody`: a user other than the agent's, as a pipeline's user is.
const OTHER_UID: &str = "65534";

fn deploy(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(p)
}

fn read(p: &str) -> String {
    std::fs::read_to_string(deploy(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn yaml(p: &str, text: &str) -> Yaml {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{p} is not valid YAML: {e}\n{text}"))
}

/// `CAP_BPF`, `cap_bpf` and `BPF` alike, as systemd, setpriv and container runtimes spell it.
fn cap_name(s: &str) -> String {
    let upper = s.trim().to_ascii_uppercase();
    upper.strip_prefix("CAP_").unwrap_or(&upper).to_string()
}

/// Every `CapabilityBoundingSet=` of the unit, joined as systemd joins them.
fn unit_capabilities() -> BTreeSet<String> {
    let unit = read("systemd/pipetrace.service");
    let mut caps = BTreeSet::new();
    for list in unit
        .lines()
        .filter_map(|l| l.trim().strip_prefix("CapabilityBoundingSet="))
    {
        // `~` lists what is taken away: everything else would stay.
        assert!(!list.starts_with('~'), "an inverted bounding set: {list}");
        caps.extend(list.split_whitespace().map(cap_name));
    }
    assert!(!caps.is_empty(), "the unit sets no CapabilityBoundingSet");
    caps
}

/// `inner` (program, arguments, environment, directory) run as root with exactly `caps` in its
/// bounding, inheritable and ambient sets, and so in its permitted and effective ones.
fn confined(caps: &BTreeSet<String>, inner: &Command) -> Command {
    let set: String = std::iter::once("-all".to_string())
        .chain(caps.iter().map(|c| format!("+{}", c.to_ascii_lowercase())))
        .collect::<Vec<_>>()
        .join(",");
    let mut c = Command::new("setpriv");
    for flag in ["--bounding-set", "--inh-caps", "--ambient-caps"] {
        c.args([flag, &set]);
    }
    c.args(["--no-new-privs", "--"]);
    c.arg(inner.get_program()).args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = inner.get_current_dir() {
        c.current_dir(d);
    }
    c
}

fn output(mut c: Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("start {:?}: {e}", c.get_program()))
}

/// The confinement is what the test says it is, not a silent no-op: setpriv names the
/// bounding set, and every other set of the process equals it.
fn assert_confined_to(caps: &BTreeSet<String>) {
    let mut sh = Command::new("sh");
    sh.args(["-c", "setpriv --dump && grep ^Cap /proc/self/status"]);
    let o = output(confined(caps, &sh));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .trim()
            .to_string()
    };
    let bounding: BTreeSet<String> = field("Capability bounding set:")
        .split(',')
        .filter(|c| *c != "[none]")
        .map(cap_name)
        .collect();
    assert_eq!(&bounding, caps, "{text}");
    let masks: BTreeSet<String> = ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"]
        .iter()
        .map(|f| field(f))
        .collect();
    assert_eq!(masks.len(), 1, "sets differ from the bounding set:\n{text}");
}

/// `pipetrace run` that refuses to fall back to polling /proc: it succeeds only if the probes
/// load and attach.
fn strict_run(out: &Path) -> Command {
    let mut c = pipetrace();
    c.env("PIPETRACE_PROBES__STRICT", "true")
        .arg("run")
        .arg("--output")
        .arg(out);
    c
}

#[test]
fn the_agent_measures_a_real_command_with_only_the_units_capabilities() {
    let caps = unit_capabilities();
    assert_confined_to(&caps);
    let dir = tempfile::tempdir().unwrap();
    let (out, ru) = (dir.path().join("t.otlp.jsonl"), dir.path().join("ru.json"));
    let mut run = strict_run(&out);
    run.arg("--")
        .arg(RUSAGE_OF)
        .arg(&ru)
        .args(["--", WORKLOAD, "burn", "300"]);
    let o = output(confined(&caps, &run));
    assert!(o.status.success(), "with {caps:?} only: {}", stderr(&o));
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(&ru).unwrap()).unwrap();
    let spans = read_jsonl(&out);
    for s in &spans {
        assert_eq!(s.str(attr::COLLECTION_MODE), "ebpf", "{s:?}");
    }
    let pid = truth["pid"].as_i64().unwrap();
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.int(attr::PROCESS_PID) == Some(pid))
        .unwrap_or_else(|| panic!("no tool span for pid {pid} in {spans:?}"));
    assert!(tool.attr(attr::USAGE_MISSING).is_none(), "{tool:?}");
    assert_eq!(tool.int(attr::PROCESS_EXIT_CODE), Some(0), "{tool:?}");
    let cpu = tool.num(attr::CPU_USER_TIME).unwrap() + tool.num(attr::CPU_SYSTEM_TIME).unwrap();
    let wait4_cpu = truth["user_s"].as_f64().unwrap() + truth["system_s"].as_f64().unwrap();
    assert!(
        (cpu - wait4_cpu).abs() <= (wait4_cpu * 0.02).max(0.020),
        "CPU: pipetrace {cpu} s, wait4 {wait4_cpu} s"
    );
    let maxrss = tool.num(attr::MEMORY_MAXRSS).unwrap();
    let wait4_maxrss = truth["maxrss_kib"].as_f64().unwrap() * 1024.0;
    assert!(
        (maxrss - wait4_maxrss).abs() <= wait4_maxrss * 0.02,
        "maxrss: pipetrace {maxrss}, wait4 {wait4_maxrss}"
    );
}

/// A process of another user, ended when dropped.
struct OtherUsersProcess {
    child: Child,
    _cwd: tempfile::TempDir,
}

impl OtherUsersProcess {
    fn start() -> Self {
        let cwd = tempfile::tempdir().unwrap();
        let child = Command::new("setpriv")
            .args(["--reuid", OTHER_UID, "--regid", OTHER_UID, "--clear-groups"])
            .args(["--", "sleep", "120"])
            .current_dir(cwd.path())
            .spawn()
            .expect("start setpriv");
        let p = Self { child, _cwd: cwd };
        p.wait_for_exec();
        p
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Until setpriv has become `sleep` as the other user: before, the entries are root's.
    fn wait_for_exec(&self) {
        let status = format!("/proc/{}/status", self.pid());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = std::fs::read_to_string(&status).unwrap_or_default();
            let uid_ok = s
                .lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some(OTHER_UID));
            if uid_ok && s.lines().any(|l| l == "Name:\tsleep") {
                return;
            }
            assert!(Instant::now() < deadline, "never ran as {OTHER_UID}: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for OtherUsersProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Another user's /proc entries the agent reads: I/O counters (poller), working directory and
/// executable (naming, engines' records), open files (Prefect's database).
fn read_other_users_proc(caps: &BTreeSet<String>, pid: u32) -> Result<(), String> {
    let script = format!(
        "cat /proc/{pid}/io >/dev/null && readlink /proc/{pid}/cwd >/dev/null && \
         readlink /proc/{pid}/exe >/dev/null && ls /proc/{pid}/fd >/dev/null"
    );
    let mut sh = Command::new("sh");
    sh.args(["-c", &script]);
    let o = output(confined(caps, &sh));
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("reading pid {pid}'s /proc failed: {}", stderr(&o)))
    }
}

fn load_probes(caps: &BTreeSet<String>) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let mut run = strict_run(&dir.path().join("t.otlp.jsonl"));
    run.args(["--", "true"]);
    let o = output(confined(caps, &run));
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("the probes did not load: {}", stderr(&o)))
    }
}

/// What the agent has its capabilities for.
fn agent_works(caps: &BTreeSet<String>, other: &OtherUsersProcess) -> Result<(), String> {
    load_probes(caps)?;
    read_other_users_proc(caps, other.pid())
}

#[test]
fn every_capability_of_the_unit_is_needed() {
    let caps = unit_capabilities();
    let other = OtherUsersProcess::start();
    if let Err(e) = agent_works(&caps, &other) {
        panic!("with the unit's {caps:?}: {e}");
    }
    // A capability the agent works without is granted for nothing (or covered by another).
    let superfluous: Vec<&String> = caps
        .iter()
        .filter(|cap| {
            let mut fewer = caps.clone();
            fewer.remove(*cap);
            agent_works(&fewer, &other).is_ok()
        })
        .collect();
    assert!(
        superfluous.is_empty(),
        "without any one of {superfluous:?} the probes load and another user's /proc is read \
         all the same"
    );
}

/// Panics if anything anywhere in `v` says `privileged: true`.
fn assert_unprivileged(what: &str, v: &Yaml, at: &str) {
    match v {
        Yaml::Mapping(m) => {
            for (k, v) in m {
                let key = k.as_str().unwrap_or("?");
                let here = format!("{at}.{key}");
                assert!(
                    !(key == "privileged" && v.as_bool() == Some(true)),
                    "{what}: {here} is privileged"
                );
                assert_unprivileged(what, v, &here);
            }
        }
        Yaml::Sequence(s) => {
            for (i, v) in s.iter().enumerate() {
                assert_unprivileged(what, v, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

fn cap_list(v: &Yaml) -> BTreeSet<String> {
    let list = v
        .as_sequence()
        .unwrap_or_else(|| panic!("not a list: {v:?}"));
    list.iter()
        .map(|c| cap_name(c.as_str().expect("a capability name")))
        .collect()
}

fn all() -> BTreeSet<String> {
    BTreeSet::from(["ALL".to_string()])
}

fn value_at<'a>(values: &'a Yaml, path: &str) -> &'a Yaml {
    path.split('.').fold(values, |v, key| {
        v.get(key)
            .unwrap_or_else(|| panic!("the template uses .Values.{path}, not in values.yaml"))
    })
}

/// Go templates' truth: false, zero, nil and empty are false.
fn truthy(v: &Yaml) -> bool {
    match v {
        Yaml::Null => false,
        Yaml::Bool(b) => *b,
        Yaml::Number(n) => n.as_f64() != Some(0.0),
        Yaml::String(s) => !s.is_empty(),
        Yaml::Sequence(s) => !s.is_empty(),
        Yaml::Mapping(m) => !m.is_empty(),
        Yaml::Tagged(t) => truthy(&t.value),
    }
}

/// A line that is a whole `{{ … }}` action, its words.
fn action_line(line: &str) -> Option<String> {
    let t = line.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{")).then(|| {
        inner
            .trim_matches(|c: char| c == '-' || c.is_whitespace())
            .to_string()
    })
}

/// Every other `{{ … }}` becomes a plain scalar: the test reads structure, not values.
fn without_actions(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("an unclosed {{") + start + 2;
        out.push('x');
        rest = &rest[end..];
    }
    out + rest
}

/// The chart's DaemonSet as Helm renders it with `values`, for what the template uses:
/// `if .Values.X` / `else` / `end` lines choose lines, other actions become placeholders.
/// Anything else fails the test rather than be guessed.
fn render_daemonset(values: &Yaml) -> Yaml {
    let p = "helm/pipetrace/templates/daemonset.yaml";
    let mut taken: Vec<bool> = Vec::new();
    let mut kept = Vec::new();
    for line in read(p).lines() {
        match action_line(line) {
            Some(a) if a.starts_with("if .Values.") => {
                taken.push(truthy(value_at(values, &a["if .Values.".len()..])));
            }
            Some(a) if a == "else" => {
                let top = taken.last_mut().expect("else without if");
                *top = !*top;
            }
            Some(a) if a == "end" => {
                taken.pop().expect("end without if");
            }
            Some(a) => panic!("{p}: an action this test cannot render: {a}"),
            None if taken.iter().all(|t| *t) => kept.push(without_actions(line)),
            None => {}
        }
    }
    assert!(taken.is_empty(), "{p}: an if without end");
    yaml(p, &kept.join("\n"))
}

fn helm_values() -> Yaml {
    let p = "helm/pipetrace/values.yaml";
    yaml(p, &read(p))
}

/// The agent container's added capabilities; panics unless everything else is dropped and
/// every mount is read-only.
fn agent_container_caps(ds: &Yaml) -> BTreeSet<String> {
    let containers = ds["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("containers");
    let agent = containers
        .iter()
        .find(|c| c["name"].as_str() == Some("pipetrace"))
        .expect("the pipetrace container");
    let sc = &agent["securityContext"]["capabilities"];
    assert_eq!(cap_list(&sc["drop"]), all(), "{sc:?}");
    for m in agent["volumeMounts"].as_sequence().expect("volumeMounts") {
        assert_eq!(m["readOnly"].as_bool(), Some(true), "not read-only: {m:?}");
    }
    cap_list(&sc["add"])
}

#[test]
fn the_chart_grants_the_units_capabilities_and_nothing_privileged() {
    let caps = unit_capabilities();
    let values = helm_values();
    let ds = render_daemonset(&values);
    assert_unprivileged("the chart", &ds, "");
    assert_eq!(agent_container_caps(&ds), caps);
    assert!(ds["spec"]["template"]["spec"]["initContainers"].is_null());

    // The opt-ins: a privileged one-shot writes the sysctl, the agent's list stays the unit's;
    // old kernels' memlock adds CAP_SYS_RESOURCE and nothing else.
    let mut opted = values.clone();
    opted["delayAccounting"]["setSysctl"] = Yaml::Bool(true);
    opted["memlockForKernelsBefore511"] = Yaml::Bool(true);
    let ds = render_daemonset(&opted);
    let init = &ds["spec"]["template"]["spec"]["initContainers"][0];
    let command = serde_yaml::to_string(&init["command"]).unwrap();
    assert!(
        command.contains("/proc/sys/kernel/task_delayacct"),
        "{init:?}"
    );
    let mut with_resource = caps.clone();
    with_resource.insert("SYS_RESOURCE".into());
    assert_eq!(agent_container_caps(&ds), with_resource);
}

#[test]
fn the_compose_stack_grants_the_units_capabilities_and_nothing_privileged() {
    let p = "compose/docker-compose.yml";
    let compose = yaml(p, &read(p));
    assert_unprivileged(p, &compose, "");
    let agent = &compose["services"]["pipetrace"];
    assert_eq!(cap_list(&agent["cap_drop"]), all());
    assert_eq!(cap_list(&agent["cap_add"]), unit_capabilities());
    for v in agent["volumes"].as_sequence().expect("volumes") {
        let v = v.as_str().expect("short volume syntax");
        assert!(v.ends_with(":ro"), "not read-only: {v}");
    }
}

/// The sysctl file the unit points to sets the delay accounting switch the agent reads.
#[test]
fn the_sysctl_file_turns_on_delay_accounting() {
    let p = "systemd/pipetrace-sysctl.conf";
    let settings: Vec<(String, String)> = read(p)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{p}: {l}"));
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    assert_eq!(
        settings,
        [("kernel.task_delayacct".to_string(), "1".to_string())]
    );
    // A setting of this kernel, at the path the agent reads and warns about.
    let path = Path::new("/proc/sys").join(settings[0].0.replace('.', "/"));
    assert!(path.exists(), "{} does not exist", path.display());
    let unit = read("systemd/pipetrace.service");
    assert!(unit.contains("pipetrace-sysctl.conf") && unit.contains("/etc/sysctl.d"));
}

/// Least privilege: root's uid but only CAP_BPF and CAP_PERFMON (no CAP_SYS_ADMIN, nothing in
/// the bounding set to regain it): the probes load and every figure is there.
#[test]
fn runs_with_only_cap_bpf_and_cap_perfmon() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let workload = env!("CARGO_BIN_EXE_workload");
    let script = format!(
        "grep CapEff /proc/self/status; exec {} run -o {} -- sh -c '{workload} burn 200; true'",
        pipetrace_e2e::pipetrace_bin().display(),
        out.display()
    );
    let caps = "-all,+bpf,+perfmon";
    let o = std::process::Command::new("setpriv")
        .args([
            &format!("--inh-caps={caps}"),
            &format!("--ambient-caps={caps}"),
            &format!("--bounding-set={caps}"),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("PIPETRACE_DIAGNOSIS__STATE_DIR", dir.path())
        .output()
        .expect("setpriv (util-linux)");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", stderr(&o));
    let eff = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .expect("CapEff line");
    assert_eq!(
        eff,
        (1 << 38) | (1 << 39),
        "exactly CAP_PERFMON and CAP_BPF"
    );
    let spans = read_jsonl(&out);
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload")
        .expect("the workload's span");
    let why = || format!("the workload's usage is missing: {}", stderr(&o));
    let cpu = tool
        .num("pipetrace.cpu.user_time")
        .unwrap_or_else(|| panic!("{}", why()));
    assert!(cpu >= 0.15, "{cpu}");
    assert!(
        tool.num("pipetrace.memory.peak")
            .unwrap_or_else(|| panic!("{}", why()))
            > 0.0
    );
}
