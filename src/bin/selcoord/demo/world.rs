//! The demo's simulated candidates, in real time.
//!
//! A small model read from the scenario's public fields: `selcoord simulate` samples the full
//! distributions in virtual time inside the library, while the demo keeps to the public API.

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use selection_coordinator::sim::{CandidateSpec, Dist, Scenario, TimelineEvent, Workload};
use selection_coordinator::{CandidateId, FailureClass, Outcome, Request};

/// The simulated candidates: a minimal real-time truth model read from the scenario (success
/// probability, failure class, mean latencies with ±50% jitter, capacity with extra overload
/// past it), plus what the demo has seen, for the status line.
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

#[derive(Debug, Clone)]
struct Live {
    success: f64,
    failure: FailureClass,
    failure_ms: f64,
    connect_ms: f64,
    ttfb_ms: f64,
    duration_ms: f64,
    bandwidth_mbps: Option<f64>,
    capacity: Option<u32>,
    overload_per_extra: f64,
    in_flight: u32,
}

impl Live {
    fn from_spec(s: &CandidateSpec) -> Self {
        Live {
            success: s.success,
            failure: s.failure,
            failure_ms: s.failure_ms.mean(),
            connect_ms: s.connect_ms.mean(),
            ttfb_ms: s.ttfb_ms.as_ref().map_or(0.0, Dist::mean),
            duration_ms: s.duration_ms.mean(),
            bandwidth_mbps: s.bandwidth_mbps,
            capacity: s.capacity,
            overload_per_extra: s.overload_per_extra,
            in_flight: 0,
        }
    }
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
            self.live.insert(id.to_string(), Live::from_spec(spec));
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

    /// Runs one attempt on `id` now: its outcome and how long it takes, scenario milliseconds.
    pub(super) fn attempt(&mut self, id: &CandidateId, workload: &Workload) -> (Outcome, f64) {
        self.attempts += 1;
        *self.grants.entry(id.as_str().to_string()).or_default() += 1;
        let rng = &mut self.rng;
        let Some(c) = self.live.get_mut(id.as_str()) else {
            self.failures += 1;
            return (Outcome::failure(FailureClass::Refused), 1.0);
        };
        c.in_flight += 1;
        let (overload_roll, success_roll): (f64, f64) = (rng.gen(), rng.gen());
        let mut jitter = |mean: f64| mean * rng.gen_range(0.5..1.5);
        let over = match c.capacity {
            Some(cap) if c.in_flight > cap => {
                (c.overload_per_extra * f64::from(c.in_flight - cap)).min(1.0)
            }
            _ => 0.0,
        };
        let failed = if overload_roll < over {
            Some(FailureClass::Overload)
        } else if success_roll >= c.success {
            Some(c.failure)
        } else {
            None
        };
        let (outcome, ms) = match failed {
            Some(class) => (Outcome::failure(class), jitter(c.failure_ms)),
            None => {
                let connect = jitter(c.connect_ms);
                let ttfb = jitter(c.ttfb_ms);
                let transfer = match c.bandwidth_mbps {
                    Some(mbps) if workload.bytes > 0 => workload.bytes as f64 * 8e-3 / mbps,
                    _ => 0.0,
                };
                let total = connect + ttfb + transfer + jitter(c.duration_ms);
                (
                    Outcome::success_with(connect, ttfb, workload.bytes, total),
                    total,
                )
            }
        };
        match workload.attempt_timeout_ms {
            Some(t) if ms > t => {
                self.failures += 1;
                (Outcome::failure(FailureClass::Timeout), t)
            }
            _ => {
                if failed.is_some() {
                    self.failures += 1;
                }
                (outcome, ms)
            }
        }
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
            c.success = ev.success.unwrap_or(c.success);
            c.failure = ev.failure.unwrap_or(c.failure);
            c.failure_ms = ev.failure_ms.as_ref().map_or(c.failure_ms, Dist::mean);
            c.ttfb_ms = ev.ttfb_ms.as_ref().map_or(c.ttfb_ms, Dist::mean);
            c.capacity = ev.capacity.or(c.capacity);
        }
    }

    /// A `heal` event: the candidate's truth returns to its file values.
    pub(super) fn heal(&mut self, id: &str) {
        if let (Some(spec), Some(c)) = (self.specs.get(id), self.live.get_mut(id)) {
            let in_flight = c.in_flight;
            *c = Live::from_spec(spec);
            c.in_flight = in_flight;
        }
    }

    /// Seconds to the next arrival of a Poisson process at `rate` per second.
    pub(super) fn gap(&mut self, rate: f64) -> f64 {
        let u: f64 = self.rng.gen();
        -(1.0 - u).ln() / rate
    }
}
