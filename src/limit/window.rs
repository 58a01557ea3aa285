//! The update window of an adaptive limit's estimator.

/// The current update window: the first `window_samples` attempts granted from `start_s` on,
/// and what they reported.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Window {
    pub(super) start_s: f64,
    /// When its last attempt was granted; `None` while it still takes grants.
    pub(super) closed_s: Option<f64>,
    pub(super) granted: u32,
    /// Its attempts that reported.
    pub(super) reported: u32,
    /// Its successes, and the sum of their latencies and of their squares.
    pub(super) n: u32,
    pub(super) sum_ms: f64,
    pub(super) sum_sq_ms: f64,
    /// The sum and the maximum of its attempts' concurrency at grant.
    pub(super) sum_k: f64,
    pub(super) max_k: u32,
    /// After a cut, the limit it set: an attempt granted past it was granted before the cut,
    /// if at the same instant. `None`: no such bound.
    pub(super) cap: Option<u32>,
    /// The no-load latency when it opened.
    pub(super) base_ms: Option<f64>,
}

impl Window {
    pub(super) fn holds(&self, granted_s: f64, concurrency: u32) -> bool {
        granted_s >= self.start_s
            && self.closed_s.is_none_or(|c| granted_s <= c)
            && self.cap.is_none_or(|cap| concurrency <= cap)
    }
}
