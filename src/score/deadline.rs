//! How long an attempt is worth waiting for: the deadline advice a grant carries
//! ([`Grant::deadline_ms`](crate::Grant::deadline_ms)).
//!
//! A candidate that hangs keeps each attempt granted to it until the caller's own timeout,
//! seconds where its answers took milliseconds, and the request pays all of it before it can
//! try elsewhere. The coordinator knows how fast the candidate answers (its first-byte
//! average, learned from successes only, so failures and hangs do not stretch it), so a grant
//! says by when an answer should have come: a multiple of that average, at least `min_ms`. A
//! worker that has no first byte by then gives up, reports the attempt as a
//! [`FailureClass::Timeout`](crate::FailureClass::Timeout), and retries elsewhere; the
//! statistics then read the hang as they would read the caller's timeout, only sooner.
//!
//! **The multiple** follows how far answers stray from their candidate's average in this
//! fleet. Every answer's first byte is compared with its candidate's average before it (in a
//! coordinator that shares evidence, a candidate's first answer here is compared with the
//! others' pooled average of it), and the fleet keeps one spread: the root mean square of the
//! natural log of that ratio ([`Overall::ttfb_spread`](super::Overall::ttfb_spread): the first
//! answers averaged evenly with the starting value below, then an average in which the newest
//! weighs 1 %). The multiple is `e^(sigmas x spread)`, at most `factor` and at least 2.
//! Servers that answer close to their average (a spread of 0.3: first bytes within about 30 %
//! of the mean) are cut at about 4.5 times it; heavy tails spread their answers and keep
//! `factor`. Until the fleet has answered, the spread is the one that gives `factor`. Where
//! the fleet queues (its queueing evidence `q`, see `load.queueing`), the multiple goes back
//! to `factor`, as `m^(1 - q) x factor^q`: waits grow with the load beyond
//! anything the spread at the usual load shows, and an attempt abandoned at its deadline still
//! holds its place in the queue, so cutting waits adds work where there is too much already.
//!
//! **In a coordinator that shares** evidence, the first-byte average is the one the
//! candidate's score is computed from: its own answers with the others' evidence blended in,
//! so a candidate only the others have answered on is advised from their average of it.
//!
//! **A candidate without an answer yet** is advised from the fleet's first-byte average
//! ([`Overall::ttfb_ms`](super::Overall::ttfb_ms)): a new candidate that hangs costs no more
//! than a known one.
//!
//! **Which attempts.** An attempt is advised when it is the only one of its request in flight
//! and no earlier attempt of the request timed out, and it is not the request's last. So:
//! - at most one attempt per request is cut short: once one has timed out (cut or not), the
//!   request's later attempts wait for their answers. If the whole fleet slows down at once
//!   past the advice, the retries still answer and the averages learn the new pace, where
//!   advice on every attempt would cut them all and learn nothing;
//! - a retry after a failure that was not a timeout (a refusal, a transport error) is advised
//!   again: a request that tries one server after another until one answers is cut short at
//!   each hang until its first;
//! - of a request's parallel attempts only the first is advised;
//! - the last attempt of a request that said how many it makes
//!   ([`Request::with_attempts`](crate::Request::with_attempts)) is not: giving up there
//!   fails the request.
//!
//! It is advice: a worker may ignore it (the coordinator's own timeouts and statistics do not
//! depend on it), and the caller's timeout still applies when it is shorter.

use serde::{Deserialize, Serialize};

use super::Problem;

/// The largest `factor`, `min_ms` and `sigmas` accepted (about 11.6 days in milliseconds).
const MAX_VALUE: f64 = 1e9;

/// The smallest multiple of the first-byte average the spread may advise: an average lags a
/// candidate that slows down, and the spread is the fleet's, not each candidate's.
const MIN_SPREAD_FACTOR: f64 = 2.0;

/// The weight of the newest answer in the fleet's spread
/// ([`Overall::ttfb_spread`](super::Overall::ttfb_spread)) once warmed up.
const SPREAD_ALPHA: f64 = 0.01;

/// The answers after which the spread's warm-up is over (the newest weighs [`SPREAD_ALPHA`]);
/// what a snapshot written before the count was kept is read as.
pub(crate) const SPREAD_WARM: u32 = 100;

/// The deadline advice of each grant; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadlineConfig {
    /// The largest deadline as a multiple of the candidate's first-byte average (0: no
    /// advice).
    pub factor: f64,
    /// How many spreads of the fleet's first bytes above the average an answer may come
    /// before it is cut: the multiple is `e^(sigmas x spread)` within 2 and `factor` (0:
    /// `factor` alone). See the module docs.
    pub sigmas: f64,
    /// The shortest deadline advised, milliseconds (at least 0): for candidates that answer in
    /// well under a millisecond, set it above the workers' scheduling jitter.
    pub min_ms: f64,
}

impl Default for DeadlineConfig {
    fn default() -> Self {
        super::Config::default().deadline
    }
}

impl DeadlineConfig {
    /// The project default: five spreads of the fleet's first bytes, at most ten times the
    /// candidate's first-byte average, no minimum (`docs/tuning.md`, "Deadline advice").
    pub const DEFAULT: DeadlineConfig = DeadlineConfig {
        factor: 10.0,
        sigmas: 5.0,
        min_ms: 0.0,
    };

    /// No advice (the lassie and Livepeer presets: their callers wait for their own timeout).
    pub const OFF: DeadlineConfig = DeadlineConfig {
        factor: 0.0,
        sigmas: 0.0,
        min_ms: 0.0,
    };

    /// Adds the problems of this section to `problems`.
    pub(super) fn check(&self, problems: &mut Vec<Problem>) {
        for (field, v, what) in [
            (
                "deadline.factor",
                self.factor,
                "multiple of a candidate's first-byte average; 0 turns the advice off",
            ),
            ("deadline.min_ms", self.min_ms, "milliseconds"),
            (
                "deadline.sigmas",
                self.sigmas,
                "spreads of the fleet's first bytes; 0 uses the factor alone",
            ),
        ] {
            if !(v.is_finite() && (0.0..=MAX_VALUE).contains(&v)) {
                problems.push(Problem::new(
                    field,
                    format!("must be a number from 0 to {MAX_VALUE} ({what}), got {v}"),
                ));
            }
        }
    }

    /// The multiple of the first-byte average advised in a fleet whose spread (the mean square
    /// of the log ratios) is `spread` (`None`: no answer yet) and whose queueing evidence is
    /// `queueing` (0 to 1): the spread's multiple where latencies are the servers' own,
    /// `factor` where the fleet queues, and their geometric blend between.
    #[inline]
    pub(crate) fn multiple(&self, spread: Option<f64>, queueing: f32) -> f64 {
        match spread {
            Some(v) if self.sigmas > 0.0 && v >= 0.0 && self.factor > MIN_SPREAD_FACTOR => {
                let m = (self.sigmas * v.sqrt()).exp().max(MIN_SPREAD_FACTOR);
                // `min` keeps `factor` when the product overflows or is NaN.
                let m = self.factor.min(m);
                let q = f64::from(queueing).clamp(0.0, 1.0);
                // Within `m` and `factor` despite the rounding of the power.
                (m * (self.factor / m).powf(q)).min(self.factor).max(m)
            }
            _ => self.factor,
        }
    }

    /// Adds one answer to the fleet's spread: its first byte `ttfb_ms` against its candidate's
    /// average before it. Answers without both, or with either at 0, say nothing. The spread
    /// starts at the value whose multiple is `factor`, which counts as one answer: the first
    /// answers are averaged evenly with it (`answers` counts them) until the newest weighs
    /// 1 %, so a fleet's spread is its own after a few answers, not after hundreds.
    #[inline]
    pub(crate) fn learn_spread(
        &self,
        spread: &mut Option<f64>,
        answers: &mut u32,
        ttfb_ms: f64,
        average_ms: f64,
    ) {
        if self.sigmas <= 0.0 || self.factor <= 0.0 || !(ttfb_ms > 0.0 && average_ms > 0.0) {
            return;
        }
        let r = (ttfb_ms / average_ms).ln();
        if !r.is_finite() {
            return;
        }
        let start = || {
            let s = self.factor.max(1.0).ln() / self.sigmas;
            s * s
        };
        let old = spread
            .filter(|v| v.is_finite() && *v >= 0.0)
            .unwrap_or_else(start);
        // Warm-up: the starting value counts as one answer, and the answers are averaged
        // evenly with it until the newest weighs SPREAD_ALPHA.
        let w = (1.0 / (f64::from(*answers) + 2.0)).max(SPREAD_ALPHA);
        *answers = answers.saturating_add(1);
        *spread = Some(old + w * (r * r - old));
    }
}

impl super::ScoreModel {
    /// The deadline advised for an attempt on a candidate whose first-byte average is
    /// `ttfb_ms` (`None`: neither it nor the fleet has answered yet), where the advice's
    /// multiple is `multiple` ([`DeadlineConfig::multiple`], as the core keeps it), if the
    /// attempt may be advised at all (`advise`: see the module docs) and the advice is on.
    /// Finite and positive when given.
    #[inline]
    pub(crate) fn attempt_deadline_ms(
        &self,
        ttfb_ms: Option<f64>,
        multiple: f64,
        advise: bool,
    ) -> Option<f64> {
        let d = &self.config.deadline;
        if !advise || d.factor <= 0.0 {
            return None;
        }
        let t = ttfb_ms.filter(|t| t.is_finite() && *t >= 0.0)?;
        let ms = (multiple * t).max(d.min_ms);
        (ms.is_finite() && ms > 0.0).then_some(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any number, NaN and the infinities included.
    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(0.0),
            0.0..1e4f64,
        ]
    }

    fn config() -> impl Strategy<Value = DeadlineConfig> {
        (0.0..1e3f64, 0.0..20.0f64, 0.0..1e4f64).prop_map(|(factor, sigmas, min_ms)| {
            DeadlineConfig {
                factor,
                sigmas,
                min_ms,
            }
        })
    }

    proptest! {
        #![proptest_config(crate::proptest_seed::config(256))]

        /// Whatever the answers (hostile ones included), the spread stays a finite square or
        /// unknown, and the multiple stays between the floor (or `factor` below it) and
        /// `factor`, whatever the queueing evidence.
        #[test]
        fn the_multiple_stays_within_its_bounds(
            d in config(),
            answers in prop::collection::vec((any_f64(), any_f64()), 0..40),
            queueing in any::<f32>(),
        ) {
            let mut spread = None;
            let mut n = 0;
            for (t, avg) in answers {
                d.learn_spread(&mut spread, &mut n, t, avg);
                if let Some(v) = spread {
                    prop_assert!(v.is_finite() && v >= 0.0, "spread {v}");
                }
                let m = d.multiple(spread, queueing);
                prop_assert!(m <= d.factor, "{m} above {}", d.factor);
                prop_assert!(m >= d.factor.min(MIN_SPREAD_FACTOR), "{m} below the floor");
            }
        }
    }

    /// A snapshot written before the answers were counted reads as warmed up, so a restored
    /// spread is not outweighed by the next answers.
    #[test]
    fn a_spread_without_its_count_reads_as_warmed_up() {
        let o: crate::score::Overall = serde_json::from_str(r#"{"ttfb_spread": 0.1}"#).unwrap();
        assert_eq!(o.ttfb_spread_answers, SPREAD_WARM);
        let (mut spread, mut n) = (o.ttfb_spread, o.ttfb_spread_answers);
        DeadlineConfig::DEFAULT.learn_spread(&mut spread, &mut n, 20.0, 20.0);
        assert!((spread.unwrap() - 0.099).abs() < 1e-12, "{spread:?}");
        assert_eq!(crate::score::Overall::default().ttfb_spread_answers, 0);
    }

    #[test]
    fn a_queueing_fleet_keeps_the_factor() {
        let d = DeadlineConfig::DEFAULT;
        // A spread of 0.1 (first bytes within about 10 % of their mean): the floor of 2.
        assert_eq!(d.multiple(Some(0.01), 0.0), MIN_SPREAD_FACTOR);
        assert!((d.multiple(Some(0.01), 1.0) - d.factor).abs() < 1e-9);
        let half = d.multiple(Some(0.01), 0.5);
        assert!((half - (2.0f64 * 10.0).sqrt()).abs() < 1e-9, "{half}");
        // No answer yet, or the spread rule off: the factor.
        assert_eq!(d.multiple(None, 0.0), d.factor);
        let off = DeadlineConfig { sigmas: 0.0, ..d };
        assert_eq!(off.multiple(Some(0.01), 0.0), d.factor);
    }
}
