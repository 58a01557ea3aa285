//! Per-candidate concurrency limits over a power-of-two-choices pick: Netflix's limit
//! algorithms ([`Limited`]) and the oracle that knows every capacity ([`OracleLimits`]).
//!
//! The queue ([`super::Queued`]) grants a candidate an attempt only while its attempts in
//! flight are fewer than its limit; among the candidates under their limit, two random ones
//! are drawn and the one with fewer attempts in flight wins (`least-loaded`). When every
//! candidate a request may use is at its limit, the request waits in the queue.

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::limiters::LimitAlgo;
use super::{PickState, Picker};
use crate::core::{FailureClass, Outcome};
use crate::sim::policy::{Cand, World};

/// A power of two choices by attempts in flight, as [`super::P2cOpcount`].
fn least_loaded_of_two(s: &[Cand], st: &PickState<'_>, rng: &mut SmallRng) -> Cand {
    let (a, b) = super::two_random(s, rng);
    if st.in_flight[a as usize] <= st.in_flight[b as usize] {
        a
    } else {
        b
    }
}

/// One limit algorithm per candidate, fed as Netflix's `AbstractLimiter` feeds its `Limit`:
/// a success is a sample, an `overload` or a `timeout` a dropped sample, any other failure
/// no sample (`onIgnore`). A round trip of 0 gives no sample (`VegasLimit` refuses one).
#[derive(Debug)]
pub(crate) struct Limited<L> {
    make: fn(&mut SmallRng) -> L,
    algos: Vec<L>,
    initial: f64,
    rng: SmallRng,
}

impl<L: LimitAlgo> Limited<L> {
    /// `make` builds one candidate's algorithm with its defaults; `seed` seeds the draws some
    /// algorithms make (Vegas's probe jitter).
    pub(crate) fn new(make: fn(&mut SmallRng) -> L, seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let initial = make(&mut rng).limit() as f64;
        Limited {
            make,
            algos: Vec::new(),
            initial,
            rng,
        }
    }
}

impl<L: LimitAlgo> Picker for Limited<L> {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        least_loaded_of_two(s, st, rng)
    }

    fn refresh(&mut self, world: &World<'_>) {
        while self.algos.len() < world.truth.len() {
            let algo = (self.make)(&mut self.rng);
            self.algos.push(algo);
        }
    }

    fn granted(&mut self, cand: Cand, inflight: u32, now: f64) {
        if let Some(a) = self.algos.get_mut(cand as usize) {
            a.started(inflight, now);
        }
    }

    fn limit(&self, cand: Cand) -> Option<f64> {
        Some(
            self.algos
                .get(cand as usize)
                .map_or(self.initial, |a| a.limit() as f64),
        )
    }

    fn limit_sample(
        &mut self,
        cand: Cand,
        outcome: &Outcome,
        elapsed_s: f64,
        inflight: u32,
        now: f64,
    ) {
        let drop = match outcome {
            Outcome::Success(_) => false,
            Outcome::Failure(FailureClass::Overload | FailureClass::Timeout) => true,
            Outcome::Failure(_) => return,
        };
        if elapsed_s <= 0.0 {
            return;
        }
        if let Some(a) = self.algos.get_mut(cand as usize) {
            a.sample_at(elapsed_s, inflight, drop, now, &mut self.rng);
        }
    }
}

/// Knows each candidate's true capacity at every instant and keeps its limit there: the
/// servers of a queueing candidate, else its `capacity`, else the start of its `knee` (the
/// smallest of those it has; no limit without any).
#[derive(Debug, Default)]
pub(crate) struct OracleLimits {
    caps: Vec<Option<u32>>,
}

impl Picker for OracleLimits {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        least_loaded_of_two(s, st, rng)
    }

    fn refresh(&mut self, world: &World<'_>) {
        self.caps.clear();
        self.caps
            .extend(world.truth.iter().map(|t| t.concurrency_capacity()));
    }

    fn limit(&self, cand: Cand) -> Option<f64> {
        self.caps
            .get(cand as usize)
            .copied()
            .flatten()
            .map(|c| c as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::baselines::limiters::Aimd;
    use crate::sim::baselines::testing::always;

    #[test]
    fn of_the_two_drawn_the_one_with_fewer_in_flight_wins() {
        let in_flight = [5, 1];
        let st = PickState {
            in_flight: &in_flight,
            now: 0.0,
        };
        assert_eq!(always(|rng| least_loaded_of_two(&[0, 1], &st, rng)), 1);
    }

    /// An AIMD limiter at 100 for candidate 0.
    fn aimd_at_100() -> Limited<Aimd> {
        let mut l = Limited::new(|_| Aimd::default(), 1);
        l.algos.push(Aimd {
            limit: 100,
            ..Default::default()
        });
        l
    }

    #[test]
    fn an_overload_or_a_timeout_is_a_dropped_sample() {
        for class in [FailureClass::Overload, FailureClass::Timeout] {
            let mut l = aimd_at_100();
            l.limit_sample(0, &Outcome::failure(class), 0.01, 100, 1.0);
            assert_eq!(l.limit(0), Some(90.0), "{class:?}");
        }
        let mut l = aimd_at_100();
        l.limit_sample(0, &Outcome::success(), 0.01, 100, 1.0);
        assert_eq!(l.limit(0), Some(101.0));
    }

    #[test]
    fn other_failures_give_no_sample() {
        for class in [
            FailureClass::Transport,
            FailureClass::Refused,
            FailureClass::Application,
        ] {
            let mut l = aimd_at_100();
            l.limit_sample(0, &Outcome::failure(class), 0.01, 100, 1.0);
            assert_eq!(l.limit(0), Some(100.0), "{class:?}");
        }
    }
}
