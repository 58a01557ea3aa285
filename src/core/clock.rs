//! The core's clock: the epoch, the latest `now` seen and the values derived from it once per
//! new instant, and when the periodic refreshes are next due.

use std::time::{Duration, Instant};

/// A deadline's nanoseconds for "none".
pub(super) const NO_DEADLINE: u64 = u64::MAX;

/// See [`Clock::bucket`].
pub(crate) const BUCKET_BASE: u64 = 1 << 10;

/// Time as the core sees it: seconds since its epoch, never going back.
#[derive(Debug, Clone)]
pub(super) struct Clock {
    /// The core's `now` at construction.
    pub(super) epoch: Instant,
    /// The latest `now` seen: a call with the same instant skips the clock arithmetic.
    last_now: Instant,
    /// Seconds since the epoch.
    pub(super) now_s: f64,
    /// `now_s` in nanoseconds.
    pub(super) now_ns: u64,
    /// The window bucket `now_s` falls in; see [`Clock::bucket`].
    pub(super) bucket: u64,
    /// When the coarse refresh of every candidate is next due.
    pub(super) next_refresh_s: f64,
    /// The period the last coarse refresh set: `refresh_ms` after the fleet changed, then
    /// doubling up to the settled period ([`crate::Config::refresh_period_s`]); 0 before the
    /// first refresh and after a new config.
    pub(super) refresh_period_s: f64,
    /// The live candidates when the refresh period last started over: a tenth more or fewer
    /// start it over again (`Core::fleet_resized`).
    pub(super) refresh_live: usize,
    /// When a heal last brought the next coarse refresh forward (`Core::heal_seen`).
    pub(super) heal_pull_s: f64,
    /// When the attempts still running are next scanned between coarse refreshes (every
    /// `refresh_ms`; see `Core::scan_running`).
    pub(super) next_scan_s: f64,
    /// When the coarse refresh next recomputes the components no channel reads.
    pub(super) next_unused_s: f64,
}

impl Clock {
    /// A clock whose epoch is `now`, with window buckets `bucket_s` seconds wide.
    pub(super) fn new(now: Instant, bucket_s: f64) -> Self {
        let mut clock = Clock {
            epoch: now,
            last_now: now,
            now_s: 0.0,
            now_ns: 0,
            bucket: 0,
            next_refresh_s: 0.0,
            refresh_period_s: 0.0,
            refresh_live: 0,
            heal_pull_s: f64::NEG_INFINITY,
            next_scan_s: 0.0,
            next_unused_s: 0.0,
        };
        clock.derive(bucket_s);
        clock
    }

    /// Moves to `now` if it is later than any instant seen.
    #[inline]
    pub(super) fn advance(&mut self, now: Instant, bucket_s: f64) {
        if now <= self.last_now {
            return;
        }
        self.last_now = now;
        let t = now.saturating_duration_since(self.epoch).as_secs_f64();
        if t > self.now_s {
            self.now_s = t;
            self.derive(bucket_s);
        }
    }

    /// Derived clock values, computed once per new `now` (or a new bucket width) rather than
    /// at every use (the float-to-integer conversions showed on the decision path).
    #[inline]
    pub(super) fn derive(&mut self, bucket_s: f64) {
        // Below `NO_DEADLINE` even past the nanoseconds' range (584 years from the epoch),
        // so a request without a deadline never reads as past it.
        self.now_ns = ((self.now_s * 1e9) as u64).min(NO_DEADLINE - 1);
        self.bucket = BUCKET_BASE + (self.now_s / bucket_s) as u64;
    }

    /// The current window bucket. Numbering starts well above 0 so a restored window always
    /// has room for its history before the new epoch.
    #[inline]
    pub(super) fn bucket(&self) -> u64 {
        self.bucket
    }

    /// A deadline as nanoseconds since the epoch ([`NO_DEADLINE`] for none).
    #[inline]
    pub(super) fn deadline_ns(&self, deadline: Option<Instant>) -> u64 {
        match deadline {
            None => NO_DEADLINE,
            Some(d) => {
                let ns = d.saturating_duration_since(self.epoch).as_nanos();
                ns.min(u64::MAX as u128 - 1) as u64
            }
        }
    }

    /// `now` in seconds since the epoch, never before the latest time seen (for the calls that
    /// read the clock without advancing it).
    pub(super) fn seconds_at(&self, now: Instant) -> f64 {
        self.now_s
            .max(now.saturating_duration_since(self.epoch).as_secs_f64())
    }

    /// The instant `ns` nanoseconds after the epoch.
    pub(super) fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_only_moves_forward_and_derives_its_values() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0, 0.5);
        assert_eq!((c.now_s, c.now_ns, c.bucket()), (0.0, 0, BUCKET_BASE));
        c.advance(t0 + Duration::from_millis(1_250), 0.5);
        assert_eq!(c.now_s, 1.25);
        assert_eq!(c.now_ns, 1_250_000_000);
        assert_eq!(c.bucket(), BUCKET_BASE + 2);
        // An earlier instant changes nothing.
        c.advance(t0 + Duration::from_millis(10), 0.5);
        assert_eq!(c.now_s, 1.25);
        // A new bucket width is applied on the next derive.
        c.derive(0.25);
        assert_eq!(c.bucket(), BUCKET_BASE + 5);
        assert_eq!(c.deadline_ns(None), NO_DEADLINE);
        assert_eq!(
            c.deadline_ns(Some(t0 + Duration::from_secs(2))),
            2_000_000_000
        );
        assert_eq!(c.deadline_ns(Some(t0)), 0);
        assert_eq!(c.instant_at(2_000_000_000), t0 + Duration::from_secs(2));
    }

    #[test]
    fn a_time_past_the_nanoseconds_range_is_still_before_no_deadline() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0, 0.5);
        // 585 years: more nanoseconds than a u64 holds.
        c.advance(t0 + Duration::from_secs(585 * 365 * 86_400), 0.5);
        assert!(c.now_ns < NO_DEADLINE);
        assert!(c.deadline_ns(None) > c.now_ns);
    }
}
