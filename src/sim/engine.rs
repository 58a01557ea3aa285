//! The discrete-event engine: virtual time, workers, arrivals, attempts, the timeline.
//!
//! Events sit in a heap ordered by (time in ns, sequence number) (`events.rs`), so two events at
//! the same instant run in the order they were scheduled and a run is a pure function of the
//! scenario, the policy and the seed. Nothing sleeps: an attempt's end is an event at the time
//! the truth model says it ends.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::dist::MAX_MS;
use super::events::{secs_to_ns, EventQueue};
use super::policy::{Cand, Decision, Policy, PolicySpec, Req, World};
use super::queue::{Job, Queues};
use super::report::RunStats;
use super::scenario::{Action, Arrivals, Caller, LoopKind, Scenario};
use super::truth::{sooner, AttemptResult};
use super::truths::Truths;
use crate::core::{FailureClass, Outcome};

mod feedback;
mod serve;
mod ticks;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A closed-loop worker starts its next request.
    Start(u32),
    /// An open-loop arrival.
    Arrive,
    /// A successful attempt's first byte arrives (index into the attempt slab); always before
    /// its end, which frees the slab entry.
    FirstByte(u32, u32),
    /// An attempt ends (index into the attempt slab, and the slot's generation).
    End(u32, u32),
    /// A request-response attempt's `FirstByte` and `End`, due at the same instant, as one.
    FirstByteEnd(u32, u32),
    /// A request's caller timeout (`workload.timeout_ms`): (request slot, generation).
    Deadline(u32, u32),
    /// A timeline event (index).
    Timeline(u32),
    /// The policy asked to be woken (a stalled request).
    Wake,
    /// Periodic tick while work remains.
    Tick,
    /// The policy's next timed decision is due (`Policy::next_wakeup_s`).
    Timed,
    /// A queueing candidate finished serving an attempt: (candidate, attempt slot, the slot's
    /// generation when it queued).
    ServiceDone(u32, u32, u32),
    /// A queued attempt's timeout: (attempt slot, generation).
    Expire(u32, u32),
}

#[derive(Clone, Copy, Debug)]
struct ReqRec {
    arrival: f64,
    worker: u32,
    retries_left: u32,
    attempts: u32,
    open: bool,
    /// The arm that granted its first attempt, when the policy has arms.
    arm: Option<usize>,
    /// Its caller gave up (`workload.timeout_ms`) while the policy still held it: the slot is
    /// reused only once the policy grants or rejects it.
    expired: bool,
    /// Its running attempt's slot (`NO_ATT`: none).
    att: u32,
    /// Its last attempt failed with an overload: counted if the request ends on it.
    overloaded: bool,
}

#[derive(Clone, Copy, Debug)]
struct Att {
    req: Req,
    cand: Cand,
    granted: f64,
    result: AttemptResult,
    /// On a queueing candidate, still waiting for (or in) service: its result is not known.
    queued: bool,
    /// When the worker gives up: the caller's timeout, or the policy's deadline if sooner.
    timeout_ms: Option<f64>,
}

const NO_WORKER: u32 = u32::MAX;
const NO_ATT: u32 = u32::MAX;
const TICK_S: f64 = 1.0;

/// Seeds of the independent random streams of one run. The workload stream does not depend on
/// the policy, so every policy sees the same arrivals and subsets for a given seed.
fn stream(seed: u64, salt: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The read-only view of the world policies get, from the engine's own fields (a macro so
/// the borrow stays on those fields and the policy can be borrowed mutably beside it).
macro_rules! world {
    ($e:ident, $now:expr) => {
        World {
            truth: &$e.truth,
            workload: &$e.sc.workload,
            queues: &$e.queues,
            now: $now,
        }
    };
}

// After the macro, which they use.
mod caller;
mod timed;

/// One run of one policy on one seed.
pub(crate) struct Engine<'a> {
    sc: &'a Scenario,
    policy: Box<dyn Policy>,
    ids: Vec<String>,
    spec_of: Vec<usize>,
    truth: Truths,
    present: Vec<bool>,
    live: Vec<Cand>,
    load: Vec<u32>,
    heap: EventQueue<Ev>,
    seq: u64,
    reqs: Vec<ReqRec>,
    /// Finished request slots, reused so every per-request table stays as small as the number
    /// of requests open at once.
    free_reqs: Vec<Req>,
    /// Per request slot, bumped each time the slot is freed (stale deadlines are ignored).
    req_gen: Vec<u32>,
    atts: Vec<Att>,
    /// Per attempt slot, bumped each time the slot is freed: events about an attempt that
    /// ended meanwhile are recognised as stale.
    att_gen: Vec<u32>,
    free_atts: Vec<u32>,
    queues: Queues,
    workers_left: Vec<u32>,
    open_requests: u64,
    arrivals_done: bool,
    /// Evenly spaced arrivals scheduled so far.
    even_arrivals: u64,
    wl_rng: SmallRng,
    truth_rng: SmallRng,
    stats: RunStats,
    now: f64,
    /// Per request slot, the candidates its caller may use (empty: any), kept for the request
    /// its worker makes anew after a reclaim.
    subsets: Vec<Vec<Cand>>,
    /// The `Timed` wake-up pushed and not yet run (ns), if any.
    timed_ns: Option<u64>,
    /// How the callers use the policy: the scenario's `[caller]` for a coordinator, else the
    /// default.
    caller: Caller,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(sc: &'a Scenario, spec: &PolicySpec, seed: u64) -> Result<Self, String> {
        let policy = spec.build(
            sc.coordinator.as_ref().map(|c| &c.0),
            sc.limits,
            sc.workload.stall_ms / 1000.0,
            stream(seed, 3).random(),
        )?;
        Ok(Self::with_policy(sc, policy, spec.label(), seed))
    }

    /// A run of a policy built elsewhere (the fleet of coordinators), labelled `label`.
    pub(crate) fn with_policy(
        sc: &'a Scenario,
        policy: Box<dyn Policy>,
        label: &str,
        seed: u64,
    ) -> Self {
        let expanded = sc.expanded();
        let ids: Vec<String> = expanded.iter().map(|(id, _)| id.clone()).collect();
        let tracked = RunStats::tracked_candidates(sc, &ids);
        let mut stats = RunStats::new(label, &ids, tracked, sc.series_bucket_s);
        stats.reserve_requests(sc.workload.expected_requests());
        stats.arms = policy
            .arm_names()
            .iter()
            .map(|name| RunStats::new(name, &ids, Vec::new(), sc.series_bucket_s))
            .collect();
        let timeout_s = sc.workload.timeout_ms.map(|t| t / 1000.0);
        let mut policy = policy;
        let caller = Caller::of(sc, policy.as_ref());
        policy.caller_timeout(timeout_s.filter(|_| caller.deadline));
        stats.timeout_s = timeout_s;
        for a in &mut stats.arms {
            a.timeout_s = timeout_s;
        }
        let n = ids.len();
        let spec_of: Vec<usize> = expanded.iter().map(|(_, s)| *s).collect();
        Engine {
            sc,
            policy,
            ids,
            truth: Truths::new(&sc.candidates, &spec_of),
            spec_of,
            present: vec![false; n],
            live: Vec::new(),
            load: vec![0; n],
            heap: EventQueue::default(),
            seq: 0,
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            req_gen: Vec::new(),
            atts: Vec::new(),
            att_gen: Vec::new(),
            free_atts: Vec::new(),
            queues: Queues::new(n, stream(seed, 4).random()),
            workers_left: Vec::new(),
            open_requests: 0,
            arrivals_done: false,
            even_arrivals: 0,
            wl_rng: stream(seed, 1),
            truth_rng: stream(seed, 2),
            stats,
            now: 0.0,
            subsets: Vec::new(),
            timed_ns: None,
            caller,
        }
    }

    fn at(&mut self, t: f64, ev: Ev) {
        let (ns, seq) = self.stamp(t);
        self.heap.push(ns, seq, ev);
    }

    /// An event's key for time `t` (not before now): its nanosecond and the next sequence
    /// number.
    #[inline]
    fn stamp(&mut self, t: f64) -> (u64, u64) {
        self.seq += 1;
        (secs_to_ns(t.max(self.now)), self.seq)
    }

    /// Runs to the end and returns the statistics.
    pub(crate) fn run(mut self) -> RunStats {
        let started = std::time::Instant::now();
        self.policy.reserve(self.ids.len());
        for c in 0..self.ids.len() {
            if self.sc.candidates[self.spec_of[c]].present {
                let id = self.ids[c].clone();
                self.join(c as Cand, &id);
            }
        }
        for (i, ev) in self.sc.timeline.iter().enumerate() {
            self.at(ev.at_s, Ev::Timeline(i as u32));
        }
        let w = &self.sc.workload;
        match w.kind {
            LoopKind::Closed => {
                self.workers_left = vec![w.operations; w.workers as usize];
                for k in 0..w.workers {
                    self.at(0.0, Ev::Start(k));
                }
                self.arrivals_done = true;
            }
            LoopKind::Open => self.next_arrival(0.0),
        }
        self.at(TICK_S, Ev::Tick);
        while let Some((ns, ev)) = self.heap.pop() {
            // The run's figures end with the workload; what is left (deadlines of requests
            // already answered, attempts their callers gave up on, timeline events, ticks)
            // still runs, so the policy sees it, but no longer counts.
            if self.workload_done() {
                self.stats.limits.finish(self.stats.last_request_s);
            }
            self.now = ns as f64 / 1e9;
            let now = self.now;
            match ev {
                Ev::Start(k) => self.start_request(k, now),
                Ev::Arrive => {
                    self.start_request(NO_WORKER, now);
                    self.next_arrival(now);
                }
                Ev::FirstByte(a, g) => self.first_byte(a, g, now),
                Ev::End(a, g) => self.end(a, g, now),
                Ev::FirstByteEnd(a, g) => {
                    self.first_byte(a, g, now);
                    self.drain(now);
                    self.end(a, g, now);
                }
                Ev::Deadline(r, g) => self.deadline(r, g, now),
                Ev::Timeline(i) => self.timeline(i as usize, now),
                Ev::ServiceDone(c, a, g) => self.service_done(c as usize, a, g, now),
                Ev::Expire(a, g) => {
                    if self.att_gen[a as usize] == g && self.atts[a as usize].queued {
                        if let Some(t) = self.atts[a as usize].timeout_ms {
                            self.atts[a as usize].queued = false;
                            self.atts[a as usize].result = AttemptResult::timeout(t);
                            self.end_attempt(a, now);
                        }
                    }
                }
                Ev::Wake => {
                    let world = world!(self, now);
                    self.policy.tick(now, &world);
                }
                Ev::Timed => self.timed(ns, now),
                Ev::Tick => {
                    let world = world!(self, now);
                    self.policy.tick(now, &world);
                    for i in 0..self.live.len() {
                        self.sample_limit(self.live[i] as usize, now);
                    }
                    let idle = self.heap.is_empty();
                    if idle && (self.open_requests > 0 || !self.arrivals_done) {
                        // Nothing can ever happen again: the policy holds requests it will not
                        // serve. Count them as failed instead of hanging.
                        self.fail_stuck(now);
                        if !self.heap.is_empty() {
                            self.at(now + TICK_S, Ev::Tick);
                        }
                    } else if !idle {
                        let next = self.next_tick(now);
                        self.at(next, Ev::Tick);
                    }
                }
            }
            self.drain(now);
            self.arm_timed(now);
        }
        // The end of the last request: the workload's end, and the run's (`virtual_s`).
        let end_s = self.stats.last_request_s;
        self.stats.limits.finish(end_s);
        self.stats.decisions = self.policy.decisions();
        self.stats.stalls = self.policy.stalls();
        self.stats.wall_s = started.elapsed().as_secs_f64();
        self.stats.end_s = end_s;
        self.stats
    }

    /// Schedules the open loop's next arrival after `now`; arrivals stop at `duration_s`, the
    /// first one too.
    fn next_arrival(&mut self, now: f64) {
        let w = &self.sc.workload;
        let next = match w.arrivals {
            Arrivals::Poisson => {
                let u: f64 = self.wl_rng.random();
                now - (1.0 - u).ln() / w.rate_per_s
            }
            // The n-th at n / rate, from the count rather than by adding gaps, which would
            // drift by an ulp each.
            Arrivals::Even => {
                self.even_arrivals += 1;
                (self.even_arrivals - 1) as f64 / w.rate_per_s
            }
        };
        if next < self.sc.workload.duration_s {
            // Beside the heap: arrivals come one at a time, each the soonest event.
            let (ns, seq) = self.stamp(next);
            self.heap.push_next(ns, seq, Ev::Arrive);
        } else {
            self.arrivals_done = true;
        }
    }

    fn join(&mut self, c: Cand, id: &str) {
        if self.present[c as usize] {
            return;
        }
        self.present[c as usize] = true;
        self.live.push(c);
        let spec = &self.sc.candidates[self.spec_of[c as usize]];
        let info = spec.info(id);
        self.policy.add(c, &info, self.now);
        self.sample_limit(c as usize, self.now);
    }

    /// Reads the policy's limit for `c` now (`limit_mean` and the `limit` series).
    fn sample_limit(&mut self, c: usize, now: f64) {
        let limit = self.policy.limit(c as Cand);
        self.stats.limits.set(c, limit, now);
    }

    fn timeline(&mut self, i: usize, now: f64) {
        let ev = &self.sc.timeline[i];
        let Some(c) = self.ids.iter().position(|x| x == ev.candidate.get_ref()) else {
            return;
        };
        match ev.action {
            Action::Degrade => {
                self.truth.degrade(c, ev);
                self.serve_queue(c, now);
            }
            Action::Heal => {
                self.truth.heal(c);
                self.serve_queue(c, now);
            }
            Action::Join => {
                let id = self.ids[c].clone();
                self.join(c as Cand, &id);
            }
            Action::Leave => {
                if self.present[c] {
                    self.present[c] = false;
                    self.live.retain(|&x| x as usize != c);
                    let world = world!(self, now);
                    self.policy.remove(c as Cand, now, &world);
                }
            }
        }
        self.sample_limit(c, now);
        let live = self.live.len();
        self.stats.mark(ev.action, c, live, now);
    }

    fn start_request(&mut self, worker: u32, now: f64) {
        let rec = ReqRec {
            arrival: now,
            worker,
            retries_left: self.sc.workload.retries,
            attempts: 0,
            open: true,
            arm: None,
            expired: false,
            att: NO_ATT,
            overloaded: false,
        };
        let req = match self.free_reqs.pop() {
            Some(r) => {
                self.reqs[r as usize] = rec;
                r
            }
            None => {
                self.reqs.push(rec);
                self.req_gen.push(0);
                self.reqs.len() as Req - 1
            }
        };
        self.open_requests += 1;
        if let Some(t) = self.sc.workload.timeout_ms {
            self.at(
                now + t / 1000.0,
                Ev::Deadline(req, self.req_gen[req as usize]),
            );
        }
        let k = self.sc.workload.subset as usize;
        if self.subsets.len() <= req as usize {
            self.subsets.resize(req as usize + 1, Vec::new());
        }
        let mut picked = std::mem::take(&mut self.subsets[req as usize]);
        picked.clear();
        if k > 0 && k < self.live.len() {
            // Floyd's algorithm: k distinct indices without building a permutation.
            let n = self.live.len();
            for j in n - k..n {
                let t = self.wl_rng.random_range(0..=j);
                let c = self.live[t];
                if picked.contains(&c) {
                    picked.push(self.live[j]);
                } else {
                    picked.push(c);
                }
            }
        }
        self.policy
            .assign(req, (worker != NO_WORKER).then_some(worker));
        let world = world!(self, now);
        let subset = (!picked.is_empty()).then_some(picked.as_slice());
        self.policy.ready(req, subset, now, &world);
        self.subsets[req as usize] = picked;
    }

    fn drain(&mut self, now: f64) {
        while let Some(d) = self.policy.poll() {
            match d {
                Decision::Grant { req, cand } if self.reqs[req as usize].expired => {
                    // Its caller gave up while the policy held it: hand the slot back.
                    let world = world!(self, now);
                    let cancelled = Outcome::failure(FailureClass::Cancelled);
                    self.policy.outcome(req, cand, &cancelled, now);
                    self.policy.done(req, cand, false, now, &world);
                    self.release(req);
                }
                Decision::Grant { req, cand } => self.start_attempt(req, cand, now),
                Decision::Reject { req } => self.end_failed(req, now),
                Decision::Reclaimed { req } => self.reclaimed(req, now),
                Decision::Stall { retry_at } => self.at(retry_at, Ev::Wake),
            }
        }
    }

    fn start_attempt(&mut self, req: Req, cand: Cand, now: f64) {
        let c = cand as usize;
        self.load[c] += 1;
        let advised = self.advised(req);
        let timeout_ms = sooner(self.sc.workload.attempt_timeout_ms, advised);
        let truth = &self.truth[c];
        // A queueing candidate's result is known only once a server has served the attempt;
        // it fails fast only when overloaded (past capacity, or its queue is full).
        let mut queued = false;
        let result = if truth.is_queue() {
            let full = self.queues.is_full(c, truth);
            let over = truth.overload_roll(self.load[c], &mut self.truth_rng);
            if full || over {
                truth
                    .overloaded(&mut self.truth_rng)
                    .with_timeout(timeout_ms)
            } else {
                queued = true;
                AttemptResult::timeout(0.0)
            }
        } else {
            truth.attempt(
                self.load[c],
                self.sc.workload.bytes,
                timeout_ms,
                &mut self.truth_rng,
            )
        };
        let r = &mut self.reqs[req as usize];
        if r.attempts == 0 {
            // The core fixes a request's arm when it arrives; its first grant tells which.
            r.arm = self.policy.arm(req);
        }
        r.attempts += 1;
        let arm = r.arm;
        let r_index = req as usize;
        self.stats.attempt(cand, now, arm);
        let att = Att {
            req,
            cand,
            granted: now,
            result,
            queued,
            timeout_ms,
        };
        let a = match self.free_atts.pop() {
            Some(a) => {
                self.atts[a as usize] = att;
                a
            }
            None => {
                self.atts.push(att);
                self.att_gen.push(0);
                self.atts.len() as u32 - 1
            }
        };
        self.reqs[r_index].att = a;
        if queued {
            let gen = self.att_gen[a as usize];
            self.queues.stations[c]
                .waiting
                .push_back(Job { att: a, gen });
            if let Some(t) = timeout_ms {
                self.at(now + t / 1000.0, Ev::Expire(a, gen));
            }
            self.serve_queue(c, now);
        } else {
            self.schedule_end(a, now);
        }
        self.sample_limit(c, now);
    }

    /// Schedules the first byte and the end of attempt `a`, whose result is known, from `from`
    /// (its grant, or the end of its service).
    fn schedule_end(&mut self, a: u32, from: f64) {
        let result = self.atts[a as usize].result;
        let gen = self.att_gen[a as usize];
        match result.first_byte_s() {
            Some(t) if t == result.end_s => self.at(from + result.end_s, Ev::FirstByteEnd(a, gen)),
            Some(t) => {
                self.at(from + t, Ev::FirstByte(a, gen));
                self.at(from + result.end_s, Ev::End(a, gen));
            }
            None => self.at(from + result.end_s, Ev::End(a, gen)),
        }
    }

    /// Attempt `a`'s first byte, if generation `g` of it still runs.
    fn first_byte(&mut self, a: u32, g: u32, now: f64) {
        if self.att_gen[a as usize] == g && self.caller.first_byte {
            let att = self.atts[a as usize];
            self.policy.first_byte(att.req, att.cand, now);
        }
    }

    /// Attempt `a`'s end, if generation `g` of it still runs.
    fn end(&mut self, a: u32, g: u32, now: f64) {
        if self.att_gen[a as usize] == g {
            self.end_attempt(a, now);
        }
    }

    fn end_attempt(&mut self, a: u32, now: f64) {
        let att = self.atts[a as usize];
        self.abandon(a, now);
        if !self.drops(&att) {
            let outcome = self.reported(att.cand as usize, &att.result.outcome, now);
            self.policy.outcome(att.req, att.cand, &outcome, now);
        }
        let world = world!(self, now);
        let r = &mut self.reqs[att.req as usize];
        r.overloaded = att.result.outcome == Outcome::failure(FailureClass::Overload);
        if att.result.ok {
            self.policy.done(att.req, att.cand, false, now, &world);
            self.finish_request(att.req, Some(att.granted + att.result.first_byte_s), now);
        } else if r.retries_left > 0 {
            r.retries_left -= 1;
            // A retry the policy then rejects (no candidate left) ends on this failure.
            self.retry(att.req, att.cand, now);
        } else {
            self.policy.done(att.req, att.cand, false, now, &world);
            self.end_failed(att.req, now);
        }
        self.sample_limit(att.cand as usize, now);
    }

    /// A request ends failed, its retries spent or no candidate left for the next one: an
    /// overload if its last attempt was one.
    fn end_failed(&mut self, req: Req, now: f64) {
        let r = &self.reqs[req as usize];
        if r.open && r.overloaded {
            self.stats.overloads += 1;
        }
        self.finish_request(req, None, now);
    }

    /// A request ends: `first_byte` is the time its successful attempt's first byte came.
    fn finish_request(&mut self, req: Req, first_byte: Option<f64>, now: f64) {
        let r = &mut self.reqs[req as usize];
        if !r.open {
            if r.expired {
                self.release(req);
            }
            return;
        }
        r.open = false;
        let r = *r;
        if !r.expired {
            self.free_reqs.push(req);
            self.req_gen[req as usize] = self.req_gen[req as usize].wrapping_add(1);
        }
        self.open_requests -= 1;
        self.stats.request(
            now,
            now - r.arrival,
            first_byte.map(|t| t - r.arrival),
            r.arm,
        );
        if r.worker != NO_WORKER {
            let left = &mut self.workers_left[r.worker as usize];
            *left -= 1;
            if *left > 0 {
                let next = now + self.sc.workload.think_ms / 1000.0;
                self.at(next, Ev::Start(r.worker));
            }
        }
    }

    /// The slot of an expired request the policy no longer holds can serve a new request.
    fn release(&mut self, req: Req) {
        self.reqs[req as usize].expired = false;
        self.free_reqs.push(req);
        self.req_gen[req as usize] = self.req_gen[req as usize].wrapping_add(1);
    }
}
