//! Fewest outstanding requests: absim's `pending` strategy.

use rand::rngs::SmallRng;

use super::{min_by_score, PickState, Picker};
use crate::sim::policy::{Cand, World};

/// absim's `pending` replica selection (the C3 paper's "least outstanding requests"): of the
/// replicas the request may use, the one with the fewest requests this client has outstanding
/// on it. Equal counts are broken at random, so idle replicas share the traffic.
#[derive(Debug, Default)]
pub(crate) struct LeastPending;

impl Picker for LeastPending {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        min_by_score(s, rng, |c| st.in_flight[c as usize] as f64)
    }
}
