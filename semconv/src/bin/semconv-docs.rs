//! Regenerates semconv/docs/registry.md from the registry.
fn main() -> std::io::Result<()> {
    let md = pipetrace_semconv::registry::Registry::embedded().to_markdown();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/registry.md");
    std::fs::write(path, md)?;
    println!("wrote {path}");
    Ok(())
}
