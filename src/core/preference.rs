//! What the policy prefers now, whatever the load: each candidate's probability in the next
//! unrestricted draw if every candidate had a free slot.

use super::evaluate::{Detail, Evaluation};
use super::select::DrawSet;
use super::{CandidateId, Core};

impl Core {
    /// Each drawable candidate's probability of winning the next unrestricted draw **if every
    /// candidate had a free slot**: the evaluation [`Core::explain`] makes (scores, filters and
    /// their fallbacks, ejection and its all-ejected fallback), over every live candidate the
    /// strict price limit allows, at its limit or not. The probabilities sum to 1 when any
    /// candidate is listed. With A/B arms every request draws under its arm, so this is the
    /// arms' probabilities weighted by their shares: the chance that the next request, whatever
    /// its arm, goes to each candidate.
    ///
    /// Unlike [`Core::tree_probability`], it does not drop to 0 for a candidate at its
    /// in-flight limit, nor for every candidate when all are at their limits or all ejected
    /// (the draw then falls back to the ejected ones, and this says with what probabilities).
    /// The metrics' `selcoord_candidate_probability` gauge reads it. O(candidates) per arm;
    /// reads the scores as of the last refresh.
    pub fn preference(&self) -> Vec<(CandidateId, f64)> {
        let mut ev = Evaluation::default();
        ev.any_load = true;
        if self.arms.is_empty() {
            self.evaluate(DrawSet::ALL, &mut ev, Detail::Probabilities);
            return ev
                .keys
                .iter()
                .zip(&ev.probs)
                .map(|(&i, &p)| (self.fleet.infos[i as usize].id.clone(), p))
                .collect();
        }
        // Each slot's probability summed over the arms, and the slots in the order first met.
        let mut sum = vec![0.0f64; self.fleet.slots.len()];
        let mut listed = vec![false; self.fleet.slots.len()];
        let mut order = Vec::new();
        let scoring = self.scoring();
        for (arm, share) in self.arms.iter().zip(super::arms::shares(&self.arms)) {
            scoring.evaluate_with(
                arm.model.as_ref(),
                DrawSet::ALL,
                &mut ev,
                Detail::Probabilities,
            );
            for (&i, &p) in ev.keys.iter().zip(&ev.probs) {
                let i = i as usize;
                sum[i] += share * p;
                if !listed[i] {
                    listed[i] = true;
                    order.push(i);
                }
            }
        }
        order
            .into_iter()
            .map(|i| (self.fleet.infos[i].id.clone(), sum[i]))
            .collect()
    }
}
