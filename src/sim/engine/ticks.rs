//! The engine's periodic tick, and what it does when nothing can happen any more.

use super::{Engine, Req, TICK_S};
use crate::sim::scenario::LoopKind;

impl Engine<'_> {
    /// Whether every request the workload makes has ended: a closed loop's `workers x
    /// operations`, an open loop's arrivals once they have stopped. The run's end
    /// (`virtual_s`) is then the end of the last one; nothing after it counts.
    pub(super) fn workload_done(&self) -> bool {
        let w = &self.sc.workload;
        match w.kind {
            LoopKind::Closed => {
                self.stats.requests == u64::from(w.workers) * u64::from(w.operations)
            }
            LoopKind::Open => self.arrivals_done && self.open_requests == 0,
        }
    }

    /// When the tick after the one at `now` comes. While a request is open or arrivals are to
    /// come it is `TICK_S` later. Otherwise (leftovers: a queueing server still serving
    /// attempts whose callers gave up, stale ends, timeline events; or a closed loop whose
    /// workers all think) the ticks that would come before the next event are skipped, so a
    /// server busy for days of virtual time costs one tick per event rather than one per
    /// second.
    pub(super) fn next_tick(&self, now: f64) -> f64 {
        let step = now + TICK_S;
        if self.open_requests > 0 || !self.arrivals_done {
            return step;
        }
        match self.heap.peek_ns() {
            Some(ns) => {
                let whole = ((ns as f64 / 1e9 - now) / TICK_S).floor().max(1.0);
                now + whole * TICK_S
            }
            None => step,
        }
    }

    /// Fails every request still open: nothing can ever happen again, and the policy holds
    /// them.
    pub(super) fn fail_stuck(&mut self, now: f64) {
        for i in 0..self.reqs.len() {
            if self.reqs[i].open {
                self.stats.stuck += 1;
                self.finish_request(i as Req, None, now);
                // The policy may still hold it: never hand this slot to a new request.
                self.free_reqs.retain(|&r| r as usize != i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::Engine;
    use crate::core::Outcome;
    use crate::sim::policy::{Cand, Decision, Policy, Req, World};
    use crate::sim::scenario::Scenario;
    use crate::CandidateInfo;

    /// Holds every request it is given and never answers; records their slots.
    #[derive(Default)]
    struct Holds {
        given: Arc<Mutex<Vec<Req>>>,
    }

    impl Policy for Holds {
        fn add(&mut self, _: Cand, _: &CandidateInfo, _: f64) {}
        fn remove(&mut self, _: Cand, _: f64, _: &World<'_>) {}
        fn ready(&mut self, req: Req, _: Option<&[Cand]>, _: f64, _: &World<'_>) {
            self.given.lock().unwrap().push(req);
        }
        fn outcome(&mut self, _: Req, _: Cand, _: &Outcome, _: f64) {}
        fn done(&mut self, _: Req, _: Cand, _: bool, _: f64, _: &World<'_>) {}
        fn tick(&mut self, _: f64, _: &World<'_>) {}
        fn poll(&mut self) -> Option<Decision> {
            None
        }
        fn decisions(&self) -> u64 {
            0
        }
        fn stalls(&self) -> u64 {
            0
        }
    }

    /// A request the policy holds when nothing else can happen is failed as stuck, and its
    /// slot is never given to a later request: the policy still holds it, and an answer for
    /// it must not reach the worker's next request.
    #[test]
    fn a_stuck_requests_slot_is_never_given_to_a_later_request() {
        let sc = Scenario::parse(
            r#"
name = "holds"
[workload]
loop = "closed"
workers = 1
operations = 3

[[candidates]]
id = "a"
success = 1.0
ttfb_ms = 10.0
"#,
            "test",
        )
        .unwrap();
        let policy = Holds::default();
        let given = policy.given.clone();
        let stats = Engine::with_policy(&sc, Box::new(policy), "holds", 1).run();
        assert_eq!((stats.requests, stats.stuck), (3, 3));
        let given = given.lock().unwrap().clone();
        let mut distinct = given.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "slots given to the policy: {given:?}");
    }
}
