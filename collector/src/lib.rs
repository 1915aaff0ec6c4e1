//! pipetrace's collector: probes -> events -> process tree -> attribution -> signals -> export.
// The core's modules, at the paths the rest of the crate has always used.
pub use pipetrace_core::{accounting, attribution, containers, event, facts, files, redact, tree};

pub(crate) mod awaiting;
pub(crate) mod cgroup;
pub mod cli;
pub(crate) mod compare;
pub(crate) mod diagnosis;
pub mod export;
pub(crate) mod gpu;
pub mod host;
pub(crate) mod live;
pub mod outputs;
pub mod pipeline;
pub(crate) mod poller;
pub mod probes;
pub(crate) mod report;
pub(crate) mod sched;
pub(crate) mod scope;
pub mod signals;
pub(crate) mod sizing;
pub(crate) mod source;
pub(crate) mod status;
pub(crate) mod summary;
