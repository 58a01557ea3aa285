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
    /// candidate is listed.
    ///
    /// Unlike [`Core::tree_probability`], it does not drop to 0 for a candidate at its
    /// in-flight limit, nor for every candidate when all are at their limits or all ejected
    /// (the draw then falls back to the ejected ones, and this says with what probabilities).
    /// The metrics' `selcoord_candidate_probability` gauge reads it. O(candidates); reads
    /// the scores as of the last refresh.
    pub fn preference(&self) -> Vec<(CandidateId, f64)> {
        let mut ev = Evaluation::default();
        ev.any_load = true;
        self.evaluate(DrawSet::ALL, &mut ev, Detail::Probabilities);
        ev.keys
            .iter()
            .zip(&ev.probs)
            .map(|(&i, &p)| (self.fleet.infos[i as usize].id.clone(), p))
            .collect()
    }
}
