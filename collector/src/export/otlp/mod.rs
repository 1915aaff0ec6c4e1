//! Our own OTLP transport, shared by traces and metrics: one client (gRPC or HTTP/protobuf,
//! TLS and mutual TLS), a byte-bounded outbox with retries, and the on-disk spool.
mod client;
mod outbox;
mod raw;
mod retry;
mod spool;

pub use client::{Client, OtlpError, SendError};
pub use outbox::{Batch, Outbox, OutboxStats};
pub use retry::Backoff;
pub use spool::{Spool, SpoolError};

use std::sync::Arc;

use pipetrace_config::{Endpoint, Export, SignalKind};

/// An outbox and the task sending it to one endpoint.
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

impl Sender {
    pub fn start(kind: SignalKind, ep: &Endpoint, cfg: &Export) -> Result<Self, StartError> {
        let client = Client::new(kind, ep)?;
        let spool = match &cfg.spool.dir {
            Some(d) => Some(Spool::open(
                &d.join(kind.name()),
                cfg.spool.max_size.as_u64(),
            )?),
            None => None,
        };
        let outbox = Arc::new(Outbox::new(cfg.queue_bytes.as_u64(), spool));
        let task = tokio::spawn(outbox.clone().run_sender(client, cfg.retry.clone()));
        Ok(Self { outbox, task })
    }

    /// Waits for `feeder` (the task that fills the outbox, its input closed) and then for
    /// `sender`, both within `timeout`. True when everything went.
    pub async fn finish(
        feeder: tokio::task::JoinHandle<()>,
        sender: Option<Sender>,
        timeout: std::time::Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let fed = tokio::time::timeout_at(deadline, feeder).await.is_ok();
        match sender {
            Some(s) => s.shutdown(deadline).await && fed,
            None => fed,
        }
    }

    /// Closes the outbox and sends until `deadline`; what is left goes to the spool or is
    /// counted as dropped. True when everything was sent.
    pub async fn shutdown(self, deadline: tokio::time::Instant) -> bool {
        self.outbox.close();
        let mut task = self.task;
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(_) => true,
            Err(_) => {
                task.abort();
                self.outbox.spill();
                false
            }
        }
    }
}
