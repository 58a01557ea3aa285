//! A MongoDB driver's server monitors, as far as server selection reads them: each server's
//! average round trip, and the latency window it selects in (the server selection spec's
//! `localThresholdMS`).

use rand::rngs::SmallRng;

use crate::sim::policy::{Cand, World};

/// Seconds between two checks of a server (`heartbeatFrequencyMS`, 10 s in drivers).
const HEARTBEAT_S: f64 = 10.0;
/// The weight of a new round trip in the average (SDAM: an EWMA with alpha 0.2).
const ALPHA: f64 = 0.2;
/// Servers whose average round trip is within this of the fastest one's are selectable, ms
/// (`localThresholdMS`, 15 ms by default).
const LOCAL_THRESHOLD_MS: f64 = 15.0;
/// At most this many missed checks are replayed at once (older ones weigh under 0.2^8 anyway).
const MAX_REPLAYED: u32 = 8;

/// Per server: its average round trip (none until its first check, or since it was last
/// marked Unknown) and when its next check is due, seconds.
#[derive(Debug, Clone, Copy)]
struct Server {
    rtt_ms: Option<f64>,
    next_check_s: f64,
}

/// The monitors of every server, with the randomness of their round trips.
#[derive(Debug)]
pub(crate) struct RttMonitor {
    servers: Vec<Server>,
    rng: SmallRng,
    /// Scratch: the average round trips of the servers a window is taken over.
    rtts: Vec<f64>,
}

impl RttMonitor {
    /// Monitors whose round trips draw from `rng`.
    pub(crate) fn new(rng: SmallRng) -> Self {
        RttMonitor {
            servers: Vec::new(),
            rng,
            rtts: Vec::new(),
        }
    }

    /// Runs the checks of `c` due by `now` and returns its average round trip, ms.
    #[cfg(test)]
    fn check(&mut self, c: Cand, world: &World<'_>, now: f64) -> f64 {
        check(&mut self.servers, &mut self.rng, c, world, now)
    }

    /// Keeps in `cands` only those within the latency window at `now`: an average round trip
    /// at most `localThresholdMS` above the fastest one's.
    pub(crate) fn window(&mut self, cands: &mut Vec<Cand>, world: &World<'_>, now: f64) {
        if cands.len() < 2 {
            return;
        }
        let RttMonitor { servers, rng, rtts } = self;
        rtts.clear();
        rtts.extend(cands.iter().map(|&c| check(servers, rng, c, world, now)));
        let fastest = rtts.iter().copied().fold(f64::INFINITY, f64::min);
        let mut k = 0;
        cands.retain(|_| {
            let keep = rtts[k] <= fastest + LOCAL_THRESHOLD_MS;
            k += 1;
            keep
        });
    }

    /// `c` was marked Unknown at `now`, to be checked again at `check_s`: SDAM clears an
    /// Unknown server's average, so that check's round trip sets it afresh.
    pub(crate) fn unknown(&mut self, c: Cand, check_s: f64) {
        if let Some(s) = self.servers.get_mut(c as usize) {
            s.rtt_ms = None;
            s.next_check_s = check_s;
        }
    }
}

/// Runs the checks of server `c` due by `now`, each one round trip: a draw of the server's
/// connect time (a connection's handshake is one round trip; 0 for a server without one).
/// A server is first checked when it is first seen. Returns its average round trip, ms.
fn check(
    servers: &mut Vec<Server>,
    rng: &mut SmallRng,
    c: Cand,
    world: &World<'_>,
    now: f64,
) -> f64 {
    let i = c as usize;
    if servers.len() <= i {
        servers.resize(
            i + 1,
            Server {
                rtt_ms: None,
                next_check_s: f64::NEG_INFINITY,
            },
        );
    }
    let s = &mut servers[i];
    let mut replayed = 0;
    while s.next_check_s <= now && replayed < MAX_REPLAYED {
        let rtt = world.truth[i].sample_connect_ms(rng);
        s.rtt_ms = Some(match s.rtt_ms {
            Some(avg) => ALPHA * rtt + (1.0 - ALPHA) * avg,
            None => rtt,
        });
        s.next_check_s = if s.next_check_s == f64::NEG_INFINITY {
            now + HEARTBEAT_S
        } else {
            s.next_check_s + HEARTBEAT_S
        };
        replayed += 1;
    }
    if s.next_check_s <= now {
        // Far behind (a server not looked at for minutes): the next check is a period on.
        s.next_check_s = now + HEARTBEAT_S;
    }
    s.rtt_ms.unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::sim::baselines::testing::TestWorld;

    /// Three servers: connect 1 ms, 10 ms and 30 ms (constant); a fourth of mean 20 ms.
    fn world() -> TestWorld {
        TestWorld::with(
            "",
            r#"
[[candidates]]
id = "near"
success = 1.0
duration_ms = 10.0
connect_ms = 1.0
[[candidates]]
id = "mid"
success = 1.0
duration_ms = 10.0
connect_ms = 10.0
[[candidates]]
id = "far"
success = 1.0
duration_ms = 10.0
connect_ms = 30.0
[[candidates]]
id = "varied"
success = 1.0
duration_ms = 10.0
connect_ms = { kind = "uniform", min = 10.0, max = 30.0 }
"#,
        )
    }

    #[test]
    fn servers_past_fifteen_ms_of_the_fastest_round_trip_are_left_out() {
        let tw = world();
        let mut m = RttMonitor::new(SmallRng::seed_from_u64(1));
        let mut s = vec![0, 1, 2];
        m.window(&mut s, &tw.world(0.0), 0.0);
        assert_eq!(s, [0, 1], "30 ms is 29 past 1 ms");
        let mut s = vec![1, 2];
        m.window(&mut s, &tw.world(0.0), 0.0);
        assert_eq!(s, [1], "30 ms is 20 past 10 ms");
        let mut s = vec![2, 1];
        m.window(&mut s, &tw.world(0.0), 0.0);
        assert_eq!(s, [1], "whatever the order");
    }

    #[test]
    fn the_average_round_trip_is_checked_every_ten_seconds_with_weight_one_fifth() {
        let tw = world();
        let mut m = RttMonitor::new(SmallRng::seed_from_u64(3));
        let first = m.check(3, &tw.world(0.0), 0.0);
        assert!((10.0..30.0).contains(&first), "{first}");
        assert_eq!(
            m.check(3, &tw.world(9.9), 9.9),
            first,
            "no check before 10 s"
        );
        let second = m.check(3, &tw.world(10.0), 10.0);
        let sample = (second - 0.8 * first) / 0.2;
        assert!((10.0 - 1e-9..30.0 + 1e-9).contains(&sample), "{sample}");
        assert_ne!(second, first);
        // Three checks missed: replayed, and the next is due on the same 10 s grid.
        m.check(3, &tw.world(45.0), 45.0);
        assert_eq!(m.servers[3].next_check_s, 50.0);
    }

    #[test]
    fn an_unknown_server_is_measured_afresh_at_its_next_check() {
        let tw = world();
        let mut m = RttMonitor::new(SmallRng::seed_from_u64(1));
        let mut s = vec![0, 2];
        m.window(&mut s, &tw.world(0.0), 0.0);
        assert_eq!(s, [0]);
        // Marked Unknown and checked at 0.5 s: its first round trip sets the average again
        // (a constant 1 ms, so nothing moves), and the next regular check is 10 s on.
        m.unknown(0, 0.5);
        assert_eq!(m.servers[0].rtt_ms, None);
        assert_eq!(m.check(0, &tw.world(0.6), 0.6), 1.0);
        assert_eq!(m.servers[0].next_check_s, 10.5);
    }
}
