//! What a policy hears of an attempt's outcome: with `server_feedback`, the server's report.

use super::Engine;
use crate::core::{Outcome, ServerFeedback};

impl Engine<'_> {
    /// The outcome as the policy hears it: with `server_feedback`, a queueing candidate's
    /// success carries its server's report, read when the response arrives (the same moment
    /// and values `c3` reads through its view of the queues): the attempts waiting, and the
    /// mean service time at the level the server runs at.
    pub(super) fn reported(&self, c: usize, outcome: &Outcome, now: f64) -> Outcome {
        let truth = &self.truth[c];
        if !self.sc.workload.server_feedback || !truth.is_queue() {
            return *outcome;
        }
        let service_ms = truth.mean_service_ms() * self.queues.factor(c, truth.slowdown(), now);
        outcome.feedback(ServerFeedback {
            queue: self.queues.waiting(c).min(ServerFeedback::MAX_QUEUE),
            service_ms: service_ms.clamp(0.0, ServerFeedback::MAX_SERVICE_MS),
        })
    }
}
