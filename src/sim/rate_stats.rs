//! The rate of attempts as Vector's adaptive-concurrency harness measures it
//! (`src/sinks/util/adaptive_concurrency/tests.rs`, its `Statistics`): at every attempt's start
//! and end, the attempts started in the trailing second (those started more than 1 s before
//! are dropped first, the new one counted at its start) are fed to a time histogram, which
//! weighs each value by the time since the previous one. `rate_trailing_1s` in the report is
//! that histogram's mean: over the whole run, the ramp-up and the last answers included.

use std::collections::VecDeque;

/// The trailing window, seconds.
const WINDOW_S: f64 = 1.0;

/// One run's trailing-second rate of attempts.
#[derive(Clone, Debug, Default)]
pub(crate) struct TrailingRate {
    /// Start times of the attempts started in the trailing window, oldest first.
    starts: VecDeque<f64>,
    /// When the last value was fed (the time before the first one is not counted).
    last_s: Option<f64>,
    /// Value x seconds, and seconds.
    integral: f64,
    weight: f64,
}

impl TrailingRate {
    /// An attempt started at `now`.
    pub(crate) fn start(&mut self, now: f64) {
        self.prune(now);
        self.starts.push_back(now);
        self.feed(now);
    }

    /// An attempt ended at `now`.
    pub(crate) fn end(&mut self, now: f64) {
        self.prune(now);
        self.feed(now);
    }

    /// The time-weighted mean of the attempts started in the trailing second; `None` before
    /// two events.
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.integral / self.weight)
    }

    /// Drops the attempts started `WINDOW_S` or more before `now`.
    fn prune(&mut self, now: f64) {
        let then = now - WINDOW_S;
        while self.starts.front().is_some_and(|&t| t <= then) {
            self.starts.pop_front();
        }
    }

    /// As Vector's `TimeHistogram::add`: the time since the previous value is weighed by the
    /// value now.
    fn feed(&mut self, now: f64) {
        if let Some(last) = self.last_s {
            let dt = (now - last).max(0.0);
            self.integral += self.starts.len() as f64 * dt;
            self.weight += dt;
        }
        self.last_s = Some(now);
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
        // The first second ramps up from 1 to 100: the mean over 10.09 s is 94.3.
        let mean = r.mean().unwrap();
        assert!((mean - 94.26).abs() < 0.01, "{mean}");
    }

    #[test]
    fn batches_read_below_their_rate() {
        // 100 attempts per second again, but ten at once every 100 ms, each batch ending as
        // the next starts. At each batch's end the batch of a second before is dropped just
        // before the count is read, and that count (90) weighs the whole 100 ms before it.
        let mut r = TrailingRate::default();
        for k in 0..=100 {
            let t = f64::from(k) / 10.0;
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
        let mean = r.mean().unwrap();
        assert!((mean - 87.3).abs() < 0.01, "{mean}");
    }
}
