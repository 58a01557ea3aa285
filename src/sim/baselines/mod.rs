//! The policies we measure against, implemented as their sources describe them.
//!
//! All but `lassie-pairwise` share one queue ([`Queued`]): requests wait in arrival order,
//! a request that cannot be served now is skipped (the same rule the coordinator follows), and
//! a [`Picker`] chooses among the candidates the request may use that have a free slot. So
//! the only difference between them and the coordinator is the choice itself.
//!
//! Every baseline keeps the scenario's `[limits]` as the coordinator's core does: `global`,
//! `per_candidate` (or a candidate's `max_in_flight`), `max_waiting` (a request that would
//! wait where `max_waiting` others already do is refused at once) and `max_attempt_s` (an
//! attempt still running at its lease end is reclaimed, [`Leases`]).

mod accrual;
mod c3;
mod c3_rate;
mod clairvoyant;
mod leases;
mod least;
mod limited;
pub(crate) mod limiters;
mod mongo;
mod oracle;
mod p2c;
mod pairwise;
mod rtt_monitor;
mod snitch;
mod thompson;

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::RngExt;

use super::policy::{Cand, Decision, Policy, Req, World};
use crate::core::{CandidateInfo, FailureClass, Limits, Outcome, UNLIMITED};
use leases::Leases;

pub(crate) use c3::C3;
pub(crate) use clairvoyant::Clairvoyant;
pub(crate) use least::LeastPending;
pub(crate) use limited::{Limited, OracleLimits};
pub(crate) use mongo::MongoErrorBias;
pub(crate) use oracle::Oracle;
pub(crate) use p2c::{P2cOpcount, P2cPeakEwma};
pub(crate) use pairwise::LassiePairwise;
pub(crate) use snitch::DynamicSnitch;
pub(crate) use thompson::Thompson;

/// What a picker may look at besides the servable set.
#[derive(Debug)]
pub(crate) struct PickState<'a> {
    /// Attempts in flight per candidate, as this policy counts them.
    pub(crate) in_flight: &'a [u32],
    pub(crate) now: f64,
}

/// A baseline's choice rule.
pub(crate) trait Picker: Send + std::fmt::Debug {
    /// Chooses one of `servable` (never empty).
    fn pick(
        &mut self,
        servable: &[Cand],
        st: &PickState<'_>,
        world: &World<'_>,
        rng: &mut SmallRng,
    ) -> Cand;
    /// Like [`Picker::pick`], but it may hold the request back (rate control): `Err(at)`
    /// means no candidate of `servable` may be sent to before `at` seconds.
    fn pick_or_wait(
        &mut self,
        servable: &[Cand],
        st: &PickState<'_>,
        world: &World<'_>,
        rng: &mut SmallRng,
    ) -> Result<Cand, f64> {
        Ok(self.pick(servable, st, world, rng))
    }
    /// An attempt started, `inflight` on `cand` with it.
    fn granted(&mut self, _cand: Cand, _inflight: u32, _now: f64) {}
    /// An attempt's slot is free (right after its outcome); `world` is what a server tells its
    /// client with a response (its queue length, its service time).
    fn finished(&mut self, _cand: Cand, _world: &World<'_>, _now: f64) {}
    /// An attempt's outcome; `elapsed_s` since its grant.
    fn outcome(&mut self, _cand: Cand, _outcome: &Outcome, _elapsed_s: f64, _now: f64) {}
    /// Before each round of grants: what the world is now (oracles read the truth).
    fn refresh(&mut self, _world: &World<'_>) {}
    /// The concurrency limit the picker keeps for `cand` now, if any: the queue grants it an
    /// attempt only while fewer than its integer part are in flight.
    fn limit(&self, _cand: Cand) -> Option<f64> {
        None
    }
    /// An attempt's outcome for a limit algorithm: `elapsed_s` since its grant, `inflight`
    /// the attempts in flight on `cand` when it was granted (itself included).
    fn limit_sample(
        &mut self,
        _cand: Cand,
        _outcome: &Outcome,
        _elapsed_s: f64,
        _inflight: u32,
        _now: f64,
    ) {
    }
}

#[derive(Debug, Default)]
struct ReqState {
    eligible: Option<Vec<Cand>>,
    tried: Vec<Cand>,
    waiting: bool,
    granted_at: f64,
    /// Attempts in flight on the candidate of its latest grant, itself included.
    inflight_at_grant: u32,
    /// The candidate of its running attempt (`None`: none, or reclaimed).
    running: Option<Cand>,
    /// Its running attempt's lease token ([`Leases::grant`]).
    lease: u64,
}

/// A FIFO queue with skip, per-candidate and global limits, and a picker.
#[derive(Debug)]
pub(crate) struct Queued<P> {
    picker: P,
    limits: Limits,
    rng: SmallRng,
    present: Vec<bool>,
    limit: Vec<u32>,
    in_flight: Vec<u32>,
    global: u32,
    live: Vec<Cand>,
    reqs: Vec<ReqState>,
    queue: VecDeque<Req>,
    out: VecDeque<Decision>,
    decisions: u64,
    scratch: Vec<Cand>,
    /// The wake-up already asked of the engine for requests the picker held back.
    wake_at: Option<f64>,
    leases: Leases,
}

/// Boxes a picker into a queued policy.
pub(crate) fn queued<P: Picker + 'static>(
    picker: P,
    limits: Limits,
    rng: SmallRng,
) -> Box<dyn Policy> {
    Box::new(Queued {
        picker,
        rng,
        present: Vec::new(),
        limit: Vec::new(),
        in_flight: Vec::new(),
        global: 0,
        live: Vec::new(),
        reqs: Vec::new(),
        queue: VecDeque::new(),
        out: VecDeque::new(),
        decisions: 0,
        scratch: Vec::new(),
        wake_at: None,
        leases: Leases::new(&limits),
        limits,
    })
}

impl<P: Picker> Queued<P> {
    fn remaining(&self, r: &ReqState, c: Cand) -> bool {
        self.present.get(c as usize).copied().unwrap_or(false) && !r.tried.contains(&c)
    }

    /// Whether `c` is under its static limit and the picker's own.
    fn open(&self, c: Cand) -> bool {
        let n = self.in_flight[c as usize];
        n < self.limit[c as usize] && self.picker.limit(c).is_none_or(|l| (n as f64) < l.floor())
    }

    /// Grants what it can, oldest request first, skipping those that must wait.
    fn pump(&mut self, now: f64, world: &World<'_>) {
        if self.wake_at.is_some_and(|t| t <= now) {
            self.wake_at = None;
        }
        self.picker.refresh(world);
        let mut wake: Option<f64> = None;
        let mut i = 0;
        // Whether some live candidate is under its limits (`None`: not known since the last
        // grant). When none is, a first attempt that may use any candidate must wait: skip it
        // without looking at each candidate (the same outcome, for long queues).
        let mut any_open: Option<bool> = None;
        while i < self.queue.len() && self.global < self.limits.global {
            let req = self.queue[i];
            let r = &self.reqs[req as usize];
            if r.eligible.is_none() && r.tried.is_empty() && !self.live.is_empty() {
                let open = *any_open.get_or_insert_with(|| self.live.iter().any(|&c| self.open(c)));
                if !open {
                    i += 1;
                    continue;
                }
            }
            let mut servable = std::mem::take(&mut self.scratch);
            servable.clear();
            let mut any_left = false;
            let candidates: &[Cand] = r.eligible.as_deref().unwrap_or(&self.live);
            for &c in candidates {
                if self.remaining(r, c) {
                    any_left = true;
                    if self.open(c) {
                        servable.push(c);
                    }
                }
            }
            if !any_left {
                self.queue.remove(i);
                self.reqs[req as usize].waiting = false;
                self.out.push_back(Decision::Reject { req });
            } else if servable.is_empty() {
                i += 1;
            } else {
                let st = PickState {
                    in_flight: &self.in_flight,
                    now,
                };
                let cand = match self
                    .picker
                    .pick_or_wait(&servable, &st, world, &mut self.rng)
                {
                    Ok(c) => c,
                    Err(at) => {
                        wake = Some(wake.map_or(at, |w: f64| w.min(at)));
                        self.scratch = servable;
                        i += 1;
                        continue;
                    }
                };
                self.queue.remove(i);
                let r = &mut self.reqs[req as usize];
                r.waiting = false;
                r.tried.push(cand);
                r.granted_at = now;
                r.running = Some(cand);
                r.lease = self.leases.grant(req, now);
                self.in_flight[cand as usize] += 1;
                r.inflight_at_grant = self.in_flight[cand as usize];
                self.global += 1;
                self.decisions += 1;
                self.picker.granted(cand, r.inflight_at_grant, now);
                self.out.push_back(Decision::Grant { req, cand });
                any_open = None;
            }
            self.scratch = servable;
        }
        if let Some(at) = wake {
            if self.wake_at.is_none_or(|w| at < w) {
                self.wake_at = Some(at);
                self.out.push_back(Decision::Stall { retry_at: at });
            }
        }
        let reqs = &self.reqs;
        self.leases
            .trim(|q| reqs.get(q as usize).map_or(0, |r| r.lease));
    }

    fn enqueue(&mut self, req: Req) {
        self.reqs[req as usize].waiting = true;
        self.queue.push_back(req);
    }

    /// A new request `req` (a first attempt, or asked anew after a reclaim with the
    /// candidates it `tried` excluded): queued and pumped; refused if it must wait where
    /// `limits.max_waiting` requests already do, as the core refuses it (`QueueFull`).
    fn admit(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        tried: Vec<Cand>,
        now: f64,
        world: &World<'_>,
    ) {
        let i = req as usize;
        if self.reqs.len() <= i {
            self.reqs.resize_with(i + 1, Default::default);
        }
        self.reqs[i] = ReqState {
            eligible: eligible.map(<[Cand]>::to_vec),
            tried,
            ..Default::default()
        };
        self.enqueue(req);
        self.pump(now, world);
        if self.reqs[i].waiting && self.queue.len() > self.limits.max_waiting {
            if let Some(at) = self.queue.iter().rposition(|&q| q == req) {
                self.queue.remove(at);
            }
            self.reqs[i].waiting = false;
            self.out.push_back(Decision::Reject { req });
        }
    }

    /// Reclaims every running attempt whose lease has ended by `now`: the picker hears a
    /// timeout and the slot is free, as the core's reclaim records and frees it.
    fn reclaim(&mut self, now: f64, world: &World<'_>) {
        loop {
            let reqs = &self.reqs;
            let token = |q: Req| reqs.get(q as usize).map_or(0, |r| r.lease);
            let Some(req) = self.leases.expired(now, token) else {
                break;
            };
            let r = &mut self.reqs[req as usize];
            r.lease = 0;
            let Some(cand) = r.running.take() else {
                continue;
            };
            let (elapsed, inflight) = (now - r.granted_at, r.inflight_at_grant);
            let timeout = Outcome::failure(FailureClass::Timeout);
            self.picker.outcome(cand, &timeout, elapsed, now);
            self.picker
                .limit_sample(cand, &timeout, elapsed, inflight, now);
            self.picker.finished(cand, world, now);
            self.in_flight[cand as usize] -= 1;
            self.global -= 1;
            self.out.push_back(Decision::Reclaimed { req });
        }
    }
}

impl<P: Picker> Policy for Queued<P> {
    fn add(&mut self, cand: Cand, info: &CandidateInfo, _now: f64) {
        let i = cand as usize;
        if self.present.len() <= i {
            self.present.resize(i + 1, false);
            self.limit.resize(i + 1, UNLIMITED);
            self.in_flight.resize(i + 1, 0);
        }
        self.present[i] = true;
        self.limit[i] = info.max_in_flight.unwrap_or(self.limits.per_candidate);
        self.live.push(cand);
    }

    fn remove(&mut self, cand: Cand, now: f64, world: &World<'_>) {
        if let Some(p) = self.present.get_mut(cand as usize) {
            *p = false;
        }
        self.live.retain(|&c| c != cand);
        self.pump(now, world);
    }

    fn ready(&mut self, req: Req, eligible: Option<&[Cand]>, now: f64, world: &World<'_>) {
        self.admit(req, eligible, Vec::new(), now, world);
    }

    /// After a reclaim: a new request that excludes the candidates it tried, as the
    /// coordinator's does.
    fn ask_again(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        _attempts: u32,
        now: f64,
        world: &World<'_>,
    ) {
        let tried = self
            .reqs
            .get_mut(req as usize)
            .map(|r| std::mem::take(&mut r.tried))
            .unwrap_or_default();
        self.admit(req, eligible, tried, now, world);
    }

    fn next_wakeup_s(&self) -> Option<f64> {
        self.leases.next_end()
    }

    fn outcome(&mut self, req: Req, cand: Cand, outcome: &Outcome, now: f64) {
        let r = &self.reqs[req as usize];
        // A reclaimed attempt is heard no more.
        if r.running.is_none() {
            return;
        }
        let (elapsed, inflight) = (now - r.granted_at, r.inflight_at_grant);
        // A grant handed back unused (its caller gave up while it waited here) was never
        // sent: no latency to learn from, as in the originals.
        if !matches!(outcome, Outcome::Failure(FailureClass::Cancelled)) {
            self.picker.outcome(cand, outcome, elapsed, now);
        }
        self.picker
            .limit_sample(cand, outcome, elapsed, inflight, now);
    }

    fn limit(&self, cand: Cand) -> Option<f64> {
        self.picker.limit(cand)
    }

    fn done(&mut self, req: Req, cand: Cand, retry: bool, now: f64, world: &World<'_>) {
        let r = &mut self.reqs[req as usize];
        r.lease = 0;
        // A reclaimed attempt's slot was freed at its reclaim.
        if r.running.take().is_some() {
            self.picker.finished(cand, world, now);
            self.in_flight[cand as usize] -= 1;
            self.global -= 1;
        }
        if retry {
            self.enqueue(req);
        } else {
            self.reqs[req as usize] = ReqState::default();
        }
        self.pump(now, world);
    }

    fn tick(&mut self, now: f64, world: &World<'_>) {
        self.reclaim(now, world);
        self.pump(now, world);
    }

    fn poll(&mut self) -> Option<Decision> {
        self.out.pop_front()
    }

    fn decisions(&self) -> u64 {
        self.decisions
    }

    fn stalls(&self) -> u64 {
        0
    }
}

/// Uniformly random.
#[derive(Debug)]
pub(crate) struct Random;

impl Picker for Random {
    fn pick(&mut self, s: &[Cand], _: &PickState<'_>, _: &World<'_>, rng: &mut SmallRng) -> Cand {
        s[rng.random_range(0..s.len())]
    }
}

/// Round robin over candidate indices: the next servable one after the last granted.
#[derive(Debug, Default)]
pub(crate) struct RoundRobin {
    last: Option<Cand>,
}

impl Picker for RoundRobin {
    fn pick(&mut self, s: &[Cand], _: &PickState<'_>, _: &World<'_>, _: &mut SmallRng) -> Cand {
        let after = |c: Cand| match self.last {
            Some(l) if c <= l => c as u64 + (1 << 32),
            _ => c as u64,
        };
        *s.iter().min_by_key(|&&c| after(c)).unwrap_or(&s[0])
    }

    fn granted(&mut self, cand: Cand, _inflight: u32, _now: f64) {
        self.last = Some(cand);
    }
}

/// The candidate of `s` with the lowest `score`; equal scores are broken by starting the scan
/// at a random place, so equal candidates share the traffic.
pub(crate) fn min_by_score(
    s: &[Cand],
    rng: &mut SmallRng,
    mut score: impl FnMut(Cand) -> f64,
) -> Cand {
    let start = rng.random_range(0..s.len());
    let mut best = s[start];
    let mut best_score = score(best);
    for i in 1..s.len() {
        let c = s[(start + i) % s.len()];
        let v = score(c);
        if v < best_score {
            best = c;
            best_score = v;
        }
    }
    best
}

/// Two distinct random picks from `s` (the same one twice if `s` has one element).
pub(crate) fn two_random(s: &[Cand], rng: &mut SmallRng) -> (Cand, Cand) {
    let n = s.len();
    if n == 1 {
        return (s[0], s[0]);
    }
    let i = rng.random_range(0..n);
    let mut j = rng.random_range(0..n - 1);
    if j >= i {
        j += 1;
    }
    (s[i], s[j])
}

/// A hand-made world for the pickers' unit tests: a scenario's candidates, its workload and
/// stations whose queues a test fills by hand.
#[cfg(test)]
pub(crate) mod testing {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::{PickState, Picker};
    use crate::sim::policy::{Cand, World};
    use crate::sim::queue::{Job, Queues};
    use crate::sim::scenario::Workload;
    use crate::sim::truths::Truths;
    use crate::sim::Scenario;

    pub(crate) struct TestWorld {
        truth: Truths,
        workload: Workload,
        queues: Queues,
    }

    impl TestWorld {
        /// The world of the scenario `toml`, every station empty.
        pub(crate) fn new(toml: &str) -> Self {
            let sc = Scenario::parse(toml, "test").expect("a valid scenario");
            let entries: Vec<usize> = sc.expanded().iter().map(|(_, s)| *s).collect();
            let truth = Truths::new(&sc.candidates, &entries);
            let queues = Queues::new(truth.len(), 0);
            TestWorld {
                truth,
                workload: sc.workload,
                queues,
            }
        }

        /// The world of `candidates` (TOML `[[candidates]]` tables) under an open loop of 10
        /// requests a second for 1 s, with the workload's further lines `workload` (TOML).
        pub(crate) fn with(workload: &str, candidates: &str) -> Self {
            TestWorld::new(&format!(
                "name = \"test\"\n[workload]\nloop = \"open\"\nrate_per_s = 10\n\
                 duration_s = 1\n{workload}\n{candidates}"
            ))
        }

        /// `n` candidates that always answer in 10 ms, no queue, no retries.
        pub(crate) fn plain(n: u32) -> Self {
            TestWorld::with(
                "",
                &format!(
                    "[[candidates]]\nid = \"c\"\ncount = {n}\nsuccess = 1.0\nduration_ms = 10.0\n"
                ),
            )
        }

        /// `busy` attempts in service on `c` and `waiting` more in its queue.
        pub(crate) fn load(&mut self, c: usize, busy: u32, waiting: u32) {
            let s = &mut self.queues.stations[c];
            s.busy = busy;
            s.waiting.clear();
            s.waiting
                .extend((0..waiting).map(|att| Job { att, gen: 0 }));
        }

        pub(crate) fn world(&self, now: f64) -> World<'_> {
            World {
                truth: &self.truth,
                workload: &self.workload,
                queues: &self.queues,
                now,
            }
        }

        /// What `p` picks of `servable` in this world at `now`, with `in_flight` attempts
        /// on each candidate, under each of 20 seeds, which must all agree ([`always`]).
        pub(crate) fn always_picks(
            &self,
            p: &mut impl Picker,
            servable: &[Cand],
            in_flight: &[u32],
            now: f64,
        ) -> Cand {
            let st = PickState { in_flight, now };
            always(|rng| p.pick(servable, &st, &self.world(now), rng))
        }
    }

    /// The candidate `pick` chooses under each of 20 seeds, which must all agree.
    pub(crate) fn always(mut pick: impl FnMut(&mut SmallRng) -> Cand) -> Cand {
        let first = pick(&mut SmallRng::seed_from_u64(0));
        for seed in 1..20 {
            assert_eq!(
                pick(&mut SmallRng::seed_from_u64(seed)),
                first,
                "seed {seed}"
            );
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rand::SeedableRng;

    use super::testing::TestWorld;
    use super::*;

    /// What a picker was told, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// Takes the first servable candidate, keeps a fixed limit and logs what it hears.
    #[derive(Debug)]
    struct Probe {
        limit: Option<f64>,
        log: Log,
    }

    impl Picker for Probe {
        fn pick(&mut self, s: &[Cand], _: &PickState<'_>, _: &World<'_>, _: &mut SmallRng) -> Cand {
            s[0]
        }
        fn granted(&mut self, cand: Cand, inflight: u32, _now: f64) {
            self.log
                .lock()
                .unwrap()
                .push(format!("granted {cand} {inflight}"));
        }
        fn outcome(&mut self, cand: Cand, outcome: &Outcome, _: f64, _: f64) {
            let l = outcome.label();
            self.log.lock().unwrap().push(format!("outcome {cand} {l}"));
        }
        fn limit(&self, _cand: Cand) -> Option<f64> {
            self.limit
        }
    }

    /// A queued `Probe` with one candidate, and `n` requests made ready.
    fn probe(limit: Option<f64>, n: u32, tw: &TestWorld) -> (Box<dyn Policy>, Log, Vec<Decision>) {
        let log = Log::default();
        let picker = Probe {
            limit,
            log: log.clone(),
        };
        let mut p = queued(picker, Limits::default(), SmallRng::seed_from_u64(1));
        p.add(0, &CandidateInfo::new("c-0"), 0.0);
        for req in 0..n {
            p.ready(req, None, 0.0, &tw.world(0.0));
        }
        let decisions = std::iter::from_fn(|| p.poll()).collect();
        (p, log, decisions)
    }

    #[test]
    fn a_picker_limit_admits_fewer_attempts_than_its_integer_part() {
        let tw = TestWorld::plain(1);
        let (_, _, decisions) = probe(Some(2.9), 4, &tw);
        let grants = decisions
            .iter()
            .filter(|d| matches!(d, Decision::Grant { .. }))
            .count();
        assert_eq!(grants, 2, "{decisions:?}");
    }

    #[test]
    fn in_flight_at_a_grant_counts_the_attempt_itself() {
        let tw = TestWorld::plain(1);
        let (_, log, _) = probe(None, 2, &tw);
        assert_eq!(*log.lock().unwrap(), ["granted 0 1", "granted 0 2"]);
    }

    #[test]
    fn a_grant_handed_back_unused_teaches_the_picker_no_latency() {
        let tw = TestWorld::plain(1);
        let (mut p, log, _) = probe(None, 1, &tw);
        let cancelled = Outcome::failure(FailureClass::Cancelled);
        p.outcome(0, 0, &cancelled, 0.5);
        p.done(0, 0, false, 0.5, &tw.world(0.5));
        let heard = log.lock().unwrap().clone();
        assert!(!heard.iter().any(|l| l.starts_with("outcome")), "{heard:?}");
        // A sent attempt's outcome is heard.
        let (mut p, log, _) = probe(None, 1, &tw);
        p.outcome(0, 0, &Outcome::failure(FailureClass::Timeout), 0.5);
        assert!(log
            .lock()
            .unwrap()
            .contains(&"outcome 0 timeout".to_string()));
    }
}
