//! A run's counts per time bucket, on the event clock's whole nanoseconds.

use super::events::secs_to_ns;

/// The most time-series buckets a run keeps (10^6: 28 hours of 0.1 s buckets). A closed loop
/// can run for any time its scenario's times add up to; past this its series stop, its totals
/// go on.
pub(crate) const MAX_SERIES_BUCKETS: usize = 1_000_000;

/// The bucket of width `bucket_s` that time `t` falls in, on the event clock's whole
/// nanoseconds: an event at exactly 0.3 s is in bucket 3 of 0.1 s, where `0.3 / 0.1` in `f64`
/// is 2.9999999999999996. Negative and NaN times are in bucket 0; a width under a nanosecond
/// counts as one.
pub(crate) fn bucket_index(t: f64, bucket_s: f64) -> usize {
    let (t, width) = on_ns(t, bucket_s);
    usize::try_from(t / width).unwrap_or(usize::MAX)
}

/// The first bucket boundary at or after `t`, as a bucket index (on nanoseconds, as
/// [`bucket_index`]).
pub(crate) fn bucket_index_ceil(t: f64, bucket_s: f64) -> usize {
    let (t, width) = on_ns(t, bucket_s);
    usize::try_from(t.div_ceil(width)).unwrap_or(usize::MAX)
}

fn on_ns(t: f64, bucket_s: f64) -> (u64, u64) {
    (secs_to_ns(t), width_ns(bucket_s))
}

/// A bucket's width in whole nanoseconds, at least one.
fn width_ns(bucket_s: f64) -> u64 {
    secs_to_ns(bucket_s).max(1)
}

/// Counts per time bucket: attempts, finished requests, failed requests, and attempts on each
/// tracked candidate.
#[derive(Clone, Debug, Default)]
pub(crate) struct Series {
    pub(crate) bucket_s: f64,
    pub(crate) tracked: Vec<usize>,
    /// Per bucket: attempts, requests finished, requests failed.
    pub(crate) totals: Vec<[u64; 3]>,
    /// Per bucket, per tracked candidate: attempts (flattened).
    pub(crate) by_cand: Vec<u64>,
    /// The last bucket found, as (its first ns, the next bucket's first ns, its index): the
    /// run's events come in time order, so most fall in the bucket of the one before.
    pub(crate) last: Option<(u64, u64, usize)>,
}

impl Series {
    /// The bucket of time `t`, grown to it; `None` past [`MAX_SERIES_BUCKETS`] (a run that
    /// long keeps its totals, not its series).
    #[inline]
    pub(crate) fn bucket(&mut self, t: f64) -> Option<usize> {
        let ns = secs_to_ns(t);
        let b = match self.last {
            Some((from, to, b)) if (from..to).contains(&ns) => b,
            _ => {
                // As `bucket_index`, with the bucket's bounds kept.
                let width = width_ns(self.bucket_s);
                let b = ns / width;
                let index = usize::try_from(b).unwrap_or(usize::MAX);
                self.last = Some((b * width, (b + 1).saturating_mul(width), index));
                index
            }
        };
        if b >= MAX_SERIES_BUCKETS {
            return None;
        }
        if self.totals.len() <= b {
            self.totals.resize(b + 1, [0; 3]);
            self.by_cand.resize((b + 1) * self.tracked.len(), 0);
        }
        Some(b)
    }

    /// Adds another run's counts (for means over seeds).
    pub(crate) fn add(&mut self, other: &Series) {
        if self.totals.len() < other.totals.len() {
            self.totals.resize(other.totals.len(), [0; 3]);
            self.by_cand
                .resize(other.totals.len() * self.tracked.len(), 0);
        }
        for (a, b) in self.totals.iter_mut().zip(&other.totals) {
            for k in 0..3 {
                a[k] += b[k];
            }
        }
        for (a, b) in self.by_cand.iter_mut().zip(&other.by_cand) {
            *a += b;
        }
    }

    /// Attempts and attempts on tracked candidate `k` in buckets `[from, to)`.
    pub(crate) fn window(&self, k: usize, from: usize, to: usize) -> (u64, u64) {
        let n = self.tracked.len();
        let (mut all, mut mine) = (0, 0);
        for b in from..to.min(self.totals.len()) {
            all += self.totals[b][0];
            mine += self.by_cand[b * n + k];
        }
        (all, mine)
    }
}

#[cfg(test)]
mod tests {
    use super::{bucket_index, bucket_index_ceil, Series};

    #[test]
    fn an_event_on_a_bucket_boundary_opens_the_next_bucket() {
        // The event clock reads ns / 1e9; these quotients fall an ulp short in `f64`.
        assert_eq!(bucket_index(300_000_000.0 / 1e9, 0.1), 3);
        assert_eq!(bucket_index(15.0, 0.1), 150);
        assert_eq!(bucket_index(0.7, 0.1), 7);
        assert_eq!(bucket_index(0.299_999_999, 0.1), 2);
        assert_eq!(bucket_index(2.0, 1.0), 2);
        assert_eq!(bucket_index(-1.0, 0.1), 0);
        assert_eq!(bucket_index(f64::NAN, 0.1), 0);
        assert_eq!(bucket_index_ceil(300_000_000.0 / 1e9, 0.1), 3);
        assert_eq!(bucket_index_ceil(0.300_000_001, 0.1), 4);
        let mut s = Series {
            bucket_s: 0.1,
            tracked: vec![0],
            ..Default::default()
        };
        assert_eq!(s.bucket(0.3), Some(3));
        assert_eq!(s.totals.len(), 4);
        assert_eq!(s.bucket(1e9), None);
    }
}
