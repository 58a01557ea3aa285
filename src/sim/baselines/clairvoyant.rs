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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::baselines::testing::TestWorld;

    /// Three candidates of 4 servers, 4 ms mean service; the first 10 ms further away.
    fn world() -> TestWorld {
        TestWorld::with(
            "",
            r#"
[[candidates]]
id = "far"
success = 1.0
servers = 4
connect_ms = 10.0
service_ms = { kind = "exp", mean = 4.0 }
[[candidates]]
id = "near"
count = 2
success = 1.0
servers = 4
service_ms = { kind = "exp", mean = 4.0 }
"#,
        )
    }

    #[test]
    fn an_attempt_waits_for_n_minus_c_plus_one_completions() {
        let mut tw = world();
        // Fewer attempts than servers: no wait.
        tw.load(1, 3, 0);
        assert_eq!(expected_wait_ms(1, &tw.world(0.0)), 0.0);
        // Every server busy: one completion of four servers, 4 / 4 ms.
        tw.load(1, 4, 0);
        assert!((expected_wait_ms(1, &tw.world(0.0)) - 1.0).abs() < 1e-9);
        // Two more waiting: three completions.
        tw.load(1, 4, 2);
        assert!((expected_wait_ms(1, &tw.world(0.0)) - 3.0).abs() < 1e-9);
        // The first byte: the wait, the service and the candidate's fixed times.
        tw.load(0, 4, 2);
        let far = expected_completion_ms(0, &tw.world(0.0));
        assert!((far - (10.0 + 3.0 + 4.0)).abs() < 1e-9, "{far}");
    }

    #[test]
    fn the_soonest_expected_answer_wins() {
        let mut tw = world();
        let idle = [0, 0, 0];
        let mut c = Clairvoyant;
        // Both idle: the near one (10 ms less connect).
        assert_eq!(tw.always_picks(&mut c, &[0, 1], &idle, 0.0), 1);
        // Of the two near ones, one has every server busy (a wait of 1 ms), the other a free
        // server.
        tw.load(1, 4, 0);
        tw.load(2, 3, 0);
        assert_eq!(tw.always_picks(&mut c, &[0, 1, 2], &idle, 0.0), 2);
    }
}
