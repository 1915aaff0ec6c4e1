//! The real Nextflow: the release tests/nextflow/pom.xml pins, from Maven Central
//! (scripts/nextflow.sh copies it and writes a launcher: `make nextflow`, a step of
//! `make test`), run offline with no plugins.
use std::path::PathBuf;

/// The version tests/nextflow/pom.xml pins: the newest whose dependencies Maven Central
/// serves whole (25.x needs artifacts it lacks: docs/engines.md).
pub const VERSION: &str = "24.10.0";

/// The launcher scripts/nextflow.sh wrote: a script named `nextflow` that execs the JVM,
/// as Nextflow's own launcher does.
pub fn launcher() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPETRACE_NEXTFLOW") {
        return p.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache"),
        PathBuf::from,
    );
    let path = cache.join(format!("pipetrace/nextflow-{VERSION}/nextflow"));
    assert!(
        path.exists(),
        "Nextflow {VERSION} is not set up: run `make nextflow` (scripts/nextflow.sh)"
    );
    path
}
