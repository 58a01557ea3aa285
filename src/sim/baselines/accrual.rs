//! Finagle's failure accrual as Linkerd configures it by default: five failures in a row mark
//! an endpoint dead for an equal-jittered backoff of 5 s doubling up to 300 s; then one probe
//! request decides whether it lives again (Finagle's `FailureAccrualFactory` with
//! `FailureAccrualPolicy.consecutiveFailures(5, Backoff.equalJittered(5.seconds,
//! 300.seconds))`).

use rand::rngs::SmallRng;
use rand::RngExt;

use crate::core::{FailureClass, Outcome};
use crate::sim::policy::Cand;

/// Failures in a row that mark an endpoint dead (Linkerd's `consecutiveFailures` default).
const FAILURES: u32 = 5;
/// The first time an endpoint is marked dead for, seconds.
const START_S: f64 = 5.0;
/// The longest, seconds.
const MAX_S: f64 = 300.0;

/// Where an endpoint is in Finagle's cycle: Alive, Dead until a time, ProbeOpen (the next
/// request is a probe) or ProbeClosed (the probe is out; no other request until it answers).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Alive,
    Dead { until_s: f64 },
    ProbeOpen,
    ProbeClosed,
}

/// One endpoint's accrual: its state, its failures in a row, and its backoff.
#[derive(Debug, Clone, Copy)]
struct Endpoint {
    state: State,
    failures: u32,
    /// How many times it was marked dead since it last lived again.
    deaths: u32,
    /// What the next mark will last, seconds (`Backoff::duration`).
    next_dead_s: f64,
}

impl Default for Endpoint {
    fn default() -> Self {
        Endpoint {
            state: State::Alive,
            failures: 0,
            deaths: 0,
            next_dead_s: START_S,
        }
    }
}

/// Failure accrual over every candidate of a run.
#[derive(Debug)]
pub(crate) struct Accrual {
    endpoints: Vec<Endpoint>,
    /// The backoff's jitter.
    rng: SmallRng,
}

impl Accrual {
    /// Accrual whose backoff jitter draws from `rng`.
    pub(crate) fn new(rng: SmallRng) -> Self {
        Accrual {
            endpoints: Vec::new(),
            rng,
        }
    }

    fn endpoint(&mut self, c: Cand) -> &mut Endpoint {
        endpoint(&mut self.endpoints, c)
    }

    /// Whether `c` takes requests at `now` (Finagle's status Open): alive, or revived and
    /// waiting for its probe. A dead endpoint whose time is up is revived here.
    pub(crate) fn open(&mut self, c: Cand, now: f64) -> bool {
        let e = self.endpoint(c);
        if let State::Dead { until_s } = e.state {
            if now >= until_s {
                e.state = State::ProbeOpen;
            }
        }
        matches!(e.state, State::Alive | State::ProbeOpen)
    }

    /// A request was sent to `c`: a revived endpoint's probe is out.
    pub(crate) fn sent(&mut self, c: Cand) {
        let e = self.endpoint(c);
        if e.state == State::ProbeOpen {
            e.state = State::ProbeClosed;
        }
    }

    /// `c` answered. Errors the endpoint returns count as failures (a reset or refused
    /// connection, an overload answer); a timeout is the caller giving up above the balancer
    /// and, like a cancellation or an application error, counts as neither (Finagle's
    /// `Ignorable`: a probe that ends so is sent again).
    pub(crate) fn outcome(&mut self, c: Cand, outcome: &Outcome, now: f64) {
        let failed = match outcome {
            Outcome::Success { .. } => false,
            Outcome::Failure(
                FailureClass::Transport | FailureClass::Refused | FailureClass::Overload,
            ) => true,
            Outcome::Failure(_) => {
                let e = self.endpoint(c);
                if e.state == State::ProbeClosed {
                    e.state = State::ProbeOpen;
                }
                return;
            }
        };
        let e = endpoint(&mut self.endpoints, c);
        if !failed {
            if e.state == State::ProbeClosed {
                // Revived: the backoff starts over.
                e.state = State::Alive;
                e.deaths = 0;
                e.next_dead_s = START_S;
            }
            e.failures = 0;
            return;
        }
        if !matches!(e.state, State::Alive | State::ProbeClosed) {
            return;
        }
        e.failures += 1;
        if e.failures >= FAILURES {
            e.state = State::Dead {
                until_s: now + e.next_dead_s,
            };
            e.deaths += 1;
            e.next_dead_s = next_backoff(e.deaths, self.rng.random());
        } else if e.state == State::ProbeClosed {
            e.state = State::ProbeOpen;
        }
    }
}

/// Candidate `c`'s accrual, added alive if it is new.
fn endpoint(endpoints: &mut Vec<Endpoint>, c: Cand) -> &mut Endpoint {
    let i = c as usize;
    if endpoints.len() <= i {
        endpoints.resize(i + 1, Endpoint::default());
    }
    &mut endpoints[i]
}

/// `Backoff.equalJittered(5 s, 300 s)` after `deaths` marks: `5 s x 2^(deaths - 1)` (Finagle's
/// `halfExp`) plus up to as much again at random (`jitter` in [0, 1)), and 300 s from where
/// that would reach it.
fn next_backoff(deaths: u32, jitter: f64) -> f64 {
    let half = START_S * 2f64.powi(deaths.saturating_sub(1).min(62) as i32);
    if half >= MAX_S {
        return MAX_S;
    }
    let d = half + jitter * half;
    if d >= MAX_S {
        MAX_S
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn fail(a: &mut Accrual, c: Cand, class: FailureClass, now: f64) {
        a.sent(c);
        a.outcome(c, &Outcome::failure(class), now);
    }

    #[test]
    fn five_failures_in_a_row_mark_an_endpoint_dead_for_five_seconds() {
        let mut a = Accrual::new(SmallRng::seed_from_u64(1));
        for i in 0..4 {
            fail(&mut a, 0, FailureClass::Refused, 1.0 + i as f64);
            assert!(a.open(0, 1.0 + i as f64), "after {} failures", i + 1);
        }
        // A success between resets the count.
        a.outcome(0, &Outcome::success(), 5.0);
        for i in 0..4 {
            fail(&mut a, 0, FailureClass::Transport, 6.0 + i as f64);
        }
        assert!(a.open(0, 9.5));
        fail(&mut a, 0, FailureClass::Overload, 10.0);
        assert!(!a.open(0, 10.0), "the fifth in a row");
        assert!(!a.open(0, 14.99));
        assert!(a.open(0, 15.0), "dead for the first backoff, 5 s");
        assert!(a.open(1, 10.0), "the others are untouched");
    }

    #[test]
    fn a_probe_decides_and_the_backoff_doubles_with_jitter_until_revived() {
        let mut a = Accrual::new(SmallRng::seed_from_u64(7));
        for _ in 0..5 {
            fail(&mut a, 0, FailureClass::Refused, 0.0);
        }
        assert!(a.open(0, 5.0), "revived for a probe");
        a.sent(0);
        assert!(!a.open(0, 5.0), "one probe at a time");
        // The probe fails: dead again, for 5-10 s (the second backoff).
        a.outcome(0, &Outcome::failure(FailureClass::Refused), 5.1);
        let second = (0..1000)
            .map(|k| 5.1 + k as f64 * 0.01)
            .find(|&t| a.open(0, t))
            .unwrap();
        assert!((10.1..15.1).contains(&second), "revived at {second}");
        // A probe that times out is sent again; one that succeeds revives the endpoint.
        a.sent(0);
        a.outcome(0, &Outcome::failure(FailureClass::Timeout), second);
        assert!(a.open(0, second), "a timeout is no verdict");
        a.sent(0);
        a.outcome(0, &Outcome::success(), second);
        assert!(a.open(0, second));
        a.sent(0);
        assert!(a.open(0, second), "alive: no probe");
        // Five failures later it is dead for 5 s again: the backoff started over.
        for _ in 0..5 {
            fail(&mut a, 0, FailureClass::Refused, 100.0);
        }
        assert!(!a.open(0, 104.9));
        assert!(a.open(0, 105.0));
    }

    #[test]
    fn timeouts_cancellations_and_application_errors_do_not_accrue() {
        let mut a = Accrual::new(SmallRng::seed_from_u64(1));
        for class in [
            FailureClass::Timeout,
            FailureClass::Cancelled,
            FailureClass::Application,
        ] {
            for _ in 0..10 {
                fail(&mut a, 0, class, 1.0);
            }
            assert!(a.open(0, 1.0), "{class:?}");
        }
    }

    #[test]
    fn the_backoff_is_equal_jittered_and_capped() {
        assert_eq!(next_backoff(1, 0.0), 5.0);
        assert_eq!(next_backoff(1, 0.5), 7.5);
        assert_eq!(next_backoff(2, 0.0), 10.0);
        assert_eq!(next_backoff(3, 0.999), 20.0 + 0.999 * 20.0);
        assert_eq!(next_backoff(6, 0.9), MAX_S, "160 + 144 s is past 300");
        assert_eq!(next_backoff(5, 0.9), 80.0 + 72.0);
        assert_eq!(next_backoff(7, 0.0), MAX_S);
        assert_eq!(next_backoff(u32::MAX, 0.3), MAX_S);
    }
}
