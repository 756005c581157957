//! Exponential backoff with seeded jitter, for reconnects and metadata refreshes.

use crate::rng::Rng;
use std::time::Duration;

/// Exponential backoff: `base × 2^attempt` scaled by a random factor in `[1 − jitter, 1 + jitter]`
/// drawn from the client's seeded [`Rng`], and never above `max` — the cap holds after the
/// jitter, as in the Java client's `ExponentialBackoff`, so a delay at the cap is in
/// `[(1 − jitter) × max, max]` and the cap is a bound callers can rely on.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    jitter: f64,
    attempt: u32,
}

impl Backoff {
    /// A backoff starting at `base`, never above `max` (jitter included), with ±`jitter`
    /// (a fraction, clamped to `[0, 1]`).
    pub(crate) fn new(base: Duration, max: Duration, jitter: f64) -> Self {
        Backoff {
            base,
            max: max.max(base),
            jitter: jitter.clamp(0.0, 1.0),
            attempt: 0,
        }
    }

    /// The delay before the next attempt; each call doubles the un-jittered delay up to `max`.
    pub(crate) fn next_delay(&mut self, rng: &mut Rng) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        let raw = self.base.saturating_mul(factor).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let scale = 1.0 - self.jitter + 2.0 * self.jitter * rng.next_f64();
        raw.mul_f64(scale).min(self.max)
    }

    /// The delay at the cap (jitter applied), and every later one too until [`Backoff::reset`]:
    /// for a failure that retrying soon cannot fix.
    pub(crate) fn at_cap(&mut self, rng: &mut Rng) -> Duration {
        self.attempt = 31;
        self.next_delay(rng)
    }

    /// Forgets past failures: the next delay is `base` again (call after a success).
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap_and_resets() {
        let mut rng = Rng::new(1);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), 0.0);
        let d: Vec<_> = (0..6).map(|_| b.next_delay(&mut rng).as_millis()).collect();
        assert_eq!(d, vec![100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(&mut rng), Duration::from_millis(100));
    }

    #[test]
    fn jitter_stays_in_bounds_and_depends_on_the_seed() {
        let mut rng = Rng::new(9);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(100), 0.2);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let d = b.next_delay(&mut rng);
            assert!(d >= Duration::from_millis(80) && d <= Duration::from_millis(100));
            seen.insert(d);
        }
        assert!(seen.len() > 10);
    }

    #[test]
    fn the_cap_holds_after_the_jitter() {
        let mut rng = Rng::new(3);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), 0.2);
        let d: Vec<_> = (0..40).map(|_| b.next_delay(&mut rng)).collect();
        assert!(d.iter().all(|d| *d <= Duration::from_secs(1)), "{d:?}");
        assert!(
            d[10..].iter().all(|d| *d >= Duration::from_millis(800)),
            "{d:?}"
        );
    }

    #[test]
    fn huge_attempt_counts_do_not_overflow() {
        let mut rng = Rng::new(1);
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), 0.0);
        for _ in 0..100 {
            assert!(b.next_delay(&mut rng) <= Duration::from_secs(30));
        }
    }
}
