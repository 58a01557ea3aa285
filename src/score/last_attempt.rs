//! The last attempt of a request that says how many it makes
//! ([`Request::with_attempts`](crate::Request::with_attempts)): drawn by its odds of success
//! as well as its time.
//!
//! The draw ranks candidates by their expected time per success, failed tries included: what a
//! caller that retries until it succeeds pays. A request with no try left after this one pays
//! for a failure differently: it fails. With `last_attempt.failure_cost = c`, such a draw
//! counts a failure as `c` average attempts (the all-candidate average attempt time) on top of
//! the time: a candidate whose success average `s` is below the best one's in the drawn set,
//! `s_best`, costs `c (s_best - s)` average attempts more, and its weight is multiplied by
//! the time factor's `exp(-time_exponent * c * (s_best - s))`. So the last attempt goes to the
//! candidates most likely to answer, and among equally reliable ones to the fastest. It acts
//! through the time factor, as `time_to_success` does: with `time_exponent = 0` (the lassie
//! and Livepeer presets) it changes nothing. The floor's share is left as it is.

use serde::{Deserialize, Serialize};

use super::Problem;

/// The largest `failure_cost` accepted: a failure weighs a million average attempts.
const MAX_FAILURE_COST: f64 = 1e6;

/// How the last attempt of a request with a known number of attempts is drawn; see the
/// module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LastAttemptConfig {
    /// What a failed last attempt costs the caller, in average attempts (at least 0; 0: the
    /// last attempt is drawn like any other).
    pub failure_cost: f64,
}

impl Default for LastAttemptConfig {
    fn default() -> Self {
        super::Config::default().last_attempt
    }
}

impl LastAttemptConfig {
    /// The last attempt is drawn like any other (the lassie and Livepeer presets).
    pub const OFF: LastAttemptConfig = LastAttemptConfig { failure_cost: 0.0 };

    /// Adds the problems of this section to `problems`.
    pub(super) fn check(&self, problems: &mut Vec<Problem>) {
        let c = self.failure_cost;
        if !(c.is_finite() && (0.0..=MAX_FAILURE_COST).contains(&c)) {
            problems.push(Problem::new(
                "last_attempt.failure_cost",
                format!(
                    "must be a number from 0 to {MAX_FAILURE_COST} (average attempts a failed \
                     last attempt costs; 0 turns it off), got {c}"
                ),
            ));
        }
    }
}

impl super::ScoreModel {
    /// The rate at which a last attempt's weight falls with the success average below the best
    /// one's: `time_exponent * failure_cost`, or `None` when it changes nothing.
    #[inline]
    pub(crate) fn last_attempt_rate(&self) -> Option<f64> {
        let k = self.config.time_exponent * self.config.last_attempt.failure_cost;
        (k > 0.0 && k.is_finite()).then_some(k)
    }

    /// What a last attempt's weight is multiplied by for a candidate whose success average is
    /// `success`, the best in the drawn set being `best` (`rate` from
    /// [`ScoreModel::last_attempt_rate`]). In `(0, 1]`, 1 for the best.
    #[inline]
    pub(crate) fn last_attempt_factor(rate: f64, success: f64, best: f64) -> f64 {
        let gap = (best - success).max(0.0);
        let f = (-rate * gap).exp();
        if f.is_finite() {
            f
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, ScoreModel};
    use super::*;

    fn with_cost(failure_cost: f64) -> Config {
        Config {
            last_attempt: LastAttemptConfig { failure_cost },
            ..Config::default()
        }
    }

    #[test]
    fn the_factor_falls_with_the_success_gap_and_is_one_for_the_best() {
        let model = ScoreModel::new(Config {
            time_exponent: 12.0,
            ..with_cost(10.0)
        })
        .unwrap();
        let rate = model.last_attempt_rate().unwrap();
        assert_eq!(rate, 120.0);
        assert_eq!(ScoreModel::last_attempt_factor(rate, 0.99, 0.99), 1.0);
        let near = ScoreModel::last_attempt_factor(rate, 0.98, 0.99);
        let far = ScoreModel::last_attempt_factor(rate, 0.80, 0.99);
        assert!(near < 1.0 && far < near && far >= 0.0, "{near} {far}");
        // A success above the best (a stale best) is never rewarded past 1.
        assert_eq!(ScoreModel::last_attempt_factor(rate, 1.0, 0.9), 1.0);
    }

    #[test]
    fn off_without_a_cost_or_a_time_factor() {
        assert_eq!(Config::default().last_attempt, LastAttemptConfig::OFF);
        assert!(ScoreModel::new(Config::default())
            .unwrap()
            .last_attempt_rate()
            .is_none());
        let no_time = Config {
            time_exponent: 0.0,
            ..with_cost(10.0)
        };
        assert!(ScoreModel::new(no_time)
            .unwrap()
            .last_attempt_rate()
            .is_none());
        assert!(ScoreModel::new(Config::lassie())
            .unwrap()
            .last_attempt_rate()
            .is_none());
    }

    #[test]
    fn bad_costs_are_refused_with_the_field_named() {
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e7] {
            let e = with_cost(bad).validate().unwrap_err().to_string();
            assert!(e.contains("last_attempt.failure_cost"), "{e}");
        }
        assert!(with_cost(3.0).validate().is_ok());
    }
}
