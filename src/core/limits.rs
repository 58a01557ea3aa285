//! The core's adaptive limits: one [`Estimator`] per candidate slot, fed from the outcomes the
//! core sees, and the learned limit written into the slot, where [`Core::limit_of`] takes the
//! lower of it and the static limit.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::limit::{AdaptiveConfig, Estimator, LimitSnapshot, Sample, Signal};

/// A request is granted only with at least this many of the drawn candidate's no-load
/// latencies left before its deadline (see [`Core::limit_deadline_too_close`]). The same
/// number of no-load latencies that an attempt must run for its timeout to count as
/// back-pressure.
pub(super) const DEADLINE_NO_LOADS: f64 = crate::limit::TIMEOUT_PRESSURE;

/// Per-slot adaptive state, empty while adaptive limits are off.
#[derive(Debug, Default)]
pub(super) struct Adaptive {
    /// Per slot; `None` for a slot never used while adaptive limits were on.
    estimators: Vec<Option<Estimator>>,
    /// Per slot: grants that filled the candidate up to its learned limit while its static
    /// limit would have taken more (each one makes later requests wait for it).
    limited: Vec<u64>,
}

impl Adaptive {
    /// Every estimator skips a pause of the driver ([`Core::driver_paused`]).
    pub(super) fn skip_pause(&mut self, by_s: f64, now_s: f64) {
        for e in self.estimators.iter_mut().flatten() {
            e.skip_pause(by_s, now_s);
        }
    }
}

/// What an outcome tells the estimator.
fn signal_of(outcome: &Outcome, elapsed_ms: Option<f64>) -> Signal {
    match outcome {
        Outcome::Success(s) => match s.ttfb_ms.or(elapsed_ms) {
            Some(ms) => Signal::Success(ms),
            None => Signal::Other,
        },
        Outcome::Failure(FailureClass::Overload) => Signal::Overload,
        Outcome::Failure(FailureClass::Timeout) => Signal::Timeout,
        Outcome::Failure(_) => Signal::Other,
    }
}

impl Core {
    fn adaptive_config(&self) -> &AdaptiveConfig {
        &self.model.config().adaptive
    }

    /// The learned limit slot `idx` starts with ([`UNLIMITED`] while adaptive limits are off),
    /// and a fresh estimator for it.
    pub(super) fn limit_added(&mut self, idx: usize) {
        let cfg = &self.model.config().adaptive;
        let a = &mut self.adaptive;
        if !cfg.enabled {
            // Off: nothing per slot is kept (a reused slot forgets what it had).
            if let Some(e) = a.estimators.get_mut(idx) {
                *e = None;
                a.limited[idx] = 0;
            }
            self.fleet.slots[idx].adaptive_limit = UNLIMITED;
            return;
        }
        let n = self.fleet.slots.len();
        if a.estimators.len() < n {
            a.estimators.resize(n, None);
            a.limited.resize(n, 0);
        }
        a.limited[idx] = 0;
        let e = Estimator::new(cfg, self.clock.now_s);
        self.fleet.slots[idx].adaptive_limit = e.limit();
        a.estimators[idx] = Some(e);
    }

    /// Feeds the outcome of attempt `att` (on a slot still of its generation) to the slot's
    /// estimator and writes a changed limit into the slot; the caller's refresh of the slot
    /// follows.
    pub(super) fn limit_observe(
        &mut self,
        att: &AttemptSlot,
        outcome: &Outcome,
        elapsed_ms: Option<f64>,
    ) {
        let cfg = &self.model.config().adaptive;
        if !cfg.enabled {
            return;
        }
        let idx = att.key.idx as usize;
        let Some(Some(e)) = self.adaptive.estimators.get_mut(idx) else {
            return;
        };
        let mut signal = signal_of(outcome, elapsed_ms);
        // An overload failure that does not follow the candidate's load (its sheds come at no
        // higher concurrency than its other attempts: a quota's steady trickle of 503s) says
        // nothing about its capacity; cutting at each would hold it at one attempt in flight.
        if signal == Signal::Overload {
            let outcomes = self.fleet.slots[idx].stats.attempts() + 1;
            if !self.fleet.load_fit[idx].overload_follows_load(outcomes) {
                signal = Signal::Other;
            }
        }
        let sample = Sample {
            signal,
            concurrency: att.concurrency,
            limit: att.limit,
            granted_s: att.granted_s,
        };
        if e.observe(cfg, sample, self.clock.now_s) {
            let learned = e.limit();
            let slot = &mut self.fleet.slots[idx];
            // An outcome grants nothing (it takes no random source), so a raise that would
            // free a place on a full candidate waits for the next release of one of its
            // attempts ([`Core::limit_released`]), where the queue is served: a waiting
            // request never sits behind a limit that already has room. Cuts, and raises on
            // a candidate with room already, count at once.
            if learned <= slot.adaptive_limit || slot.in_flight < slot.adaptive_limit {
                slot.adaptive_limit = learned;
            }
        }
    }

    /// Before an attempt's release on slot `idx` is scored: the learned limit in force is
    /// the estimator's again (a raise held back by [`Core::limit_observe`]).
    #[inline]
    pub(super) fn limit_released(&mut self, idx: usize) {
        if let Some(Some(e)) = self.adaptive.estimators.get(idx) {
            self.fleet.slots[idx].adaptive_limit = e.limit();
        }
    }

    /// Whether request `req`, about to be granted on slot `cidx`, has too little of its
    /// deadline left to be served there: less than [`DEADLINE_NO_LOADS`] of the slot's learned
    /// no-load latencies. Always false while adaptive limits are off, for a request without a
    /// deadline, and for a candidate without a latency estimate yet.
    ///
    /// Under overload the oldest waiting request is the one with the least time left; granted,
    /// it would time out after its grant while the candidate keeps serving it, and no attempt
    /// would ever succeed again (a limit learns nothing from such timeouts). Rejecting it
    /// serves the next one, which can still make it.
    #[inline]
    pub(super) fn limit_deadline_too_close(&self, req: u32, cidx: usize, now_ns: u64) -> bool {
        let deadline_ns = self.requests[req as usize].deadline_ns;
        if deadline_ns == NO_DEADLINE || !self.adaptive_config().enabled {
            return false;
        }
        let Some(Some(e)) = self.adaptive.estimators.get(cidx) else {
            return false;
        };
        let Some(no_load_ms) = e.no_load_ms() else {
            return false;
        };
        let left_ms = deadline_ns.saturating_sub(now_ns) as f64 / 1e6;
        // A request that waited less than half its whole deadline is always granted: an
        // estimate too high would otherwise refuse every request, and nothing would correct it.
        let r = &self.requests[req as usize];
        let budget_ms = left_ms + (self.clock.now_s - r.arrival_s).max(0.0) * 1000.0;
        left_ms < (DEADLINE_NO_LOADS * no_load_ms).min(budget_ms / 2.0)
    }

    /// After a grant on slot `idx`: tells its estimator, and counts the grant when the learned
    /// limit, not the static one, now stops further grants.
    #[inline]
    pub(super) fn limit_granted(&mut self, idx: usize) {
        let s = &self.fleet.slots[idx];
        if s.adaptive_limit == UNLIMITED {
            return; // adaptive limits are off
        }
        let (in_flight, learned) = (s.in_flight, s.adaptive_limit);
        let full = in_flight >= learned && learned < self.static_limit_of(s);
        let cfg = &self.model.config().adaptive;
        if let Some(Some(e)) = self.adaptive.estimators.get_mut(idx) {
            if e.granted(cfg, in_flight, self.clock.now_s) {
                // A probe's grant: the limit in force is the learned one again.
                self.fleet.slots[idx].adaptive_limit = e.limit();
            }
        }
        if full {
            if let Some(c) = self.adaptive.limited.get_mut(idx) {
                *c += 1;
            }
        }
    }

    /// After a config change: starts, stops or re-bounds the estimators and rewrites every
    /// slot's learned limit (the caller refreshes every slot after).
    pub(super) fn limits_reconfigured(&mut self) {
        let cfg = self.adaptive_config().clone();
        let n = if cfg.enabled {
            self.fleet.slots.len()
        } else {
            0
        };
        let now_s = self.clock.now_s;
        let a = &mut self.adaptive;
        a.estimators.resize(n, None);
        a.limited.resize(n, 0);
        a.estimators.shrink_to_fit();
        a.limited.shrink_to_fit();
        if !cfg.enabled {
            for slot in &mut self.fleet.slots {
                slot.adaptive_limit = UNLIMITED;
            }
            return;
        }
        for idx in 0..n {
            let e = &mut a.estimators[idx];
            if !cfg.enabled {
                *e = None;
            } else if let Some(e) = e {
                e.clamp(&cfg);
            } else {
                *e = Some(Estimator::new(&cfg, now_s));
            }
            self.fleet.slots[idx].adaptive_limit = e.as_ref().map_or(UNLIMITED, Estimator::limit);
        }
    }

    /// Slot `idx`'s estimator state (`None` while adaptive limits are off).
    pub(super) fn limit_state(&self, idx: usize) -> Option<LimitSnapshot> {
        self.adaptive
            .estimators
            .get(idx)?
            .as_ref()
            .map(Estimator::snapshot)
    }

    /// Restores slot `idx`'s estimator from a snapshot (ignored while adaptive limits are off).
    pub(super) fn limit_restore(&mut self, idx: usize, saved: &LimitSnapshot) {
        let cfg = &self.model.config().adaptive;
        if !cfg.enabled {
            return;
        }
        if let Some(e) = self.adaptive.estimators.get_mut(idx) {
            let restored = Estimator::restore(cfg, saved, self.clock.now_s);
            self.fleet.slots[idx].adaptive_limit = restored.limit();
            *e = Some(restored);
        }
    }

    /// A candidate's in-flight limit in force now (the lower of the static and the learned
    /// one): `None` for unlimited or an unknown id. Cheaper than [`Core::candidate`].
    pub fn candidate_limit(&self, id: &CandidateId) -> Option<u32> {
        let idx = self.fleet.index_of(id)? as usize;
        let limit = self.limit_of(&self.fleet.slots[idx]);
        (limit != UNLIMITED).then_some(limit)
    }

    /// Grants to slot `idx` that filled it up to its learned limit (see [`Adaptive`]).
    pub(super) fn limited_count(&self, idx: usize) -> u64 {
        self.adaptive.limited.get(idx).copied().unwrap_or(0)
    }
}
