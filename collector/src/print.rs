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

/// `-q`: pipetrace's own progress lines (what it traces, where the report went) are not
/// said; errors and losses still are.
pub(crate) static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A progress line on stderr, unless `-q`.
macro_rules! say {
    ($($t:tt)*) => {{
        if !$crate::print::QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            errln!($($t)*);
        }
    }};
}

/// `1 span`, `2 spans`: a count with its noun in the number it takes.
pub(crate) fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_count_of_one_takes_the_singular() {
        assert_eq!(super::count(1u64, "span", "spans"), "1 span");
        assert_eq!(super::count(0u64, "span", "spans"), "0 spans");
        assert_eq!(super::count(2u32, "run", "runs"), "2 runs");
    }
}
