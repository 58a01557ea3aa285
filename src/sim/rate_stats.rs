//! The rate of attempts as Vector's adaptive-concurrency harness measures it
//! (`src/sinks/util/adaptive_concurrency/tests.rs`, its `Statistics`): at every attempt's start
//! and end, the attempts started in the trailing second (those started more than 1 s before
//! are dropped first, the new one counted at its start) are fed to a time histogram, which
//! weighs each value by the time since the previous one. `rate_trailing_1s` in the report is
//! that histogram's mean: over the whole run, the ramp-up and the last answers included.
//!
//! Vector's harness keeps `Instant`s, whole nanoseconds, so an attempt started exactly one
//! second before an event is dropped at that event. The simulator's clock is in seconds as
//! `f64`, whose sums drift by an ulp (`0.2 + 0.1 > 0.3`), so the window is kept on the
//! nearest nanosecond, as the event queue keeps its own (`events::secs_to_ns`): on the `f64`
//! clock the same drop happens only by chance.

use std::collections::VecDeque;

use super::events::secs_to_ns;

/// The trailing window, nanoseconds.
const WINDOW_NS: u64 = 1_000_000_000;

/// One run's trailing-second rate of attempts.
#[derive(Clone, Debug, Default)]
pub(crate) struct TrailingRate {
    /// Start times of the attempts started in the trailing window, oldest first, ns.
    starts: VecDeque<u64>,
    /// When the last value was fed, ns (the time before the first one is not counted).
    last_ns: Option<u64>,
    /// Value x seconds, and seconds.
    integral: f64,
    weight: f64,
}

impl TrailingRate {
    /// An attempt started at `now`.
    pub(crate) fn start(&mut self, now: f64) {
        let now = secs_to_ns(now);
        self.prune(now);
        self.starts.push_back(now);
        self.feed(now);
    }

    /// An attempt ended at `now`.
    pub(crate) fn end(&mut self, now: f64) {
        let now = secs_to_ns(now);
        self.prune(now);
        self.feed(now);
    }

    /// The time-weighted mean of the attempts started in the trailing second; `None` before
    /// two events.
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.integral / self.weight)
    }

    /// Drops the attempts started a window or more before `now` (ns).
    fn prune(&mut self, now: u64) {
        // Within the first second nothing started a window before.
        let Some(then) = now.checked_sub(WINDOW_NS) else {
            return;
        };
        while self.starts.front().is_some_and(|&t| t <= then) {
            self.starts.pop_front();
        }
    }

    /// As Vector's `TimeHistogram::add`: the time since the previous value is weighed by the
    /// value now.
    fn feed(&mut self, now: u64) {
        if let Some(last) = self.last_ns {
            let dt = now.saturating_sub(last) as f64 / 1e9;
            self.integral += self.starts.len() as f64 * dt;
            self.weight += dt;
        }
        self.last_ns = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_interval_is_weighed_by_the_count_at_its_end() {
        let mut r = TrailingRate::default();
        assert_eq!(r.mean(), None);
        r.start(0.0); // nothing weighed yet
        r.start(0.5); // 0.5 s at 2
        r.end(1.0); // the attempt of 0.0 is dropped: 0.5 s at 1
        r.end(2.0); // both dropped: 1 s at 0
        let mean = r.mean().unwrap();
        assert!(
            (mean - (0.5 * 2.0 + 0.5 * 1.0) / 2.0).abs() < 1e-12,
            "{mean}"
        );
    }

    #[test]
    fn a_steady_rate_reads_as_itself() {
        let mut r = TrailingRate::default();
        // 100 attempts per second for 10 s, each ending 0.1 s after its start.
        for i in 0..1010 {
            let t = f64::from(i) / 100.0;
            if i >= 10 {
                r.end(t);
            }
            if i < 1000 {
                r.start(t);
            }
        }
        // The first second ramps up from 1 to 100, and each end drops the start of a second
        // before: the mean over 10.09 s is 94.16.
        let mean = r.mean().unwrap();
        assert!((mean - 94.16).abs() < 0.01, "{mean}");
    }

    /// Ten attempts at once at each of the 101 instants `times` gives, each batch ending as
    /// the next starts; the statistic's mean.
    fn batches(times: impl Iterator<Item = f64>) -> f64 {
        let mut r = TrailingRate::default();
        for (k, t) in times.take(101).enumerate() {
            for _ in 0..10 {
                if k >= 1 {
                    r.end(t);
                }
            }
            for _ in 0..10 {
                if k < 100 {
                    r.start(t);
                }
            }
        }
        r.mean().unwrap()
    }

    #[test]
    fn batches_read_below_their_rate() {
        // 100 attempts per second again, but ten at once every 100 ms, each batch ending as
        // the next starts. At each batch's end the batch of a second before is dropped just
        // before the count is read, and that count (90) weighs the whole 100 ms before it:
        // (10 + 20 + ... + 90 + 91 x 90) / 100 = 86.4.
        let mean = batches((0..=100).map(|k| f64::from(k) / 10.0));
        assert!((mean - 86.4).abs() < 0.01, "{mean}");
    }

    #[test]
    fn the_window_drops_on_the_nanosecond_whatever_the_float_sums() {
        // The same batches on a clock that adds 0.1 s at a time, as an event queue does:
        // 0.1 + 0.1 + 0.1 is 0.30000000000000004, and so on, so on the `f64` clock "one second
        // before" misses some batches by an ulp. On Vector's nanosecond clock it does not.
        let mean = batches(std::iter::successors(Some(0.0), |t| Some(t + 0.1)));
        assert!((mean - 86.4).abs() < 0.01, "{mean}");
    }

    #[test]
    fn times_at_the_clock_ends_do_not_overflow() {
        // `secs_to_ns` saturates: -inf is 0, +inf the clock's end, NaN is 0.
        let mut r = TrailingRate::default();
        r.start(f64::NEG_INFINITY);
        r.end(f64::NAN);
        r.start(f64::INFINITY);
        r.end(f64::INFINITY);
        assert!(r.mean().is_some_and(f64::is_finite));
    }

    #[test]
    fn nanos_rounds_to_the_nearest() {
        // 0.30000000000000004 and 0.29999999999999998 are the same instant.
        assert_ne!(0.1 + 0.2, 0.3);
        let nanos = secs_to_ns;
        assert_eq!(nanos(0.1 + 0.2), nanos(0.3));
        assert_eq!(nanos(0.3), 300_000_000);
        assert_eq!(nanos(1.0), 1_000_000_000);
    }
}
