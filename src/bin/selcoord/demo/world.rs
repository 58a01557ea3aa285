//! The demo's simulated candidates, in real time: the simulator's truth model
//! ([`Truth`]) decides each attempt; the demo sleeps for the time it says.

use std::collections::{HashMap, VecDeque};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::sim::{CandidateSpec, Scenario, TimelineEvent, Truth, Workload};
use selection_coordinator::{CandidateId, FailureClass, Outcome, Request};

/// The simulated candidates: each live one's [`Truth`] and the attempts in flight on it (the
/// load its next attempt lands on), plus what the demo has seen, for the status line.
#[derive(Debug)]
pub(super) struct World {
    specs: HashMap<String, CandidateSpec>,
    live: HashMap<String, Live>,
    ids: Vec<String>,
    rng: SmallRng,
    /// Attempts run.
    pub(super) attempts: u64,
    /// Attempts that failed.
    pub(super) failures: u64,
    /// What the status line shows: the attempts started in each of the last [`RECENT_S`]
    /// complete seconds (newest last), and in the second under way.
    recent: VecDeque<Bucket>,
    current: Bucket,
    /// Shutting down: workers ask for nothing more.
    pub(super) stopping: bool,
}

/// How many seconds of attempts the status line's failure rate and shares cover.
pub(super) const RECENT_S: usize = 5;

/// The attempts started in one second.
#[derive(Debug, Default)]
struct Bucket {
    attempts: u64,
    failures: u64,
    grants: HashMap<String, u64>,
}

#[derive(Debug)]
struct Live {
    truth: Truth,
    in_flight: u32,
}

impl World {
    pub(super) fn new(scenario: &Scenario, seed: u64) -> Self {
        let mut specs = HashMap::new();
        for (id, i) in scenario.expanded() {
            specs.insert(id, scenario.candidates[i].clone());
        }
        World {
            specs,
            live: HashMap::new(),
            ids: Vec::new(),
            rng: SmallRng::seed_from_u64(seed ^ 0x5eed),
            attempts: 0,
            failures: 0,
            recent: VecDeque::new(),
            current: Bucket::default(),
            stopping: false,
        }
    }

    pub(super) fn join(&mut self, id: &str) {
        if let Some(spec) = self.specs.get(id) {
            self.live.insert(
                id.to_string(),
                Live {
                    truth: Truth::from_spec(spec),
                    in_flight: 0,
                },
            );
            if !self.ids.iter().any(|x| x == id) {
                self.ids.push(id.to_string());
            }
        }
    }

    pub(super) fn leave(&mut self, id: &str) {
        self.ids.retain(|x| x != id);
    }

    /// A request as the workload describes it: any candidate, or a random subset.
    pub(super) fn request(&mut self, workload: &Workload) -> Request {
        let k = workload.subset as usize;
        if k == 0 || k >= self.ids.len() {
            return Request::any();
        }
        let picked = rand::seq::index::sample(&mut self.rng, self.ids.len(), k);
        Request::only(picked.into_iter().map(|i| self.ids[i].clone()))
    }

    /// Starts one attempt on `id` now: its outcome and how long it takes, scenario
    /// milliseconds. The candidate counts it in flight until [`World::finished`].
    pub(super) fn attempt(&mut self, id: &CandidateId, workload: &Workload) -> (Outcome, f64) {
        self.attempts += 1;
        self.current.attempts += 1;
        *self
            .current
            .grants
            .entry(id.as_str().to_string())
            .or_default() += 1;
        let Some(c) = self.live.get_mut(id.as_str()) else {
            self.failures += 1;
            self.current.failures += 1;
            return (Outcome::failure(FailureClass::Refused), 1.0);
        };
        c.in_flight += 1;
        let r = c.truth.attempt(
            c.in_flight,
            workload.bytes,
            workload.attempt_timeout_ms,
            &mut self.rng,
        );
        if !r.is_success() {
            self.failures += 1;
            self.current.failures += 1;
        }
        (r.outcome(), r.end_s() * 1000.0)
    }

    pub(super) fn finished(&mut self, id: &CandidateId) {
        if let Some(c) = self.live.get_mut(id.as_str()) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }

    /// Closes the second under way (call it once a second), forgetting seconds older than
    /// [`RECENT_S`].
    pub(super) fn next_second(&mut self) {
        self.recent.push_back(std::mem::take(&mut self.current));
        while self.recent.len() > RECENT_S {
            self.recent.pop_front();
        }
    }

    /// Failed attempts among those started in the last [`RECENT_S`] complete seconds, as a
    /// percentage (0 with none).
    pub(super) fn recent_failure_pct(&self) -> f64 {
        let (attempts, failures) = self
            .recent
            .iter()
            .fold((0, 0), |(a, f), b| (a + b.attempts, f + b.failures));
        100.0 * failures as f64 / attempts.max(1) as f64
    }

    /// The `n` candidates with most attempts started in the last [`RECENT_S`] complete seconds,
    /// with their share.
    pub(super) fn recent_top(&self, n: usize) -> String {
        let mut grants: HashMap<&str, u64> = HashMap::new();
        for b in &self.recent {
            for (id, k) in &b.grants {
                *grants.entry(id).or_default() += k;
            }
        }
        let total: u64 = grants.values().sum();
        let mut v: Vec<_> = grants.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.iter()
            .take(n)
            .map(|(id, k)| format!("{id} {:.0}%", 100.0 * *k as f64 / total.max(1) as f64))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether `id` is a candidate of the scenario; its static info if so.
    pub(super) fn spec(&self, id: &str) -> Option<&CandidateSpec> {
        self.specs.get(id)
    }

    /// A `degrade` event: the candidate's truth takes the event's overrides.
    pub(super) fn degrade(&mut self, id: &str, ev: &TimelineEvent) {
        if let Some(c) = self.live.get_mut(id) {
            c.truth.degrade(ev);
        }
    }

    /// A `heal` event: the candidate's truth returns to its file values.
    pub(super) fn heal(&mut self, id: &str) {
        if let (Some(spec), Some(c)) = (self.specs.get(id), self.live.get_mut(id)) {
            c.truth = Truth::from_spec(spec);
        }
    }

    /// Seconds to the next arrival of a Poisson process at `rate` per second.
    pub(super) fn gap(&mut self, rate: f64) -> f64 {
        let u: f64 = self.rng.random();
        -(1.0 - u).ln() / rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_window_covers_the_last_recent_s_seconds() {
        let scenario = Scenario::parse(include_str!("scenario.toml"), "builtin:demo").unwrap();
        let mut w = World::new(&scenario, 1);
        // An attempt on a candidate that is not live fails at once (refused).
        let gone = CandidateId::new("gone");
        for _ in 0..4 {
            w.attempt(&gone, &scenario.workload);
        }
        assert_eq!(
            w.recent_failure_pct(),
            0.0,
            "the second under way is not shown"
        );
        w.next_second();
        assert_eq!(w.recent_failure_pct(), 100.0);
        assert_eq!(w.recent_top(2), "gone 100%");
        for _ in 1..RECENT_S {
            w.next_second();
        }
        assert_eq!(w.recent_failure_pct(), 100.0, "still within {RECENT_S} s");
        w.next_second();
        assert_eq!(w.recent_failure_pct(), 0.0);
        assert_eq!(w.recent_top(2), "");
        // The counts for the final summary stay cumulative.
        assert_eq!((w.attempts, w.failures), (4, 4));
    }
}
