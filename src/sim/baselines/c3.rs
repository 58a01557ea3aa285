//! C3 (Suresh et al., NSDI 2015): replica ranking with a cubic queue-size term, as absim's
//! `expDelay` strategy computes it.

use rand::rngs::SmallRng;
use rand::RngExt;

use super::c3_rate::RateControl;
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
/// With rate control (absim's `--backpressure`), replicas are tried in score order and the
/// first whose token bucket has a token is sent to; when none has one the request waits until
/// the first token comes (backpressure). See [`RateControl`].
///
/// The simulator runs one client, so `n` is 1 and `os` counts every outstanding request. A
/// server reports its queue (requests waiting, not in service, when the response leaves) and
/// the mean service time of the level it runs at (absim sends the request's own service time).
#[derive(Debug)]
pub(crate) struct C3 {
    feedback: Vec<Option<Feedback>>,
    clients: f64,
    /// Per replica, when rate control is on.
    rates: Option<Vec<RateControl>>,
    /// The response time of each replica's latest outcome, waiting for its slot to be freed
    /// (where the server's report is read).
    last_elapsed_ms: Vec<f64>,
    ranked: Vec<(f64, Cand)>,
}

impl C3 {
    /// `rate_control`: absim's cubic rate limiter with backpressure.
    pub(crate) fn new(rate_control: bool) -> Self {
        C3 {
            feedback: Vec::new(),
            clients: 1.0,
            rates: rate_control.then(Vec::new),
            last_elapsed_ms: Vec::new(),
            ranked: Vec::new(),
        }
    }

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

    fn rate(&mut self, c: Cand) -> Option<&mut RateControl> {
        let rates = self.rates.as_mut()?;
        let i = c as usize;
        if rates.len() <= i {
            rates.resize(i + 1, RateControl::default());
        }
        Some(&mut rates[i])
    }
}

impl Picker for C3 {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        min_by_score(s, rng, |c| self.score(c, st.in_flight[c as usize]))
    }

    fn pick_or_wait(
        &mut self,
        s: &[Cand],
        st: &PickState<'_>,
        world: &World<'_>,
        rng: &mut SmallRng,
    ) -> Result<Cand, f64> {
        if self.rates.is_none() {
            return Ok(self.pick(s, st, world, rng));
        }
        // Score order; equal scores in an order that starts at a random place.
        let start = rng.random_range(0..s.len());
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        for i in 0..s.len() {
            let c = s[(start + i) % s.len()];
            ranked.push((self.score(c, st.in_flight[c as usize]), c));
        }
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        let now_ms = st.now * 1000.0;
        let mut wait_ms = f64::INFINITY;
        let mut chosen = None;
        for &(_, c) in &ranked {
            let Some(rate) = self.rate(c) else { break };
            let w = rate.try_acquire(now_ms);
            if w == 0.0 {
                rate.sent(now_ms);
                chosen = Some(c);
                break;
            }
            wait_ms = wait_ms.min(w);
        }
        self.ranked = ranked;
        match chosen {
            Some(c) => Ok(c),
            // A microsecond past the token, so rounding never leaves it just short of one.
            None => Err(st.now + (wait_ms + 0.001) / 1000.0),
        }
    }

    fn outcome(&mut self, cand: Cand, _outcome: &Outcome, elapsed_s: f64, _now: f64) {
        let i = cand as usize;
        if self.last_elapsed_ms.len() <= i {
            self.last_elapsed_ms.resize(i + 1, 0.0);
        }
        self.last_elapsed_ms[i] = elapsed_s * 1000.0;
    }

    fn finished(&mut self, cand: Cand, world: &World<'_>, now: f64) {
        let response_ms = self
            .last_elapsed_ms
            .get(cand as usize)
            .copied()
            .unwrap_or(0.0);
        let rate = world.service_rate(cand);
        let service_ms = if rate.is_finite() && rate > 0.0 {
            1000.0 / rate
        } else {
            0.0
        };
        self.observe(cand, response_ms, service_ms, world.waiting(cand) as f64);
        if let Some(r) = self.rate(cand) {
            r.response(now * 1000.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_is_the_rest_of_the_response_plus_the_cubed_queue_times_service() {
        let mut c3 = C3::new(false);
        assert_eq!(c3.score(0, 5), 0.0, "no feedback yet: tried first");
        // R = 10 ms, 1/mu = 4 ms, q = 1: with 2 outstanding, q_hat = 4.
        c3.observe(0, 10.0, 4.0, 1.0);
        assert!((c3.score(0, 2) - (6.0 + 64.0 * 4.0)).abs() < 1e-9);
        // The next sample weighs 0.9.
        c3.observe(0, 20.0, 4.0, 3.0);
        let q: f64 = 0.9 * 3.0 + 0.1 * 1.0;
        let rest = 0.9 * 16.0 + 0.1 * 6.0;
        assert!((c3.score(0, 0) - (rest + (1.0 + q).powi(3) * 4.0)).abs() < 1e-9);
    }

    use rand::SeedableRng;

    use crate::core::FailureClass;
    use crate::sim::baselines::testing::TestWorld;

    /// Two replicas of 4 servers each, 4 ms mean service.
    fn two_replicas() -> TestWorld {
        TestWorld::with(
            "",
            r#"
[[candidates]]
id = "s"
count = 2
success = 1.0
servers = 4
service_ms = { kind = "exp", mean = 4.0 }
"#,
        )
    }

    #[test]
    fn the_report_read_is_the_queue_waiting_and_the_service_time_of_the_moment() {
        let mut tw = two_replicas();
        // Every server busy and one request waiting when the response leaves.
        tw.load(0, 4, 1);
        let mut c3 = C3::new(false);
        c3.outcome(0, &Outcome::success(), 0.010, 1.0);
        c3.finished(0, &tw.world(1.0), 1.0);
        let f = c3.feedback[0].unwrap();
        assert_eq!(f.queue, 1.0, "requests waiting, not those in service");
        assert!((f.service_ms - 4.0).abs() < 1e-9, "{}", f.service_ms);
        assert!((f.rest_ms - 6.0).abs() < 1e-9, "{}", f.rest_ms);
    }

    #[test]
    fn a_failure_counts_in_the_response_time_at_the_time_it_took() {
        let tw = two_replicas();
        let mut c3 = C3::new(false);
        c3.outcome(0, &Outcome::failure(FailureClass::Timeout), 0.5, 1.0);
        c3.finished(0, &tw.world(1.0), 1.0);
        let f = c3.feedback[0].unwrap();
        assert!((f.rest_ms - 496.0).abs() < 1e-9, "{}", f.rest_ms);
    }

    #[test]
    fn requests_outstanding_on_a_replica_count_against_it() {
        let tw = two_replicas();
        let mut c3 = C3::new(false);
        c3.observe(0, 10.0, 4.0, 0.0);
        c3.observe(1, 10.0, 4.0, 0.0);
        // Same reports; three outstanding on replica 0: q_hat 4 against 1.
        assert_eq!(tw.always_picks(&mut c3, &[0, 1], &[3, 0], 1.0), 1);
    }

    #[test]
    fn with_rate_control_the_best_scored_replica_with_a_token_is_sent_to() {
        let tw = two_replicas();
        let mut c3 = C3::new(true);
        // Replica 0 reported a long queue; replica 1 has reported nothing (score 0). Both
        // buckets are full a second in.
        c3.observe(0, 10.0, 4.0, 5.0);
        let in_flight = [0, 0];
        let st = PickState {
            in_flight: &in_flight,
            now: 1.0,
        };
        for seed in 0..20 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let got = c3.pick_or_wait(&[0, 1], &st, &tw.world(1.0), &mut rng);
            assert_eq!(got, Ok(1));
        }
    }
}
