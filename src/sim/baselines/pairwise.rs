//! lassie's prioritywaitqueue: every waiter compares itself with every other waiter by a
//! random roll weighted by lassie's scores, and runs only if it beats them all.

use std::collections::VecDeque;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::RngExt;

use super::leases::Leases;
use crate::core::FailureClass;
use crate::core::{AttemptId, CandidateInfo, Core, Event, Limits, Next, Outcome, Request};
use crate::score::{Config, ScoreModel};
use crate::sim::policy::{Cand, Clock, Decision, Ids, Policy, Req, World};

#[derive(Debug, Default, Clone)]
struct Waiter {
    eligible: Option<Vec<Cand>>,
    tried: Vec<Cand>,
    blocked_until: f64,
    attempt: Option<AttemptId>,
    /// The candidate of its running attempt (`None`: none, or reclaimed).
    running: Option<Cand>,
    /// Its running attempt's lease token ([`Leases::grant`]).
    lease: u64,
    /// Waits in the queue.
    queued: bool,
}

/// Pairwise comparison is not a total order: in a round every waiter may find a rival that
/// beat it, and then no one runs. lassie would hang there; here the round is counted as a
/// stall and the request looks again after `workload.stall_ms`.
///
/// lassie's scores come from a [`Core`] with the `lassie` preset, used as the statistics
/// store and slot keeper: once the pairwise rolls chose a winner, the core grants exactly it.
#[derive(Debug)]
pub(crate) struct LassiePairwise {
    core: Core,
    model: ScoreModel,
    clock: Clock,
    rng: SmallRng,
    ids: Ids,
    limits: Limits,
    stall_s: f64,
    in_flight: Vec<u32>,
    limit: Vec<u32>,
    present: Vec<bool>,
    live: Vec<Cand>,
    global: u32,
    waiters: Vec<Waiter>,
    queue: VecDeque<Req>,
    out: VecDeque<Decision>,
    decisions: u64,
    stalls: u64,
    scores: Vec<(Cand, f64)>,
    leases: Leases,
}

impl LassiePairwise {
    pub(crate) fn new(
        limits: Limits,
        stall_s: f64,
        rng: SmallRng,
        base: Instant,
    ) -> Result<Self, String> {
        let config = Config::lassie();
        let model = ScoreModel::new(config.clone()).map_err(|e| e.to_string())?;
        // The core keeps slots and statistics; the lease and the waiting places are kept
        // here, where the requests wait.
        let core_limits = Limits {
            max_attempt_s: None,
            ..limits
        };
        let core = Core::new(config, base)
            .and_then(|c| c.with_limits(core_limits))
            .map_err(|e| e.to_string())?;
        Ok(LassiePairwise {
            core,
            model,
            clock: Clock(base),
            rng,
            ids: Ids::default(),
            limits,
            stall_s,
            in_flight: Vec::new(),
            limit: Vec::new(),
            present: Vec::new(),
            live: Vec::new(),
            global: 0,
            waiters: Vec::new(),
            queue: VecDeque::new(),
            out: VecDeque::new(),
            decisions: 0,
            stalls: 0,
            scores: Vec::new(),
            leases: Leases::new(&limits),
        })
    }

    fn score(&self, c: Cand) -> f64 {
        self.ids
            .id(c)
            .and_then(|id| self.core.candidate(id))
            .map(|v| self.model.score(&v.components))
            .unwrap_or(0.0)
    }

    /// One round of lassie's comparisons among `self.scores`: the index of a waiter that beat
    /// every other, if any. Each waiter rolls its own dice against each rival.
    fn round(&mut self) -> Option<usize> {
        let n = self.scores.len();
        let mut winners = Vec::new();
        for i in 0..n {
            let si = self.scores[i].1;
            let beats_all = (0..n).filter(|&j| j != i).all(|j| {
                let sj = self.scores[j].1;
                let p = if si + sj > 0.0 { si / (si + sj) } else { 0.5 };
                self.rng.random::<f64>() < p
            });
            if beats_all {
                winners.push(i);
            }
        }
        // Several self-declared winners race for the slot; one gets it.
        winners.choose(&mut self.rng).copied()
    }

    fn pump(&mut self, now: f64) {
        let mut i = 0;
        while i < self.queue.len() && self.global < self.limits.global {
            let req = self.queue[i];
            let w = &self.waiters[req as usize];
            if w.blocked_until > now {
                i += 1;
                continue;
            }
            let mut any_left = false;
            let mut servable = Vec::new();
            let candidates: &[Cand] = w.eligible.as_deref().unwrap_or(&self.live);
            for &c in candidates {
                if self.present.get(c as usize).copied().unwrap_or(false) && !w.tried.contains(&c) {
                    any_left = true;
                    if self.in_flight[c as usize] < self.limit[c as usize] {
                        servable.push(c);
                    }
                }
            }
            if !any_left {
                self.queue.remove(i);
                self.waiters[req as usize].queued = false;
                self.out.push_back(Decision::Reject { req });
                continue;
            }
            if servable.is_empty() {
                i += 1;
                continue;
            }
            self.scores = servable.iter().map(|&c| (c, self.score(c))).collect();
            let Some(win) = self.round() else {
                self.stalls += 1;
                self.waiters[req as usize].blocked_until = now + self.stall_s;
                self.out.push_back(Decision::Stall {
                    retry_at: now + self.stall_s,
                });
                i += 1;
                continue;
            };
            let cand = self.scores[win].0;
            let Some(id) = self.ids.id(cand).cloned() else {
                i += 1;
                continue;
            };
            let granted = self
                .core
                .ready(Request::only([id]), self.clock.at(now), &mut self.rng)
                .ok()
                .and_then(|_| loop {
                    match self.core.poll_event() {
                        Some(Event::Granted(g)) => break Some(g.attempt),
                        Some(_) => continue,
                        None => break None,
                    }
                });
            self.queue.remove(i);
            self.waiters[req as usize].queued = false;
            let Some(attempt) = granted else {
                self.out.push_back(Decision::Reject { req });
                continue;
            };
            let w = &mut self.waiters[req as usize];
            w.tried.push(cand);
            w.attempt = Some(attempt);
            w.running = Some(cand);
            w.lease = self.leases.grant(req, now);
            self.in_flight[cand as usize] += 1;
            self.global += 1;
            self.decisions += 1;
            self.out.push_back(Decision::Grant { req, cand });
        }
        let waiters = &self.waiters;
        self.leases
            .trim(|q| waiters.get(q as usize).map_or(0, |w| w.lease));
    }

    /// A new request `req` (a first attempt, or asked anew after a reclaim with the
    /// candidates it `tried` excluded), refused if it must wait where `limits.max_waiting`
    /// requests already do, as the core refuses it.
    fn admit(&mut self, req: Req, eligible: Option<&[Cand]>, tried: Vec<Cand>, now: f64) {
        let i = req as usize;
        if self.waiters.len() <= i {
            self.waiters.resize_with(i + 1, Default::default);
        }
        self.waiters[i] = Waiter {
            eligible: eligible.map(<[Cand]>::to_vec),
            tried,
            queued: true,
            ..Default::default()
        };
        self.queue.push_back(req);
        self.pump(now);
        if self.waiters[i].queued && self.queue.len() > self.limits.max_waiting {
            if let Some(at) = self.queue.iter().rposition(|&q| q == req) {
                self.queue.remove(at);
            }
            self.waiters[i].queued = false;
            self.out.push_back(Decision::Reject { req });
        }
    }

    /// Reclaims every running attempt whose lease has ended by `now`: the core records a
    /// timeout and frees the slot, as the coordinator's core does at a lease end.
    fn reclaim(&mut self, now: f64) {
        loop {
            let waiters = &self.waiters;
            let token = |q: Req| waiters.get(q as usize).map_or(0, |w| w.lease);
            let Some(req) = self.leases.expired(now, token) else {
                break;
            };
            let w = &mut self.waiters[req as usize];
            w.lease = 0;
            let Some(cand) = w.running.take() else {
                continue;
            };
            if let Some(a) = w.attempt.take() {
                let at = self.clock.at(now);
                let timeout = Outcome::failure(FailureClass::Timeout);
                let _ = self.core.outcome(a, timeout, at);
                let _ = self.core.done(a, Next::Finish, at, &mut self.rng);
            }
            self.in_flight[cand as usize] -= 1;
            self.global -= 1;
            self.out.push_back(Decision::Reclaimed { req });
        }
    }
}

impl Policy for LassiePairwise {
    fn add(&mut self, cand: Cand, info: &CandidateInfo, now: f64) {
        let i = cand as usize;
        if self.present.len() <= i {
            self.present.resize(i + 1, false);
            self.limit.resize(i + 1, u32::MAX);
            self.in_flight.resize(i + 1, 0);
        }
        self.present[i] = true;
        self.limit[i] = info.max_in_flight.unwrap_or(self.limits.per_candidate);
        self.live.push(cand);
        self.ids.insert(cand, info.id.clone());
        let _ = self
            .core
            .add_candidate(info.clone(), self.clock.at(now), &mut self.rng);
        self.pump(now);
    }

    fn remove(&mut self, cand: Cand, now: f64, _world: &World<'_>) {
        if let Some(p) = self.present.get_mut(cand as usize) {
            *p = false;
        }
        self.live.retain(|&c| c != cand);
        if let Some(id) = self.ids.id(cand).cloned() {
            let _ = self
                .core
                .remove_candidate(&id, self.clock.at(now), &mut self.rng);
        }
        self.pump(now);
    }

    fn ready(&mut self, req: Req, eligible: Option<&[Cand]>, now: f64, _world: &World<'_>) {
        self.admit(req, eligible, Vec::new(), now);
    }

    /// After a reclaim: a new request that excludes the candidates it tried, as the
    /// coordinator's does.
    fn ask_again(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        _attempts: u32,
        now: f64,
        _world: &World<'_>,
    ) {
        let tried = self
            .waiters
            .get_mut(req as usize)
            .map(|w| std::mem::take(&mut w.tried))
            .unwrap_or_default();
        self.admit(req, eligible, tried, now);
    }

    fn next_wakeup_s(&self) -> Option<f64> {
        self.leases.next_end()
    }

    fn outcome(&mut self, req: Req, _cand: Cand, outcome: &Outcome, now: f64) {
        if let Some(a) = self.waiters[req as usize].attempt {
            let _ = self.core.outcome(a, *outcome, self.clock.at(now));
        }
    }

    fn done(&mut self, req: Req, cand: Cand, retry: bool, now: f64, _world: &World<'_>) {
        let w = &mut self.waiters[req as usize];
        w.lease = 0;
        // A reclaimed attempt's slot was freed at its reclaim.
        if w.running.take().is_some() {
            self.in_flight[cand as usize] -= 1;
            self.global -= 1;
        }
        if let Some(a) = w.attempt.take() {
            let _ = self
                .core
                .done(a, Next::Finish, self.clock.at(now), &mut self.rng);
        }
        if retry {
            self.waiters[req as usize].queued = true;
            self.queue.push_back(req);
        } else {
            self.waiters[req as usize] = Waiter::default();
        }
        self.pump(now);
    }

    fn tick(&mut self, now: f64, _world: &World<'_>) {
        self.core.tick(self.clock.at(now), &mut self.rng);
        self.reclaim(now);
        self.pump(now);
    }

    fn poll(&mut self) -> Option<Decision> {
        self.out.pop_front()
    }

    fn decisions(&self) -> u64 {
        self.decisions
    }

    fn stalls(&self) -> u64 {
        self.stalls
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn two_waiters_without_a_score_each_win_their_roll_half_the_time() {
        let mut p = LassiePairwise::new(
            Limits::default(),
            0.01,
            SmallRng::seed_from_u64(9),
            Instant::now(),
        )
        .unwrap();
        p.scores = vec![(0, 0.0), (1, 0.0)];
        // Each of the two beats the other with probability 1/2: no winner a quarter of the time.
        let none = (0..400).filter(|_| p.round().is_none()).count();
        assert!(
            (60..140).contains(&none),
            "{none} rounds of 400 without a winner"
        );
    }
}
