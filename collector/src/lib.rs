//! The `pipetrace` command and agent: the pipeline one agent or one `pipetrace run` drives
//! (`pipeline`, its stages), the event loop both share (`cli/serve.rs`), the judgement stage that puts
//! the findings on the run span (`judging`), the views (live view, `top`, report, summary,
//! compare, sizing), advice (`suggest`), provenance, the agent registry and the CLI.
//!
//! probes -> events -> process tree -> attribution -> judgement -> signals -> export.
#[macro_use]
pub(crate) mod print;

pub mod assembly;
pub(crate) mod awaiting;
pub mod cli;
pub(crate) mod compare;
pub(crate) mod judging;
pub(crate) mod live_view;
pub mod pipeline;
pub(crate) mod provenance;
pub(crate) mod registry;
pub(crate) mod report;
pub(crate) mod scope;
pub(crate) mod sizing;
pub(crate) mod suggest;
pub(crate) mod summary;
