//! When to try again: exponential backoff with jitter, or the server's own Retry-After.
use std::time::{Duration, SystemTime};

use pipetrace_config::Retry;

pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(cfg: &Retry) -> Self {
        Self {
            initial: cfg.initial_interval.max(Duration::from_millis(1)),
            max: cfg.max_interval.max(cfg.initial_interval),
            attempt: 0,
        }
    }

    /// The wait before the next attempt. Half of the exponential step is fixed and half
    /// random, so agents that lost the same backend do not return in step. A server's
    /// Retry-After wins, within `max`.
    pub fn next(&mut self, retry_after: Option<Duration>) -> Duration {
        let step = self
            .initial
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        if let Some(ra) = retry_after {
            return ra.min(self.max);
        }
        let half = step / 2;
        half + half.mul_f64(fastrand::f64())
    }

    /// Failed attempts since the last success.
    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }

    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Retry-After as seconds or as an HTTP date (RFC 9110).
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_with_jitter_up_to_the_max() {
        let cfg = Retry {
            enabled: true,
            initial_interval: Duration::from_millis(100),
            max_interval: Duration::from_secs(1),
        };
        let mut b = Backoff::new(&cfg);
        let waits: Vec<Duration> = (0..8).map(|_| b.next(None)).collect();
        for (i, w) in waits.iter().enumerate() {
            let step = Duration::from_millis(100 * (1 << i)).min(Duration::from_secs(1));
            assert!(
                *w >= step / 2 && *w <= step,
                "attempt {i}: {w:?} not in [{:?}, {step:?}]",
                step / 2
            );
        }
        assert_eq!(
            b.next(Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            b.next(Some(Duration::from_secs(60))),
            Duration::from_secs(1)
        );
        b.reset();
        assert!(b.next(None) <= Duration::from_millis(100));
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        let later = SystemTime::now() + Duration::from_secs(30);
        let d = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(
            d > Duration::from_secs(27) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
