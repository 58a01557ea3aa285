//! Power of two choices: MongoDB's operation count, and tower / Finagle's peak EWMA.

use rand::rngs::SmallRng;

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
/// marks the server Unknown, out of selection until its monitor's next check; as Linkerd's
/// least loaded ([`P2cOpcount::least_loaded`]), the rule alone.
#[derive(Debug, Default)]
pub(crate) struct P2cOpcount {
    /// Network errors mark a server Unknown (SDAM).
    sdam: bool,
    /// Per candidate, until when it is Unknown, seconds.
    unknown_until: Vec<f64>,
    /// Scratch: the servable candidates that are not Unknown.
    known: Vec<Cand>,
}

impl P2cOpcount {
    /// The MongoDB server selection spec, with SDAM's reaction to network errors.
    pub(crate) fn mongodb() -> Self {
        P2cOpcount {
            sdam: true,
            ..P2cOpcount::default()
        }
    }

    /// Linkerd / Finagle's least loaded: the rule alone.
    pub(crate) fn least_loaded() -> Self {
        P2cOpcount::default()
    }
}

impl Picker for P2cOpcount {
    fn pick(&mut self, s: &[Cand], st: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        // With every servable server Unknown, the driver would wait for its monitors; here the
        // rule picks among them all rather than stall.
        let until = &self.unknown_until;
        self.known.clear();
        self.known.extend(
            s.iter()
                .filter(|&&c| until.get(c as usize).is_none_or(|&u| u <= st.now)),
        );
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
        let network = matches!(
            outcome,
            Outcome::Failure(FailureClass::Transport | FailureClass::Refused)
        );
        if self.sdam && network {
            let i = cand as usize;
            if self.unknown_until.len() <= i {
                self.unknown_until.resize(i + 1, f64::NEG_INFINITY);
            }
            self.unknown_until[i] = now + MIN_HEARTBEAT_S;
        }
    }
}

/// tower `PeakEwma` / Finagle: cost = peak-sensitive EWMA of round-trip time x (pending + 1);
/// two random candidates, the cheaper wins. A slower sample replaces the estimate at once; a
/// faster one is blended in with weight `1 - exp(-elapsed / tau)`. Failures are round trips
/// like any other, which is exactly why fast failures attract traffic.
#[derive(Debug)]
pub(crate) struct P2cPeakEwma {
    rtt_ms: Vec<(f64, f64)>,
    /// Decay time constant, seconds (linkerd's default 10 s).
    tau_s: f64,
    /// The estimate before any sample, ms (linkerd's default 30 ms).
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
    fn estimate(&self, c: Cand, now: f64) -> f64 {
        match self.rtt_ms.get(c as usize) {
            Some(&(est, at)) if at >= 0.0 => {
                // The estimate decays toward zero while idle, as tower's does when read.
                est * (-(now - at).max(0.0) / self.tau_s).exp()
            }
            _ => self.default_rtt_ms,
        }
    }

    fn cost(&self, c: Cand, st: &PickState<'_>) -> f64 {
        self.estimate(c, st.now) * (st.in_flight[c as usize] as f64 + 1.0)
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
        let i = cand as usize;
        if self.rtt_ms.len() <= i {
            self.rtt_ms.resize(i + 1, (0.0, -1.0));
        }
        let rtt = elapsed_s * 1000.0;
        let (est, at) = self.rtt_ms[i];
        let next = if at < 0.0 || rtt > est {
            rtt
        } else {
            let w = (-(now - at).max(0.0) / self.tau_s).exp();
            est * w + rtt * (1.0 - w)
        };
        self.rtt_ms[i] = (next, now);
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
    fn a_network_error_makes_the_server_unknown_for_half_a_second_and_a_timeout_does_not() {
        let tw = TestWorld::plain(2);
        let mut p = P2cOpcount::mongodb();
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
