//! How long an attempt is worth waiting for: the deadline advice a grant carries
//! ([`Grant::deadline_ms`](crate::Grant::deadline_ms)).
//!
//! A candidate that hangs keeps each attempt granted to it until the caller's own timeout,
//! seconds where its answers took milliseconds, and the request pays all of it before it can
//! try elsewhere. The coordinator knows how fast the candidate answers (its first-byte
//! average, learned from successes only, so failures and hangs do not stretch it), so the
//! grant of a request's first attempt says by when an answer should have come: `factor` times that average, at least
//! `min_ms`. A worker that has no first byte by then gives up, reports the attempt as a
//! [`FailureClass::Timeout`](crate::FailureClass::Timeout), and retries elsewhere; the
//! statistics then read the hang as they would read the caller's timeout, only sooner.
//!
//! The advice is left out where it would cost more than it saves:
//! - on the last attempt of a request that said how many it makes
//!   ([`Request::with_attempts`](crate::Request::with_attempts)): giving up there fails the
//!   request;
//! - on any attempt after a request's first (its retries, its further parallel attempts):
//!   at most one attempt per request is cut short, so if the whole fleet slows down at once
//!   past the advice, the retries still wait for their answers and the averages learn the
//!   new pace, where advice on every attempt would cut them all and learn nothing;
//! - on a candidate without an answer yet (no first-byte average to go by).
//!
//! It is advice: a worker may ignore it (the coordinator's own timeouts and statistics do not
//! depend on it), and the caller's timeout still applies when it is shorter.

use serde::{Deserialize, Serialize};

use super::Problem;

/// The largest `factor` and `min_ms` accepted (about 11.6 days in milliseconds).
const MAX_VALUE: f64 = 1e9;

/// The deadline advice of each grant; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadlineConfig {
    /// The deadline as a multiple of the candidate's first-byte average (0: no advice).
    pub factor: f64,
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
    /// The project default: ten times the candidate's first-byte average, no minimum
    /// (`docs/tuning.md`, "Deadline advice").
    pub const TENFOLD: DeadlineConfig = DeadlineConfig {
        factor: 10.0,
        min_ms: 0.0,
    };

    /// No advice (the lassie and Livepeer presets: their callers wait for their own timeout).
    pub const OFF: DeadlineConfig = DeadlineConfig {
        factor: 0.0,
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
        ] {
            if !(v.is_finite() && (0.0..=MAX_VALUE).contains(&v)) {
                problems.push(Problem::new(
                    field,
                    format!("must be a number from 0 to {MAX_VALUE} ({what}), got {v}"),
                ));
            }
        }
    }
}

impl super::ScoreModel {
    /// The deadline advised for an attempt on a candidate whose first-byte average is
    /// `ttfb_ms` (`None`: no answer yet), if the attempt may be advised at all (`advise`: the
    /// request's first attempt and not its last) and the advice is on. Finite and positive
    /// when given.
    #[inline]
    pub(crate) fn attempt_deadline_ms(&self, ttfb_ms: Option<f64>, advise: bool) -> Option<f64> {
        let d = &self.config.deadline;
        if !advise || d.factor <= 0.0 {
            return None;
        }
        let t = ttfb_ms.filter(|t| t.is_finite() && *t >= 0.0)?;
        let ms = (d.factor * t).max(d.min_ms);
        (ms.is_finite() && ms > 0.0).then_some(ms)
    }
}
