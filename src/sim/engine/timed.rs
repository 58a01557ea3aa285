//! What happens at set times: the caller's deadline, the policy's timed decisions (waiting
//! deadlines, lease ends) and the attempts a lease reclaimed.

use super::{Engine, Ev, Req, NO_ATT};
use crate::core::{FailureClass, Outcome};
use crate::sim::events::round_ns;
use crate::sim::policy::World;

impl Engine<'_> {
    /// Pushes a `Timed` wake-up at the policy's next timed decision unless one at or before it
    /// is pending: the actor's one timer, armed at `Core::next_wakeup` and re-read after every
    /// call. Only the waiting deadlines and lease ends are woken for; the periodic refresh
    /// comes with the next call or tick.
    pub(super) fn arm_timed(&mut self, now: f64) {
        let Some(t) = self.policy.next_wakeup_s() else {
            return;
        };
        // Never at an instant already run: a tick there found nothing more due.
        let ns = round_ns(t * 1e9).max(round_ns(now * 1e9) + 1);
        if self.timed_ns.is_some_and(|armed| armed <= ns) {
            return;
        }
        self.timed_ns = Some(ns);
        self.seq += 1;
        self.heap.push(ns, self.seq, Ev::Timed);
    }

    /// A `Timed` wake-up at `ns`: the policy is ticked if its timed decision is due (an
    /// earlier wake-up pushed since may have handled it).
    pub(super) fn timed(&mut self, ns: u64, now: f64) {
        if self.timed_ns == Some(ns) {
            self.timed_ns = None;
        }
        let due = self
            .policy
            .next_wakeup_s()
            .is_some_and(|t| round_ns(t * 1e9) <= ns);
        if due {
            let world = world!(self, now);
            self.policy.tick(now, &world);
        }
    }

    /// Frees attempt slot `a`, which ends or its worker abandons at `now`: it no longer loads
    /// its candidate, and events of it still to come are stale.
    pub(super) fn abandon(&mut self, a: u32, now: f64) {
        self.free_atts.push(a);
        self.att_gen[a as usize] = self.att_gen[a as usize].wrapping_add(1);
        let att = self.atts[a as usize];
        self.load[att.cand as usize] -= 1;
        self.stats.attempt_end(now);
        self.reqs[att.req as usize].att = NO_ATT;
    }

    /// Whether attempt slot `a` has answered its caller by `now`: a success whose first byte
    /// came (the rest of the transfer follows). Compared on the event clock (whole ns), so a
    /// first byte due at the very instant of the caller's deadline is an answer whatever the
    /// rounding of the two sums.
    fn answered(&self, a: u32, now: f64) -> bool {
        let att = &self.atts[a as usize];
        !att.queued
            && att.result.ok
            && round_ns((att.granted + att.result.first_byte_s) * 1e9) <= round_ns(now * 1e9)
    }

    /// The caller of request slot `req` (generation `gen`) gives up: the request fails now. Its
    /// running attempt, if any, ends for the policy as a `timeout` (a server serving it does
    /// not know and finishes it). A request waiting for a grant is cancelled in the policy at
    /// once, as the actor's `acquire` cancels when its caller drops it; its slot is reused
    /// once the policy has answered it.
    pub(super) fn deadline(&mut self, req: Req, gen: u32, now: f64) {
        if self.req_gen[req as usize] != gen || !self.reqs[req as usize].open {
            return;
        }
        let a = self.reqs[req as usize].att;
        if a == NO_ATT {
            self.reqs[req as usize].expired = true;
            self.finish_request(req, None, now);
            self.policy.cancel(req, now);
            return;
        }
        if self.answered(a, now) {
            // Its first byte came in time: the caller has its answer.
            return;
        }
        let cand = self.atts[a as usize].cand;
        self.abandon(a, now);
        if !self.caller.drops_timeouts() {
            let timeout = Outcome::failure(FailureClass::Timeout);
            self.policy.outcome(req, cand, &timeout, now);
        }
        let world = world!(self, now);
        self.policy.done(req, cand, false, now, &world);
        self.sample_limit(cand as usize, now);
        self.finish_request(req, None, now);
    }

    /// The policy reclaimed `req`'s running attempt at its lease end (`limits.max_attempt_s`)
    /// and ended the request; the actor tells the worker so (`Rejection::Reclaimed`). The
    /// worker abandons the attempt, which counts as a failed attempt (as an attempt timeout
    /// does; the policy has recorded a timeout) and reports nothing more of it; it asks again
    /// with a new request if it has a retry left (its caller's deadline has not passed: the
    /// request is open), else the request fails. An attempt whose first byte came is the
    /// caller's answer: the worker finishes the transfer, its report and release unheard.
    pub(super) fn reclaimed(&mut self, req: Req, now: f64) {
        let r = self.reqs[req as usize];
        if !r.open || r.att == NO_ATT || self.answered(r.att, now) {
            return;
        }
        let cand = self.atts[r.att as usize].cand;
        self.abandon(r.att, now);
        let r = &mut self.reqs[req as usize];
        r.overloaded = false;
        if r.retries_left > 0 {
            r.retries_left -= 1;
            let attempts = r.retries_left + 1;
            let picked = std::mem::take(&mut self.subsets[req as usize]);
            let subset = (!picked.is_empty()).then_some(picked.as_slice());
            let world = world!(self, now);
            self.policy.ask_again(req, subset, attempts, now, &world);
            self.subsets[req as usize] = picked;
        } else {
            // Nothing of the attempt reaches the core, which has released it; a policy
            // counting open requests hears that this one ends.
            let world = world!(self, now);
            self.policy.done(req, cand, false, now, &world);
            self.end_failed(req, now);
        }
        self.sample_limit(cand as usize, now);
    }
}
