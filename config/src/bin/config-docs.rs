//! Regenerates docs/configuration.md from the config model (`make docs`).
fn main() -> std::io::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
    std::fs::write(path, pipetrace_config::reference::current())?;
    println!("wrote {}", pipetrace_config::reference::PAGE);
    Ok(())
}
