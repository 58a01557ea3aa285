//! Discovery settings and their validation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::input::Num;

/// How discovery refreshes its catalogue. Times are seconds (fractions allowed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// Seconds between the starts of two refresh passes (Livepeer: 15 minutes).
    pub interval_s: f64,
    /// Fetches run at once: the size of one batch (Livepeer: 100).
    pub batch_size: usize,
    /// First cutoff checkpoint of a batch, seconds after it started (Livepeer: 0.5).
    pub cutoff_start_s: f64,
    /// Last cutoff checkpoint; checkpoints double from `cutoff_start_s` up to it (Livepeer: 6).
    pub cutoff_max_s: f64,
    /// Seconds fetched info stays valid; expired info is refetched before it is used again.
    /// At least `interval_s` (validation refuses less), so info is refreshed before it
    /// expires; the default, two intervals, survives one failed refresh.
    pub expiry_s: f64,
    /// Pause refreshing after this many seconds without a request; `None`: never pause.
    pub idle_pause_s: Option<f64>,
    /// Refresh at once when a request finds fewer eligible candidates than this;
    /// `None`: `min(8, ceil(n / 2))` of `n` known candidates.
    pub pool_threshold: Option<usize>,
    /// At most one pool-threshold refresh per this many seconds, so a small network is not
    /// refetched in a loop.
    pub threshold_backoff_s: f64,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            interval_s: 900.0,
            batch_size: 100,
            cutoff_start_s: 0.5,
            cutoff_max_s: 6.0,
            expiry_s: 1800.0,
            idle_pause_s: Some(3600.0),
            pool_threshold: None,
            threshold_backoff_s: 10.0,
        }
    }
}

/// The longest time any discovery setting may give, seconds (about 31 years): times are added
/// to the clock, and a longer one would overflow it.
pub const MAX_SECONDS: f64 = 1e9;

/// A discovery setting is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// A field has a value discovery cannot work with.
    #[error("discovery config: `{field}` {problem}")]
    InvalidConfig {
        /// The field, e.g. `batch_size`.
        field: &'static str,
        /// What is wrong and what would work.
        problem: String,
    },
}

impl DiscoveryConfig {
    /// Checks every field; the error names the field and what would work.
    pub fn validate(&self) -> Result<(), DiscoveryError> {
        let bad = |field, problem: String| Err(DiscoveryError::InvalidConfig { field, problem });
        let positive = |x: f64| x.is_finite() && x > 0.0 && x <= MAX_SECONDS;
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1".into());
        }
        for (field, value) in [
            ("interval_s", self.interval_s),
            ("cutoff_start_s", self.cutoff_start_s),
            ("cutoff_max_s", self.cutoff_max_s),
            ("expiry_s", self.expiry_s),
        ] {
            if !positive(value) {
                return bad(
                    field,
                    format!(
                        "must be a positive number of seconds, at most {MAX_SECONDS:e}, got {}",
                        Num(value)
                    ),
                );
            }
        }
        if self.cutoff_max_s < self.cutoff_start_s {
            return bad(
                "cutoff_max_s",
                format!(
                    "must be at least cutoff_start_s ({}), got {}",
                    Num(self.cutoff_start_s),
                    Num(self.cutoff_max_s)
                ),
            );
        }
        if self.expiry_s < self.interval_s {
            return bad(
                "expiry_s",
                format!(
                    "must be at least interval_s ({}), got {}: info would expire before its \
                     refresh each interval, and every candidate would be removed (losing its \
                     learned statistics) and fetched anew; twice interval_s lets one failed \
                     refresh pass",
                    Num(self.interval_s),
                    Num(self.expiry_s)
                ),
            );
        }
        if let Some(idle) = self.idle_pause_s {
            if !positive(idle) {
                return bad(
                    "idle_pause_s",
                    format!(
                        "must be a positive number of seconds, at most {MAX_SECONDS:e}, or \
                         absent, got {}",
                        Num(idle)
                    ),
                );
            }
        }
        if !(self.threshold_backoff_s.is_finite()
            && (0.0..=MAX_SECONDS).contains(&self.threshold_backoff_s))
        {
            return bad(
                "threshold_backoff_s",
                format!(
                    "must be a non-negative number of seconds, at most {MAX_SECONDS:e}, got {}",
                    Num(self.threshold_backoff_s)
                ),
            );
        }
        Ok(())
    }

    /// The cutoff checkpoints: `cutoff_start_s` doubling, capped at and ending with
    /// `cutoff_max_s` (0.5, 1, 2, 4, 6 s by default).
    pub fn cutoffs(&self) -> Vec<Duration> {
        let mut out = Vec::new();
        let mut c = self.cutoff_start_s;
        while c < self.cutoff_max_s {
            out.push(Duration::from_secs_f64(c));
            c *= 2.0;
        }
        out.push(Duration::from_secs_f64(self.cutoff_max_s));
        out
    }

    /// The pool threshold for `n` known candidates.
    pub fn threshold(&self, n: usize) -> usize {
        self.pool_threshold.unwrap_or_else(|| n.div_ceil(2).min(8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_double_up_to_the_cap() {
        let secs: Vec<f64> = DiscoveryConfig::default()
            .cutoffs()
            .iter()
            .map(Duration::as_secs_f64)
            .collect();
        assert_eq!(secs, vec![0.5, 1.0, 2.0, 4.0, 6.0]);
        let flat = DiscoveryConfig {
            cutoff_start_s: 2.0,
            cutoff_max_s: 2.0,
            ..DiscoveryConfig::default()
        };
        assert_eq!(flat.cutoffs(), vec![Duration::from_secs(2)]);
    }

    #[test]
    fn default_threshold_is_min_8_half() {
        let c = DiscoveryConfig::default();
        assert_eq!(c.threshold(0), 0);
        assert_eq!(c.threshold(1), 1);
        assert_eq!(c.threshold(5), 3);
        assert_eq!(c.threshold(16), 8);
        assert_eq!(c.threshold(1000), 8);
    }

    #[test]
    fn validation_names_the_field() {
        let err = DiscoveryConfig {
            batch_size: 0,
            ..DiscoveryConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("batch_size"), "{err}");
        let err = DiscoveryConfig {
            cutoff_max_s: 0.1,
            ..DiscoveryConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("cutoff_max_s"), "{err}");
        let err = DiscoveryConfig {
            expiry_s: f64::NAN,
            ..DiscoveryConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("expiry_s"), "{err}");
        assert!(DiscoveryConfig::default().validate().is_ok());
    }

    #[test]
    fn expiry_shorter_than_the_interval_is_refused() {
        let err = DiscoveryConfig {
            interval_s: 900.0,
            expiry_s: 899.0,
            ..DiscoveryConfig::default()
        }
        .validate()
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("expiry_s") && text.contains("interval_s"),
            "{text}"
        );
        let equal = DiscoveryConfig {
            interval_s: 900.0,
            expiry_s: 900.0,
            ..DiscoveryConfig::default()
        };
        assert!(equal.validate().is_ok());
    }

    #[test]
    fn the_smallest_and_largest_allowed_values_are_accepted() {
        let smallest = DiscoveryConfig {
            batch_size: 1,
            cutoff_start_s: 2.0,
            cutoff_max_s: 2.0,
            threshold_backoff_s: 0.0,
            ..DiscoveryConfig::default()
        };
        assert_eq!(smallest.validate(), Ok(()));
        let largest = DiscoveryConfig {
            interval_s: MAX_SECONDS,
            cutoff_start_s: MAX_SECONDS,
            cutoff_max_s: MAX_SECONDS,
            expiry_s: MAX_SECONDS,
            idle_pause_s: Some(MAX_SECONDS),
            threshold_backoff_s: MAX_SECONDS,
            ..DiscoveryConfig::default()
        };
        assert_eq!(largest.validate(), Ok(()));
    }

    #[test]
    fn zero_and_negative_times_are_refused() {
        type Set = fn(&mut DiscoveryConfig, f64);
        let fields: [(&str, Set); 6] = [
            ("interval_s", |c, v| c.interval_s = v),
            ("cutoff_start_s", |c, v| c.cutoff_start_s = v),
            ("cutoff_max_s", |c, v| c.cutoff_max_s = v),
            ("expiry_s", |c, v| c.expiry_s = v),
            ("idle_pause_s", |c, v| c.idle_pause_s = Some(v)),
            ("threshold_backoff_s", |c, v| c.threshold_backoff_s = v),
        ];
        for (field, set) in fields {
            // A zero backoff is allowed (no backoff); the other times must be positive.
            let values: &[f64] = if field == "threshold_backoff_s" {
                &[-1.0, -1e-9]
            } else {
                &[0.0, -1.0]
            };
            for &v in values {
                let mut config = DiscoveryConfig::default();
                set(&mut config, v);
                match config.validate() {
                    Err(DiscoveryError::InvalidConfig { field: f, .. }) => {
                        assert_eq!(f, field, "{field} = {v}")
                    }
                    Ok(()) => panic!("{field} = {v} accepted"),
                }
            }
        }
    }
}
