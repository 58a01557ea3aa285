//! Checks of what callers hand in: each turns an unusable value into an [`Error`] that names
//! the field and what is wrong with it.

use crate::error::Error;
use crate::vocab::{CandidateInfo, Eligible, Outcome, Request, Success};

impl CandidateInfo {
    /// Checks that every number is usable: finite and not negative, a non-empty id, a limit > 0.
    /// The first problem found, as [`Error::InvalidCandidate`]; [`CandidateInfo::problems`]
    /// lists them all.
    pub fn validate(&self) -> Result<(), Error> {
        let mut first = None;
        self.each_problem(|e| {
            first = Some(e);
            false
        });
        first.map_or(Ok(()), Err)
    }

    /// Every problem [`CandidateInfo::validate`] checks for, in field order (empty when the
    /// info is usable): for a caller that reports them all at once, as a file loader does.
    ///
    /// ```
    /// use selection_coordinator::{CandidateInfo, Error};
    ///
    /// let mut info = CandidateInfo::new("a");
    /// info.stake = -5.0;
    /// info.price = f64::NAN;
    /// let fields: Vec<String> = info
    ///     .problems()
    ///     .into_iter()
    ///     .filter_map(|e| match e {
    ///         Error::InvalidCandidate { field, .. } => Some(field),
    ///         _ => None,
    ///     })
    ///     .collect();
    /// assert_eq!(fields, ["stake", "price"]);
    /// ```
    pub fn problems(&self) -> Vec<Error> {
        let mut all = Vec::new();
        self.each_problem(|e| {
            all.push(e);
            true
        });
        all
    }

    /// Calls `found` with each problem in field order while it returns true.
    fn each_problem(&self, mut found: impl FnMut(Error) -> bool) {
        let bad = |field: String, problem: &str| Error::InvalidCandidate {
            id: self.id.clone(),
            field,
            problem: problem.to_string(),
        };
        if self.id.as_str().is_empty() && !found(bad("id".into(), "must not be empty")) {
            return;
        }
        for (field, x) in [("stake", self.stake), ("price", self.price)] {
            if let Err(p) = check_number(x) {
                if !found(bad(field.into(), p)) {
                    return;
                }
            }
        }
        for (region, score) in &self.perf_scores {
            if let Err(p) = check_number(*score) {
                if !found(bad(format!("perf_scores.{region}"), p)) {
                    return;
                }
            }
        }
        if self.max_in_flight == Some(0) {
            found(bad("max_in_flight".into(), "must be at least 1"));
        }
    }
}

impl Request {
    /// Checks what can be checked without a coordinator, as [`Core::ready`](crate::Core::ready)
    /// does first: `parallelism` and `attempts` at least 1, an eligible list that names at
    /// least one candidate. Errors with [`Error::InvalidRequest`], saying which. (Whether the
    /// named candidates exist, and `max_parallelism`, only the coordinator knows.)
    #[inline]
    pub fn validate(&self) -> Result<(), Error> {
        if self.parallelism == 0 {
            return Err(Error::InvalidRequest(
                "parallelism must be at least 1".into(),
            ));
        }
        if self.attempts == Some(0) {
            return Err(Error::InvalidRequest(
                "attempts must be at least 1 (the first attempt counts), or None for unknown"
                    .into(),
            ));
        }
        if let Eligible::Only(ids) = &self.eligible {
            if ids.is_empty() {
                return Err(Error::InvalidRequest(
                    "the eligible set is empty: name at least one candidate or use Eligible::All"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

impl Outcome {
    /// Checks every number: finite and not negative, a server's report within its bounds.
    #[inline]
    pub fn validate(&self) -> Result<(), Error> {
        if let Outcome::Success(s) = self {
            // Every outcome passes through here: the common case (plain numbers, no server
            // report) is one comparison per number, and naming what is wrong is out of line.
            // Below the bits of infinity are exactly the finite numbers from +0.0 up (a sign
            // bit, NaN or infinity is above); -0.0, which is fine, takes the named check.
            let plain = |v: Option<f64>| v.is_none_or(|v| v.to_bits() < f64::INFINITY.to_bits());
            if !(plain(s.connect_ms) && plain(s.ttfb_ms) && plain(s.duration_ms))
                || s.feedback.is_some()
            {
                return Self::validate_success(s);
            }
        }
        Ok(())
    }

    /// [`Outcome::validate`] of a success, naming the first field that is wrong.
    #[cold]
    #[inline(never)]
    fn validate_success(s: &Success) -> Result<(), Error> {
        for (field, v) in [
            ("connect_ms", s.connect_ms),
            ("ttfb_ms", s.ttfb_ms),
            ("duration_ms", s.duration_ms),
        ] {
            if let Some(v) = v {
                check_number(v).map_err(|problem| Error::InvalidOutcome {
                    field,
                    value: v,
                    problem,
                })?;
            }
        }
        if let Some((field, value, problem)) = s.feedback.and_then(|f| f.problem()) {
            return Err(Error::InvalidOutcome {
                field,
                value,
                problem,
            });
        }
        Ok(())
    }
}

/// `Ok` for finite, non-negative numbers; otherwise what is wrong with it.
fn check_number(x: f64) -> Result<(), &'static str> {
    if x.is_nan() {
        Err("is NaN")
    } else if x.is_infinite() {
        Err("is infinite")
    } else if x < 0.0 {
        Err("is negative")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The common-case comparison and the field-by-field check agree on every kind of number.
    #[test]
    fn the_quick_check_agrees_with_the_named_one() {
        let values = [
            None,
            Some(0.0),
            Some(-0.0),
            Some(12.5),
            Some(f64::MAX),
            Some(-1.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
        ];
        for connect_ms in values {
            for ttfb_ms in values {
                for duration_ms in values {
                    let s = Success {
                        connect_ms,
                        ttfb_ms,
                        duration_ms,
                        ..Success::default()
                    };
                    let quick = Outcome::Success(s).validate();
                    let named = Outcome::validate_success(&s);
                    assert_eq!(quick.is_ok(), named.is_ok(), "{s:?}");
                    let bad = [connect_ms, ttfb_ms, duration_ms]
                        .iter()
                        .flatten()
                        .any(|v| !(*v >= 0.0 && v.is_finite()));
                    assert_eq!(quick.is_err(), bad, "{s:?}");
                }
            }
        }
    }
}
