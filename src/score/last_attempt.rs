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
//!
//! A failure that the caller's own draw causes is weighed on its own, `last_attempt.shed_cost`
//! (on by default): a candidate whose overload failures follow its load (a server past its
//! capacity sheds) sheds a last attempt granted one attempt too many. Its share of overload
//! failures at the concurrency the grant would give it, `p`, is read from its
//! [`LoadFit`](super::LoadFit) (the overload failures' mean concurrency against its
//! attempts'), and its weight is multiplied by `exp(-time_exponent * shed_cost * p)`. Time
//! per success counts a fast shed as cheap, since a retry follows; with no retry left it
//! fails the request, and without this a fast server of small capacity draws last attempts
//! until it sheds most of them. Where the fleet queues, the load component already charges a server's sheds through
//! its load (`load.shed_relief`), so the rate is counted as far as the fleet shows no
//! queueing: times `(1 - q)^`[`QUEUE_GATE`], `q` the fleet's queueing evidence.

use serde::{Deserialize, Serialize};

use super::Problem;

/// The largest `failure_cost` and `shed_cost` accepted: a failure weighs a million average
/// attempts.
const MAX_FAILURE_COST: f64 = 1e6;

/// The power of `1 - q` (`q` the fleet's queueing evidence) the shed cost is counted at: in
/// full where the fleet shows no queueing, a tenth at `q = 0.13`, nothing past a fleet that
/// queues in part.
const QUEUE_GATE: i32 = 16;

/// Below this rate a shed share of 1 moves a weight by under 1 %: the last attempt draws as
/// any other (from the tree, in O(log n)).
const MIN_SHED_RATE: f64 = 0.01;

/// How the last attempt of a request with a known number of attempts is drawn; see the
/// module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LastAttemptConfig {
    /// What a failed last attempt costs the caller, in average attempts (at least 0; 0: the
    /// last attempt is drawn like any other).
    pub failure_cost: f64,
    /// What a last attempt shed for being one attempt too many costs the caller, in average
    /// attempts (at least 0; 0: sheds count as any failure's time). See the module docs.
    pub shed_cost: f64,
}

impl Default for LastAttemptConfig {
    fn default() -> Self {
        super::Config::default().last_attempt
    }
}

impl LastAttemptConfig {
    /// The last attempt is drawn like any other (the lassie and Livepeer presets).
    pub const OFF: LastAttemptConfig = LastAttemptConfig {
        failure_cost: 0.0,
        shed_cost: 0.0,
    };

    /// The default: a shed last attempt costs 10 average attempts; other failures count as
    /// their time.
    pub const DEFAULT: LastAttemptConfig = LastAttemptConfig {
        failure_cost: 0.0,
        shed_cost: 10.0,
    };

    /// Adds the problems of this section to `problems`.
    pub(super) fn check(&self, problems: &mut Vec<Problem>) {
        for (path, c, what) in [
            (
                "last_attempt.failure_cost",
                self.failure_cost,
                "average attempts a failed last attempt costs",
            ),
            (
                "last_attempt.shed_cost",
                self.shed_cost,
                "average attempts a last attempt shed past a candidate's capacity costs",
            ),
        ] {
            if !(c.is_finite() && (0.0..=MAX_FAILURE_COST).contains(&c)) {
                problems.push(Problem::new(
                    path,
                    format!(
                        "must be a number from 0 to {MAX_FAILURE_COST} ({what}; 0 turns it \
                         off), got {c}"
                    ),
                ));
            }
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

    /// The rate at which a last attempt's weight falls with the candidate's expected share of
    /// sheds at the next grant: `time_exponent * shed_cost * (1 - q)^QUEUE_GATE`, `q` the
    /// fleet's queueing evidence; `None` when it changes nothing or next to nothing
    /// ([`MIN_SHED_RATE`]).
    #[inline]
    pub(crate) fn shed_rate(&self, queueing: f32) -> Option<f64> {
        let k = self.config.time_exponent * self.config.last_attempt.shed_cost;
        if !(k > 0.0 && k.is_finite()) {
            return None;
        }
        let gate = (1.0 - f64::from(queueing).clamp(0.0, 1.0)).powi(QUEUE_GATE);
        let k = k * gate;
        (k >= MIN_SHED_RATE).then_some(k)
    }

    /// What a last attempt's weight is multiplied by for a candidate whose success average is
    /// `success`, the best in the drawn set being `best` (`rate` from
    /// [`ScoreModel::last_attempt_rate`]). In `(0, 1]`, 1 for the best.
    #[inline]
    pub(crate) fn last_attempt_factor(rate: f64, success: f64, best: f64) -> f64 {
        falling(rate * (best - success).max(0.0))
    }

    /// What a last attempt's weight is multiplied by for a candidate expected to shed a share
    /// `shed` of its attempts at the next grant (`rate` from [`ScoreModel::shed_rate`]). In
    /// `(0, 1]`, 1 for a candidate that does not shed.
    #[inline]
    pub(crate) fn shed_factor(rate: f64, shed: f64) -> f64 {
        falling(rate * shed.clamp(0.0, 1.0))
    }
}

/// `exp(-x)` for a weight's factor, 0 where that is not a number (a NaN input).
#[inline]
fn falling(x: f64) -> f64 {
    let f = (-x).exp();
    if f.is_finite() {
        f
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, ScoreModel};
    use super::*;

    fn with_cost(failure_cost: f64) -> Config {
        Config {
            last_attempt: LastAttemptConfig {
                failure_cost,
                shed_cost: 0.0,
            },
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
        assert_eq!(Config::default().last_attempt, LastAttemptConfig::DEFAULT);
        assert_eq!(Config::default().last_attempt.failure_cost, 0.0);
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
    fn the_shed_factor_falls_with_the_shed_share_and_where_the_fleet_queues() {
        let model = ScoreModel::new(Config {
            time_exponent: 14.0,
            ..Config::default()
        })
        .unwrap();
        let rate = model.shed_rate(0.0).unwrap();
        assert_eq!(rate, 140.0);
        assert_eq!(ScoreModel::shed_factor(rate, 0.0), 1.0);
        let some = ScoreModel::shed_factor(rate, 0.05);
        let more = ScoreModel::shed_factor(rate, 0.5);
        assert!(more < some && some < 1.0 && more >= 0.0, "{some} {more}");
        // A fleet that queues in part counts a little of it; one that queues, none.
        let partly = model.shed_rate(0.1).unwrap();
        assert!(partly < 0.25 * rate && partly > 0.0, "{partly}");
        assert!(model.shed_rate(1.0).is_none());
        // A fleet that queues in the main: too little to leave the tree for.
        assert!(model.shed_rate(0.5).is_none());
        // Off with a cost of 0, and in the presets (no time factor).
        let off = Config {
            last_attempt: LastAttemptConfig::OFF,
            ..Config::default()
        };
        assert!(ScoreModel::new(off).unwrap().shed_rate(0.0).is_none());
        assert!(ScoreModel::new(Config::lassie())
            .unwrap()
            .shed_rate(0.0)
            .is_none());
    }

    #[test]
    fn bad_costs_are_refused_with_the_field_named() {
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e7] {
            let e = with_cost(bad).validate().unwrap_err().to_string();
            assert!(e.contains("last_attempt.failure_cost"), "{e}");
        }
        assert!(with_cost(3.0).validate().is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e7] {
            let config = Config {
                last_attempt: LastAttemptConfig {
                    failure_cost: 0.0,
                    shed_cost: bad,
                },
                ..Config::default()
            };
            let e = config.validate().unwrap_err().to_string();
            assert!(e.contains("last_attempt.shed_cost"), "{e}");
        }
    }
}
