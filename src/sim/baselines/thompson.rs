//! Thompson sampling over everything ever seen: the learning bound of a stationary world.

use rand::rngs::SmallRng;
use rand_distr::{Beta, Distribution};

use super::{PickState, Picker};
use crate::core::{FailureClass, Outcome};
use crate::sim::policy::{Cand, World};

/// How many outcomes the fleet-wide success rate counts for in a candidate's prior.
const PRIOR_OUTCOMES: f64 = 2.0;

/// What a candidate has shown: counts and summed times, never forgotten.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    served: f64,
    failed: f64,
    served_ms: f64,
    failed_ms: f64,
}

impl Counts {
    fn add(&mut self, served: bool, ms: f64) {
        if served {
            self.served += 1.0;
            self.served_ms += ms;
        } else {
            self.failed += 1.0;
            self.failed_ms += ms;
        }
    }
}

/// Thompson sampling (Thompson 1933; Chapelle and Li 2011) on the expected time per success,
/// the quantity the oracle ranks by. Each candidate's success probability has a Beta
/// posterior over all its outcomes, with a prior worth [`PRIOR_OUTCOMES`] outcomes at the
/// fleet-wide success rate; its times per answer and per failure are the means of all its
/// samples (the fleet's means while it has none). Each pick draws a success probability per
/// candidate from its posterior and takes the least `served + failed * (1 - p) / p`, as the
/// oracle does with the truth (with no retries left: the highest `p`).
///
/// It assumes a world that does not change and never forgets, so it learns a stationary
/// fleet as well as a simple learner can and does not come back after a heal: it measures
/// what learning the fleet costs, not a policy to deploy.
#[derive(Debug, Default)]
pub(crate) struct Thompson {
    counts: Vec<Counts>,
    fleet: Counts,
}

impl Thompson {
    /// The candidate's time per success with success probability `p`.
    fn per_success(&self, c: &Counts, p: f64) -> f64 {
        let mean = |sum: f64, n: f64, fleet_sum: f64, fleet_n: f64| {
            if n > 0.0 {
                sum / n
            } else if fleet_n > 0.0 {
                fleet_sum / fleet_n
            } else {
                0.0
            }
        };
        let f = &self.fleet;
        let served = mean(c.served_ms, c.served, f.served_ms, f.served);
        let failed = mean(c.failed_ms, c.failed, f.failed_ms, f.failed);
        let p = p.max(1e-3);
        served + failed * (1.0 - p) / p
    }

    /// A draw of the candidate's success probability from its posterior.
    fn sample_p(&self, c: &Counts, rng: &mut SmallRng) -> f64 {
        let f = &self.fleet;
        let total = f.served + f.failed;
        let m = if total > 0.0 { f.served / total } else { 0.5 };
        let m = m.clamp(0.01, 0.99);
        let a = c.served + PRIOR_OUTCOMES * m;
        let b = c.failed + PRIOR_OUTCOMES * (1.0 - m);
        Beta::new(a, b).map_or(m, |d| d.sample(rng))
    }
}

impl Picker for Thompson {
    fn pick(&mut self, s: &[Cand], _: &PickState<'_>, w: &World<'_>, rng: &mut SmallRng) -> Cand {
        let mut best = s[0];
        let mut best_key = f64::INFINITY;
        for &c in s {
            let counts = self.counts.get(c as usize).copied().unwrap_or_default();
            let p = self.sample_p(&counts, rng);
            let key = if w.workload.retries == 0 {
                -p
            } else {
                self.per_success(&counts, p)
            };
            if key < best_key {
                best = c;
                best_key = key;
            }
        }
        best
    }

    fn outcome(&mut self, cand: Cand, outcome: &Outcome, elapsed_s: f64, _now: f64) {
        let elapsed_ms = elapsed_s * 1000.0;
        let (served, ms) = match outcome {
            Outcome::Failure(FailureClass::Cancelled) => return,
            Outcome::Success(s) => (true, s.ttfb_ms.unwrap_or(elapsed_ms)),
            Outcome::Failure(FailureClass::Application) => (true, elapsed_ms),
            Outcome::Failure(_) => (false, elapsed_ms),
        };
        let i = cand as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, Counts::default());
        }
        self.counts[i].add(served, ms);
        self.fleet.add(served, ms);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_time_per_success_counts_failed_tries_by_the_odds() {
        let c = Counts {
            served: 1.0,
            failed: 1.0,
            served_ms: 100.0,
            failed_ms: 3000.0,
        };
        let t = Thompson {
            counts: Vec::new(),
            fleet: c,
        };
        // Half the tries fail at 3 s: a success costs 100 ms plus one failure on average.
        assert!((t.per_success(&c, 0.5) - 3100.0).abs() < 1e-9);
        // Unknown times are the fleet's.
        let unknown = Counts::default();
        assert!((t.per_success(&unknown, 1.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn posterior_draws_concentrate_with_evidence() {
        let mut rng = SmallRng::seed_from_u64(7);
        let t = Thompson {
            counts: Vec::new(),
            fleet: Counts {
                served: 500.0,
                failed: 500.0,
                ..Counts::default()
            },
        };
        let seen = Counts {
            served: 900.0,
            failed: 100.0,
            ..Counts::default()
        };
        let draws: Vec<f64> = (0..200).map(|_| t.sample_p(&seen, &mut rng)).collect();
        assert!(draws.iter().all(|p| (0.85..0.95).contains(p)), "{draws:?}");
        let fresh: Vec<f64> = (0..200)
            .map(|_| t.sample_p(&Counts::default(), &mut rng))
            .collect();
        let spread =
            fresh.iter().cloned().fold(0.0, f64::max) - fresh.iter().cloned().fold(1.0, f64::min);
        assert!(
            spread > 0.5,
            "an unknown candidate's draws spread widely: {spread}"
        );
    }

    /// The mean of many posterior draws for `seen` in a fleet that served `fleet_served` of
    /// 100 outcomes.
    fn mean_draw(fleet_served: f64, seen: Counts) -> f64 {
        let mut rng = SmallRng::seed_from_u64(11);
        let t = Thompson {
            counts: Vec::new(),
            fleet: Counts {
                served: fleet_served,
                failed: 100.0 - fleet_served,
                ..Counts::default()
            },
        };
        (0..4000).map(|_| t.sample_p(&seen, &mut rng)).sum::<f64>() / 4000.0
    }

    #[test]
    fn the_prior_is_worth_two_outcomes_at_the_fleet_rate() {
        // Fleet rate 0.5, two successes seen: Beta(2 + 1, 0 + 1), mean 0.75.
        let two = Counts {
            served: 2.0,
            ..Counts::default()
        };
        let m = mean_draw(50.0, two);
        assert!((m - 0.75).abs() < 0.02, "{m}");
        // Nothing seen in a fleet at 0.9: Beta(1.8, 0.2), mean 0.9.
        let m = mean_draw(90.0, Counts::default());
        assert!((m - 0.9).abs() < 0.02, "{m}");
    }

    #[test]
    fn first_bytes_and_application_errors_are_answers() {
        let mut t = Thompson::default();
        // A success's time is its first byte, not the whole transfer.
        t.outcome(0, &Outcome::success_with(5.0, 50.0, 1000, 500.0), 0.6, 1.0);
        // An application error is an answer, at the time it took.
        t.outcome(0, &Outcome::failure(FailureClass::Application), 0.2, 2.0);
        t.outcome(0, &Outcome::failure(FailureClass::Timeout), 1.0, 3.0);
        // A grant handed back unused counts nowhere.
        t.outcome(0, &Outcome::failure(FailureClass::Cancelled), 0.1, 4.0);
        let c = t.counts[0];
        assert_eq!((c.served, c.served_ms), (2.0, 250.0));
        assert_eq!((c.failed, c.failed_ms), (1.0, 1000.0));
        assert_eq!((t.fleet.served, t.fleet.failed), (2.0, 1.0));
    }

    #[test]
    fn with_no_retries_left_the_surest_candidate_is_taken() {
        use crate::sim::baselines::testing::TestWorld;
        let tw = TestWorld::plain(2);
        assert_eq!(tw.world(0.0).workload.retries, 0);
        let mut t = Thompson::default();
        for k in 0..50 {
            // Candidate 0 answers slowly but always; candidate 1 fails fast, always.
            t.outcome(
                0,
                &Outcome::success_with(0.0, 900.0, 1, 900.0),
                0.9,
                k as f64,
            );
            t.outcome(1, &Outcome::failure(FailureClass::Refused), 0.001, k as f64);
        }
        assert_eq!(tw.always_picks(&mut t, &[1, 0], &[0, 0], 100.0), 0);
    }
}
