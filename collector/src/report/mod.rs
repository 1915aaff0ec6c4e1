//! The end-of-run report: a per-task table and a self-contained HTML page (timeline of tasks
//! and tools; CPU, memory and disk I/O per task; events and failures in words), built from
//! spans, whether just made by `pipetrace run` or read back from an OTLP JSON lines file
//! (`pipetrace report FILE`).
mod events;
mod html;
mod model;
mod read;
pub mod table;

pub use html::render as html;
pub use model::{Kind, ReportEvent, ReportSpan};
pub use read::{ReadError, read_file};
