//! Our own OTLP transport, shared by traces and metrics: one connection per endpoint (gRPC
//! or HTTP/protobuf, TLS and mutual TLS) with each signal's path, a byte-bounded outbox with
//! retries, and the on-disk spool.
mod client;
pub mod encode;
mod outbox;
mod raw;
mod retry;
mod spool;
pub mod unsent;

pub use client::{Accepted, BySignal, Client, OtlpError, SendError};
pub use outbox::{Batch, Outbox, OutboxStats};
pub use retry::Backoff;
pub use spool::{Spool, SpoolError};

use std::sync::Arc;

use pipetrace_config::{Endpoint, Export, Protocol, Retry, SignalKind};

/// An outbox and the task sending it over one connection.
pub struct Sender {
    pub outbox: Arc<Outbox>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Otlp(#[from] OtlpError),
    #[error(transparent)]
    Spool(#[from] SpoolError),
}

/// The spool's folder, and whether the config named it (else it is the default one).
pub struct SpoolAt {
    pub dir: Option<std::path::PathBuf>,
    pub named: bool,
}

impl SpoolAt {
    /// Opens the spool of `kinds`. A folder the config named must work; the default one
    /// (in the state directory, which a user without rights on it may not write) is left
    /// out with a warning instead.
    fn open(&self, max_bytes: u64, kinds: &[SignalKind]) -> Result<Option<Spool>, SpoolError> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        match Spool::open(dir, max_bytes, kinds) {
            Ok(s) => Ok(Some(s)),
            Err(e) if self.named => Err(e),
            Err(e) => {
                log::warn!("{e}; going on without a spool");
                Ok(None)
            }
        }
    }
}

/// Every connection the configured endpoints need, and which one carries each signal.
pub struct Connections {
    senders: Vec<Sender>,
    pub outbox: BySignal<Option<Arc<Outbox>>>,
    pub client: BySignal<Option<Arc<Client>>>,
}

/// Two signals' endpoints can share a connection: the same settings, and the same server
/// (gRPC: the same URL; HTTP: the same origin, each signal keeping its own path).
fn shareable(a: &Endpoint, b: &Endpoint) -> bool {
    let same = a.protocol == b.protocol
        && a.headers == b.headers
        && a.timeout == b.timeout
        && a.compression == b.compression
        && a.tls == b.tls;
    let origin = |u: &str| reqwest::Url::parse(u).ok().map(|u| u.origin());
    same && match a.protocol {
        Protocol::Grpc => a.url == b.url,
        Protocol::HttpProtobuf => origin(&a.url).is_some_and(|o| Some(o) == origin(&b.url)),
    }
}

impl Connections {
    /// Connects to each signal's endpoint (none: that signal is not sent over OTLP), one
    /// connection for both when they share a server.
    pub(crate) fn start(
        endpoints: &BySignal<Option<Endpoint>>,
        cfg: &Export,
        spool: &SpoolAt,
        stats: &BySignal<Arc<OutboxStats>>,
    ) -> Result<Self, StartError> {
        let mut groups: Vec<(&Endpoint, Vec<SignalKind>)> = Vec::new();
        for kind in [SignalKind::Traces, SignalKind::Metrics] {
            let Some(ep) = endpoints.get(kind) else {
                continue;
            };
            match groups.iter_mut().find(|(first, _)| shareable(first, ep)) {
                Some((_, kinds)) => kinds.push(kind),
                None => groups.push((ep, vec![kind])),
            }
        }
        let mut me = Self {
            senders: Vec::new(),
            outbox: BySignal::default(),
            client: BySignal::default(),
        };
        for (ep, kinds) in groups {
            let mut urls = BySignal::default();
            for &k in &kinds {
                *urls.get_mut(k) = endpoints.get(k).as_ref().map(|e| e.url.clone());
            }
            let client = Arc::new(Client::new(ep, urls)?);
            let spool = spool.open(cfg.spool.max_size.as_u64(), &kinds)?;
            let sender = Sender::start(client.clone(), spool, stats.clone(), cfg);
            for &k in &kinds {
                *me.outbox.get_mut(k) = Some(sender.outbox.clone());
                *me.client.get_mut(k) = Some(client.clone());
            }
            me.senders.push(sender);
        }
        Ok(me)
    }

    /// Moves batches waiting in memory to the spool (or drops them, counted).
    pub(crate) fn spill(&self) -> u64 {
        self.senders.iter().map(|s| s.outbox.spill()).sum()
    }

    /// Closes every outbox and sends until `deadline`. True when everything was sent. What
    /// is unsent then is handed back with `keep` (spans first), else spooled or dropped.
    pub(crate) async fn shutdown(
        self,
        deadline: tokio::time::Instant,
        keep: bool,
    ) -> (bool, Vec<Arc<Batch>>) {
        let (mut all, mut left) = (true, Vec::new());
        for s in self.senders {
            let (sent, rest) = s.shutdown(deadline, keep).await;
            all &= sent;
            left.extend(rest);
        }
        left.sort_by_key(|b| b.kind != SignalKind::Traces);
        (all, left)
    }
}

impl Sender {
    /// Sends `spool` (if any) and what is pushed to the outbox over `client`.
    pub(crate) fn start(
        client: Arc<Client>,
        spool: Option<Spool>,
        stats: BySignal<Arc<OutboxStats>>,
        cfg: &Export,
    ) -> Self {
        let outbox = Arc::new(Outbox::new(cfg.queue_bytes.as_u64(), spool, stats));
        Self::over(outbox, client, cfg.retry.clone())
    }

    /// Sends what is pushed to `outbox` over `client`.
    pub(crate) fn over(outbox: Arc<Outbox>, client: Arc<Client>, retry: Retry) -> Self {
        let task = tokio::spawn(outbox.clone().run_senders(client, retry));
        Self { outbox, task }
    }

    /// Closes the outbox and sends until `deadline`; what is left is handed back with
    /// `keep`, else goes to the spool or is counted as dropped. True when everything was
    /// sent.
    pub(crate) async fn shutdown(
        self,
        deadline: tokio::time::Instant,
        keep: bool,
    ) -> (bool, Vec<Arc<Batch>>) {
        self.outbox.close(deadline);
        let mut task = self.task;
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(_) => (true, Vec::new()),
            Err(_) => {
                task.abort();
                match keep {
                    true => (false, self.outbox.take_queued()),
                    false => {
                        self.outbox.spill();
                        (false, Vec::new())
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_config::Otlp;

    fn both(otlp: Otlp) -> (Endpoint, Endpoint) {
        let r = |k| otlp.resolve(k).unwrap();
        (r(SignalKind::Traces), r(SignalKind::Metrics))
    }

    #[test]
    fn signals_share_a_connection_to_one_server_with_the_same_settings() {
        let base = |protocol| Otlp {
            endpoint: Some("http://collector:4318".into()),
            protocol: Some(protocol),
            ..Default::default()
        };
        let (t, m) = both(base(Protocol::Grpc));
        assert!(
            shareable(&t, &m),
            "gRPC: one channel, each signal its service"
        );
        let (t, m) = both(base(Protocol::HttpProtobuf));
        assert_ne!(t.url, m.url);
        assert!(shareable(&t, &m), "HTTP: one origin, each signal its path");
        let mut other_host = base(Protocol::HttpProtobuf);
        other_host.metrics.endpoint = Some("http://metrics:4318/v1/metrics".into());
        let (t, m) = both(other_host);
        assert!(!shareable(&t, &m));
        let mut own_timeout = base(Protocol::Grpc);
        own_timeout.traces.timeout = Some(std::time::Duration::from_secs(1));
        let (t, m) = both(own_timeout);
        assert!(
            !shareable(&t, &m),
            "settings of its own: a connection of its own"
        );
    }
}
