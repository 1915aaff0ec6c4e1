//! probes/prebuilt holds the probes' object for machines without the eBPF toolchain: it must
//! be built from the sources as they are. (An integration test, not a unit test: it reads the
//! repository, which `make unit-unprivileged` runs the unit tests away from.)
#[path = "../src/probes/sources.rs"]
mod sources;

#[test]
fn the_committed_probes_object_is_built_from_these_sources() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let recorded = std::fs::read_to_string(root.join("probes/prebuilt/sources.sha256"));
    assert_eq!(
        recorded.unwrap_or_default().trim(),
        sources::of_sources(&root),
        "probes/prebuilt is stale: the probes' sources changed since it was built; run \
         `make probes-object` and commit probes/prebuilt"
    );
    assert!(root.join("probes/prebuilt/pipetrace-probes").is_file());
}
