//! Queueing candidates: a FIFO queue in front of `servers` parallel servers (M/G/c), the
//! time-varying service rate, and the read-only view of both that policies get through
//! [`World`](super::policy::World).
//!
//! The engine owns one [`Station`] per candidate. An attempt on a queueing candidate joins the
//! station's queue; when a server is free it is served for a `service_ms` sample times the
//! slowdown factor of the moment its service starts; its response (success roll, connect,
//! first byte, transfer, duration or `failure_ms`) follows the end of its service.

use std::collections::VecDeque;

use super::scenario::Slowdown;
use super::truth::Truth;

/// An attempt waiting for a server: its slot in the engine's attempt table and that slot's
/// generation (a slot reused by a later attempt has a new generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) att: u32,
    pub(crate) gen: u32,
}

/// One candidate's queue and busy servers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Station {
    /// Waiting, oldest first.
    pub(crate) waiting: VecDeque<Job>,
    /// Servers busy (attempts in service). Jobs whose caller gave up stay in the queue and
    /// are served all the same: the server does not know.
    pub(crate) busy: u32,
}

/// The stations of a run and what decides the slow periods.
#[derive(Clone, Debug)]
pub(crate) struct Queues {
    pub(crate) stations: Vec<Station>,
    /// Per-run salt of the slow-period draws.
    salt: u64,
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Queues {
    pub(crate) fn new(n: usize, salt: u64) -> Self {
        Queues {
            stations: vec![Station::default(); n],
            salt,
        }
    }

    /// The factor service times of candidate `c` are multiplied by at virtual time `now`:
    /// `slowdown.factor` in a slow period, else 1. Each period of each candidate is slow with
    /// probability `slowdown.probability`, independently: a hash of (run, candidate, period)
    /// rather than a random stream, so the level at any time is known without events and does
    /// not depend on what else happened in the run.
    pub(crate) fn factor(&self, c: usize, slowdown: Option<Slowdown>, now: f64) -> f64 {
        let Some(s) = slowdown else { return 1.0 };
        // The saturating cast is `floor().max(0.0)`: it truncates towards zero, 0 for NaN.
        let period = (now * 1000.0 / s.period_ms) as u64;
        let h = mix(self.salt
            ^ mix((c as u64)
                .wrapping_add(1)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15))
            ^ period);
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        if u < s.probability {
            s.factor
        } else {
            1.0
        }
    }

    /// Attempts waiting plus attempts in service on `c`.
    #[allow(dead_code)] // read through `World` by policies that know the queues
    pub(crate) fn queue_len(&self, c: usize) -> u32 {
        self.stations
            .get(c)
            .map_or(0, |s| s.waiting.len() as u32 + s.busy)
    }

    /// Whether an attempt arriving at `c` now finds every server busy and the queue at
    /// `truth`'s `queue_limit` (it is refused as an overload).
    pub(crate) fn is_full(&self, c: usize, truth: &Truth) -> bool {
        self.stations.get(c).is_some_and(|s| {
            s.busy >= truth.servers()
                && truth
                    .queue_limit()
                    .is_some_and(|l| s.waiting.len() as u32 >= l)
        })
    }

    /// Attempts waiting (not in service) on `c`.
    #[allow(dead_code)]
    pub(crate) fn waiting(&self, c: usize) -> u32 {
        self.stations.get(c).map_or(0, |s| s.waiting.len() as u32)
    }

    /// Attempts in service on `c`.
    #[allow(dead_code)]
    pub(crate) fn in_service(&self, c: usize) -> u32 {
        self.stations.get(c).map_or(0, |s| s.busy)
    }

    /// Completions per second one server of `c` manages at `now` (its mean service time at
    /// the current slowdown level); infinite for a candidate without a queue.
    #[allow(dead_code)]
    pub(crate) fn service_rate(&self, c: usize, truth: &Truth, now: f64) -> f64 {
        let ms = truth.mean_service_ms() * self.factor(c, truth.slowdown(), now);
        if truth.is_queue() && ms > 0.0 {
            1000.0 / ms
        } else {
            f64::INFINITY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_periods_come_at_the_given_rate_and_last_one_period() {
        let q = Queues::new(2, 42);
        let s = Some(Slowdown {
            period_ms: 500.0,
            factor: 3.0,
            probability: 0.5,
        });
        let levels: Vec<f64> = (0..4000)
            .map(|k| q.factor(0, s, k as f64 * 0.5 + 0.25))
            .collect();
        let slow = levels.iter().filter(|&&f| f == 3.0).count();
        assert!((1800..2200).contains(&slow), "{slow} slow periods of 4000");
        assert!(levels.iter().all(|&f| f == 1.0 || f == 3.0));
        // Constant within a period, and candidates differ.
        assert_eq!(q.factor(0, s, 10.01), q.factor(0, s, 10.49));
        let other: Vec<f64> = (0..4000)
            .map(|k| q.factor(1, s, k as f64 * 0.5 + 0.25))
            .collect();
        assert_ne!(levels, other);
        assert_eq!(q.factor(0, None, 1.0), 1.0);
    }
}
