//! pipetrace's configuration: a typed model (`model`) and its layering (defaults < file <
//! environment < flags, `load`), its checks, `config show`, the defaults the code picks
//! (`defaults`); it makes configuration.md (`config-docs`) and the commented
//! `/etc/pipetrace/config.yaml` (`etc_file`).
mod checks;
pub mod defaults;
mod docs;
pub mod env;
mod error;
pub mod etc_file;
pub mod export;
pub mod layer;
pub mod limits;
pub mod load;
pub mod model;
pub mod reference;
pub mod show;
#[cfg(test)]
mod testing;

pub use error::ConfigError;
pub use export::*;
pub use limits::{Limits, SpanLimits};
pub use load::{Flags, load};
pub use model::*;
