//! Checking a [`Stats`] handed in from outside (restored or built by a caller).

use super::Stats;

/// The farthest a time in [`Stats`] may lie from the core's epoch, seconds (about 31 years):
/// further, its age in a snapshot (microseconds) would overflow.
pub(crate) const MAX_TIME_S: f64 = 1e9;

impl Stats {
    /// The first unusable value, as its field name and what is wrong with it: averages must be
    /// finite and not negative (the success average at most 1), times finite, and the counts
    /// consistent (no more successes than attempts).
    pub(crate) fn problem(&self) -> Option<(&'static str, String)> {
        let averages = [
            ("success", self.success),
            ("connect_ms", self.connect_ms),
            ("ttfb_ms", self.ttfb_ms),
            ("bandwidth_bps", self.bandwidth_bps),
            ("attempt_ms", self.attempt_ms),
        ];
        for (field, v) in averages {
            if let Some(x) = v.filter(|x| !(x.is_finite() && *x >= 0.0)) {
                return Some((field, format!("= {x}: must be finite and not negative")));
            }
        }
        if let Some(x) = self.success.filter(|x| *x > 1.0) {
            return Some(("success", format!("= {x}: must be at most 1")));
        }
        for (field, v) in [
            ("last_sample_s", self.last_sample_s),
            ("ejected_until_s", self.ejected_until_s),
        ] {
            if let Some(x) = v.filter(|x| x.is_nan() || x.abs() > MAX_TIME_S) {
                return Some((
                    field,
                    format!("= {x}: must be within {MAX_TIME_S:e} s of the core's epoch"),
                ));
            }
        }
        if self.successes > self.attempts {
            return Some((
                "successes",
                format!(
                    "= {} is more than its attempts ({})",
                    self.successes, self.attempts
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.overload_evidence) {
            return Some((
                "overload_evidence",
                format!("= {}: must be between 0 and 1", self.overload_evidence),
            ));
        }
        for (field, v) in [
            ("attempt_var", self.attempt_var),
            ("attempt_noise", self.attempt_noise),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Some((field, format!("= {v}: must be a finite number at least 0")));
            }
        }
        if !self.attempt_lag.is_finite() {
            return Some((
                "attempt_lag",
                format!("= {}: must be a finite number", self.attempt_lag),
            ));
        }
        None
    }
}
