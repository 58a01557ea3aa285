//! Waiting for a candidate worth it: the one exception to granting at once.
//!
//! A draw picks among the free candidates (those below their in-flight limits). When every
//! free candidate has weight 0 in the score channel its roll falls in, the draw used to fall
//! back to a uniform pick among them. Weight 0 is what a hopeless candidate gets: the time
//! factor (`time_exponent`) underflows to 0 for one whose expected time to a success is
//! dozens of times the fleet's mean attempt time, and the time component is 0 for one that
//! failed its last twenty attempts without ever answering, as a server that refuses every
//! connection does. So a dead server failing in a fraction of a millisecond took every request
//! that arrived while the good servers sat at their limits: the faster it failed, the more it
//! drew. Such a roll now waits instead, as long as a candidate the request may use *with*
//! weight is busy at its limit: its attempts in flight end (or their lease does), and each
//! release pumps the queue again, so the request is served at the next free slot worth it.
//! The floor's share of each draw is still spent uniformly over the free candidates, so a
//! hopeless candidate keeps its exploration and can come back.
//!
//! No request waits on another request: a roll waits only on a candidate's attempts in
//! flight, whose end is an event of the core, and a candidate whose attempts stop ending loses
//! its weight to the censored time of those attempts (`weights.time_to_success`), which ends
//! the wait at a refresh.

use super::evaluate::{Detail, Evaluation};
use super::scoring::{ScoredAt, Scoring};
use super::select::DrawSet;
use super::slots::Fleet;
use crate::score::ScoreModel;

impl Scoring<'_> {
    /// Whether a candidate of `set` that is busy at its in-flight limit (with attempts in
    /// flight, and passing every filter a free one would have to) has weight in one of
    /// `channels` under `model` (the core's own when `None`). O(candidates in reach), and
    /// only called when a roll found no weight among the free ones.
    #[cold]
    #[inline(never)]
    pub(crate) fn busy_with_weight(
        &self,
        set: DrawSet<'_>,
        model: Option<&ScoreModel>,
        channels: &[usize],
    ) -> bool {
        let fleet = self.fleet;
        // Every usable candidate is free: none is busy.
        if channels.is_empty() || fleet.avail >= fleet.usable_count {
            return false;
        }
        let m = model.unwrap_or(self.model);
        let kinds = m.channels();
        fleet.in_reach(set).any(|(i, s)| {
            // Busy at its limit with attempts to end, and drawable once one does.
            let busy = s.usable && !s.available && s.in_flight > 0;
            let passes = s.perf_ok && s.price_ok && !s.ejected;
            if !busy
                || !passes
                || Fleet::excluded(set.exclude, i, s.gen)
                || !fleet.caps_ok(i, set.caps)
            {
                return false;
            }
            let idx = i as usize;
            let comps = match model {
                Some(m) => m.components(
                    &m.fixed(&fleet.infos[idx]),
                    &s.stats.unpack(),
                    &self.score_context(idx, ScoredAt::Rest),
                ),
                None => self.components_of(idx),
            };
            channels.iter().any(|&c| {
                kinds
                    .get(c)
                    .is_some_and(|ch| m.channel_value(ch.kind, &comps) > 0.0)
            })
        })
    }

    /// Whether a request drawing from `set` may wait although a candidate is free: the free
    /// ones have no weight in some score channel while a busy one has (see the module docs).
    /// For the no-stuck-request check ([`super::Core::any_servable_waiting`]).
    pub(crate) fn may_wait(&self, set: DrawSet<'_>, ev: &mut Evaluation) -> bool {
        self.evaluate_with(None, set, ev, Detail::Probabilities);
        !ev.keys.is_empty()
            && ev.empty > 0.0
            && self.busy_with_weight(set, None, &ev.empty_channels)
    }
}
