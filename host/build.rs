//! Builds the eBPF programs (probes/ebpf) for the bpf target and leaves the object in OUT_DIR,
//! where src/probes/loader.rs embeds it.
//!
//! Every distinct build of this crate (clippy's check, the tests', a release) runs this script
//! with an OUT_DIR of its own, and each eBPF build takes about a minute on two CPUs: the
//! object is kept in the target directory under a digest of what makes it (the probes'
//! sources, the lock file, the nightly compiler and bpf-linker), and taken from there while
//! none of it changed.
//!
//! A machine without the eBPF toolchain (nightly's rust-src and bpf-linker: minutes to
//! install and build, which `make demo` spares) takes the object committed in
//! probes/prebuilt, when it was built from the sources as they are (`make probes-object`
//! refreshes it; host/tests/prebuilt.rs fails when it is stale).
use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    process::Command,
};

#[path = "src/probes/sources.rs"]
mod pipetrace_probes_digest;

/// The probes' binary, as probes/ebpf names it and aya-build leaves it in OUT_DIR.
const OBJECT: &str = "pipetrace-probes";

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kept = cache(&out, &root).map(|dir| dir.join(format!("{:016x}", digest(&root))));
    if let Some(kept) = kept.as_ref().filter(|k| k.join(OBJECT).is_file()) {
        for dir in ["probes/ebpf", "probes/common", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={}", root.join(dir).display());
        }
        std::fs::copy(kept.join(OBJECT), out.join(OBJECT))?;
        let digest = pipetrace_probes_digest::of_sources(&root) + "\n";
        std::fs::write(out.join(format!("{OBJECT}.sources.sha256")), digest)?;
        return Ok(());
    }
    if !toolchain_present() {
        return prebuilt(&root, &out);
    }
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "pipetrace-probes-ebpf",
            root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../probes/ebpf"),
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "building the eBPF probes failed: {e:#}\n\
             run scripts/setup.sh (installs nightly rust-src and bpf-linker), then build again"
        )
    })?;
    // What `make probes-object` records beside the object it commits.
    std::fs::write(
        out.join(format!("{OBJECT}.sources.sha256")),
        pipetrace_probes_digest::of_sources(&root) + "\n",
    )?;
    if let Some(kept) = kept {
        // Written whole, then renamed: builds running side by side may keep it at once. A
        // cache that cannot be written costs the next build its time, nothing else.
        let part = kept.join(format!("{OBJECT}.{}", std::process::id()));
        let keep = std::fs::create_dir_all(&kept)
            .and_then(|()| std::fs::copy(out.join(OBJECT), &part))
            .and_then(|_| std::fs::rename(&part, kept.join(OBJECT)));
        if let Err(e) = keep {
            println!(
                "cargo:warning=the probes' object is not kept in {}: {e}",
                kept.display()
            );
        }
    }
    Ok(())
}

/// Whether this machine can build the probes: nightly's compiler and bpf-linker answer.
fn toolchain_present() -> bool {
    let answers = |program: &str, args: &[&str]| {
        (Command::new(program).args(args).output()).is_ok_and(|o| o.status.success())
    };
    answers("bpf-linker", &["--version"]) && answers("rustup", &["run", "nightly", "rustc", "-V"])
}

/// probes/prebuilt's object, when the sources it was built from are the sources here.
fn prebuilt(root: &Path, out: &Path) -> anyhow::Result<()> {
    let dir = root.join("probes/prebuilt");
    for p in ["probes/ebpf", "probes/common", "probes/prebuilt"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let recorded = std::fs::read_to_string(dir.join("sources.sha256")).unwrap_or_default();
    let now = pipetrace_probes_digest::of_sources(root);
    if recorded.trim() != now {
        anyhow::bail!(
            "the eBPF toolchain (nightly rust-src, bpf-linker) is not installed, and \
             probes/prebuilt was built from other sources than these: run scripts/setup.sh \
             to install the toolchain (or `make probes-object` where it is)"
        );
    }
    std::fs::copy(dir.join(OBJECT), out.join(OBJECT))?;
    Ok(())
}

/// The workspace's `target/pipetrace-probes` where that folder is (the fuzz targets'
/// workspace, tests/fuzz, builds this crate in a target directory of its own and takes the
/// object from there too), else `<target>/pipetrace-probes` from OUT_DIR =
/// `<target>/<profile>/build/<crate>-<hash>/out`.
fn cache(out: &Path, root: &Path) -> Option<PathBuf> {
    let shared = root.join("target");
    if shared.is_dir() {
        return Some(shared.join("pipetrace-probes"));
    }
    let build = out.ancestors().nth(2)?;
    (build.file_name()? == "build").then_some(())?;
    Some(out.ancestors().nth(4)?.join("pipetrace-probes"))
}

/// What the object is made of: every file of the probes' crates, the lock file, and the
/// versions of the compiler and linker that build it.
fn digest(root: &Path) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    let mut files = pipetrace_probes_digest::files(root);
    files.push(root.join("Cargo.lock"));
    files.sort();
    for f in &files {
        f.strip_prefix(root).unwrap_or(f).hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    for (program, args) in [
        ("rustup", &["run", "nightly", "rustc", "-vV"][..]),
        ("bpf-linker", &["--version"][..]),
    ] {
        let said = Command::new(program).args(args).output();
        said.map(|o| o.stdout).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}
