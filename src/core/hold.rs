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
//! A roll of the weights that picks a candidate failing past hope (its last twenty attempts
//! failed, not by shedding) waits the same way: a server that crashed after serving keeps a
//! weight that is small but not 0, and would otherwise take every request arriving while the
//! others are at their limits. The floor's share of the draw still probes it.
//!
//! No request waits on another request: a roll waits only on a candidate's attempts in
//! flight, whose end is an event of the core, and a candidate whose attempts stop ending loses
//! its weight to the censored time of those attempts (`weights.time_to_success`), which ends
//! the wait at a refresh.

use super::evaluate::{Detail, Evaluation};
use super::scoring::{ScoredAt, Scoring};
use super::select::DrawSet;
use super::slots::{Fleet, Slot};
use crate::score::{ScoreModel, StatsView, HOPELESS_FAILURES};

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
            let busy = s.usable && !s.available && s.in_flight > 0 && !self.slot_past_hope(s);
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
    /// ones have no weight in some score channel, or one of them is failing past hope, while a
    /// busy one has weight (see the module docs). For the no-stuck-request check
    /// ([`super::Core::any_servable_waiting`]).
    pub(crate) fn may_wait(&self, set: DrawSet<'_>, ev: &mut Evaluation) -> bool {
        self.evaluate_with(None, set, ev, Detail::Probabilities);
        if ev.keys.is_empty() {
            return false;
        }
        (ev.empty > 0.0 && self.busy_with_weight(set, None, &ev.empty_channels))
            || (ev.keys.iter().any(|&k| self.past_hope(k as usize))
                && self.busy_with_weight(set, None, &self.score_channels(None)))
    }

    /// Whether the candidate at `idx` is failing past hope: its last
    /// [`HOPELESS_FAILURES`] attempts failed, and not by shedding. A roll of the weights that
    /// picks it waits for a busy candidate with weight, as a roll that finds no weight does.
    #[inline]
    pub(crate) fn past_hope(&self, idx: usize) -> bool {
        self.fleet
            .slots
            .get(idx)
            .is_some_and(|s| self.slot_past_hope(s))
    }

    /// [`Scoring::past_hope`] of a slot. A server answering `overload` (a 503 past its
    /// capacity) is alive and full, not dead: where the overload window holds as many
    /// overload failures as the streak needs, the streak may be its sheds, which the load and
    /// overload components and the limits answer, and waiting for busy servers instead only
    /// lengthens the tail (`hidden-capacity`'s p99, docs/tuning.md).
    #[inline]
    fn slot_past_hope(&self, s: &Slot) -> bool {
        s.stats.consecutive_failures() >= HOPELESS_FAILURES && {
            let buckets = self.model.config().window.buckets as usize;
            let (overloads, _) = s.stats.window().counts(self.clock.bucket(), buckets);
            overloads < HOPELESS_FAILURES
        }
    }

    /// The score channels of `model` (the core's own when `None`) with mass: every one but
    /// the floor's.
    #[cold]
    pub(crate) fn score_channels(&self, model: Option<&ScoreModel>) -> Vec<usize> {
        let m = model.unwrap_or(self.model);
        let uniform = m.uniform_channel();
        (0..m.channels().len())
            .filter(|&c| c != uniform && m.channels()[c].mass > 0.0)
            .collect()
    }

    /// Each candidate's share of a draw over `n` that the floor spreads evenly: the floor's
    /// probe of it.
    #[cold]
    pub(crate) fn floor_share(&self, model: Option<&ScoreModel>, n: usize) -> f64 {
        let m = model.unwrap_or(self.model);
        m.channels()[m.uniform_channel()].mass / n.max(1) as f64
    }
}
