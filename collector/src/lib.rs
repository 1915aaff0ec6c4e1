//! pipetrace's collector: probes -> events -> process tree -> attribution -> signals -> export.
pub mod accounting;
pub mod attribution;
pub mod awaiting;
pub mod cgroup;
pub mod cli;
pub mod diagnosis;
pub mod event;
pub mod export;
pub mod host;
pub mod pipeline;
pub mod probes;
pub mod redact;
pub mod report;
pub mod signals;
pub mod tree;
