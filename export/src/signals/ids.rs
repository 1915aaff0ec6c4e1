//! Trace and span ids derived from identities, so that a restarted agent, or another
//! agent, names the same entity the same way.
use sha2::{Digest, Sha256};

use pipetrace_core::event::ProcKey;

fn digest(boot_id: &str, what: &str, key: ProcKey) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(boot_id.as_bytes());
    h.update([0]);
    h.update(what.as_bytes());
    h.update(key.pid.to_be_bytes());
    h.update(key.start_ticks.to_be_bytes());
    h.finalize().into()
}

/// The trace of a run: from the run root's identity.
pub(crate) fn trace_id(boot_id: &str, run: ProcKey) -> [u8; 16] {
    let d = digest(boot_id, "trace", run);
    let mut id = [0; 16];
    id.copy_from_slice(&d[..16]);
    // All-zero ids are invalid in OTLP.
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// A span of an entity: `what` is "run", "task" or "tool", `key` its process.
pub(crate) fn span_id(boot_id: &str, what: &str, key: ProcKey) -> [u8; 8] {
    let d = digest(boot_id, what, key);
    let mut id = [0; 8];
    id.copy_from_slice(&d[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

/// The trace, and the run span, of a run every node names alike (`identity`, e.g. a Slurm
/// job): each node's agent derives the same ids, so their spans form one trace.
pub(crate) fn of_identity(identity: &str) -> ([u8; 16], [u8; 8]) {
    let d: [u8; 32] = Sha256::new()
        .chain_update(b"pipetrace-run\0")
        .chain_update(identity.as_bytes())
        .finalize()
        .into();
    let (mut trace, mut span) = ([0; 16], [0; 8]);
    trace.copy_from_slice(&d[..16]);
    span.copy_from_slice(&d[16..24]);
    if trace == [0; 16] {
        trace[15] = 1;
    }
    if span == [0; 8] {
        span[7] = 1;
    }
    (trace, span)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let k = ProcKey {
            pid: 42,
            start_ticks: 7,
        };
        assert_eq!(trace_id("b", k), trace_id("b", k));
        assert_eq!(of_identity("slurm/0/7"), of_identity("slurm/0/7"));
        assert_ne!(of_identity("slurm/0/7").0, of_identity("slurm/0/8").0);
        assert_ne!(trace_id("b", k), trace_id("other-boot", k));
        assert_ne!(span_id("b", "task", k), span_id("b", "tool", k));
        let reused = ProcKey {
            pid: 42,
            start_ticks: 8,
        };
        assert_ne!(span_id("b", "tool", k), span_id("b", "tool", reused));
    }
}
