//! The clairvoyant: the oracle of a queueing world.

use rand::rngs::SmallRng;

use super::{min_by_score, PickState, Picker};
use crate::sim::policy::{Cand, World};

/// Reads every candidate's true queue (attempts waiting and in service), its number of servers
/// and its service rate at this moment (slow periods included), and sends the request where it
/// would be answered soonest on average: with `n` attempts there and `c` servers of mean
/// service time `S`, a new attempt starts at once if `n < c`, else after `n - c + 1` of the
/// `c` servers' completions (one every `S / c` on average), then is served for `S`; the
/// candidate's fixed times (connect, time to first byte) come on top. Equal times are broken
/// at random. absim's `clairvoyant` ranks by `(1 + n) * S`, the same order for one server.
/// It ignores success odds: in the worlds it is meant for every server answers.
#[derive(Debug, Default)]
pub(crate) struct Clairvoyant;

/// Expected time from now to the first byte of an attempt sent to `c` now, ms.
pub(crate) fn expected_completion_ms(c: Cand, w: &World<'_>) -> f64 {
    let truth = &w.truth[c as usize];
    // The truth's mean first byte counts the base service time; the level of the moment
    // replaces it below.
    let fixed = truth.mean_first_byte_ms() - truth.mean_service_ms();
    match service_ms(c, w) {
        Some(service_ms) => fixed + expected_wait_ms(c, w) + service_ms,
        None => fixed,
    }
}

/// Mean service time of one server of `c` at this moment, ms (`None` without a queue).
fn service_ms(c: Cand, w: &World<'_>) -> Option<f64> {
    let rate = w.service_rate(c);
    (rate.is_finite() && rate > 0.0).then(|| 1000.0 / rate)
}

/// Expected wait for a server of an attempt sent to `c` now, ms (0 without a queue): with `n`
/// attempts there and `c` servers, none if `n < c`, else `n - c + 1` of the servers'
/// completions, one every `S / c` on average.
pub(crate) fn expected_wait_ms(c: Cand, w: &World<'_>) -> f64 {
    let Some(service_ms) = service_ms(c, w) else {
        return 0.0;
    };
    let n = w.queue_len(c) as f64;
    let servers = w.servers(c).max(1) as f64;
    if n < servers {
        0.0
    } else {
        (n - servers + 1.0) * service_ms / servers
    }
}

impl Picker for Clairvoyant {
    fn pick(&mut self, s: &[Cand], _: &PickState<'_>, w: &World<'_>, rng: &mut SmallRng) -> Cand {
        min_by_score(s, rng, |c| expected_completion_ms(c, w))
    }
}
