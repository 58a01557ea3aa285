//! Learned statistics per candidate: moving averages, the bucketed overload window, failure
//! streaks. Pure data plus the update rules; no clock reads (time is a `f64` of seconds since the
//! core's epoch, passed in).

use serde::{Deserialize, Serialize};

/// Updates an EMA where `alpha` is the weight of the newest sample.
#[inline]
pub(crate) fn ema(old: Option<f64>, sample: f64, alpha: f64) -> f64 {
    match old {
        None => sample,
        Some(o) => o + alpha * (sample - o),
    }
}

/// A bounded, time-bucketed error counter: `buckets` buckets of `bucket_s` seconds each.
///
/// Recording and reading are O(buckets) at worst (when buckets roll over) and allocate nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorWindow {
    /// Overload errors per bucket (ring, indexed by bucket number modulo the ring size).
    errors: [u32; 16],
    /// All counted outcomes per bucket.
    totals: [u32; 16],
    /// The absolute number of the newest bucket written.
    newest: u64,
}

/// Ring size of [`ErrorWindow`]; configs with more buckets are capped here.
pub(crate) const WINDOW_RING: usize = 16;

impl ErrorWindow {
    /// Moves the newest bucket forward to `bucket`, clearing the slots it passes over.
    /// Slots are indexed modulo the ring size, not the configured window, so a config reload
    /// that changes `window.buckets` keeps the counts aligned.
    fn roll(&mut self, bucket: u64) {
        if bucket <= self.newest {
            return;
        }
        let gap = (bucket - self.newest).min(WINDOW_RING as u64);
        for k in 1..=gap {
            let i = ((self.newest + k) % WINDOW_RING as u64) as usize;
            self.errors[i] = 0;
            self.totals[i] = 0;
        }
        self.newest = bucket;
    }

    /// Counts one outcome in `bucket` (an absolute bucket number).
    pub(crate) fn record(&mut self, bucket: u64, buckets: usize, overload: bool) {
        let buckets = buckets.clamp(1, WINDOW_RING) as u64;
        if bucket + buckets <= self.newest {
            return; // older than the window
        }
        self.roll(bucket);
        let i = (bucket % WINDOW_RING as u64) as usize;
        self.totals[i] = self.totals[i].saturating_add(1);
        if overload {
            self.errors[i] = self.errors[i].saturating_add(1);
        }
    }

    /// `(errors, total)` over the last `buckets` buckets as seen from `bucket`.
    pub(crate) fn counts(&self, bucket: u64, buckets: usize) -> (u32, u32) {
        let buckets = buckets.clamp(1, WINDOW_RING) as u64;
        let mut e = 0u32;
        let mut t = 0u32;
        for k in 0..buckets {
            let Some(b) = self.newest.checked_sub(k) else {
                break;
            };
            if b + buckets <= bucket {
                break; // fell out of the window
            }
            let i = (b % WINDOW_RING as u64) as usize;
            e = e.saturating_add(self.errors[i]);
            t = t.saturating_add(self.totals[i]);
        }
        (e, t)
    }
}

impl ErrorWindow {
    /// `(errors, total)` per bucket, newest first: index `k` is the bucket `k` buckets before
    /// `at_bucket`. Used to store the window independently of the clock's epoch.
    pub fn relative(&self, at_bucket: u64, buckets: usize) -> Vec<(u32, u32)> {
        let buckets = buckets.clamp(1, WINDOW_RING);
        (0..buckets as u64)
            .map(|k| {
                let Some(b) = at_bucket.checked_sub(k) else {
                    return (0, 0);
                };
                if b > self.newest || b + buckets as u64 <= self.newest {
                    return (0, 0);
                }
                let i = (b % WINDOW_RING as u64) as usize;
                (self.errors[i], self.totals[i])
            })
            .collect()
    }

    /// Rebuilds a window from [`ErrorWindow::relative`] counts, placed before `at_bucket`.
    pub fn from_relative(counts: &[(u32, u32)], at_bucket: u64, buckets: usize) -> Self {
        let buckets = buckets.clamp(1, WINDOW_RING);
        let mut w = ErrorWindow::default();
        for (k, &(errors, totals)) in counts.iter().enumerate().take(buckets).rev() {
            let Some(b) = at_bucket.checked_sub(k as u64) else {
                continue;
            };
            w.roll(b);
            let i = (b % WINDOW_RING as u64) as usize;
            w.errors[i] = errors;
            w.totals[i] = totals;
        }
        w.roll(at_bucket);
        w
    }
}

/// What the coordinator has learned about one candidate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Success EMA (None until the first counted attempt: the prior applies).
    pub success: Option<f64>,
    /// Connect time EMA, ms.
    pub connect_ms: Option<f64>,
    /// Time-to-first-byte EMA, ms.
    pub ttfb_ms: Option<f64>,
    /// Bandwidth EMA, bytes per second.
    pub bandwidth_bps: Option<f64>,
    /// EMA of the time each attempt took to its result (first byte, or the failure), ms.
    pub attempt_ms: Option<f64>,
    /// Seconds (since the core's epoch) of the last sample; drives decay toward the prior.
    pub last_sample_s: Option<f64>,
    /// Overload error window.
    pub window: ErrorWindow,
    /// Failures in a row (reset by a success).
    pub consecutive_failures: u32,
    /// Times this candidate has been ejected.
    pub ejections: u32,
    /// Ejected until this time (seconds since the core's epoch).
    pub ejected_until_s: Option<f64>,
    /// Attempts that reported an outcome.
    pub attempts: u64,
    /// Of those, successes (application errors included).
    pub successes: u64,
    /// EMA (newest outcome weighs 0.02) of 1 per overload failure, 0 per other counted
    /// outcome: whether this candidate degrades under load. Gates the load component
    /// (`Config::load_gate`).
    pub overload_evidence: f32,
}

/// Averages over all candidates, the reference for the relative components.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overall {
    /// All-candidate connect time EMA, ms.
    pub connect_ms: Option<f64>,
    /// All-candidate time-to-first-byte EMA, ms.
    pub ttfb_ms: Option<f64>,
    /// All-candidate bandwidth EMA, bytes per second.
    pub bandwidth_bps: Option<f64>,
    /// All-candidate EMA of attempt time to a result, ms.
    #[serde(default)]
    pub attempt_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_forgets_old_buckets() {
        let mut w = ErrorWindow::default();
        for _ in 0..5 {
            w.record(0, 10, true);
        }
        w.record(3, 10, false);
        assert_eq!(w.counts(3, 10), (5, 6));
        assert_eq!(w.counts(9, 10), (5, 6));
        // Bucket 0 leaves the window at bucket 10.
        assert_eq!(w.counts(10, 10), (0, 1));
        assert_eq!(w.counts(13, 10), (0, 0));
        w.record(30, 10, true);
        assert_eq!(w.counts(30, 10), (1, 1));
    }

    #[test]
    fn ema_weights_newest_sample_by_alpha() {
        assert_eq!(ema(None, 10.0, 0.5), 10.0);
        assert_eq!(ema(Some(10.0), 20.0, 0.5), 15.0);
        assert!((ema(Some(10.0), 20.0, 0.2) - 12.0).abs() < 1e-12);
    }
}
