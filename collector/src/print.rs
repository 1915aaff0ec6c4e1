//! Printing that never panics. `println!` panics when stdout is a closed pipe and SIGPIPE is
//! ignored, as it is while pipetrace exports (`pipetrace run -- cmd | head -1`): the text
//! is lost then, never the run, its trace or its exit code.

/// `println!` to stdout, a write error ignored.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `print!` to stdout, a write error ignored.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `eprintln!` to stderr, a write error ignored.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// `eprint!` to stderr, a write error ignored.
macro_rules! errout {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($t)*);
    }};
}
