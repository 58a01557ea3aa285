//! What the callers of the `coordinator` policies do as the scenario's `[caller]` says: the
//! deadline their requests carry, what they report of their own timeouts and of first bytes,
//! how they retry and whether they follow the first-byte advice.

use super::{Att, Engine};
use crate::core::FailureClass;
use crate::sim::policy::{Cand, Policy, Req, World};
use crate::sim::scenario::{Caller, OnTimeout, Retry, Scenario};

impl Caller {
    /// The callers of `policy` in `sc`: the scenario's `[caller]` for a policy that takes it
    /// (the coordinators), the default for the others, which keep their own callers.
    pub(super) fn of(sc: &Scenario, policy: &dyn Policy) -> Caller {
        if policy.takes_caller() {
            sc.caller
        } else {
            Caller::default()
        }
    }

    /// Whether the caller drops the permit with no report when its own timeout fires.
    pub(super) fn drops_timeouts(&self) -> bool {
        self.on_timeout == OnTimeout::Drop
    }
}

impl Engine<'_> {
    /// The first-byte deadline the caller keeps for `req`'s new attempt, ms: the policy's
    /// advice, unless the caller ignores it.
    pub(super) fn advised(&self, req: Req) -> Option<f64> {
        if self.caller.deadline_advice {
            self.policy.deadline_ms(req)
        } else {
            None
        }
    }

    /// Whether `att`, ending now, ends unreported: the caller cut it at its own timeout
    /// (the attempt timeout or the advice) and drops such permits with no report.
    pub(super) fn drops(&self, att: &Att) -> bool {
        self.caller.drops_timeouts()
            && !att.result.ok
            && att.result.outcome == crate::core::Outcome::failure(FailureClass::Timeout)
            && att
                .timeout_ms
                .is_some_and(|t| att.result.end_s == t / 1000.0)
    }

    /// `req`'s attempt on `cand` failed and it has a retry left (already counted): within the
    /// request (the policy excludes the candidates it tried), or as a new request with the
    /// same candidates allowed, the same deadline and the attempts it has left.
    pub(super) fn retry(&mut self, req: Req, cand: Cand, now: f64) {
        let world = world!(self, now);
        if self.caller.retry == Retry::Within {
            self.policy.done(req, cand, true, now, &world);
            return;
        }
        self.policy.done(req, cand, false, now, &world);
        self.ask_anew(req, now);
    }

    /// `req` asks the policy again, as a new request of the same caller: the candidates it
    /// was allowed, its deadline, and the attempts it has left (its retries left, plus this
    /// one).
    pub(super) fn ask_anew(&mut self, req: Req, now: f64) {
        let attempts = self.reqs[req as usize].retries_left + 1;
        let picked = std::mem::take(&mut self.subsets[req as usize]);
        let subset = (!picked.is_empty()).then_some(picked.as_slice());
        let world = world!(self, now);
        self.policy.ask_again(req, subset, attempts, now, &world);
        self.subsets[req as usize] = picked;
    }
}
