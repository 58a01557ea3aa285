//! A read-only view of the parts scoring reads: the model, the limits, the clock, the fleet,
//! the pooled inputs and the attempts. A candidate's components, its score context, its leaf
//! values and an evaluated draw need only these, so they borrow them apart from the parts a
//! decision writes (the evaluation buffer, the requests, the shadows' tallies).

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::score::{FleetState, ScoreContext, StatsView};
use pool::Pool;

/// The parts scoring reads, borrowed together (see the [module docs](self)).
#[derive(Clone, Copy)]
pub(super) struct Scoring<'a> {
    pub(super) model: &'a ScoreModel,
    pub(super) limits: &'a Limits,
    pub(super) clock: &'a Clock,
    pub(super) fleet: &'a Fleet,
    pub(super) pool: &'a Pool,
    pub(super) attempts: &'a Attempts,
    /// The remote evidence, in a core that shares.
    pub(super) share: Option<&'a digest::ShareState>,
}

/// When a candidate is scored, which says whether one of its attempts in flight is the one
/// reporting (and so cannot be the one still running unreported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScoredAt {
    /// A refresh or a draw: every attempt in flight may still be running unreported.
    Rest,
    /// Its outcome: one attempt in flight is the one reporting now; only the others may run.
    Outcome,
}

impl Core {
    /// The parts scoring reads, borrowed together.
    #[inline]
    pub(super) fn scoring(&self) -> Scoring<'_> {
        Scoring {
            model: &self.model,
            limits: &self.limits,
            clock: &self.clock,
            fleet: &self.fleet,
            pool: &self.pool,
            attempts: &self.attempts,
            share: self.share.as_deref(),
        }
    }
}

impl Scoring<'_> {
    /// The limit in force: the lower of the static one and the learned one.
    #[inline]
    pub(crate) fn limit_of(&self, slot: &Slot) -> u32 {
        self.static_limit_of(slot).min(slot.adaptive_limit)
    }

    /// The static limit: the candidate's own `max_in_flight`, else `Limits::per_candidate`.
    #[inline]
    pub(crate) fn static_limit_of(&self, slot: &Slot) -> u32 {
        if slot.own_limit == 0 {
            self.limits.per_candidate
        } else {
            slot.own_limit
        }
    }

    /// Slot `idx`'s components: the learned ones as of its last full refresh, the rest as
    /// they stand. Zero for a removed candidate.
    #[inline]
    pub(crate) fn components_of(&self, idx: usize) -> Components {
        let s = &self.fleet.slots[idx];
        if !s.live {
            return Components::default();
        }
        let fleet = FleetState {
            stake_total: self.fleet.stake_total,
            probe_at_s: self.pool.at_s,
            probes: self.pool.probes,
            queueing: self.pool.queueing,
            load_scale: self.pool.load_scale,
            heal_at_s: self.pool.heal_at_s,
            queueing_powers: &self.pool.queueing_powers,
        };
        self.model.assemble(
            &s.learned,
            &s.fixed,
            s.in_flight,
            self.limit_of(s),
            &s.stats,
            &fleet,
            self.fleet.feedback.relative(idx, s.in_flight),
            self.queue_time(idx, s.in_flight + 1),
            self.overload_follows_load(idx),
            self.own_queueing(idx),
        )
    }

    /// The deadline advised on an attempt granted to slot `idx` if the attempt may be advised
    /// (`advise`; see `score::deadline`): from its first-byte average (in a core that shares,
    /// the one its score is computed from, with the remote evidence blended in), or the
    /// fleet's while it has none.
    #[inline]
    pub(crate) fn deadline_ms(&self, idx: usize, advise: bool) -> Option<f64> {
        if !advise {
            return None;
        }
        let stats = &self.fleet.slots[idx].stats;
        let own = match self.share {
            Some(_) => self
                .blended(idx, &stats.unpack())
                .and_then(|b| b.ttfb_ms)
                .or_else(|| stats.ttfb_ms()),
            None => stats.ttfb_ms(),
        };
        let ttfb = own.or(self.fleet.overall.ttfb_ms);
        self.model
            .attempt_deadline_ms(ttfb, self.deadline_multiple(), advise)
    }

    /// The deadline advice's multiple in force: as the last refresh worked it out, `factor`
    /// before the first.
    #[inline]
    pub(crate) fn deadline_multiple(&self) -> f64 {
        let m = self.pool.deadline_multiple;
        if m.is_finite() {
            m
        } else {
            self.model.config().deadline.factor
        }
    }

    /// Whether slot `idx`'s overload failures follow its load
    /// ([`crate::score::LoadFit::overload_follows_load`]); only tested where the answer can
    /// move the load component: the candidate has overload evidence, and the gate and a
    /// background share are on.
    #[inline]
    fn overload_follows_load(&self, idx: usize) -> bool {
        let stats = &self.fleet.slots[idx].stats;
        let load = &self.model.config().load;
        stats.overload_evidence() <= 0.0
            || load.gate <= 0.0
            || load.background_overload <= 0.0
            || self.fleet.load_fit[idx].overload_follows_load(stats.attempts())
    }

    /// The share of slot `idx`'s next attempt expected to be shed, read at the concurrency
    /// the grant would give it ([`crate::score::LoadFit::shed_at`]); 0 for a candidate whose
    /// overload failures do not follow its load.
    #[inline]
    pub(super) fn shed_next(&self, idx: usize) -> f64 {
        let slot = &self.fleet.slots[idx];
        let fit = &self.fleet.load_fit[idx];
        if !sheds_with_load(slot, fit) {
            return 0.0;
        }
        fit.shed_at(slot.in_flight.saturating_add(1)).unwrap_or(0.0)
    }

    /// Slot `idx`'s own queueing evidence ([`crate::score::LoadFit::evidence`]), read only
    /// where `load.own_queueing` can count it (the setting on and the fleet queueing); 0
    /// otherwise, which the load gate reads the same way, without touching the load fit.
    #[inline]
    fn own_queueing(&self, idx: usize) -> f32 {
        if self.model.config().load.own_queueing > 0.0 && self.pool.queueing > 0.0 {
            self.fleet.load_fit[idx].evidence()
        } else {
            0.0
        }
    }

    /// How much slower than its average slot `idx`'s next attempt is expected to be when it
    /// is granted at concurrency `next` ([`crate::score::LoadFit::time_factor`]); 1 when the
    /// fleet shows no queueing, where the factor is not used.
    #[inline]
    fn queue_time(&self, idx: usize, next: u32) -> f64 {
        if self.pool.queueing > 0.0 {
            self.fleet.load_fit[idx].time_factor(next)
        } else {
            1.0
        }
    }

    /// The inputs slot `idx` is scored with, `at` a refresh or its outcome.
    #[inline]
    pub(crate) fn score_context(&self, idx: usize, at: ScoredAt) -> ScoreContext {
        let slot = &self.fleet.slots[idx];
        // At an outcome the reporting attempt still counts in the in-flight number.
        let reporting = match at {
            ScoredAt::Rest => 0,
            ScoredAt::Outcome => 1,
        };
        ScoreContext {
            overall: self.pool.overall.unwrap_or(self.fleet.overall),
            now_s: self.clock.now_s,
            bucket: self.clock.bucket(),
            stake_total: self.fleet.stake_total,
            in_flight: slot.in_flight,
            limit: self.limit_of(slot),
            // Usually no other attempt of it runs: then there is nothing to look up.
            pending_ms: if slot.in_flight > reporting {
                self.pending_ms(idx)
            } else {
                0.0
            },
            spread: self.pool.spread,
            center: self.pool.center,
            probes: self.pool.probes,
            probe_at_s: self.pool.at_s,
            queueing: self.pool.queueing,
            load_scale: self.pool.load_scale,
            own_queueing: self.own_queueing(idx),
            overload_follows_load: self.overload_follows_load(idx),
            queue_time: self.queue_time(idx, slot.in_flight + 1 - reporting),
            heal_at_s: self.pool.heal_at_s,
        }
    }

    /// How long an attempt of slot `idx` has been running without a report, milliseconds; 0
    /// when none is known. The attempt is the oldest one as of the last full refresh; if it has
    /// reported since, or its slot now holds another attempt, that is checked here, so the
    /// value is always the age of an attempt of this candidate still running (or 0).
    pub(crate) fn pending_ms(&self, idx: usize) -> f64 {
        let pending = &self.fleet.oldest_pending;
        let Ok(at) = pending.binary_search_by_key(&(idx as u32), |&(slot, _)| slot) else {
            return 0.0;
        };
        let a = pending[at].1;
        let slot = &self.fleet.slots[idx];
        match self.attempts.get(a as usize) {
            Some(att)
                if att.active
                    && !att.reported
                    && !att.answered
                    && att.key.idx as usize == idx
                    && att.key.gen == slot.gen =>
            {
                (self.clock.now_s - att.granted_s).max(0.0) * 1000.0
            }
            _ => 0.0,
        }
    }

    /// The value leaf `idx` of channel `c` should hold now.
    #[inline]
    pub(crate) fn leaf_value(&self, c: usize, idx: usize) -> f64 {
        let slot = &self.fleet.slots[idx];
        if !slot.in_tree {
            0.0
        } else if c == self.model.uniform_channel() {
            1.0
        } else {
            self.model
                .channel_value(self.model.channels()[c].kind, &self.components_of(idx))
        }
    }
}

/// Whether a live candidate's overload failures follow its load: it has overload evidence, and
/// its sheds came at a higher concurrency than its attempts
/// ([`crate::score::LoadFit::overload_follows_load`]).
#[inline]
pub(super) fn sheds_with_load(slot: &Slot, fit: &crate::score::LoadFit) -> bool {
    slot.live
        && slot.stats.overload_evidence() > 0.0
        && fit.overload_follows_load(slot.stats.attempts())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use crate::core::{Core, Event};
    use crate::{AttemptId, CandidateInfo, Config, Outcome, Request};

    /// Grants one attempt on `id` at `at` and returns its attempt id.
    fn grant(core: &mut Core, id: &str, at: Instant, rng: &mut SmallRng) -> AttemptId {
        core.ready(Request::only([id]), at, rng).unwrap();
        let granted = std::iter::from_fn(|| core.poll_event()).find_map(|e| match e {
            Event::Granted(g) => Some(g),
            _ => None,
        });
        let g = granted.expect("an idle candidate grants at once");
        assert_eq!(g.candidate.as_str(), id);
        g.attempt
    }

    fn pending_s(core: &Core, id: &str) -> f64 {
        let idx = core.fleet.index_of(&id.into()).unwrap() as usize;
        core.scoring().pending_ms(idx) / 1000.0
    }

    #[test]
    fn pending_is_the_oldest_unreported_attempt_of_each_candidate() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut core = Core::new(Config::default(), t0).unwrap();
        for id in ["a", "b", "c"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        // "a" runs two attempts (granted at 0 s and 1 s), "b" one (2 s), "c" none.
        let a_first = grant(&mut core, "a", at(0), &mut rng);
        grant(&mut core, "a", at(1), &mut rng);
        grant(&mut core, "b", at(2), &mut rng);
        core.advance(at(5));
        core.refresh_all();
        assert_eq!(pending_s(&core, "a"), 5.0);
        assert_eq!(pending_s(&core, "b"), 3.0);
        assert_eq!(pending_s(&core, "c"), 0.0);

        // The oldest reports: until the next full refresh nothing is claimed for "a" (the
        // attempt found is checked, not trusted); after it, the other attempt is found.
        core.outcome(a_first, Outcome::success(), at(5)).unwrap();
        assert_eq!(pending_s(&core, "a"), 0.0);
        core.advance(at(6));
        core.refresh_all();
        assert_eq!(pending_s(&core, "a"), 5.0);
        assert_eq!(pending_s(&core, "b"), 4.0);
    }
}
