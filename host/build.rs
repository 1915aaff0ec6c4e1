//! Builds the eBPF programs (probes/ebpf) for the bpf target and leaves the object in OUT_DIR,
//! where src/probes/loader.rs embeds it.
fn main() -> anyhow::Result<()> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../probes/ebpf");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "pipetrace-probes-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "building the eBPF probes failed: {e:#}\n\
             run scripts/setup.sh (installs nightly rust-src and bpf-linker), then build again"
        )
    })
}
