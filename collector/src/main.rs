//! The `pipetrace` binary: everything is in the library; this is the edge.
fn main() {
    // A closed pipe costs text, never the exit code: with SIGPIPE ignored, a write to a
    // reader that went away (`pipetrace report missing.jsonl 2>&1 | true`, `report | head`)
    // fails with EPIPE, which the printing macros drop, instead of ending pipetrace with
    // 141 where it meant to exit 125, 2 or 3. Every command's output is finite, so going on
    // writing to nobody ends too. The command `run` wraps gets the default back (its
    // pre_exec).
    // SAFETY: before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    std::process::exit(pipetrace::cli::main());
}
