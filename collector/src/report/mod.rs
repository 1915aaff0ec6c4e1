//! The end-of-run report: a per-task table and a self-contained HTML page (timeline of tasks
//! and tools, CPU and memory per task), built from spans, whether just made by `pipetrace
//! run` or read back from an OTLP JSON lines file (`pipetrace report FILE`).
mod html;
mod model;
mod read;
pub mod table;

pub use html::render as html;
pub use model::{Kind, ReportSpan};
pub use read::{ReadError, read_file};
