//! Power of two choices: MongoDB's operation count, and tower / Finagle's peak EWMA.

use rand::rngs::SmallRng;

use super::accrual::Accrual;
use super::rtt_monitor::RttMonitor;
use super::{two_random, PickState, Picker};
use crate::core::{FailureClass, Outcome};
use crate::sim::policy::{Cand, World};

/// How long a server stays Unknown after a network error, seconds: the driver asks its
/// monitor for an immediate check, which runs at most every `minHeartbeatFrequencyMS` (500 ms);
/// the check is taken to succeed (the server is up, its operations fail).
const MIN_HEARTBEAT_S: f64 = 0.5;

/// Two random candidates, the one with fewer operations in flight wins; on a tie the first
/// drawn (so a random one). As MongoDB's driver ([`P2cOpcount::mongodb`]) it also follows
/// SDAM: a network error on an operation (a reset or a refused connection, not a timeout)
/// marks the server Unknown, out of selection until its monitor's next check; and it selects
/// only among servers within the latency window of the fastest average round trip
/// (`rtt_monitor.rs`). As Linkerd's
/// least loaded ([`P2cOpcount::least_loaded`]), the rule alone; with Linkerd's default
/// failure accrual ([`P2cOpcount::least_loaded_with_accrual`]), an endpoint is out after five
/// failures in a row (`accrual.rs`).
#[derive(Debug, Default)]
pub(crate) struct P2cOpcount {
    /// Per candidate, until when it is Unknown, seconds.
    unknown_until: Vec<f64>,
    /// The servers' monitors and the latency window (MongoDB), if kept; with them, network
    /// errors mark a server Unknown (SDAM).
    monitor: Option<RttMonitor>,
    /// Failure accrual (Linkerd), if kept.
    accrual: Option<Accrual>,
    /// Scratch: the servable candidates that are not Unknown.
    known: Vec<Cand>,
}

impl P2cOpcount {
    /// The MongoDB server selection spec, with SDAM's reaction to network errors and the
    /// latency window; the monitors' round trips draw from `rng`.
    pub(crate) fn mongodb(rng: SmallRng) -> Self {
        P2cOpcount {
            monitor: Some(RttMonitor::new(rng)),
            ..P2cOpcount::default()
        }
    }

    /// Linkerd / Finagle's least loaded: the rule alone.
    pub(crate) fn least_loaded() -> Self {
        P2cOpcount::default()
    }

    /// Linkerd's least loaded with its default failure accrual, whose backoff jitter draws
    /// from `rng`.
    pub(crate) fn least_loaded_with_accrual(rng: SmallRng) -> Self {
        P2cOpcount {
            accrual: Some(Accrual::new(rng)),
            ..P2cOpcount::default()
        }
    }
}

impl Picker for P2cOpcount {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, w: &World<'_>, rng: &mut SmallRng) -> Cand {
        if let Some(acc) = self.accrual.as_mut() {
            let c = finagle_pick(s, st, acc, rng);
            acc.sent(c);
            return c;
        }
        // With every servable server Unknown, the driver would wait for its monitors; here the
        // rule picks among them all rather than stall.
        let until = &self.unknown_until;
        self.known.clear();
        self.known.extend(
            s.iter()
                .filter(|&&c| until.get(c as usize).is_none_or(|&u| u <= st.now)),
        );
        if let Some(m) = self.monitor.as_mut() {
            m.window(&mut self.known, w, st.now);
        }
        let pool = if self.known.is_empty() {
            s
        } else {
            &self.known[..]
        };
        let (a, b) = two_random(pool, rng);
        if st.in_flight[a as usize] <= st.in_flight[b as usize] {
            a
        } else {
            b
        }
    }

    fn outcome(&mut self, cand: Cand, outcome: &Outcome, _elapsed_s: f64, now: f64) {
        if let Some(acc) = self.accrual.as_mut() {
            acc.outcome(cand, outcome, now);
        }
        let network = matches!(
            outcome,
            Outcome::Failure(FailureClass::Transport | FailureClass::Refused)
        );
        if self.monitor.is_some() && network {
            let i = cand as usize;
            if self.unknown_until.len() <= i {
                self.unknown_until.resize(i + 1, f64::NEG_INFINITY);
            }
            self.unknown_until[i] = now + MIN_HEARTBEAT_S;
            if let Some(m) = self.monitor.as_mut() {
                m.unknown(cand, now + MIN_HEARTBEAT_S);
            }
        }
    }
}

/// Picks a balancer makes before it gives up looking for an open endpoint (Finagle's
/// `maxEffort` as Linkerd 1 ran it; today's Finagle default, `PanicMode.FiftyPercentUnhealthy`,
/// is 4).
const MAX_EFFORT: u32 = 5;

/// Finagle's balancer over P2C: of two random endpoints the healthier (open before dead), and
/// of two equally healthy ones the one with fewer requests in flight (`P2CPick`); up to
/// [`MAX_EFFORT`] such picks until one is open, and then the next pick whatever its health
/// (`Balancer.apply`'s panic).
fn finagle_pick(s: &[Cand], st: &PickState<'_>, acc: &mut Accrual, rng: &mut SmallRng) -> Cand {
    let mut pick = |rng: &mut SmallRng| {
        let (a, b) = two_random(s, rng);
        let (open_a, open_b) = (acc.open(a, st.now), acc.open(b, st.now));
        let c = if open_a != open_b {
            if open_a {
                a
            } else {
                b
            }
        } else if st.in_flight[a as usize] <= st.in_flight[b as usize] {
            a
        } else {
            b
        };
        (c, open_a || open_b)
    };
    for _ in 0..MAX_EFFORT {
        let (c, open) = pick(rng);
        if open {
            return c;
        }
    }
    pick(rng).0
}

/// tower `PeakEwma` / Finagle: cost = peak-sensitive EWMA of round-trip time x (pending + 1);
/// two random candidates, the cheaper wins. A slower sample replaces the estimate at once; a
/// faster one is blended in with weight `1 - exp(-elapsed / tau)`, `elapsed` since the
/// estimate was last touched. Every read of a cost first decays the estimate toward zero and
/// keeps the decayed value (tower's `RttEstimate::decay`, Finagle's `observe(0)`), so the
/// next sample is compared with, and blended into, the decayed estimate. Failures are round
/// trips like any other, which is exactly why fast failures attract traffic.
#[derive(Debug)]
pub(crate) struct P2cPeakEwma {
    /// Per candidate: the estimate, ms, and when it was last touched (a read or a sample),
    /// seconds; `None` until the candidate is first touched.
    rtt_ms: Vec<Option<(f64, f64)>>,
    /// Decay time constant, seconds (linkerd's default 10 s).
    tau_s: f64,
    /// A new candidate's estimate, ms (linkerd's default 30 ms); it decays like any other.
    default_rtt_ms: f64,
}

impl Default for P2cPeakEwma {
    fn default() -> Self {
        P2cPeakEwma {
            rtt_ms: Vec::new(),
            tau_s: 10.0,
            default_rtt_ms: 30.0,
        }
    }
}

impl P2cPeakEwma {
    /// Candidate `c`'s estimate and when it was last touched. A candidate starts at the
    /// default the first time it is touched; tower starts it when the endpoint is discovered,
    /// so where each candidate is read rarely (thousands of them) tower's default has decayed
    /// further by its first read.
    fn entry(&mut self, c: Cand, now: f64) -> &mut (f64, f64) {
        let i = c as usize;
        if self.rtt_ms.len() <= i {
            self.rtt_ms.resize(i + 1, None);
        }
        self.rtt_ms[i].get_or_insert((self.default_rtt_ms, now))
    }

    /// Folds a round trip of `rtt` ms observed at `now` into `c`'s estimate and returns the
    /// new estimate (tower's `RttEstimate::update`); a read is a round trip of 0.
    fn update(&mut self, c: Cand, rtt: f64, now: f64) -> f64 {
        let tau_s = self.tau_s;
        let (est, at) = self.entry(c, now);
        if *est < rtt {
            *est = rtt;
        } else {
            let decay = (-(now - *at).max(0.0) / tau_s).exp();
            *est = *est * decay + rtt * (1.0 - decay);
        }
        *at = now;
        *est
    }

    /// What a read of `c`'s load gives, keeping the decayed estimate.
    fn cost(&mut self, c: Cand, st: &PickState<'_>) -> f64 {
        self.update(c, 0.0, st.now) * (st.in_flight[c as usize] as f64 + 1.0)
    }
}

impl Picker for P2cPeakEwma {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        let (a, b) = two_random(s, rng);
        if self.cost(a, st) <= self.cost(b, st) {
            a
        } else {
            b
        }
    }

    fn outcome(&mut self, cand: Cand, _outcome: &Outcome, elapsed_s: f64, now: f64) {
        self.update(cand, elapsed_s * 1000.0, now);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::sim::baselines::testing::TestWorld;

    /// Candidate 0 idle, candidate 1 busy: the rule alone always takes 0.
    fn pick_at(p: &mut P2cOpcount, tw: &TestWorld, now: f64) -> Cand {
        let in_flight = [0, 5];
        let st = PickState {
            in_flight: &in_flight,
            now,
        };
        p.pick(
            &[0, 1],
            &st,
            &tw.world(now),
            &mut SmallRng::seed_from_u64(1),
        )
    }

    #[test]
    fn mongodb_selects_within_fifteen_ms_of_the_fastest_round_trip() {
        // A busy near server (1 ms round trips) and an idle far one (30 ms): the far one is
        // outside the latency window, so the near one takes every request; the rule alone
        // (Linkerd's) takes the idle one.
        let tw = TestWorld::with(
            "",
            "[[candidates]]\nid = \"near\"\nsuccess = 1.0\nduration_ms = 10.0\nconnect_ms = 1.0\n\
             [[candidates]]\nid = \"far\"\nsuccess = 1.0\nduration_ms = 10.0\nconnect_ms = 30.0\n",
        );
        let in_flight = [5, 0];
        let mut m = P2cOpcount::mongodb(SmallRng::seed_from_u64(1));
        assert_eq!(tw.always_picks(&mut m, &[0, 1], &in_flight, 0.0), 0);
        let mut ll = P2cOpcount::least_loaded();
        assert_eq!(tw.always_picks(&mut ll, &[0, 1], &in_flight, 0.0), 1);
    }

    #[test]
    fn least_loaded_with_accrual_leaves_out_a_dead_endpoint_until_its_probe() {
        let tw = TestWorld::plain(2);
        let mut ll = P2cOpcount::least_loaded_with_accrual(SmallRng::seed_from_u64(1));
        for _ in 0..5 {
            ll.outcome(0, &Outcome::failure(FailureClass::Refused), 0.01, 2.0);
        }
        assert_eq!(pick_at(&mut ll, &tw, 2.1), 1, "dead: the busy one takes it");
        assert_eq!(
            pick_at(&mut ll, &tw, 7.0),
            0,
            "revived 5 s later: the probe"
        );
        assert_eq!(pick_at(&mut ll, &tw, 7.0), 1, "one probe at a time");
        ll.outcome(0, &Outcome::success(), 0.01, 7.1);
        assert_eq!(pick_at(&mut ll, &tw, 7.2), 0, "alive again");
        // Both dead: after its tries the balancer panics and takes the less loaded anyway.
        for c in [0, 1] {
            for _ in 0..5 {
                ll.outcome(c, &Outcome::failure(FailureClass::Refused), 0.01, 8.0);
            }
        }
        assert_eq!(pick_at(&mut ll, &tw, 8.1), 0, "panic: the less loaded");
        // MongoDB's rule has no accrual: five refusals make it Unknown for 500 ms only; the
        // rule alone leaves it in.
        let mut m = P2cOpcount::mongodb(SmallRng::seed_from_u64(1));
        let mut plain = P2cOpcount::least_loaded();
        for _ in 0..5 {
            m.outcome(0, &Outcome::failure(FailureClass::Refused), 0.01, 2.0);
            plain.outcome(0, &Outcome::failure(FailureClass::Refused), 0.01, 2.0);
        }
        assert_eq!(pick_at(&mut m, &tw, 2.5), 0);
        assert_eq!(pick_at(&mut plain, &tw, 2.1), 0);
    }

    /// The cost tower reads for `c` at `now` with nothing in flight.
    fn read(p: &mut P2cPeakEwma, c: Cand, now: f64) -> f64 {
        let in_flight = [0, 0];
        p.cost(
            c,
            &PickState {
                in_flight: &in_flight,
                now,
            },
        )
    }

    #[test]
    fn a_new_candidate_starts_at_the_default_and_decays_like_any_other() {
        let mut p = P2cPeakEwma::default();
        assert_eq!(
            read(&mut p, 0, 5.0),
            30.0,
            "the default, first touched at 5 s"
        );
        let e = 30.0 * (-1.0f64).exp();
        assert!(
            (read(&mut p, 0, 15.0) - e).abs() < 1e-9,
            "one tau later: 30 / e"
        );
        // A first sample below the decayed default blends in (tower: `rtt_ns < rtt` fails).
        p.outcome(0, &Outcome::success(), 0.010, 15.0);
        assert!(
            (read(&mut p, 0, 15.0) - e).abs() < 1e-9,
            "no time since the read: no weight"
        );
    }

    #[test]
    fn a_read_keeps_the_decayed_estimate_for_the_next_sample() {
        let mut p = P2cPeakEwma::default();
        p.outcome(0, &Outcome::success(), 0.100, 0.0);
        assert_eq!(
            read(&mut p, 0, 0.0),
            100.0,
            "a slower sample replaces the default"
        );
        let decayed = 100.0 * (-1.0f64).exp();
        assert!((read(&mut p, 0, 10.0) - decayed).abs() < 1e-9);
        // 50 ms is above the decayed 36.8 ms that the read kept: it replaces it. (Blended
        // into the estimate as it stood at the sample, it would read 68.4 ms.)
        p.outcome(0, &Outcome::success(), 0.050, 10.0);
        assert_eq!(read(&mut p, 0, 10.0), 50.0);
        // A faster sample blends in by the time since the last touch (a read at 10 s).
        p.outcome(0, &Outcome::success(), 0.020, 20.0);
        let w = (-1.0f64).exp();
        assert!((read(&mut p, 0, 20.0) - (50.0 * w + 20.0 * (1.0 - w))).abs() < 1e-9);
        // The other candidate was never touched: the default, whatever the time.
        assert_eq!(read(&mut p, 1, 20.0), 30.0);
    }

    #[test]
    fn the_cost_is_the_estimate_times_one_more_than_in_flight() {
        let mut p = P2cPeakEwma::default();
        p.outcome(1, &Outcome::success(), 0.010, 0.0);
        let tw = TestWorld::plain(2);
        // 0: default 30 ms idle (30); 1: 10 ms with 3 in flight (40): 0 wins either order.
        let in_flight = [0, 3];
        let st = PickState {
            in_flight: &in_flight,
            now: 0.0,
        };
        for seed in 0..8 {
            let got = p.pick(
                &[0, 1],
                &st,
                &tw.world(0.0),
                &mut SmallRng::seed_from_u64(seed),
            );
            assert_eq!(got, 0, "seed {seed}");
        }
    }

    #[test]
    fn a_network_error_makes_the_server_unknown_for_half_a_second_and_a_timeout_does_not() {
        let tw = TestWorld::plain(2);
        let mut p = P2cOpcount::mongodb(SmallRng::seed_from_u64(1));
        p.outcome(0, &Outcome::failure(FailureClass::Timeout), 1.0, 1.0);
        assert_eq!(
            pick_at(&mut p, &tw, 1.1),
            0,
            "a timeout is no network error"
        );
        for class in [FailureClass::Transport, FailureClass::Refused] {
            p.outcome(0, &Outcome::failure(class), 0.01, 2.0);
            assert_eq!(pick_at(&mut p, &tw, 2.4), 1, "{class:?}: Unknown");
            assert_eq!(pick_at(&mut p, &tw, 2.5), 0, "{class:?}: checked again");
        }
        // Linkerd's least loaded has no SDAM.
        let mut ll = P2cOpcount::least_loaded();
        ll.outcome(0, &Outcome::failure(FailureClass::Transport), 0.01, 2.0);
        assert_eq!(pick_at(&mut ll, &tw, 2.1), 0);
    }
}
