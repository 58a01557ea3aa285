//! The oracle: it reads the hidden truth, so it is the limit to measure against.

use rand::rngs::SmallRng;
use rand::RngExt;

use super::clairvoyant::{expected_completion_ms, expected_wait_ms};
use super::{PickState, Picker};
use crate::sim::policy::{Cand, World};

/// Picks the candidate with the best true odds at the load it would add to. Without retries
/// that is the highest success probability (then the fastest); with retries, the highest
/// success probability per expected millisecond spent, the optimal order for a sequential
/// search until the first success.
///
/// A served attempt whose first byte would come after the attempt timeout times out, so the
/// success probability is scaled by the share of first bytes within it (the first-byte
/// distribution's own, the connect time at its mean). Without that rule the oracle kept a
/// sure server whose first byte had slowed past the timeout above a slightly less sure one
/// that answered in time, and counted a slowness as no reason to leave.
///
/// Past a candidate's `knee` its times grow with its load: every time of the attempt (a
/// failure's too, except an overload's) is taken at the knee's factor for the load the attempt
/// would add. Without that the oracle piled every attempt onto the fastest candidate of a
/// fleet with knees, far past them.
///
/// On a queueing candidate it also reads the real queue. The expected time to the first byte
/// counts the wait for a server at the service rate of the moment
/// ([`expected_completion_ms`]); an attempt that would find the queue full is refused; one
/// expected to answer after the attempt timeout counts as that timeout; and the wait uses up
/// the attempt's room before its timeout, so the success probability is scaled by the share
/// of the timeout left (`1 - wait / timeout`, with a 1 s scale without a timeout). Without
/// the queue the oracle piled every request onto the fastest or surest server until its
/// attempts timed out; without the last rule it still ranked a sure server with a second's
/// backlog above an idle one a percent less sure.
///
/// `to_completion` (`oracle-completion`) counts a success's time to its end instead of its
/// first byte: the duration and the transfer of `workload.bytes` at the candidate's bandwidth
/// that follow the first byte. It is the limit for callers that wait for a whole download.
#[derive(Debug, Default)]
pub(crate) struct Oracle {
    /// Successes cost their time to completion, not to the first byte.
    pub(crate) to_completion: bool,
}

/// A share of first bytes past the timeout below this is taken as none: no run is long
/// enough to see it, and it would otherwise decide ties between equally sure servers by the
/// far tails of their first-byte distributions, against the faster one.
const NEGLIGIBLE_LATE: f64 = 1e-4;

/// Scale of a queue's wait against the success odds when the scenario has no attempt timeout.
const WAIT_SCALE_MS: f64 = 1000.0;

/// `c`'s success probability and the expected milliseconds an attempt sent to it now takes.
/// `after_ms`: what a success costs past its first byte.
fn odds(c: Cand, st: &PickState<'_>, w: &World<'_>, after_ms: f64) -> (f64, f64) {
    let t = &w.truth[c as usize];
    let load = st.in_flight[c as usize] + 1;
    let p = t.success_probability(load);
    let failure_ms = t.mean_failure_ms(load);
    if !t.is_queue() {
        // A knee scales every time of the attempt, the transfer after its first byte too.
        let knee = t.knee_factor(load);
        let first_byte_ms = t.mean_first_byte_ms() * knee;
        let after_ms = after_ms * knee;
        let Some(timeout_ms) = w.workload.attempt_timeout_ms else {
            return (p, p * (first_byte_ms + after_ms) + (1.0 - p) * failure_ms);
        };
        // A served attempt whose first byte would come after the timeout times out.
        let in_time = match t.first_byte_within(timeout_ms / knee) {
            q if q > 1.0 - NEGLIGIBLE_LATE => 1.0,
            q => q,
        };
        let ok = p * in_time;
        let cost = ok * (first_byte_ms.min(timeout_ms) + after_ms)
            + (p - ok) * timeout_ms
            + (1.0 - p) * failure_ms.min(timeout_ms);
        return (ok, cost);
    }
    if w.queues.is_full(c as usize, t) {
        return (0.0, failure_ms);
    }
    let first_byte_ms = expected_completion_ms(c, w);
    let timeout_ms = w.workload.attempt_timeout_ms.unwrap_or(WAIT_SCALE_MS);
    if w.workload.attempt_timeout_ms.is_some() && first_byte_ms > timeout_ms {
        return (0.0, timeout_ms);
    }
    let p = p * (1.0 - expected_wait_ms(c, w) / timeout_ms).max(0.0);
    (p, p * (first_byte_ms + after_ms) + (1.0 - p) * failure_ms)
}

impl Picker for Oracle {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, w: &World<'_>, rng: &mut SmallRng) -> Cand {
        let key = |c: Cand| -> (f64, f64) {
            let after_ms = if self.to_completion {
                w.truth[c as usize].mean_after_first_byte_ms(w.workload.bytes)
            } else {
                0.0
            };
            let (p, cost) = odds(c, st, w, after_ms);
            if w.workload.retries == 0 {
                (p, -cost)
            } else {
                (p / cost.max(1e-3), p)
            }
        };
        // Start at a random place so equal candidates share the traffic.
        let start = rng.random_range(0..s.len());
        let mut best = s[start];
        let mut best_key = key(best);
        for i in 1..s.len() {
            let c = s[(start + i) % s.len()];
            let k = key(c);
            if k > best_key {
                best = c;
                best_key = k;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::baselines::testing::TestWorld;

    #[test]
    fn a_queue_that_would_refuse_the_attempt_is_not_chosen() {
        let mut tw = TestWorld::with(
            "",
            r#"
[[candidates]]
id = "short-queue"
success = 1.0
servers = 1
queue_limit = 1
service_ms = 4.0
[[candidates]]
id = "long-queue"
success = 1.0
servers = 1
service_ms = 4.0
"#,
        );
        // The first is full (a refusal); the second serves after a 24 ms wait.
        tw.load(0, 1, 1);
        tw.load(1, 1, 5);
        assert_eq!(
            tw.always_picks(&mut Oracle::default(), &[0, 1], &[2, 6], 0.0),
            1
        );
    }

    #[test]
    fn a_queue_expected_to_answer_after_the_attempt_timeout_is_not_chosen() {
        let mut tw = TestWorld::with(
            "attempt_timeout_ms = 50",
            r#"
[[candidates]]
id = "far"
success = 1.0
servers = 1
connect_ms = 45.0
service_ms = 4.0
[[candidates]]
id = "near"
success = 1.0
servers = 1
service_ms = 4.0
"#,
        );
        // The far one waits 4 ms but answers at 45 + 4 + 4 = 53 ms, past the timeout; the
        // near one waits 24 ms and answers at 28 ms.
        tw.load(0, 1, 0);
        tw.load(1, 1, 5);
        assert_eq!(
            tw.always_picks(&mut Oracle::default(), &[0, 1], &[1, 6], 0.0),
            1
        );
    }

    #[test]
    fn a_candidate_past_its_knee_counts_the_latency_the_knee_adds() {
        let tw = TestWorld::with(
            "",
            r#"
[[candidates]]
id = "fast-knee"
success = 1.0
duration_ms = 10.0
knee = { start = 4, exp = 1.3 }
[[candidates]]
id = "slow"
success = 1.0
duration_ms = 30.0
"#,
        );
        // Up to its knee the fast one is chosen; with 8 in flight a ninth attempt would take
        // 10 x 1.3^5 = 37 ms there against 30 ms on the idle slow one.
        assert_eq!(
            tw.always_picks(&mut Oracle::default(), &[0, 1], &[3, 0], 0.0),
            0
        );
        assert_eq!(
            tw.always_picks(&mut Oracle::default(), &[0, 1], &[8, 0], 0.0),
            1
        );
    }
}
