//! pipetrace's export crate: from the core's finished records to the wire. Spans and
//! metrics built under the semantic-convention registry (`signals`); the `Output` trait every
//! destination shares (`outputs`); and the destinations themselves (`export`): the OTLP
//! client (gRPC, HTTP, TLS, retries, spool), OTLP JSON lines files, trace-size limits, the
//! Prometheus endpoint and pipetrace's own telemetry.
pub mod export;
pub mod outputs;
pub mod signals;
