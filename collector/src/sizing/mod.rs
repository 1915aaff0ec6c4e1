//! Which machine: from a run's exact figures per task (peak memory, CPUs kept busy, disk and
//! network rates, GPUs), the cheapest cloud instances that would have run each task and the
//! whole run without a worse bottleneck, on demand and on spot, per cloud region. Prices and
//! shapes come from a table shipped in the binary or the user's own (docs/sizing.md): never
//! a network call. `pipetrace run`, `pipetrace report` and `--json` show [`Sizing`].
mod fit;
mod need;
mod render;
pub mod table;
#[cfg(test)]
mod tests;

pub use fit::Sizing;
pub use need::Needs;
pub use render::{html, text};
pub use table::{Catalog, TableError};

use pipetrace_core::judgement::ReportSpan;

/// The machines for one run's spans (one trace; see `report::by_run`). `headroom`: the share
/// added to what a task used (`diagnosis.headroom`).
pub(crate) fn recommend(spans: &[ReportSpan], catalog: &Catalog, headroom: f64) -> Sizing {
    fit::size(&Needs::of(spans), catalog, headroom)
}

/// As [`recommend`], from needs summed while the run ran.
pub(crate) fn recommend_needs(needs: &Needs, catalog: &Catalog, headroom: f64) -> Sizing {
    fit::size(needs, catalog, headroom)
}

/// The table the config names (the shipped one, or `sizing.instances`), filtered to
/// `sizing.clouds` and `sizing.regions`; None when `sizing.enabled` is off.
pub(crate) fn catalog(cfg: &pipetrace_config::Sizing) -> Result<Option<Catalog>, TableError> {
    if !cfg.enabled {
        return Ok(None);
    }
    let table = match &cfg.instances {
        Some(path) => Catalog::read(path)?,
        None => Catalog::builtin(),
    };
    table.filtered(&cfg.clouds, &cfg.regions).map(Some)
}
