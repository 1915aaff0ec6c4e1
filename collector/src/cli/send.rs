//! `pipetrace send FILE`: delivers what a run could not (the file its last lines named), to
//! the endpoint its flags and OTEL_EXPORTER_OTLP_* variables give, and says what arrived.
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest, metrics::v1::metric::Data,
};
use pipetrace_config::{Config, Retry, SignalKind};
use prost::Message;
use tokio::time::Instant;

use super::usage_error::UsageError;
use pipetrace_export::export::{
    Kept,
    otlp::{Accepted, Backoff, Batch, BySignal, Client, SendError, unsent},
};

/// Where `pipetrace run` keeps what it could not deliver: beside its trace file, else in
/// the state directory's `unsent/`, else in its working directory.
pub(crate) fn unsent_path(cfg: &Config, stem: &Path, trace_file: Option<&Path>) -> PathBuf {
    if let Some(t) = trace_file {
        return pipetrace_export::export::paths::unsent_beside(t);
    }
    let name = pipetrace_export::export::paths::unsent_beside(Path::new(
        stem.file_name().unwrap_or_default(),
    ));
    match &cfg.diagnosis.state_dir {
        Some(dir) => dir.join("unsent").join(name),
        None => stem.with_file_name(name),
    }
}

/// The command that sends `file` with this run's endpoint.
fn command(cfg: &Config, file: &Path) -> String {
    let mut cmd = String::from("pipetrace");
    let otlp = &cfg.export.otlp;
    if let Some(e) = &otlp.endpoint {
        cmd.push_str(&format!(" --endpoint {e}"));
    }
    if otlp.protocol == Some(pipetrace_config::Protocol::HttpProtobuf) {
        cmd.push_str(" --protocol http/protobuf");
    }
    format!("{cmd} send {}", file.display())
}

/// The run's last lines about what it kept, with the command that sends it.
pub(crate) fn kept_lines(cfg: &Config, k: &Kept) -> String {
    let count = crate::print::count;
    let what = format!(
        "{} and {}",
        count(k.spans, "span", "spans"),
        count(k.metric_exports, "metric export", "metric exports")
    );
    match &k.error {
        Some(e) => format!(
            "pipetrace: WARNING {what} were not delivered and cannot be kept in {}: {e}; \
             they are counted as dropped\n",
            k.path.display()
        ),
        None => format!(
            "pipetrace: {what} not delivered by the end (the backend did not take them \
             within export.flush_timeout); kept in {}\npipetrace: send them once it \
             answers: {}\n",
            k.path.display(),
            command(cfg, &k.path)
        ),
    }
}

/// Data points in an encoded metrics request.
fn points(body: &[u8]) -> u64 {
    let Ok(req) = ExportMetricsServiceRequest::decode(body) else {
        return 0;
    };
    let metrics = (req.resource_metrics.iter())
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics);
    let of = |d: &Data| match d {
        Data::Gauge(g) => g.data_points.len(),
        Data::Sum(s) => s.data_points.len(),
        Data::Histogram(h) => h.data_points.len(),
        Data::ExponentialHistogram(h) => h.data_points.len(),
        Data::Summary(s) => s.data_points.len(),
    };
    metrics
        .filter_map(|m| m.data.as_ref())
        .map(of)
        .sum::<usize>() as u64
}

/// Items of one signal: accepted, refused for good, and still unsent.
#[derive(Default)]
struct Tally {
    accepted: u64,
    refused: u64,
    left: u64,
    /// The backend's answer to what it refused.
    why: Option<String>,
}

/// The counts `pipetrace send` reports: spans, and metric points (an export's own count
/// says nothing to whoever reads the backend).
fn items(b: &Batch) -> u64 {
    match b.kind {
        SignalKind::Traces => b.items,
        SignalKind::Metrics => points(&b.body),
    }
}

/// One signal's client, or why there is none.
fn client(cfg: &Config, kind: SignalKind, file: &Path) -> Result<Arc<Client>, UsageError> {
    let Some(ep) = cfg.export.otlp.resolve(kind) else {
        return Err(UsageError(format!(
            "{} holds {}, but no OTLP endpoint is set for them: give --endpoint URL, or set \
             OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_{}_ENDPOINT)",
            file.display(),
            kind.name(),
            kind.name().to_ascii_uppercase()
        )));
    };
    let mut urls = BySignal::default();
    *urls.get_mut(kind) = Some(ep.url.clone());
    Client::new(&ep, urls)
        .map(Arc::new)
        .map_err(|e| UsageError(e.to_string()))
}

/// Sends one batch, retrying what the OTLP specification calls retryable until `deadline`.
async fn deliver(
    client: &Client,
    b: &Batch,
    retry: &Retry,
    deadline: Instant,
) -> Result<Accepted, SendError> {
    let mut backoff = Backoff::new(retry);
    loop {
        let e = match client.send(b.kind, &b.body).await {
            Ok(taken) => return Ok(taken),
            Err(e) => e,
        };
        let wait = backoff.next(e.retry_after);
        if !e.retryable || !retry.enabled || Instant::now() + wait > deadline {
            return Err(e);
        }
        tokio::time::sleep(wait).await;
    }
}

/// `pipetrace send FILE`: exit 0 when everything arrived, 1 when the backend refused some
/// or still does not answer (what it may still take stays in FILE), 2 for a bad file or no
/// endpoint.
pub async fn run(cfg: &Config, file: &Path) -> anyhow::Result<i32> {
    let batches = unsent::read(file).map_err(|e| UsageError(e.to_string()))?;
    let mut clients: BySignal<Option<Arc<Client>>> = BySignal::default();
    for kind in [SignalKind::Traces, SignalKind::Metrics] {
        if batches.iter().any(|b| b.kind == kind) {
            *clients.get_mut(kind) = Some(client(cfg, kind, file)?);
        }
    }
    let deadline = Instant::now() + cfg.export.flush_timeout;
    let mut tally: BySignal<Tally> = BySignal::default();
    let mut away: BySignal<Option<String>> = BySignal::default();
    let mut left = Vec::new();
    for b in batches {
        let t = tally.get_mut(b.kind);
        let n = items(&b);
        let Some(client) = clients.get(b.kind).as_ref() else {
            continue;
        };
        // A backend that does not answer is not asked again for each batch.
        if away.get(b.kind).is_some() {
            t.left += n;
            left.push(b);
            continue;
        }
        match deliver(client, &b, &cfg.export.retry, deadline).await {
            Ok(taken) => {
                // A partial success: what it rejected is refused for good.
                let rejected = taken.rejected.min(n);
                t.accepted += n - rejected;
                if rejected > 0 {
                    t.refused += rejected;
                    t.why.get_or_insert(taken.message);
                }
            }
            Err(e) if e.retryable => {
                *away.get_mut(b.kind) = Some(e.message);
                t.left += n;
                left.push(b);
            }
            Err(e) => {
                t.refused += n;
                t.why.get_or_insert(e.message);
            }
        }
    }
    let kept = match left.is_empty() {
        true => std::fs::remove_file(file).map_err(|e| e.to_string()),
        false => unsent::write(file, &left).map_err(|e| e.to_string()),
    };
    let again = command(cfg, file);
    errout!("{}", report(file, &again, &clients, &tally, &away, kept));
    let all = tally.traces.refused + tally.metrics.refused + tally.traces.left + tally.metrics.left;
    Ok(if all == 0 { 0 } else { 1 })
}

/// What arrived, what was refused, and what is still in the file.
fn report(
    file: &Path,
    again: &str,
    clients: &BySignal<Option<Arc<Client>>>,
    tally: &BySignal<Tally>,
    away: &BySignal<Option<String>>,
    kept: Result<(), String>,
) -> String {
    let mut out = String::new();
    let shown = file.display();
    for (kind, noun) in [
        (SignalKind::Traces, "spans"),
        (SignalKind::Metrics, "metric points"),
    ] {
        let (Some(c), t) = (clients.get(kind), tally.get(kind)) else {
            continue;
        };
        let url = c.url(kind);
        out.push_str(&format!(
            "pipetrace: {} {noun} accepted by {url}, {} refused, {} not delivered\n",
            t.accepted, t.refused, t.left
        ));
        if let Some(why) = &t.why {
            out.push_str(&format!(
                "pipetrace: {url} refused {} {noun} for good ({why}): it will not take them; \
                 they are not kept\n",
                t.refused
            ));
        }
        if let Some(why) = away.get(kind) {
            out.push_str(&format!(
                "pipetrace: {url} still does not take {noun} ({why}): {} kept in {shown}; run \
                 `{again}` again once it answers\n",
                t.left
            ));
        }
    }
    match kept {
        Err(e) => out.push_str(&format!("pipetrace: WARNING cannot update {shown}: {e}\n")),
        Ok(()) if away.traces.is_none() && away.metrics.is_none() => out.push_str(&format!(
            "pipetrace: nothing left to send; removed {shown}\n"
        )),
        Ok(()) => {}
    }
    out
}
