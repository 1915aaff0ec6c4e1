//! The real Prometheus and Alertmanager (Debian's), started for a test on free loopback
//! ports, and a webhook that records what Alertmanager delivers.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::receiver::free_port;

/// A daemon of the test's own, killed when dropped.
pub struct Daemon {
    child: Child,
    /// http://127.0.0.1:PORT
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(program: &str, args: &[String], url: String, dir: tempfile::TempDir) -> Self {
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
        let d = Self {
            child,
            url,
            _dir: dir,
        };
        d.wait_ready(program);
        d
    }

    /// Waits for `GET /-/ready` to answer 200 (plain HTTP/1.0: it may be called from
    /// inside a runtime or outside one).
    fn wait_ready(&self, program: &str) {
        use std::io::{Read, Write};
        let addr = self.url.trim_start_matches("http://").to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let answer = std::net::TcpStream::connect(&addr).and_then(|mut c| {
                c.write_all(b"GET /-/ready HTTP/1.0\r\n\r\n")?;
                let mut s = String::new();
                c.read_to_string(&mut s)?;
                Ok(s)
            });
            if answer.is_ok_and(|a| a.starts_with("HTTP/1.0 200") || a.starts_with("HTTP/1.1 200"))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default();
        panic!("{program} never became ready at {}:\n{log}", self.url);
    }

    /// A PromQL instant query (now, or at `time`, Unix seconds): the result vector.
    pub async fn query(&self, promql: &str, time: Option<f64>) -> Vec<Value> {
        let mut url = reqwest::Url::parse(&format!("{}/api/v1/query", self.url)).unwrap();
        url.query_pairs_mut().append_pair("query", promql);
        if let Some(t) = time {
            url.query_pairs_mut()
                .append_pair("time", &format!("{t:.3}"));
        }
        let text = reqwest::get(url).await.unwrap().text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["status"], "success", "{promql}: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// Alertmanager delivering every alert at once to `webhook` (no grouping wait, no cluster).
pub fn alertmanager(webhook: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("alertmanager.yml");
    std::fs::write(
        &cfg,
        format!(
            "route:\n  receiver: test\n  group_by: ['...']\n  group_wait: 0s\n  \
             group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    \
             webhook_configs:\n      - url: {webhook}\n        send_resolved: false\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let args = [
        format!("--config.file={}", cfg.display()),
        format!("--storage.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        "--cluster.listen-address=".into(),
    ];
    Daemon::start(
        "prometheus-alertmanager",
        &args,
        format!("http://127.0.0.1:{port}"),
        dir,
    )
}

/// Prometheus scraping `targets` (host:port) every second, evaluating `rules` every second
/// and alerting through `alertmanager` (host:port).
pub fn prometheus(targets: &[String], rules: &Path, alertmanager: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - '{}'\n\
             alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{alertmanager}']\n\
             scrape_configs:\n  - job_name: pipetrace\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        ),
    )
    .unwrap();
    let port = free_port();
    let args = [
        format!("--config.file={}", cfg.display()),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    Daemon::start("prometheus", &args, format!("http://127.0.0.1:{port}"), dir)
}

/// A webhook receiver: every alert Alertmanager posts to it, in arrival order.
#[derive(Clone, Default)]
pub struct Webhook {
    alerts: Arc<Mutex<Vec<Value>>>,
    pub url: String,
}

impl Webhook {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hook = Self {
            url: format!("http://{}/alerts", listener.local_addr().unwrap()),
            ..Self::default()
        };
        let alerts = hook.alerts.clone();
        let app = axum::Router::new().route(
            "/alerts",
            axum::routing::post(move |body: String| async move {
                let v: Value = serde_json::from_str(&body).expect("Alertmanager's JSON");
                let got = v["alerts"].as_array().cloned().unwrap_or_default();
                alerts.lock().unwrap().extend(got);
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        hook
    }

    pub fn alerts(&self) -> Vec<Value> {
        self.alerts.lock().unwrap().clone()
    }
}
