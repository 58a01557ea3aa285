//! Power of two choices: MongoDB's operation count, and tower / Finagle's peak EWMA.

use rand::rngs::SmallRng;

use super::{two_random, PickState, Picker};
use crate::core::Outcome;
use crate::sim::policy::{Cand, World};

/// The MongoDB server selection spec: two random candidates, the one with fewer operations in
/// flight wins; on a tie the first drawn (so a random one).
#[derive(Debug)]
pub(crate) struct P2cOpcount;

impl Picker for P2cOpcount {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        let (a, b) = two_random(s, rng);
        if st.in_flight[a as usize] <= st.in_flight[b as usize] {
            a
        } else {
            b
        }
    }
}

/// tower `PeakEwma` / Finagle: cost = peak-sensitive EWMA of round-trip time x (pending + 1);
/// two random candidates, the cheaper wins. A slower sample replaces the estimate at once; a
/// faster one is blended in with weight `1 - exp(-elapsed / tau)`. Failures are round trips
/// like any other, which is exactly why fast failures attract traffic.
#[derive(Debug)]
pub(crate) struct P2cPeakEwma {
    rtt_ms: Vec<(f64, f64)>,
    /// Decay time constant, seconds (linkerd's default 10 s).
    tau_s: f64,
    /// The estimate before any sample, ms (linkerd's default 30 ms).
    default_rtt_ms: f64,
}

impl Default for P2cPeakEwma {
    fn default() -> Self {
        P2cPeakEwma {
            rtt_ms: Vec::new(),
            tau_s: 10.0,
            default_rtt_ms: 30.0,
        }
    }
}

impl P2cPeakEwma {
    fn estimate(&self, c: Cand, now: f64) -> f64 {
        match self.rtt_ms.get(c as usize) {
            Some(&(est, at)) if at >= 0.0 => {
                // The estimate decays toward zero while idle, as tower's does when read.
                est * (-(now - at).max(0.0) / self.tau_s).exp()
            }
            _ => self.default_rtt_ms,
        }
    }

    fn cost(&self, c: Cand, st: &PickState<'_>) -> f64 {
        self.estimate(c, st.now) * (st.in_flight[c as usize] as f64 + 1.0)
    }
}

impl Picker for P2cPeakEwma {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        let (a, b) = two_random(s, rng);
        if self.cost(a, st) <= self.cost(b, st) {
            a
        } else {
            b
        }
    }

    fn outcome(&mut self, cand: Cand, _outcome: &Outcome, elapsed_s: f64, now: f64) {
        let i = cand as usize;
        if self.rtt_ms.len() <= i {
            self.rtt_ms.resize(i + 1, (0.0, -1.0));
        }
        let rtt = elapsed_s * 1000.0;
        let (est, at) = self.rtt_ms[i];
        let next = if at < 0.0 || rtt > est {
            rtt
        } else {
            let w = (-(now - at).max(0.0) / self.tau_s).exp();
            est * w + rtt * (1.0 - w)
        };
        self.rtt_ms[i] = (next, now);
    }
}
