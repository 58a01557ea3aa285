//! Property tests of the pure core: random sequences of operations against the Step 1
//! invariants, and the draw's frequencies.

#[path = "support/props.rs"]
mod proptest_seed;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::score::Weights;
use selection_coordinator::{
    AttemptId, CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Limits, Mode, Next,
    Outcome, Request, RequestId, ServerFeedback,
};

const POOL: usize = 6;

fn name(i: usize) -> CandidateId {
    CandidateId::new(format!("c{}", i % POOL))
}

/// Candidate `i`'s static info: stakes, prices, perf scores, capabilities and tags that differ,
/// for the filters, their fallbacks and the mixture components to have something to do.
fn info(i: usize) -> CandidateInfo {
    let i = i % POOL;
    let mut info = CandidateInfo::new(name(i))
        .with_stake((i + 1) as f64)
        .with_price(10.0 * i as f64)
        .with_perf_score("FRA", 0.2 * i as f64)
        .with_capability(if i.is_multiple_of(2) { "gpu" } else { "cpu" });
    if i.is_multiple_of(3) {
        info = info.with_tag("fast");
    }
    if i == 5 {
        info = info.with_max_in_flight(1);
    }
    info
}

#[derive(Clone, Debug)]
enum Op {
    Ready {
        subset: Option<Vec<usize>>,
        parallelism: u32,
        deadline_ms: Option<u64>,
    },
    Outcome {
        pick: usize,
        kind: u8,
    },
    Done {
        pick: usize,
        retry: bool,
    },
    Cancel {
        pick: usize,
    },
    Limits {
        global: Option<u32>,
        per_candidate: Option<u32>,
        max_waiting: usize,
    },
    Remove {
        candidate: usize,
    },
    Add {
        candidate: usize,
    },
    /// Takes over an attempt the core did not grant (one running across a restart).
    Carry {
        candidate: usize,
    },
    Advance {
        ms: u64,
    },
    /// Releases an attempt and keeps its request open without asking (`Next::Keep`).
    Keep {
        pick: usize,
    },
    /// Asks again for an open request (refused when it is closed or has all it may run).
    Reask {
        pick: usize,
    },
    /// Finishes an open request.
    Finish {
        pick: usize,
    },
    /// An attempt reports its first byte.
    FirstByte {
        pick: usize,
    },
    /// A new valid config at run time: one of [`config_list`]'s.
    Reconfigure {
        which: usize,
    },
    /// A snapshot of the core restored into it at once.
    Roundtrip,
    /// A peer's digest: this core's own evidence as another coordinator would send it, its
    /// times scaled by `skew` and its success shifted by `shift`.
    Digest {
        skew: f64,
        shift: f64,
    },
    /// A request for any candidate with a capability (`none` is one that no candidate has).
    ReadyNeeding {
        capability: usize,
    },
    /// A request for any candidate but those listed (possibly one twice), with parallelism.
    ReadyExcluding {
        exclude: Vec<usize>,
        parallelism: u32,
    },
    /// Hostile input: each variant must be refused with an error (or ignored), never a panic.
    Hostile(Hostile),
}

#[derive(Clone, Debug)]
enum Hostile {
    BadCandidate(u8),
    BadOutcome { pick: usize, value: f64 },
    StaleDone,
    StaleOutcome,
    StaleRequest(u8),
    BadRequest(u8),
    BadLimits(u8),
    BadConfig(f64),
    TimeBackwards(u64),
    BadSnapshot(f64),
}

fn hostile() -> impl Strategy<Value = Hostile> {
    let weird = prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-1.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        any::<f64>(),
    ];
    prop_oneof![
        (0u8..6).prop_map(Hostile::BadCandidate),
        (any::<usize>(), weird.clone())
            .prop_map(|(pick, value)| Hostile::BadOutcome { pick, value }),
        Just(Hostile::StaleDone),
        Just(Hostile::StaleOutcome),
        (0u8..3).prop_map(Hostile::StaleRequest),
        (0u8..4).prop_map(Hostile::BadRequest),
        (0u8..4).prop_map(Hostile::BadLimits),
        weird.clone().prop_map(Hostile::BadConfig),
        (1u64..5_000).prop_map(Hostile::TimeBackwards),
        weird.prop_map(Hostile::BadSnapshot),
    ]
}

fn hostile_op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => op(), 2 => hostile().prop_map(Op::Hostile)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            proptest::option::of(proptest::collection::vec(0..POOL, 1..4)),
            1u32..=2,
            proptest::option::weighted(0.2, 1u64..500),
        )
            .prop_map(|(subset, parallelism, deadline_ms)| Op::Ready {
                subset,
                parallelism,
                deadline_ms
            }),
        3 => (any::<usize>(), 0u8..9).prop_map(|(pick, kind)| Op::Outcome { pick, kind }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, retry)| Op::Done { pick, retry }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => (
            proptest::option::of(1u32..5),
            proptest::option::of(1u32..3),
            1usize..12
        )
            .prop_map(|(global, per_candidate, max_waiting)| Op::Limits {
                global,
                per_candidate,
                max_waiting
            }),
        1 => (0..POOL).prop_map(|candidate| Op::Remove { candidate }),
        1 => (0..POOL).prop_map(|candidate| Op::Add { candidate }),
        1 => (0..POOL).prop_map(|candidate| Op::Carry { candidate }),
        2 => (1u64..2_000).prop_map(|ms| Op::Advance { ms }),
        1 => any::<usize>().prop_map(|pick| Op::Keep { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Reask { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Finish { pick }),
        1 => any::<usize>().prop_map(|pick| Op::FirstByte { pick }),
        1 => any::<usize>().prop_map(|which| Op::Reconfigure { which }),
        1 => Just(Op::Roundtrip),
        1 => (0usize..3).prop_map(|capability| Op::ReadyNeeding { capability }),
        1 => (proptest::collection::vec(0..POOL, 1..4), 1u32..3)
            .prop_map(|(exclude, parallelism)| Op::ReadyExcluding { exclude, parallelism }),
        1 => (0.1f64..10.0, -0.5f64..0.5).prop_map(|(skew, shift)| Op::Digest { skew, shift }),
    ]
}

/// The configs a sequence starts with or switches to.
fn config_list() -> Vec<Config> {
    vec![
        Config::default(),
        Config::lassie(),
        Config::livepeer(),
        Config::default().deterministic(),
        variant_config(),
        arms_config(),
        filters_config(false),
        filters_config(true),
    ]
}

/// Price and perf filters and a tag weight: with `strict`, the maximum price makes candidates
/// unusable outright; else it falls back when none passes. Livepeer's mixture when not strict.
fn filters_config(strict: bool) -> Config {
    let mut c = if strict {
        Config::default()
    } else {
        Config::livepeer()
    };
    c.price.max = Some(25.0);
    c.price.ignore_max_if_none_pass = !strict;
    c.perf.region = Some("FRA".into());
    c.perf.min_score = Some(0.3);
    c.tag_weights.insert("fast".into(), 0.5);
    c
}

fn outcome_of(kind: u8) -> Outcome {
    match kind {
        0 => Outcome::success_with(10.0, 20.0, 1000, 50.0),
        1 => Outcome::success(),
        2 => Outcome::failure(FailureClass::Overload),
        3 => Outcome::failure(FailureClass::Timeout),
        4 => Outcome::failure(FailureClass::Refused),
        5 => Outcome::failure(FailureClass::Cancelled),
        6 => Outcome::failure(FailureClass::Application),
        // Server feedback: the reports move a fleet-wide reference as well as the candidate's.
        7 => Outcome::success().feedback(ServerFeedback::new(2, Duration::from_millis(4))),
        _ => Outcome::success().feedback(ServerFeedback::new(0, Duration::from_micros(900))),
    }
}

/// The test's view of the world, to check the core's events against.
struct Harness {
    core: Core,
    rng: SmallRng,
    base: Instant,
    now: Instant,
    live: HashSet<CandidateId>,
    limits: Limits,
    outstanding: Vec<(AttemptId, RequestId, CandidateId)>,
    open: Vec<RequestId>,
    answered: HashSet<RequestId>,
    requests: Vec<RequestId>,
    stale_attempts: Vec<AttemptId>,
    rejected: HashSet<RequestId>,
    /// Requests the core said ended (`Event::Closed`).
    closed: HashSet<RequestId>,
    /// The capability each request that asked for one requires.
    needs: HashMap<RequestId, &'static str>,
    /// The last sequence number of the peer's digests.
    peer_seq: u64,
}

impl Harness {
    fn new(config: Config, seed: u64) -> Self {
        let base = Instant::now();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut core = Core::new(config, base).unwrap();
        core.set_close_events(true);
        core.set_share_identity("local", 0);
        let mut live = HashSet::new();
        for i in 0..4 {
            core.add_candidate(info(i), base, &mut rng).unwrap();
            live.insert(name(i));
        }
        Harness {
            core,
            rng,
            base,
            now: base,
            live,
            limits: Limits::default(),
            outstanding: Vec::new(),
            open: Vec::new(),
            answered: HashSet::new(),
            requests: Vec::new(),
            stale_attempts: Vec::new(),
            rejected: HashSet::new(),
            closed: HashSet::new(),
            needs: HashMap::new(),
            peer_seq: 0,
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Ready {
                subset,
                parallelism,
                deadline_ms,
            } => {
                let mut req = match subset {
                    None => Request::any(),
                    Some(ix) => Request::only(ix.iter().map(|&i| name(i))),
                };
                req = req.with_parallelism(*parallelism);
                if let Some(ms) = deadline_ms {
                    req = req.with_deadline(self.now + Duration::from_millis(*ms));
                }
                let all_known = match subset {
                    None => true,
                    Some(ix) => ix.iter().all(|&i| self.live.contains(&name(i))),
                };
                // Parallel attempts go to distinct candidates: a list naming fewer is refused.
                let enough = match subset {
                    None => true,
                    Some(ix) => {
                        let distinct: HashSet<_> = ix.iter().collect();
                        distinct.len() as u32 >= *parallelism
                    }
                };
                match self.core.ready(req, self.now, &mut self.rng) {
                    Ok(id) => {
                        prop_assert!(all_known, "ready accepted an unknown candidate");
                        prop_assert!(enough, "ready accepted more parallelism than candidates");
                        self.requests.push(id);
                        self.open.push(id);
                    }
                    Err(e) => prop_assert!(!(all_known && enough), "valid ready refused: {e}"),
                }
            }
            Op::Outcome { pick, kind } => {
                if !self.outstanding.is_empty() {
                    let (a, request, ref candidate) =
                        self.outstanding[pick % self.outstanding.len()];
                    // A second report is refused, never a panic.
                    if let Ok(reported) = self.core.outcome(a, outcome_of(*kind), self.now) {
                        // The core says what the attempt belonged to.
                        prop_assert_eq!(reported.request, request);
                        prop_assert_eq!(&reported.candidate, candidate);
                    }
                }
            }
            Op::Done { pick, retry } => {
                let next = if *retry { Next::Retry } else { Next::Finish };
                if let Some(a) = self.release(*pick, next)? {
                    prop_assert!(self.core.done(a, next, self.now, &mut self.rng).is_err());
                }
            }
            Op::Cancel { pick } => {
                if !self.open.is_empty() {
                    let r = self.open[pick % self.open.len()];
                    let _ = self.core.cancel(r, self.now);
                }
            }
            Op::Limits {
                global,
                per_candidate,
                max_waiting,
            } => {
                self.limits = Limits {
                    global: global.unwrap_or(u32::MAX),
                    per_candidate: per_candidate.unwrap_or(u32::MAX),
                    max_waiting: *max_waiting,
                    ..Limits::default()
                };
                self.core
                    .set_limits(self.limits, self.now, &mut self.rng)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Op::Remove { candidate } => {
                let id = name(*candidate);
                let r = self.core.remove_candidate(&id, self.now, &mut self.rng);
                prop_assert_eq!(r.is_ok(), self.live.remove(&id));
            }
            Op::Add { candidate } => {
                let id = name(*candidate);
                let r = self
                    .core
                    .add_candidate(info(*candidate), self.now, &mut self.rng);
                prop_assert_eq!(r.is_ok(), self.live.insert(id));
            }
            Op::Carry { candidate } => {
                let id = name(*candidate);
                match self.core.carry(&id, false, self.now) {
                    Ok(a) => {
                        prop_assert!(self.live.contains(&id), "carried on an unknown candidate");
                        let request = self.core.attempt_request(a);
                        prop_assert!(request.is_some());
                        let request = request.unwrap();
                        self.outstanding.push((a, request, id));
                        self.requests.push(request);
                        self.open.push(request);
                        // Its answer was the earlier core's grant.
                        self.answered.insert(request);
                    }
                    Err(e) => prop_assert!(!self.live.contains(&id), "carry refused: {e}"),
                }
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(*ms);
                self.core.tick(self.now, &mut self.rng);
            }
            Op::Keep { pick } => {
                self.release(*pick, Next::Keep)?;
            }
            Op::Reask { pick } => {
                if !self.open.is_empty() {
                    let r = self.open[pick % self.open.len()];
                    // Refused for a closed request or one with all it may run; never a panic.
                    let _ = self.core.reask(r, self.now, &mut self.rng);
                }
            }
            Op::Finish { pick } => {
                if !self.open.is_empty() {
                    let r = self.open[pick % self.open.len()];
                    // Its waiting asks are dropped without an event: the caller ended it.
                    if self.core.finish(r).is_ok() {
                        self.answered.insert(r);
                    }
                }
            }
            Op::FirstByte { pick } => {
                if !self.outstanding.is_empty() {
                    let (a, _, _) = self.outstanding[pick % self.outstanding.len()];
                    self.core
                        .first_byte(a)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Op::Reconfigure { which } => {
                let list = config_list();
                let c = list[which % list.len()].clone();
                self.core
                    .set_config(c, self.now, &mut self.rng)
                    .map_err(|e| TestCaseError::fail(format!("valid config refused: {e}")))?;
            }
            Op::ReadyExcluding {
                exclude,
                parallelism,
            } => {
                let mut req = Request::any().with_parallelism(*parallelism);
                for &i in exclude {
                    req = req.excluding(name(i));
                }
                // Refused only for a parallelism above the limit; otherwise granted, waiting
                // or rejected, never a panic, and never waiting while it could be served.
                if let Ok(id) = self.core.ready(req, self.now, &mut self.rng) {
                    self.requests.push(id);
                    self.open.push(id);
                }
            }
            Op::ReadyNeeding { capability } => {
                let cap = ["gpu", "cpu", "none"][*capability];
                // No candidate has `none`: refused or rejected, never a panic or a wait.
                if let Ok(id) =
                    self.core
                        .ready(Request::any().requiring(cap), self.now, &mut self.rng)
                {
                    self.requests.push(id);
                    self.open.push(id);
                    self.needs.insert(id, cap);
                }
            }
            Op::Digest { skew, shift } => {
                let mut d = self.core.digest(self.now);
                d.sender = "peer".into();
                self.peer_seq += 1;
                d.seq = self.peer_seq;
                for e in &mut d.entries {
                    e.success = (e.success + shift).clamp(0.0, 1.0);
                    e.attempt_ms = e.attempt_ms.map(|t| t * skew);
                    e.ttfb_ms = e.ttfb_ms.map(|t| t * skew);
                }
                // Turned away when sharing is off, too soon after the last one, and so on;
                // never a panic. Applied, it moves weights from the next refresh on.
                let _ = self.core.apply_digest(self.now, &d);
            }
            Op::Roundtrip => {
                let snap = self.core.snapshot();
                self.core
                    .restore(&snap, self.now, &mut self.rng)
                    .map_err(|e| TestCaseError::fail(format!("own snapshot refused: {e}")))?;
            }
            Op::Hostile(h) => self.hostile(h)?,
        }
        self.drain_and_check()
    }

    /// Releases the outstanding attempt `pick` picks with `next`; the attempt, if any.
    fn release(&mut self, pick: usize, next: Next) -> Result<Option<AttemptId>, TestCaseError> {
        if self.outstanding.is_empty() {
            return Ok(None);
        }
        let (a, _, _) = self.outstanding.swap_remove(pick % self.outstanding.len());
        self.core
            .done(a, next, self.now, &mut self.rng)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        self.stale_attempts.push(a);
        Ok(Some(a))
    }

    fn hostile(&mut self, h: &Hostile) -> Result<(), TestCaseError> {
        let now = self.now;
        match h {
            Hostile::BadCandidate(kind) => {
                let mut info = CandidateInfo::new(format!("bad{kind}"));
                match kind {
                    0 => info.stake = f64::NAN,
                    1 => info.price = f64::INFINITY,
                    2 => info.stake = -3.0,
                    3 => info.max_in_flight = Some(0),
                    4 => info.id = CandidateId::new(""),
                    _ => {
                        info.perf_scores.insert("FRA".into(), f64::NAN);
                    }
                }
                prop_assert!(self.core.add_candidate(info, now, &mut self.rng).is_err());
            }
            Hostile::BadOutcome { pick, value } => {
                if !self.outstanding.is_empty() {
                    let (a, _, _) = self.outstanding[pick % self.outstanding.len()];
                    let o = Outcome::Success(selection_coordinator::Success {
                        ttfb_ms: Some(*value),
                        ..Default::default()
                    });
                    let ok = value.is_finite() && *value >= 0.0;
                    let r = self.core.outcome(a, o, now);
                    if !ok {
                        prop_assert!(r.is_err(), "outcome with {value} accepted");
                    }
                }
            }
            Hostile::StaleDone => {
                if let Some(&a) = self.stale_attempts.last() {
                    prop_assert!(self.core.done(a, Next::Finish, now, &mut self.rng).is_err());
                }
            }
            Hostile::StaleOutcome => {
                if let Some(&a) = self.stale_attempts.first() {
                    prop_assert!(self.core.outcome(a, Outcome::success(), now).is_err());
                }
            }
            Hostile::StaleRequest(kind) => {
                // A rejected request with nothing running is gone: every call on it is refused.
                let gone = self.requests.iter().copied().find(|r| {
                    self.rejected.contains(r) && !self.outstanding.iter().any(|o| o.1 == *r)
                });
                if let Some(r) = gone {
                    let res = match kind {
                        0 => self.core.cancel(r, now),
                        1 => self.core.finish(r),
                        _ => self.core.reask(r, now, &mut self.rng),
                    };
                    prop_assert!(res.is_err(), "call on finished request {r} accepted");
                }
            }
            Hostile::BadRequest(kind) => {
                let req = match kind {
                    0 => Request::any().with_parallelism(0),
                    1 => Request::any().with_parallelism(1_000_000),
                    2 => Request::only(Vec::<String>::new()),
                    _ => Request::only(["no-such-candidate"]),
                };
                prop_assert!(self.core.ready(req, now, &mut self.rng).is_err());
            }
            Hostile::BadLimits(kind) => {
                let mut l = Limits::default();
                match kind {
                    0 => l.global = 0,
                    1 => l.per_candidate = 0,
                    2 => l.max_parallelism = 0,
                    _ => l.max_attempt_s = Some(f64::NAN),
                }
                prop_assert!(self.core.set_limits(l, now, &mut self.rng).is_err());
                prop_assert_eq!(self.core.limits(), self.limits);
            }
            Hostile::BadConfig(v) => {
                let before = self.core.config().clone();
                let mut c = before.clone();
                c.weights.success = *v;
                c.ema.alpha = if v.is_finite() { *v } else { 2.0 };
                let valid = c.validate().is_ok();
                let r = self.core.set_config(c, now, &mut self.rng);
                prop_assert_eq!(r.is_ok(), valid);
                if !valid {
                    prop_assert_eq!(self.core.config(), &before);
                }
            }
            Hostile::TimeBackwards(ms) => {
                let earlier = self
                    .now
                    .checked_sub(Duration::from_millis(*ms))
                    .unwrap_or(self.base);
                self.core.tick(earlier, &mut self.rng);
            }
            Hostile::BadSnapshot(v) => {
                let mut snap = self.core.snapshot();
                if let Some(c) = snap.candidates.first_mut() {
                    c.stats.connect_ms = Some(*v);
                    let valid = v.is_finite() && *v >= 0.0;
                    prop_assert_eq!(self.core.restore(&snap, now, &mut self.rng).is_ok(), valid);
                }
            }
        }
        Ok(())
    }

    fn drain_and_check(&mut self) -> Result<(), TestCaseError> {
        let mut granted_to: HashSet<CandidateId> = HashSet::new();
        let mut any_grant = false;
        while let Some(e) = self.core.poll_event() {
            match e {
                Event::Granted(g) => {
                    prop_assert!(
                        self.live.contains(&g.candidate),
                        "granted removed candidate {}",
                        g.candidate
                    );
                    prop_assert!(g.probability > 0.0 && g.probability <= 1.0 + 1e-12);
                    let index: usize = g.candidate.as_str()[1..].parse().unwrap();
                    let granted = info(index);
                    if let Some(cap) = self.needs.get(&g.request) {
                        prop_assert!(
                            granted.capabilities.iter().any(|c| c == cap),
                            "{} granted to {} without {cap}",
                            g.request,
                            g.candidate
                        );
                    }
                    let price = &self.core.config().price;
                    if let (Some(max), false) = (price.max, price.ignore_max_if_none_pass) {
                        prop_assert!(
                            granted.price <= max,
                            "{} at price {} over the strict maximum {max}",
                            g.candidate,
                            granted.price
                        );
                    }
                    self.answered.insert(g.request);
                    granted_to.insert(g.candidate.clone());
                    any_grant = true;
                    self.outstanding.push((g.attempt, g.request, g.candidate));
                }
                Event::Rejected { request, .. } => {
                    self.rejected.insert(request);
                    self.answered.insert(request);
                }
                Event::Reclaimed { .. } => {}
                // An attempt released unreported past its advice: of a request still open.
                Event::TimedOut(r) => {
                    prop_assert!(self.requests.contains(&r.request), "unknown {}", r.request);
                    prop_assert!(!self.closed.contains(&r.request), "{} closed", r.request);
                }
                Event::Closed { request, .. } => {
                    prop_assert!(self.requests.contains(&request), "closed unknown {request}");
                    prop_assert!(self.closed.insert(request), "{request} closed twice");
                    prop_assert!(
                        self.outstanding.iter().all(|(_, r, _)| *r != request),
                        "{request} closed with an attempt running"
                    );
                }
                other => prop_assert!(false, "an event this test does not know: {other:?}"),
            }
        }
        // A closed request gets nothing after its end.
        for (_, r, _) in &self.outstanding {
            prop_assert!(!self.closed.contains(r), "{r} granted after it closed");
        }
        // The core's open requests are exactly those accepted and not yet closed.
        prop_assert_eq!(
            self.core.open_requests(),
            self.requests.len() - self.closed.len()
        );
        // Grants never push anything past a limit.
        if any_grant {
            prop_assert!(self.core.in_flight() <= self.limits.global);
        }
        for id in granted_to {
            let view = self.core.candidate(&id).expect("granted candidate exists");
            prop_assert!(view.in_flight <= view.limit, "{id} over its limit");
        }
        prop_assert_eq!(self.core.in_flight() as usize, self.outstanding.len());
        // Nothing is stuck while capacity exists.
        prop_assert!(
            !self.core.any_servable_waiting(),
            "a servable request is waiting"
        );
        self.core.check_invariants().map_err(TestCaseError::fail)?;
        // Probabilities over the state sum to 1, and the tree agrees with the evaluated draw.
        let probs = self
            .core
            .probabilities(&Request::any(), self.now)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if !probs.is_empty() {
            let sum: f64 = probs.iter().map(|(_, p)| p).sum();
            prop_assert!((sum - 1.0).abs() < 1e-9, "probabilities sum to {sum}");
            // When no candidate the tree holds is drawable (every free one ejected, or none
            // passing a filter), draws take the evaluated path with its fallbacks: the tree
            // is not read then.
            let tree: Vec<f64> = probs
                .iter()
                .map(|(id, _)| self.core.tree_probability(id))
                .collect();
            if tree.iter().any(|t| *t > 0.0) {
                for ((id, p), t) in probs.iter().zip(&tree) {
                    prop_assert!((t - p).abs() < 1e-9, "tree {t} vs evaluated {p} for {id}");
                }
            }
        }
        Ok(())
    }

    /// Releases everything and lets every deadline pass: each request must end up answered.
    fn quiesce(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..1000 {
            if self.outstanding.is_empty() {
                break;
            }
            let (a, _, _) = self.outstanding.remove(0);
            self.core
                .done(a, Next::Finish, self.now, &mut self.rng)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            self.drain_and_check()?;
        }
        self.now += Duration::from_secs(10);
        self.core.tick(self.now, &mut self.rng);
        self.drain_and_check()?;
        for r in &self.requests {
            prop_assert!(self.answered.contains(r), "request {r} was never answered");
        }
        Ok(())
    }
}

fn configs() -> impl Strategy<Value = Config> {
    proptest::sample::select(config_list())
}

/// Two arms (the default and lassie's weights) and a shadow: requests are split between
/// the arms, and the main draw is the first arm's.
fn arms_config() -> Config {
    use selection_coordinator::score::{Arm, Shadow};
    Config {
        arms: vec![
            Arm {
                name: "main".into(),
                share: 1.0,
                config: Config::default(),
            },
            Arm {
                name: "lassie".into(),
                share: 1.0,
                config: Config::lassie(),
            },
        ],
        shadows: vec![Shadow {
            name: "livepeer".into(),
            sample: 0.5,
            config: Config::livepeer(),
        }],
        ..Config::default()
    }
}

/// The default with the optional parts on: adaptive limits, ejection, the pooled prior for
/// unseen candidates, and every probe.
fn variant_config() -> Config {
    let mut c = Config::default();
    c.adaptive.enabled = true;
    c.ejection.enabled = true;
    c.ejection.consecutive_failures = 2;
    c.unseen.prior = selection_coordinator::score::UnseenPrior::Pooled;
    c.unseen.optimism = 0.5;
    c
}

proptest! {
    #![proptest_config(proptest_seed::config(2000))]

    #[test]
    fn invariants_hold_for_random_operation_sequences(
        config in configs(),
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mut h = Harness::new(config, seed);
        for op in &ops {
            h.apply(op)?;
        }
        h.quiesce()?;
        let _ = h.base;
    }
}

proptest! {
    #![proptest_config(proptest_seed::config(8000))]

    /// Hostile input mixed into random sequences: every bad call is refused with an error,
    /// nothing panics, and the invariants still hold afterwards.
    #[test]
    fn hostile_inputs_are_refused_and_invariants_hold(
        config in configs(),
        seed in any::<u64>(),
        ops in proptest::collection::vec(hostile_op(), 1..30),
    ) {
        let mut h = Harness::new(config, seed);
        for op in &ops {
            h.apply(op)?;
        }
        h.quiesce()?;
    }
}

fn weighted_core(deterministic: bool) -> (Core, SmallRng, Instant) {
    // Mixture mode with only the stake component: probability exactly proportional to stake.
    let config = Config {
        mode: Mode::Mixture,
        weights: Weights {
            stake: 1.0,
            ..Weights::ZERO
        },
        floor: 0.0,
        exponent: 1.0,
        deterministic,
        ..Config::default()
    };
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(2024);
    let mut core = Core::new(config, now).unwrap();
    for (i, w) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
        core.add_candidate(
            CandidateInfo::new(format!("w{i}")).with_stake(w),
            now,
            &mut rng,
        )
        .unwrap();
    }
    (core, rng, now)
}

fn draw_counts(
    core: &mut Core,
    rng: &mut SmallRng,
    now: Instant,
    n: usize,
    request: &Request,
) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        core.ready(request.clone(), now, rng).unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("no grant")
        };
        *counts.entry(g.candidate.to_string()).or_insert(0) += 1;
        core.done(g.attempt, Next::Finish, now, rng).unwrap();
    }
    counts
}

/// Upper tail of the chi-square distribution with 3 degrees of freedom.
fn chi2_sf_3(x: f64) -> f64 {
    // Q(x; 3) = erfc(sqrt(x/2)) + sqrt(2x/pi) e^{-x/2}
    erfc((x / 2.0).sqrt()) + (2.0 * x / std::f64::consts::PI).sqrt() * (-x / 2.0).exp()
}

/// erfc by the Numerical Recipes Chebyshev fit (relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

fn chi_square(counts: &HashMap<String, u64>, n: usize) -> f64 {
    [1.0, 2.0, 3.0, 4.0]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let expected = n as f64 * w / 10.0;
            let observed = *counts.get(&format!("w{i}")).unwrap_or(&0) as f64;
            (observed - expected).powi(2) / expected
        })
        .sum()
}

#[test]
fn draws_are_proportional_to_weight_1_2_3_4() {
    let n = 100_000;
    let (mut core, mut rng, now) = weighted_core(false);
    let counts = draw_counts(&mut core, &mut rng, now, n, &Request::any());
    let chi2 = chi_square(&counts, n);
    let p = chi2_sf_3(chi2);
    println!("tree draw, weights 1:2:3:4, {n} draws: {counts:?}, chi-square {chi2:.3}, p = {p:.4}");
    assert!(
        p > 0.001,
        "chi-square {chi2} (p = {p}) rejects proportional draws"
    );

    // The explicit-subset path (a linear pick) has the same distribution.
    let subset = Request::only(["w0", "w1", "w2", "w3"]);
    let counts = draw_counts(&mut core, &mut rng, now, n, &subset);
    let chi2 = chi_square(&counts, n);
    let p = chi2_sf_3(chi2);
    println!(
        "subset draw, weights 1:2:3:4, {n} draws: {counts:?}, chi-square {chi2:.3}, p = {p:.4}"
    );
    assert!(
        p > 0.001,
        "chi-square {chi2} (p = {p}) rejects proportional draws"
    );
}

#[test]
fn chi_square_helper_matches_known_quantiles() {
    // The 0.999 quantile of chi-square(3) is 16.266; the median is 2.366.
    assert!((chi2_sf_3(16.266) - 0.001).abs() < 1e-5);
    assert!((chi2_sf_3(2.366) - 0.5).abs() < 1e-3);
}

#[test]
fn deterministic_mode_always_picks_the_maximum() {
    let (mut core, mut rng, now) = weighted_core(true);
    let counts = draw_counts(&mut core, &mut rng, now, 1_000, &Request::any());
    assert_eq!(counts.get("w3"), Some(&1_000), "{counts:?}");
    let counts = draw_counts(
        &mut core,
        &mut rng,
        now,
        100,
        &Request::only(["w0", "w1", "w2"]),
    );
    assert_eq!(counts.get("w2"), Some(&100), "{counts:?}");
}

#[test]
fn deterministic_ties_go_to_the_first_added() {
    let config = Config::default().deterministic();
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut core = Core::new(config, now).unwrap();
    for id in ["z", "a", "m"] {
        core.add_candidate(CandidateInfo::new(id), now, &mut rng)
            .unwrap();
    }
    let counts = draw_counts(&mut core, &mut rng, now, 10, &Request::any());
    assert_eq!(counts.get("z"), Some(&10), "{counts:?}");
}
