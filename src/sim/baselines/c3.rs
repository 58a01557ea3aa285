//! C3 (Suresh et al., NSDI 2015): replica ranking with a cubic queue-size term, as absim's
//! `expDelay` strategy computes it.

use rand::rngs::SmallRng;

use super::{min_by_score, PickState, Picker};
use crate::core::Outcome;
use crate::sim::policy::{Cand, World};

/// Weight of a new sample in every moving average (absim's `updateEma`, alpha = 0.9).
const ALPHA: f64 = 0.9;

/// What a server piggybacks on a response, averaged per replica.
#[derive(Clone, Copy, Debug, Default)]
struct Feedback {
    /// Response time minus service time (network and queueing as the client sees them), ms.
    rest_ms: f64,
    /// Service time of the request, ms (1 / mu).
    service_ms: f64,
    /// Requests waiting in the server's queue when the response left.
    queue: f64,
}

/// C3's replica ranking. Per replica the client keeps moving averages of the response time
/// `R`, the service time `1/mu` and the queue length `q` the server reports with each response.
/// The score is `R - 1/mu + q_hat^3 / mu` with `q_hat = 1 + os * n + q`, where `os` is the
/// requests this client has outstanding on the replica and `n` the number of clients (the
/// concurrency compensation). The allowed replica with the lowest score wins; a replica with no
/// feedback yet scores 0, so every replica is tried early (as in absim).
///
/// The simulator runs one client, so `n` is 1 and `os` counts every outstanding request.
#[derive(Debug)]
pub(crate) struct C3 {
    feedback: Vec<Option<Feedback>>,
    clients: f64,
}

impl Default for C3 {
    fn default() -> Self {
        C3 {
            feedback: Vec::new(),
            clients: 1.0,
        }
    }
}

impl C3 {
    fn score(&self, c: Cand, outstanding: u32) -> f64 {
        match self.feedback.get(c as usize).copied().flatten() {
            None => 0.0,
            Some(f) => {
                let q_hat = 1.0 + outstanding as f64 * self.clients + f.queue;
                f.rest_ms + q_hat.powi(3) * f.service_ms
            }
        }
    }

    /// Folds one response's feedback into the replica's averages.
    fn observe(&mut self, c: Cand, response_ms: f64, service_ms: f64, queue: f64) {
        let i = c as usize;
        if self.feedback.len() <= i {
            self.feedback.resize(i + 1, None);
        }
        let sample = Feedback {
            rest_ms: response_ms - service_ms,
            service_ms,
            queue,
        };
        self.feedback[i] = Some(match self.feedback[i] {
            None => sample,
            Some(old) => Feedback {
                rest_ms: ALPHA * sample.rest_ms + (1.0 - ALPHA) * old.rest_ms,
                service_ms: ALPHA * sample.service_ms + (1.0 - ALPHA) * old.service_ms,
                queue: ALPHA * sample.queue + (1.0 - ALPHA) * old.queue,
            },
        });
    }
}

impl Picker for C3 {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        min_by_score(s, rng, |c| self.score(c, st.in_flight[c as usize]))
    }

    fn outcome(&mut self, _cand: Cand, _outcome: &Outcome, _elapsed_s: f64, _now: f64) {}
}
