//! The `[adaptive]` section of the config: whether limits are learned, their bounds and the
//! estimator's knobs, with validation that names every bad field.

use serde::{Deserialize, Serialize};

use crate::error::Problem;

/// Adaptive per-candidate concurrency limits (the `[adaptive]` section of the config).
///
/// With `enabled`, each candidate's in-flight limit is learned from its outcomes (see
/// [`Estimator`](super::Estimator)); the static limits ([`Limits`](crate::core::Limits) and a
/// candidate's own `max_in_flight`) stay as caps: the limit in force is the lower of the two.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdaptiveConfig {
    /// Learn limits. Off: only the static limits apply.
    pub enabled: bool,
    /// A new candidate's limit before anything is known.
    pub initial: u32,
    /// The lowest limit (at least 1).
    pub min: u32,
    /// The highest limit.
    pub max: u32,
    /// The share of a window's attempts that may wait at the candidate (by Little's law,
    /// `1 - no_load / mean latency`) before the window counts as queueing; never more than one
    /// attempt's worth, and on top of an allowance for the latency's own noise.
    pub tolerance: f64,
    /// The limit is multiplied by this on an overload failure or a timeout (at most once per
    /// no-load latency).
    pub backoff: f64,
    /// Grants per update window: a window holds the first `max(window_samples, limit)`
    /// attempts granted after it opens and is judged once they have reported.
    pub window_samples: u32,
    /// The weight of one light-load success in the no-load latency estimate.
    pub no_load_alpha: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            enabled: false,
            initial: 4,
            min: 1,
            max: 1000,
            tolerance: 0.1,
            backoff: 0.9,
            window_samples: 10,
            no_load_alpha: 0.05,
        }
    }
}

impl AdaptiveConfig {
    /// Appends a [`Problem`] (with its `adaptive.` field path) for every unusable field.
    pub(crate) fn check(&self, problems: &mut Vec<Problem>) {
        if self.min == 0 {
            problems.push(Problem::new("adaptive.min", "must be at least 1"));
        }
        if self.max < self.min {
            problems.push(Problem::new(
                "adaptive.max",
                format!(
                    "must be at least adaptive.min ({}), got {}",
                    self.min, self.max
                ),
            ));
        }
        if self.initial < self.min || self.initial > self.max {
            // A bound set alone meets the default start: say where the 4 came from.
            let default = AdaptiveConfig::default().initial;
            let hint = if self.initial == default {
                " (its default; set adaptive.initial too when you set min or max)".to_string()
            } else {
                String::new()
            };
            problems.push(Problem::new(
                "adaptive.initial",
                format!(
                    "must be between adaptive.min ({}) and adaptive.max ({}), got {}{hint}",
                    self.min, self.max, self.initial
                ),
            ));
        }
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            problems.push(Problem::new(
                "adaptive.tolerance",
                format!("must be a finite number >= 0, got {}", self.tolerance),
            ));
        }
        if !(self.backoff > 0.0 && self.backoff < 1.0) {
            problems.push(Problem::new(
                "adaptive.backoff",
                format!("must be in (0, 1), got {}", self.backoff),
            ));
        }
        if self.window_samples == 0 {
            problems.push(Problem::new(
                "adaptive.window_samples",
                "must be at least 1",
            ));
        }
        if !(self.no_load_alpha > 0.0 && self.no_load_alpha <= 1.0) {
            problems.push(Problem::new(
                "adaptive.no_load_alpha",
                format!(
                    "must be in (0, 1] (the weight of the newest sample), got {}",
                    self.no_load_alpha
                ),
            ));
        }
    }
}
