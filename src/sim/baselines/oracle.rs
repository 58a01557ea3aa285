//! The oracle: it reads the hidden truth, so it is the limit to measure against.

use rand::rngs::SmallRng;
use rand::RngExt;

use super::{PickState, Picker};
use crate::sim::policy::{Cand, World};

/// Picks the candidate with the best true odds at the load it would add to. Without retries
/// that is the highest success probability (then the fastest); with retries, the highest
/// success probability per expected millisecond spent, the optimal order for a sequential
/// search until the first success.
#[derive(Debug)]
pub(crate) struct Oracle;

impl Picker for Oracle {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, w: &World<'_>, rng: &mut SmallRng) -> Cand {
        let key = |c: Cand| -> (f64, f64) {
            let t = &w.truth[c as usize];
            let p = t.success_probability(st.in_flight[c as usize] + 1);
            let cost = p * t.mean_first_byte_ms() + (1.0 - p) * t.failure_ms.mean();
            if w.retries == 0 {
                (p, -cost)
            } else {
                (p / cost.max(1e-3), p)
            }
        };
        // Start at a random place so equal candidates share the traffic.
        let start = rng.random_range(0..s.len());
        let mut best = s[start];
        let mut best_key = key(best);
        for i in 1..s.len() {
            let c = s[(start + i) % s.len()];
            let k = key(c);
            if k > best_key {
                best = c;
                best_key = k;
            }
        }
        best
    }
}
