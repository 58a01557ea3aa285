//! The DRIVERS-3217 proof of concept: bias power-of-two-choices by a 10 s error rate.

use rand::rngs::SmallRng;
use rand::RngExt;

use super::{two_random, PickState, Picker};
use crate::core::{FailureClass, Outcome};
use crate::sim::policy::{Cand, World};

const BUCKETS: usize = 10;
const MIN_SAMPLES: u32 = 10;

/// Per candidate, 10 one-second buckets of (errors, operations). Of two random candidates the
/// one with the lower error rate is taken with probability equal to the difference of the
/// rates; otherwise the one with fewer operations in flight. An error rate needs at least 10
/// samples in the window (else it is 0).
#[derive(Debug, Default)]
pub(crate) struct MongoErrorBias {
    windows: Vec<[(i64, u32, u32); BUCKETS]>,
}

impl MongoErrorBias {
    fn error_rate(&self, c: Cand, now: f64) -> f64 {
        let Some(w) = self.windows.get(c as usize) else {
            return 0.0;
        };
        let sec = now.floor() as i64;
        let (mut errors, mut total) = (0, 0);
        for &(s, e, t) in w {
            if s > sec - BUCKETS as i64 && s <= sec {
                errors += e;
                total += t;
            }
        }
        if total < MIN_SAMPLES {
            0.0
        } else {
            errors as f64 / total as f64
        }
    }
}

impl Picker for MongoErrorBias {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        let (a, b) = two_random(s, rng);
        let (ea, eb) = (self.error_rate(a, st.now), self.error_rate(b, st.now));
        let (lower, diff) = if ea <= eb { (a, eb - ea) } else { (b, ea - eb) };
        if rng.random::<f64>() < diff {
            return lower;
        }
        if st.in_flight[a as usize] <= st.in_flight[b as usize] {
            a
        } else {
            b
        }
    }

    fn outcome(&mut self, cand: Cand, outcome: &Outcome, _elapsed_s: f64, now: f64) {
        let error = match outcome {
            Outcome::Success(_) => false,
            Outcome::Failure(FailureClass::Application | FailureClass::Cancelled) => false,
            Outcome::Failure(_) => true,
        };
        let i = cand as usize;
        if self.windows.len() <= i {
            self.windows.resize(i + 1, [(i64::MIN, 0, 0); BUCKETS]);
        }
        let sec = now.floor() as i64;
        let slot = &mut self.windows[i][sec.rem_euclid(BUCKETS as i64) as usize];
        if slot.0 != sec {
            *slot = (sec, 0, 0);
        }
        slot.1 += u32::from(error);
        slot.2 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_error_is_no_error_for_the_rate() {
        let mut m = MongoErrorBias::default();
        for _ in 0..10 {
            m.outcome(0, &Outcome::failure(FailureClass::Application), 0.01, 1.5);
            m.outcome(1, &Outcome::failure(FailureClass::Overload), 0.01, 1.5);
        }
        assert_eq!(m.error_rate(0, 1.5), 0.0);
        assert_eq!(m.error_rate(1, 1.5), 1.0);
    }
}
