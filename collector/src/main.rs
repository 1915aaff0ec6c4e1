//! The `pipetrace` binary: everything is in the library; this is the edge.
fn main() {
    std::process::exit(pipetrace::cli::main());
}
