//! Granting: the single oldest-servable pump and the booking of one grant.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::decision::ConsideredCandidate;
use arms::ShadowState;
use attempt_slots::NewAttempt;
use queue::WakeOn;
use select::{DrawMode, DrawPath, Drawer, Pick};

/// What [`Core::grant_one`] did with a waiting request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Granting {
    /// Granted an attempt, or rejected.
    Answered,
    /// Left waiting for a busy candidate with weight (`hold`).
    Waits,
    /// Nothing could be drawn (which the servability check rules out; a guard against
    /// looping).
    Nothing,
}

/// A request needing capabilities that more candidates than this have is parked to wake on
/// any candidate's capacity rather than listed under each.
const PARK_SLOTS: usize = 256;

impl Core {
    /// Grants until nothing more can be granted.
    pub(super) fn pump<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.refresh_due();
        // Within one pump capacity only shrinks, so a general request found unservable stays
        // unservable: the scan resumes after it instead of restarting.
        let mut cursor: Option<u64> = None;
        // The plain requests all draw from the same set: once the oldest waits for a busy
        // candidate (`hold`), the others are left for the next pump.
        let mut plain_wait = false;
        // Entries of requests that left are removed lazily: all at once when nothing waits,
        // else once they outnumber the waiting ones.
        self.queue.clear_stale(&self.requests);
        loop {
            if self.queue.len() == 0 {
                break;
            }
            if self.attempts.in_flight() >= self.limits.global || self.fleet.avail == 0 {
                break;
            }
            let fast = if plain_wait {
                None
            } else {
                self.queue.fast_head(&self.requests)
            };
            let bound = fast.map(|(s, _)| s).unwrap_or(u64::MAX);
            let start = cursor.map(|c| c + 1).unwrap_or(0);
            let mut chosen = None;
            let mut skipped = false;
            for (seq, idx) in self.queue.general(start, bound) {
                if self.fleet.servable(self.requests[idx as usize].set()) {
                    chosen = Some((seq, idx));
                    break;
                }
                skipped = true;
                cursor = Some(seq);
            }
            // The requests found unservable are parked, out of later scans (see `queue`).
            if let (true, Some(last)) = (skipped, cursor) {
                self.park_range(start, last);
            }
            let (seq, idx, plain) = match (chosen, fast) {
                (Some((seq, idx)), _) => (seq, idx, false),
                (None, Some((seq, idx))) => (seq, idx, true),
                (None, None) => break,
            };
            let wakes = self.queue.wakes();
            match self.grant_one(idx, rng) {
                Granting::Answered => {}
                Granting::Nothing => break,
                // It stays where it is, first in line at the next pump; the scan goes on
                // past it.
                Granting::Waits if plain => plain_wait = true,
                Granting::Waits => {
                    cursor = Some(seq);
                    continue;
                }
            }
            // Capacity only shrinks within a pump, but should a grant's refresh have woken a
            // parked request, the scan starts over so it is not passed by.
            if self.queue.wakes() != wakes {
                cursor = None;
            }
        }
    }

    /// Parks the waiting requests of the general queue from sequence `from` to `last`, all
    /// found unservable by the scan that just passed them.
    #[cold]
    #[inline(never)]
    fn park_range(&mut self, from: u64, last: u64) {
        let skipped: Vec<u32> = self
            .queue
            .general(from, last.saturating_add(1))
            .map(|(_, idx)| idx)
            .collect();
        for idx in skipped {
            self.park(idx);
        }
    }

    /// Parks waiting request `idx`, found unservable, under the candidates that could serve
    /// it: those it names, or those with its capabilities; any candidate when it names none
    /// (or when more than [`PARK_SLOTS`] candidates have its capabilities).
    #[cold]
    fn park(&mut self, idx: u32) {
        let set = self.requests[idx as usize].set();
        let fleet = &self.fleet;
        let named = set.eligible.is_some();
        let mut slots = Vec::new();
        if named || !set.caps.is_empty() {
            for (i, s) in fleet.in_reach(set) {
                if s.live && !Fleet::excluded(set.exclude, i, s.gen) && fleet.caps_ok(i, set.caps) {
                    slots.push(i);
                    if !named && slots.len() > PARK_SLOTS {
                        slots.clear();
                        break;
                    }
                }
            }
        }
        let on = if slots.is_empty() {
            WakeOn::Any
        } else {
            WakeOn::Slots(&slots)
        };
        self.queue.park(&mut self.requests[idx as usize], idx, on);
    }

    /// Grants one attempt to request `idx`, or answers it otherwise (a rejection), or leaves it
    /// waiting for a busy candidate with weight (`hold`).
    pub(super) fn grant_one<R: Rng + ?Sized>(&mut self, idx: u32, rng: &mut R) -> Granting {
        let now_ns = self.clock.now_ns;
        if self.requests[idx as usize].deadline_ns <= now_ns {
            self.reject(idx, Rejection::DeadlinePassed);
            return Granting::Answered;
        }
        let record = self.out.sample_record();
        let arm = (!self.arms.is_empty()).then_some(self.requests[idx as usize].arm as usize);
        let shadows = if self.shadows.is_empty() {
            0
        } else {
            self.sample_shadows()
        };
        // Shadows replay the live draw's roll over the same set, so the live draw is evaluated.
        let mode = if record {
            DrawMode::Record
        } else if shadows != 0 {
            DrawMode::Evaluate
        } else {
            DrawMode::Fast
        };
        // The request's draw set is read in place while the draw writes the fleet and the
        // evaluation buffer: the parts are borrowed apart.
        let Core {
            model,
            limits,
            clock,
            fleet,
            requests,
            attempts,
            eval,
            arms,
            shadows: shadow_states,
            pool,
            share,
            ..
        } = self;
        let set = requests[idx as usize].set();
        let mut drawer = Drawer {
            fleet,
            eval,
            model,
            limits,
            clock,
            pool,
            attempts,
            arms,
            share: share.as_deref(),
        };
        let drawn = match drawer.draw(set, rng, mode, arm) {
            Some(Pick::Drawn(d, path)) => Some((d, path)),
            Some(Pick::Wait) => {
                self.out.counters.waited_for_weight += 1;
                return Granting::Waits;
            }
            None => None,
        };
        let verdicts = match drawn {
            Some((d, _)) if shadows != 0 => ShadowState::judge_shadows(
                shadow_states,
                drawer.scoring(),
                set,
                d.idx,
                d.roll,
                shadows,
            ),
            _ => Vec::new(),
        };
        let Some((d, path)) = drawn else {
            return Granting::Nothing;
        };
        // Book the slot.
        let cidx = d.idx as usize;
        if self.limit_deadline_too_close(idx, cidx, now_ns) {
            self.reject(idx, Rejection::DeadlineTooClose);
            return Granting::Answered;
        }
        // Plain loads of the winner's id bytes, slot lines and load fit first: on a fleet
        // larger than the cache they all miss, and issued together the misses overlap, where
        // the id's locked reference-count increment below, and the outcome's statistics and
        // fit updates later, would otherwise take them one after another.
        std::hint::black_box((
            self.fleet.infos[cidx]
                .id
                .as_str()
                .as_bytes()
                .first()
                .copied(),
            self.fleet.slots[cidx].touch(),
            self.fleet.load_fit[cidx].evidence(),
        ));
        let key = Key {
            idx: d.idx,
            gen: self.fleet.slots[cidx].gen,
        };
        // A record lists the candidates as the draw saw them: before the grant moves the
        // winner's load and limit.
        let considered = (record && path == DrawPath::Evaluated).then(|| self.considered(arm));
        let attempt = self.book(
            key,
            idx,
            (!self.arms.is_empty()).then_some(self.requests[idx as usize].arm),
        );
        let r = &mut self.requests[idx as usize];
        r.pending -= 1;
        r.in_flight += 1;
        if r.attempts_left != NO_BUDGET {
            r.attempts_left = r.attempts_left.saturating_sub(1);
        }
        // Advice on the request's only attempt in flight, unless one of its attempts timed
        // out already or this is its last (see `score::deadline`).
        let advise = r.in_flight == 1 && !r.timed_out && r.attempts_left != 0;
        let request = RequestId::new(idx, r.gen);
        let waited_s = self.clock.now_s - r.arrival_s;
        let more = r.pending > 0;
        if more {
            // Parallel attempts go to different candidates.
            r.extras.get_or_insert_with(Default::default).exclude(
                Some(key),
                &self.fleet.infos[cidx].id,
                &mut self.excluding,
            );
            self.queue.move_to_general(r, idx);
        } else {
            self.drop_pending(idx);
        }
        self.out.counters.decisions += 1;
        if path == DrawPath::Tree {
            self.out.counters.tree_decisions += 1;
        }
        let reason_ix = DecisionReason::ALL
            .iter()
            .position(|x| *x == d.reason)
            .unwrap_or(0);
        self.out.counters.by_reason[reason_ix] += 1;
        let candidate = self.fleet.infos[cidx].id.clone();
        let deadline_ms = self.scoring().deadline_ms(cidx, advise);
        if let Some(ms) = deadline_ms {
            self.attempts.advise(attempt.index(), ms);
        }
        if let Some(considered) = considered {
            self.push_record(request, attempt, &d, arm, considered, verdicts);
        }
        self.out.push(Event::Granted(Grant {
            request,
            attempt,
            candidate,
            probability: d.probability,
            reason: d.reason,
            waited_s,
            arm,
            deadline_ms,
        }));
        // Its other asks may have no candidate left that it does not run on already: they
        // are refused now, as a retry with none left is, rather than waiting for good.
        if more && !self.fleet.has_eligible(self.requests[idx as usize].set()) {
            self.reject(idx, Rejection::NoEligibleCandidate);
        }
        Granting::Answered
    }

    /// Books an attempt of request `request` on the candidate `key` names: its slot, the
    /// candidate's count in flight and its limit's estimator.
    #[inline]
    pub(super) fn book(&mut self, key: Key, request: u32, arm: Option<u8>) -> AttemptId {
        let cidx = key.idx as usize;
        self.fleet.slots[cidx].in_flight += 1;
        self.limit_granted(cidx);
        self.refresh_load(cidx);
        self.attempts.start(NewAttempt {
            key,
            request,
            concurrency: self.fleet.slots[cidx].in_flight,
            limit: self.limit_of(&self.fleet.slots[cidx]),
            granted_s: self.clock.now_s,
            arm,
        })
    }

    /// The candidates of the evaluated draw just made, for its record (under `arm`'s model
    /// if it has one). Out of line and marked cold, as [`Core::push_record`].
    #[cold]
    #[inline(never)]
    fn considered(&self, arm: Option<usize>) -> Vec<ConsideredCandidate> {
        self.scoring().considered_with(
            arm.and_then(|a| self.arms.get(a)?.model.as_ref()),
            &self.eval,
        )
    }

    /// Builds and queues the record of an evaluated decision. Out of line and marked cold:
    /// records are sampled, and keeping their construction out of the grant path keeps that
    /// path's code as compact as in a build without records.
    #[cold]
    #[inline(never)]
    pub(super) fn push_record(
        &mut self,
        request: RequestId,
        attempt: AttemptId,
        d: &Drawn,
        arm: Option<usize>,
        candidates: Vec<ConsideredCandidate>,
        shadows: Vec<ShadowVerdict>,
    ) {
        let record = DecisionRecord {
            time_s: self.clock.now_s,
            request,
            attempt: Some(attempt),
            reason: d.reason,
            candidates,
            filters: self.eval.filters.clone(),
            fallbacks: self.eval.fallbacks.clone(),
            roll: d.roll,
            winner: Some(self.fleet.infos[d.idx as usize].id.clone()),
            winner_probability: d.probability,
            arm: arm.and_then(|a| self.arms.get(a)).map(|a| a.name.clone()),
            shadows,
        };
        self.out.push_record(record);
    }
}
