//! Jaeger v2, a real backend: the Go module pinned in tests/jaeger (scripts/jaeger.sh builds
//! it: `make jaeger`, a step of `make test`), started with its in-memory store, OTLP
//! receivers on free ports and its query API. Tests judge what pipetrace sent by what
//! Jaeger's query API gives back.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::{pipetrace, read_jsonl, receiver::free_ports, spans::RecvSpan, stderr, wait_until};

/// The version tests/jaeger/go.mod pins, and where setup puts its build.
pub const VERSION: &str = "v1.76.0";

pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPETRACE_JAEGER") {
        return p.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    let path = PathBuf::from(home).join(format!(".cache/pipetrace/jaeger-{VERSION}"));
    assert!(
        path.exists(),
        "Jaeger {VERSION} is not built: run `make jaeger` (scripts/jaeger.sh builds tests/jaeger)"
    );
    path
}

pub struct Jaeger {
    child: Option<Child>,
    config: PathBuf,
    pub otlp_grpc: u16,
    pub otlp_http: u16,
    pub query: u16,
    dir: tempfile::TempDir,
}

/// Where Jaeger keeps the spans it takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    Memory,
    /// Badger on disk in the test's directory: kept across a restart.
    Disk,
}

impl Jaeger {
    /// Starts one and waits (up to a minute) until its query API answers.
    pub fn start() -> Self {
        Self::start_with(None, Store::Memory)
    }

    /// With its OTLP receivers behind mutual TLS: their certificate, and the clients' CA.
    pub fn start_with_tls(certs: &crate::tls::Certs) -> Self {
        Self::start_with(Some(certs), Store::Memory)
    }

    /// With its spans on disk (Badger), so that what it took outlives [`Jaeger::stop`].
    pub fn start_on_disk() -> Self {
        Self::start_with(None, Store::Disk)
    }

    fn start_with(tls: Option<&crate::tls::Certs>, store: Store) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = tls.map_or(String::new(), |c| {
            format!(
                "
        tls:
          cert_file: {}
          key_file: {}
          client_ca_file: {}",
                c.server_cert.display(),
                c.server_key.display(),
                c.ca.display()
            )
        });
        let backend = match store {
            Store::Memory => "memory:\n          max_traces: 100000".to_string(),
            Store::Disk => {
                let d = dir.path().join("badger");
                format!(
                    "badger:\n          directories:\n            keys: {0}\n            \
                     values: {0}\n          ephemeral: false",
                    d.display()
                )
            }
        };
        let [otlp_grpc, otlp_http, query, query_grpc, health] = free_ports();
        let config = format!(
            "service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health}
  jaeger_storage:
    backends:
      store:
        {backend}
  jaeger_query:
    storage:
      traces: store
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc}{tls}
      http:
        endpoint: 127.0.0.1:{otlp_http}{tls}
exporters:
  jaeger_storage_exporter:
    trace_storage: store
"
        );
        let config_file = dir.path().join("jaeger.yaml");
        std::fs::write(&config_file, config).expect("write jaeger.yaml");
        let mut j = Self {
            child: None,
            config: config_file,
            otlp_grpc,
            otlp_http,
            query,
            dir,
        };
        j.run();
        j
    }

    /// Starts the binary on this configuration and waits for its query API.
    fn run(&mut self) {
        let log = (std::fs::OpenOptions::new().create(true).append(true))
            .open(self.dir.path().join("jaeger.log"))
            .expect("log");
        // Its own traces would go to localhost:4317 otherwise.
        let child = Command::new(binary())
            .env("OTEL_TRACES_EXPORTER", "none")
            .arg("--config")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start jaeger");
        self.child = Some(child);
        let log = self.dir.path().join("jaeger.log");
        wait_until(Duration::from_secs(60), "Jaeger's query API", || {
            // One that exited will not answer: say why, from its own log.
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok()?) {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = said.lines().rev().take(15).collect();
                panic!(
                    "Jaeger exited ({status}) before its query API answered:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            self.get("/api/services").ok()
        });
    }

    /// Stops it (SIGKILL: a crash, not a shutdown); its ports refuse until [`Jaeger::restart`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same ports and store.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_grpc)
    }

    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_http)
    }

    /// GET `path` of the query API, as JSON.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        let url = format!("http://127.0.0.1:{}{path}", self.query);
        let body = http_get(&url)?;
        serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))
    }

    /// The spans Jaeger holds of trace `id` (hex), once it holds `at_least` of them (it
    /// stores what its receiver took as it comes): Jaeger's own JSON of each span.
    pub fn trace(&self, id: &str, at_least: usize) -> Vec<Value> {
        let what = format!("{at_least} spans of trace {id} in Jaeger");
        wait_until(Duration::from_secs(30), &what, || {
            let v = self.get(&format!("/api/traces/{id}")).ok()?;
            let spans = v["data"][0]["spans"].as_array()?.clone();
            (spans.len() >= at_least).then_some(spans)
        })
    }

    /// What Jaeger keeps of the process (resource) of `span`: its service and tags.
    pub fn process_of(&self, id: &str, span: &Value) -> Value {
        let v = self.get(&format!("/api/traces/{id}")).expect("trace");
        let pid = span["processID"].as_str().expect("processID");
        v["data"][0]["processes"][pid].clone()
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The body of a GET of `url` (curl: no HTTP client of the tests' own to block on), or
/// what went wrong: the answer of a failed request, or curl's error.
pub fn http_get(url: &str) -> Result<String, String> {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--fail-with-body", url])
        .output()
        .map_err(|e| e.to_string())?;
    let body = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        let why = String::from_utf8_lossy(&o.stderr);
        return Err(format!("{url}: {body}{why}"));
    }
    Ok(body)
}

/// A span's tag by key, as Jaeger gives it.
pub fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    let tags = span["tags"].as_array()?;
    Some(&tags.iter().find(|t| t["key"] == key)?["value"])
}

/// A field of a log (a span event) by key.
pub fn field<'a>(log: &'a Value, key: &str) -> Option<&'a Value> {
    let fields = log["fields"].as_array()?;
    Some(&fields.iter().find(|f| f["key"] == key)?["value"])
}

/// The span's log of span event `name` (Jaeger keeps an event's name as field `event`).
pub fn log_named<'a>(span: &'a Value, name: &str) -> Option<&'a Value> {
    let logs = span["logs"].as_array()?;
    logs.iter()
        .find(|l| field(l, "event").is_some_and(|v| v == name))
}

/// The span a span is the child of, in Jaeger's references.
pub fn parent(span: &Value) -> Option<String> {
    let refs = span["references"].as_array()?;
    let r = refs.iter().find(|r| r["refType"] == "CHILD_OF")?;
    Some(r["spanID"].as_str()?.to_string())
}

/// `pipetrace run -o FILE` with traces also sent to `endpoint` (metrics stay in files: Jaeger
/// takes traces only), in `dir`.
pub fn run_into(dir: &Path, endpoint: &str, protocol: &str, argv: &[&str]) -> Vec<RecvSpan> {
    run_into_with(dir, endpoint, protocol, &[], argv)
}

/// [`run_into`] with more settings for pipetrace.
pub fn run_into_with(
    dir: &Path,
    endpoint: &str,
    protocol: &str,
    env: &[(&str, &str)],
    argv: &[&str],
) -> Vec<RecvSpan> {
    let file = dir.join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(env.iter().copied())
        .env("PIPETRACE_EXPORT__OTLP__TRACES__ENDPOINT", endpoint)
        .env("PIPETRACE_EXPORT__OTLP__TRACES__PROTOCOL", protocol)
        .args(["run", "-o"])
        .arg(&file)
        .arg("--")
        .args(argv)
        .current_dir(dir)
        .output()
        .expect("pipetrace run");
    let err = stderr(&o);
    assert!(
        !err.contains("not delivered"),
        "every span delivered: {err}"
    );
    read_jsonl(&file)
}

/// (span id, parent, name, in error) of each span, as pipetrace wrote them and as Jaeger
/// gives them.
pub type Tree = BTreeSet<(String, Option<String>, String, bool)>;

pub fn written(spans: &[RecvSpan]) -> Tree {
    (spans.iter())
        .map(|s| {
            (
                s.span_id.clone(),
                s.parent.clone(),
                s.name.clone(),
                s.status == 2,
            )
        })
        .collect()
}

pub fn read_back(spans: &[Value]) -> Tree {
    let id = |s: &Value| s["spanID"].as_str().unwrap().to_string();
    let name = |s: &Value| s["operationName"].as_str().unwrap().to_string();
    let error = |s: &Value| tag(s, "otel.status_code").and_then(Value::as_str) == Some("ERROR");
    (spans.iter())
        .map(|s| (id(s), parent(s), name(s), error(s)))
        .collect()
}

pub fn one_trace(spans: &[RecvSpan]) -> String {
    let ids: BTreeSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(ids.len(), 1, "one trace per run: {ids:?}");
    ids.into_iter().next().unwrap().to_string()
}

/// The OpenTelemetry Collector pipeline shipped in deploy/collector/pipetrace.yaml, run by
/// Jaeger v2's binary (a Collector distribution with those components), sending to a
/// [`Jaeger`]: OTLP receivers and its Prometheus endpoint on free ports.
pub struct Collector {
    child: Child,
    pub otlp_grpc: u16,
    pub prometheus: u16,
    /// Holds its log while it runs.
    _dir: tempfile::TempDir,
}

impl Collector {
    /// Starts it with `env` over the file's defaults (its `${env:...}` settings) and waits
    /// until its Prometheus endpoint answers.
    pub fn start(backend: &Jaeger, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let [otlp_grpc, otlp_http, prometheus] = free_ports();
        let config =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/collector/pipetrace.yaml");
        let log = std::fs::File::create(dir.path().join("collector.log")).expect("log");
        // Its own traces would go to localhost:4317 otherwise.
        let child = Command::new(binary())
            .env("OTEL_TRACES_EXPORTER", "none")
            .arg("--config")
            .arg(&config)
            .env("PIPETRACE_COLLECTOR_GRPC", format!("127.0.0.1:{otlp_grpc}"))
            .env("PIPETRACE_COLLECTOR_HTTP", format!("127.0.0.1:{otlp_http}"))
            .env(
                "PIPETRACE_BACKEND",
                format!("127.0.0.1:{}", backend.otlp_grpc),
            )
            .env("PIPETRACE_PROMETHEUS", format!("127.0.0.1:{prometheus}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the collector");
        let c = Self {
            child,
            otlp_grpc,
            prometheus,
            _dir: dir,
        };
        wait_until(
            Duration::from_secs(60),
            "the collector's Prometheus endpoint",
            || c.metrics().ok(),
        );
        c
    }

    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_grpc)
    }

    /// What it serves Prometheus now (text format).
    pub fn metrics(&self) -> Result<String, String> {
        http_get(&format!("http://127.0.0.1:{}/metrics", self.prometheus))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
