//! The `pipetrace` binary: everything is in the library; this is the edge.
fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`pipetrace doctor | head`) instead of panicking on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    std::process::exit(pipetrace::cli::main());
}
