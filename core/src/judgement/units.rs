//! Figures in the unit that fits them: 12 KiB rather than 0 MiB, 40 ms rather than 0.04 s.

/// Bytes in B, KiB, MiB, GiB or TiB: three significant figures at most.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b.max(0.0);
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    match (i, v) {
        (0, _) => format!("{v:.0} B"),
        (_, v) if v < 10.0 => format!("{v:.1} {}", UNITS[i]),
        _ => format!("{v:.0} {}", UNITS[i]),
    }
}

/// Seconds as µs, ms, s, minutes or hours.
pub fn secs(s: f64) -> String {
    let s = s.max(0.0);
    if s == 0.0 {
        "0 s".into()
    } else if s < 0.001 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        let m = (s / 60.0).floor();
        format!("{m:.0} min {:.0} s", s - m * 60.0)
    } else {
        let h = (s / 3600.0).floor();
        format!("{h:.0} h {:.0} min", (s - h * 3600.0) / 60.0)
    }
}

/// A share as a whole percentage.
pub fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// An amount of money: cents shown below one unit of the currency.
pub fn money(v: f64, currency: &str) -> String {
    match v {
        v if v < 0.01 => format!("{v:.4} {currency}"),
        v if v < 100.0 => format!("{v:.2} {currency}"),
        v => format!("{v:.0} {currency}"),
    }
}

/// A Unix time in nanoseconds as UTC, to the second.
pub fn when(unix_ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_ns);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .replace('Z', " UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_figures_keep_a_unit_that_shows_them() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(12.0 * 1024.0), "12 KiB");
        assert_eq!(bytes(1.5 * 1048576.0), "1.5 MiB");
        assert_eq!(bytes(64.0 * 1048576.0), "64 MiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1048576.0), "3.0 GiB");
        assert_eq!(secs(0.04), "40 ms");
        assert_eq!(secs(0.0004), "400 µs");
        assert_eq!(secs(2.5), "2.50 s");
        assert_eq!(secs(125.0), "2 min 5 s");
        assert_eq!(secs(7200.0 + 600.0), "2 h 10 min");
        assert_eq!(pct(0.456), "46%");
        assert_eq!(money(0.004, "USD"), "0.0040 USD");
        assert_eq!(when(1_000_000_000), "1970-01-01 00:00:01 UTC");
    }
}
