//! Rebuild the probes when bpf-linker changes: cargo cannot see that dependency by itself.
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => println!(
            "cargo:warning=bpf-linker not found on PATH: run scripts/setup.sh, which installs it"
        ),
    }
}
