//! pipetrace's collector: probes -> events -> process tree -> attribution -> signals -> export.
// The core's modules, at the paths the rest of the crate has always used.
pub use pipetrace_core::{accounting, containers, event, facts, files, redact, tree};

pub mod attribution;
pub mod awaiting;
pub mod cgroup;
pub mod cli;
pub mod compare;
pub mod diagnosis;
pub mod export;
pub mod gpu;
pub mod host;
pub mod live;
pub mod outputs;
pub mod pipeline;
pub mod poller;
pub mod probes;
pub mod report;
pub mod sched;
pub mod scope;
pub mod signals;
pub mod sizing;
pub mod source;
pub mod status;
pub mod summary;
