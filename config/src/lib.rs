//! pipetrace's configuration: a typed model ([`model`]) and its layered loading ([`load`]).
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
