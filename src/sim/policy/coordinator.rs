//! The `coordinator` policy: every decision goes through the real [`Core`].

use std::time::Instant;

use rand::rngs::SmallRng;

use super::{Cand, Clock, Decision, FastMap, Ids, Policy, Req, World};
use crate::core::{AttemptId, CandidateInfo, Core, Event, Limits, Next, Outcome};
use crate::core::{Request, RequestId};
use crate::score::Config;

/// The coordinator: every decision goes through [`Core::ready`], [`Core::outcome`],
/// [`Core::done`] and [`Core::tick`].
#[derive(Debug)]
pub(crate) struct CoordinatorPolicy {
    core: Core,
    clock: Clock,
    rng: SmallRng,
    ids: Ids,
    /// Core slot -> the candidate in it, written when a candidate is added (a grant is always
    /// of a live candidate, so its slot names it).
    by_slot: Vec<Cand>,
    /// Engine request -> core request and its running attempt.
    requests: Vec<(Option<RequestId>, Option<AttemptId>)>,
    /// Engine request -> the arm of its latest grant and the deadline advised with it.
    latest: Vec<(Option<usize>, Option<f64>)>,
    /// Core requests waiting for a grant that will come during some other call. Most grants
    /// come during the `ready` or `done` of their own request and never enter this map.
    waiting: FastMap<u64, Req>,
    out: std::collections::VecDeque<Decision>,
    /// The caller's timeout: each request's deadline is its arrival plus this.
    timeout_s: Option<f64>,
    /// Engine request -> its caller's deadline (virtual seconds), kept for the request its
    /// worker makes anew after a reclaim.
    due_s: Vec<Option<f64>>,
    /// Core attempt -> the engine request it serves, kept only while leases are
    /// (`limits.max_attempt_s`): a reclaim names the attempt.
    leased: Option<FastMap<u64, Req>>,
    /// Engine request -> the candidates it tried, kept only while leases are: the request a
    /// worker makes anew after a reclaim excludes them, as its retries would.
    tried: Vec<Vec<Cand>>,
    /// Whether any limit can be in force (adaptive limits, a per-candidate limit, or a
    /// candidate's own `max_in_flight`); without one, [`Policy::limit`] is `None` for every
    /// candidate and needs no lookup.
    limited: bool,
    /// The latest virtual time converted for the core, and its instant: an event's calls
    /// (an outcome and the release after it) share one conversion.
    last_at: (f64, Instant),
}

impl CoordinatorPolicy {
    pub(crate) fn new(config: Config, limits: Limits, rng: SmallRng) -> Result<Self, String> {
        let base = Instant::now();
        let limited = config.adaptive.enabled || limits.per_candidate != crate::core::UNLIMITED;
        let core = Core::new(config, base)
            .and_then(|c| c.with_limits(limits))
            .map_err(|e| e.to_string())?;
        Ok(CoordinatorPolicy {
            core,
            clock: Clock(base),
            rng,
            ids: Ids::default(),
            by_slot: Vec::new(),
            requests: Vec::new(),
            latest: Vec::new(),
            waiting: FastMap::default(),
            limited,
            out: Default::default(),
            timeout_s: None,
            due_s: Vec::new(),
            leased: limits.max_attempt_s.map(|_| FastMap::default()),
            tried: Vec::new(),
            last_at: (f64::NAN, base),
        })
    }

    /// [`Clock::at`], remembering the latest conversion.
    #[inline]
    fn instant(&mut self, now: f64) -> Instant {
        if now != self.last_at.0 {
            self.last_at = (now, self.clock.at(now));
        }
        self.last_at.1
    }

    /// The core (the fleet reads and feeds it digests).
    pub(crate) fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    /// The core, read-only.
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// [`Policy::tick`] without the world (the coordinator never reads it).
    pub(crate) fn tick_core(&mut self, now: f64) {
        let at = self.instant(now);
        self.core.tick(at, &mut self.rng);
        self.drain(None);
    }

    /// The probability that an unrestricted request draws `cand` now (0 if unknown).
    pub(crate) fn probability_of(&self, cand: Cand) -> f64 {
        self.ids
            .id(cand)
            .map_or(0.0, |id| self.core.tree_probability(id))
    }

    /// The clock the core runs on.
    pub(crate) fn clock(&self) -> Clock {
        self.clock
    }

    /// Turns core events into decisions. `current`: the request whose own call this was; if
    /// it is still open and neither granted nor rejected, it now waits.
    fn drain(&mut self, current: Option<(RequestId, Req)>) {
        let mut current_answered = false;
        while let Some(ev) = self.core.poll_event() {
            let (request, granted) = match ev {
                Event::Granted(g) => (g.request, Some((g.attempt, g.arm, g.deadline_ms))),
                Event::Rejected { request, .. } => (request, None),
                Event::Reclaimed { attempt, .. } => {
                    self.reclaimed(attempt);
                    continue;
                }
                // Only with `set_close_events`, which the policy leaves off; and a timeout
                // the core read from a dropped attempt, which the engine counts itself.
                Event::Closed { .. } | Event::TimedOut(_) => continue,
            };
            let req = match current {
                Some((id, req)) if id == request => {
                    current_answered = true;
                    req
                }
                _ => match self.waiting.remove(&request.as_u64()) {
                    Some(req) => req,
                    None => continue,
                },
            };
            match granted {
                Some((attempt, arm, deadline_ms)) => {
                    let Some(&cand) = self
                        .core
                        .attempt_slot(attempt)
                        .and_then(|s| self.by_slot.get(s))
                    else {
                        continue;
                    };
                    self.requests[req as usize].1 = Some(attempt);
                    self.latest[req as usize] = (arm, deadline_ms);
                    if let Some(leased) = self.leased.as_mut() {
                        leased.insert(attempt.as_u64(), req);
                        if let Some(tried) = self.tried.get_mut(req as usize) {
                            tried.push(cand);
                        }
                    }
                    self.out.push_back(Decision::Grant { req, cand });
                }
                None => self.out.push_back(Decision::Reject { req }),
            }
        }
        if let Some((id, req)) = current {
            if !current_answered {
                self.waiting.insert(id.as_u64(), req);
            }
        }
    }
}

impl CoordinatorPolicy {
    /// Asks the core for a grant for engine request `req` (sized by `ready`): a new core
    /// request of `attempts` attempts, with its caller's deadline.
    fn ask(&mut self, req: Req, eligible: Option<&[Cand]>, attempts: u32, now: f64) {
        let request = match eligible {
            None => Request::any(),
            Some(list) => Request::only(list.iter().filter_map(|&c| self.ids.id(c).cloned())),
        };
        let mut request = request.with_attempts(attempts);
        for &c in self.tried.get(req as usize).map_or(&[][..], Vec::as_slice) {
            if let Some(id) = self.ids.id(c) {
                request = request.excluding(id.clone());
            }
        }
        self.latest[req as usize] = (None, None);
        let request = match self.due_s[req as usize] {
            Some(due) => request.with_deadline(self.clock.at(due)),
            None => request,
        };
        let at = self.instant(now);
        match self.core.ready(request, at, &mut self.rng) {
            Ok(id) => {
                self.requests[req as usize] = (Some(id), None);
                self.drain(Some((id, req)));
            }
            // An eligible candidate that left between sampling and asking: nothing to use.
            Err(_) => {
                self.requests[req as usize] = (None, None);
                self.out.push_back(Decision::Reject { req });
                self.drain(None);
            }
        }
    }

    /// The core reclaimed `attempt` at its lease end: if it is the running attempt of an
    /// engine request, the request is over for the core (the engine runs one attempt of a
    /// request at a time, so it was the last) and the engine is told.
    fn reclaimed(&mut self, attempt: AttemptId) {
        let Some(req) = self
            .leased
            .as_mut()
            .and_then(|l| l.remove(&attempt.as_u64()))
        else {
            return;
        };
        if let Some(r) = self.requests.get_mut(req as usize) {
            if r.1 == Some(attempt) {
                *r = (None, None);
                self.out.push_back(Decision::Reclaimed { req });
            }
        }
    }
}

impl Policy for CoordinatorPolicy {
    fn add(&mut self, cand: Cand, info: &CandidateInfo, now: f64) {
        self.limited |= info.max_in_flight.is_some();
        self.ids.insert(cand, info.id.clone());
        // Ids are unique and info validated by the scenario; a refusal would be a bug there.
        let at = self.instant(now);
        if self
            .core
            .add_candidate(info.clone(), at, &mut self.rng)
            .is_ok()
        {
            if let Some(s) = self.core.candidate_slot(&info.id) {
                if self.by_slot.len() <= s {
                    self.by_slot.resize(s + 1, cand);
                }
                self.by_slot[s] = cand;
            }
        }
        self.drain(None);
    }

    fn remove(&mut self, cand: Cand, now: f64, _world: &World<'_>) {
        if let Some(id) = self.ids.id(cand).cloned() {
            let at = self.instant(now);
            let _ = self.core.remove_candidate(&id, at, &mut self.rng);
        }
        self.drain(None);
    }

    fn ready(&mut self, req: Req, eligible: Option<&[Cand]>, now: f64, world: &World<'_>) {
        if self.requests.len() <= req as usize {
            self.requests.resize(req as usize + 1, (None, None));
            self.latest.resize(req as usize + 1, (None, None));
            self.due_s.resize(req as usize + 1, None);
            if self.leased.is_some() {
                self.tried.resize(req as usize + 1, Vec::new());
            }
        }
        self.due_s[req as usize] = self.timeout_s.map(|t| now + t);
        if let Some(tried) = self.tried.get_mut(req as usize) {
            tried.clear();
        }
        // The caller's retry loop, as the scenario says: its last attempt is drawn by its
        // odds of success as well.
        let attempts = world.workload.retries.saturating_add(1);
        self.ask(req, eligible, attempts, now);
    }

    fn ask_again(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        attempts: u32,
        now: f64,
        _world: &World<'_>,
    ) {
        if self.requests.len() <= req as usize {
            // Never asked before: nothing to ask again for.
            self.out.push_back(Decision::Reject { req });
            return;
        }
        self.ask(req, eligible, attempts, now);
    }

    fn takes_caller(&self) -> bool {
        true
    }

    fn cancel(&mut self, req: Req, now: f64) {
        let Some(&(Some(id), None)) = self.requests.get(req as usize) else {
            return;
        };
        // Only a request that waits for a grant is cancelled here; the core's rejection of it
        // is then heard by nobody, as the actor's for a dropped `acquire`.
        if self.waiting.remove(&id.as_u64()).is_some() {
            let at = self.instant(now);
            let _ = self.core.cancel(id, at);
            self.out.push_back(Decision::Reject { req });
            self.drain(None);
        }
    }

    fn first_byte(&mut self, req: Req, _cand: Cand, _now: f64) {
        if let Some(attempt) = self.requests[req as usize].1 {
            let _ = self.core.first_byte(attempt);
        }
    }

    fn outcome(&mut self, req: Req, _cand: Cand, outcome: &Outcome, now: f64) {
        if let Some(attempt) = self.requests[req as usize].1 {
            let at = self.instant(now);
            let _ = self.core.outcome(attempt, *outcome, at);
        }
    }

    fn done(&mut self, req: Req, _cand: Cand, retry: bool, now: f64, _world: &World<'_>) {
        let (request, attempt) = self.requests[req as usize];
        if let Some(attempt) = attempt {
            if let Some(leased) = self.leased.as_mut() {
                leased.remove(&attempt.as_u64());
            }
            let next = if retry { Next::Retry } else { Next::Finish };
            let at = self.instant(now);
            let _ = self.core.done(attempt, next, at, &mut self.rng);
            self.requests[req as usize].1 = None;
        }
        if !retry {
            // The request ended: a request asked anew under its slot excludes nothing.
            if let Some(tried) = self.tried.get_mut(req as usize) {
                tried.clear();
            }
        }
        match (retry, request) {
            (true, Some(id)) => self.drain(Some((id, req))),
            _ => self.drain(None),
        }
    }

    fn tick(&mut self, now: f64, _world: &World<'_>) {
        let at = self.instant(now);
        self.core.tick(at, &mut self.rng);
        self.drain(None);
    }

    fn next_wakeup_s(&self) -> Option<f64> {
        let at = self.core.next_timed_wakeup()?;
        Some(at.saturating_duration_since(self.clock.0).as_secs_f64())
    }

    fn caller_timeout(&mut self, timeout_s: Option<f64>) {
        self.timeout_s = timeout_s;
    }

    fn reserve(&mut self, candidates: usize) {
        self.core.reserve_candidates(candidates);
    }

    fn poll(&mut self) -> Option<Decision> {
        self.out.pop_front()
    }

    fn decisions(&self) -> u64 {
        self.core.counters().decisions
    }

    fn stalls(&self) -> u64 {
        0
    }

    fn arm_names(&self) -> Vec<String> {
        self.core
            .arm_names()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    fn arm(&self, req: Req) -> Option<usize> {
        self.latest.get(req as usize).and_then(|l| l.0)
    }

    fn deadline_ms(&self, req: Req) -> Option<f64> {
        self.latest.get(req as usize).and_then(|l| l.1)
    }

    fn limit(&self, cand: Cand) -> Option<f64> {
        if !self.limited {
            return None;
        }
        let id = self.ids.id(cand)?;
        self.core.candidate_limit(id).map(f64::from)
    }
}
