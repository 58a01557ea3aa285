//! The demo's simulated candidates, in real time: the simulator's truth model
//! ([`Truth`]) decides each attempt; the demo sleeps for the time it says.

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
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
    grants: HashMap<String, u64>,
    /// Shutting down: workers ask for nothing more.
    pub(super) stopping: bool,
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
            grants: HashMap::new(),
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
        *self.grants.entry(id.as_str().to_string()).or_default() += 1;
        let Some(c) = self.live.get_mut(id.as_str()) else {
            self.failures += 1;
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
        }
        (r.outcome(), r.end_s() * 1000.0)
    }

    pub(super) fn finished(&mut self, id: &CandidateId) {
        if let Some(c) = self.live.get_mut(id.as_str()) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }

    /// The `n` candidates with most grants, with their share.
    pub(super) fn top(&self, n: usize) -> String {
        let total: u64 = self.grants.values().sum();
        let mut v: Vec<_> = self.grants.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .take(n)
            .map(|(id, k)| format!("{id} {:.0}%", 100.0 * **k as f64 / total.max(1) as f64))
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
        let u: f64 = self.rng.gen();
        -(1.0 - u).ln() / rate
    }
}
