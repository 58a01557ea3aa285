//! What happens at set times: the caller's deadline, the policy's timed decisions (waiting
//! deadlines, lease ends) and the attempts a lease reclaimed.

use super::{Engine, Ev, Req, NO_ATT};
use crate::core::{FailureClass, Outcome};
use crate::sim::events::secs_to_ns;
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
        let ns = secs_to_ns(t).max(secs_to_ns(now) + 1);
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
            .is_some_and(|t| secs_to_ns(t) <= ns);
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
            && secs_to_ns(att.granted + att.result.first_byte_s) <= secs_to_ns(now)
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
            self.ask_anew(req, now);
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

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use super::super::Engine;
    use crate::core::Outcome;
    use crate::sim::policy::{Cand, Decision, Policy, Req, World};
    use crate::sim::scenario::Scenario;
    use crate::CandidateInfo;

    /// Grants every request at once and reclaims its attempt 0.3 s later, as a lease would;
    /// records how many attempts each request asked again for.
    #[derive(Default)]
    struct Reclaims {
        out: VecDeque<Decision>,
        lease: Option<(Req, f64)>,
        asked_with: Arc<Mutex<Vec<u32>>>,
    }

    impl Policy for Reclaims {
        fn add(&mut self, _: Cand, _: &CandidateInfo, _: f64) {}
        fn remove(&mut self, _: Cand, _: f64, _: &World<'_>) {}
        fn ready(&mut self, req: Req, _: Option<&[Cand]>, now: f64, _: &World<'_>) {
            self.out.push_back(Decision::Grant { req, cand: 0 });
            self.lease = Some((req, now + 0.3));
        }
        fn outcome(&mut self, _: Req, _: Cand, _: &Outcome, _: f64) {}
        fn done(&mut self, _: Req, _: Cand, _: bool, _: f64, _: &World<'_>) {}
        fn tick(&mut self, now: f64, _: &World<'_>) {
            if let Some((req, _)) = self.lease.filter(|l| l.1 <= now) {
                self.lease = None;
                self.out.push_back(Decision::Reclaimed { req });
            }
        }
        fn next_wakeup_s(&self) -> Option<f64> {
            self.lease.map(|l| l.1)
        }
        fn ask_again(&mut self, req: Req, e: Option<&[Cand]>, n: u32, now: f64, w: &World<'_>) {
            self.asked_with.lock().unwrap().push(n);
            self.ready(req, e, now, w);
        }
        fn poll(&mut self) -> Option<Decision> {
            self.out.pop_front()
        }
        fn decisions(&self) -> u64 {
            0
        }
        fn stalls(&self) -> u64 {
            0
        }
    }

    /// A worker whose attempt a lease reclaims asks again with every attempt it has left (its
    /// retries left, plus this one), so the request it makes anew is drawn as its last
    /// attempt only when it is: with two retries, it asks again for 2 attempts, then 1; the
    /// third reclaim ends the request.
    #[test]
    fn a_reclaimed_request_asks_again_with_the_attempts_its_worker_has_left() {
        let sc = Scenario::parse(
            r#"
name = "reclaims"
[workload]
loop = "closed"
workers = 1
operations = 1
retries = 2

[[candidates]]
id = "hangs"
success = 1.0
ttfb_ms = 5000.0
"#,
            "test",
        )
        .unwrap();
        let policy = Reclaims::default();
        let asked_with = policy.asked_with.clone();
        let stats = Engine::with_policy(&sc, Box::new(policy), "reclaims", 1).run();
        assert_eq!(*asked_with.lock().unwrap(), vec![2, 1]);
        assert_eq!((stats.requests, stats.errors, stats.attempts), (1, 1, 3));
    }
}
