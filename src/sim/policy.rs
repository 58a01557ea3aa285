//! The `Policy` trait the engine drives, policy names, and the `coordinator` policy, which
//! hands every decision to the real [`Core`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::baselines;
use super::baselines::limiters;
use super::queue::Queues;
use super::scenario::Workload;
use super::truth::Truth;
use crate::core::{AttemptId, CandidateId, CandidateInfo, Core, Event, Limits, Next, Outcome};
use crate::core::{Request, RequestId};
use crate::score::Config;

/// A candidate by its index in the scenario's expanded list.
pub(crate) type Cand = u32;
/// A request by its index in the run.
pub(crate) type Req = u32;

/// What a policy tells the engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Decision {
    /// Run an attempt of `req` on `cand`.
    Grant { req: Req, cand: Cand },
    /// `req` will get no attempt (nothing left it may use).
    Reject { req: Req },
    /// The policy could not decide for `req`; look again at `retry_at` seconds.
    Stall { retry_at: f64 },
}

/// What only the oracles (`oracle`, `clairvoyant`) may look at: the hidden truth, the real
/// queues and service rates.
#[derive(Clone, Copy, Debug)]
pub(crate) struct World<'a> {
    pub(crate) truth: &'a [Truth],
    /// The scenario's workload (retries, the attempt timeout).
    pub(crate) workload: &'a Workload,
    #[allow(dead_code)]
    pub(crate) queues: &'a Queues,
    /// Virtual seconds since the start of the run.
    #[allow(dead_code)]
    pub(crate) now: f64,
}

// The hook for policies that know the queues (the clairvoyant oracle of a queueing world).
#[allow(dead_code)]
impl World<'_> {
    /// Attempts on `c` waiting for a server plus those in service (0 without a queue).
    pub(crate) fn queue_len(&self, c: Cand) -> u32 {
        self.queues.queue_len(c as usize)
    }

    /// Attempts on `c` waiting for a server (not in service).
    pub(crate) fn waiting(&self, c: Cand) -> u32 {
        self.queues.waiting(c as usize)
    }

    /// Attempts on `c` in service.
    pub(crate) fn in_service(&self, c: Cand) -> u32 {
        self.queues.in_service(c as usize)
    }

    /// Parallel servers of `c` now (`u32::MAX` without a queue).
    pub(crate) fn servers(&self, c: Cand) -> u32 {
        self.truth[c as usize].servers()
    }

    /// Completions per second of one server of `c` at this moment: the inverse of its mean
    /// service time at the current slowdown level (infinite without a queue).
    pub(crate) fn service_rate(&self, c: Cand) -> f64 {
        self.queues
            .service_rate(c as usize, &self.truth[c as usize], self.now)
    }
}

/// A selection policy driven in virtual time (seconds since the start of the run).
pub(crate) trait Policy: Send {
    /// A candidate becomes available.
    fn add(&mut self, cand: Cand, info: &CandidateInfo, now: f64);
    /// A candidate leaves.
    fn remove(&mut self, cand: Cand, now: f64, world: &World<'_>);
    /// A request wants its first attempt; `eligible` is `None` for every candidate.
    fn ready(&mut self, req: Req, eligible: Option<&[Cand]>, now: f64, world: &World<'_>);
    /// A successful attempt's first byte came (its outcome follows at the end of the
    /// transfer). Most policies learn from outcomes alone.
    fn first_byte(&mut self, _req: Req, _cand: Cand, _now: f64) {}
    /// An attempt's outcome.
    fn outcome(&mut self, req: Req, cand: Cand, outcome: &Outcome, now: f64);
    /// An attempt's slot is free; `retry`: the request wants another candidate it has not tried.
    fn done(&mut self, req: Req, cand: Cand, retry: bool, now: f64, world: &World<'_>);
    /// Time passes (refreshes, deadlines, stalled requests).
    fn tick(&mut self, now: f64, world: &World<'_>);
    /// How long a caller waits for its request (`workload.timeout_ms`, seconds), told once
    /// before the first request; a policy that takes deadlines gives each request its own.
    fn caller_timeout(&mut self, _timeout_s: Option<f64>) {}
    /// Told once before the first candidate joins: how many candidates the run may add, so a
    /// policy can make room for them at once instead of growing its tables as they come.
    fn reserve(&mut self, _candidates: usize) {}
    /// The next decision, if any.
    fn poll(&mut self) -> Option<Decision>;
    /// Decisions made.
    fn decisions(&self) -> u64;
    /// Rounds in which the policy could not decide although a candidate was free.
    fn stalls(&self) -> u64;
    /// The names of the live A/B arms the policy splits requests between (none by default).
    fn arm_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// The arm (an index into [`Policy::arm_names`]) whose draw granted `req`'s latest attempt.
    fn arm(&self, _req: Req) -> Option<usize> {
        None
    }
    /// The deadline advised with `req`'s latest grant, ms ([`crate::Grant::deadline_ms`]):
    /// the engine's workers give up on the attempt then, as a timeout (none by default).
    fn deadline_ms(&self, _req: Req) -> Option<f64> {
        None
    }
    /// Says which closed-loop worker (`None`: an open-loop arrival) issues `req`, just before
    /// its `ready` (a fleet of coordinators routes it to that worker's own coordinator).
    fn assign(&mut self, _req: Req, _worker: Option<u32>) {}
    /// The policy's current concurrency limit for `cand`: it grants `cand` an attempt only
    /// while fewer are in flight (`None`: the policy keeps no limit of its own). The engine
    /// reads it over time for `limit_mean` and the `limit` series.
    fn limit(&self, _cand: Cand) -> Option<f64> {
        None
    }
}

/// A policy named on the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicySpec {
    /// The coordinator with a config; the label is what the user typed.
    Coordinator {
        /// Shown in tables and JSON.
        label: String,
        /// `None`: the scenario's `[coordinator]` config, else the project default.
        config: Option<Box<Config>>,
    },
    /// Uniform random.
    Random,
    /// Round robin.
    RoundRobin,
    /// Power of two choices by operations in flight (MongoDB's server selection).
    P2cOpcount,
    /// DRIVERS-3217 proof of concept: error-rate bias over operation count.
    MongoErrorBias,
    /// lassie's random pairwise comparison between waiters.
    LassiePairwise,
    /// Power of two choices by peak EWMA of latency times load (tower, Finagle).
    P2cPeakEwma,
    /// Linkerd's "least loaded": two random choices, fewer in flight wins.
    LeastLoaded,
    /// Fewest outstanding requests among the allowed candidates.
    LeastPending,
    /// Cassandra's dynamic snitch (latency scores recomputed every 100 ms).
    DynamicSnitch,
    /// C3's replica ranking with its cubic queue-size term.
    C3,
    /// C3's ranking with its cubic rate control and backpressure (made for many clients).
    C3Rate,
    /// Knows true queue lengths and service rates: least expected completion time.
    Clairvoyant,
    /// Knows the truth.
    Oracle,
    /// Thompson sampling over everything ever seen: the learning bound of a stationary world.
    Thompson,
    /// Netflix concurrency-limits' `Gradient2Limit` per candidate over a least-loaded p2c.
    Gradient2,
    /// Netflix concurrency-limits' `VegasLimit` per candidate over a least-loaded p2c.
    Vegas,
    /// Netflix concurrency-limits' `AIMDLimit` per candidate over a least-loaded p2c.
    Aimd,
    /// Vector's adaptive request concurrency per candidate over a least-loaded p2c.
    VectorArc,
    /// Knows each candidate's true capacity: limit = capacity, least-loaded p2c.
    OracleLimits,
}

/// Every policy name `--policies` accepts (besides `coordinator:<preset or file>`).
pub const POLICY_NAMES: [&str; 22] = [
    "coordinator",
    "random",
    "round-robin",
    "p2c-opcount",
    "mongo-error-bias",
    "lassie-pairwise",
    "lassie",
    "livepeer",
    "p2c-peak-ewma",
    "least-loaded",
    "least-pending",
    "dynamic-snitch",
    "c3",
    "c3-rate",
    "clairvoyant",
    "oracle",
    "thompson",
    "gradient2",
    "vegas",
    "aimd",
    "vector-arc",
    "oracle-limits",
];

impl PolicySpec {
    /// Parses one policy name.
    pub fn parse(name: &str) -> Result<Self, String> {
        let coordinator = |label: &str, config: Option<Config>| PolicySpec::Coordinator {
            label: label.to_string(),
            config: config.map(Box::new),
        };
        Ok(match name {
            "coordinator" => coordinator(name, None),
            "lassie" => coordinator(name, Some(Config::lassie())),
            "livepeer" => coordinator(name, Some(Config::livepeer())),
            "random" => PolicySpec::Random,
            "round-robin" => PolicySpec::RoundRobin,
            "p2c-opcount" => PolicySpec::P2cOpcount,
            "mongo-error-bias" => PolicySpec::MongoErrorBias,
            "lassie-pairwise" => PolicySpec::LassiePairwise,
            "p2c-peak-ewma" => PolicySpec::P2cPeakEwma,
            "least-loaded" => PolicySpec::LeastLoaded,
            "least-pending" => PolicySpec::LeastPending,
            "dynamic-snitch" => PolicySpec::DynamicSnitch,
            "c3" => PolicySpec::C3,
            "c3-rate" => PolicySpec::C3Rate,
            "clairvoyant" => PolicySpec::Clairvoyant,
            "oracle" => PolicySpec::Oracle,
            "thompson" => PolicySpec::Thompson,
            "gradient2" => PolicySpec::Gradient2,
            "vegas" => PolicySpec::Vegas,
            "aimd" => PolicySpec::Aimd,
            "vector-arc" => PolicySpec::VectorArc,
            "oracle-limits" => PolicySpec::OracleLimits,
            other => match other.strip_prefix("coordinator:") {
                Some(spec) => {
                    let config = Config::from_name_or_path(spec)
                        .map_err(|e| format!("policy `{other}`: {e}"))?;
                    coordinator(other, Some(config))
                }
                None => {
                    let hint = super::scenario::did_you_mean(other, &POLICY_NAMES);
                    return Err(format!(
                        "unknown policy `{other}`; {hint}expected one of {}, or coordinator:<preset or config file>",
                        POLICY_NAMES.join(", ")
                    ));
                }
            },
        })
    }

    /// The name shown in reports.
    pub fn label(&self) -> &str {
        match self {
            PolicySpec::Coordinator { label, .. } => label,
            PolicySpec::Random => "random",
            PolicySpec::RoundRobin => "round-robin",
            PolicySpec::P2cOpcount => "p2c-opcount",
            PolicySpec::MongoErrorBias => "mongo-error-bias",
            PolicySpec::LassiePairwise => "lassie-pairwise",
            PolicySpec::P2cPeakEwma => "p2c-peak-ewma",
            PolicySpec::LeastLoaded => "least-loaded",
            PolicySpec::LeastPending => "least-pending",
            PolicySpec::DynamicSnitch => "dynamic-snitch",
            PolicySpec::C3 => "c3",
            PolicySpec::C3Rate => "c3-rate",
            PolicySpec::Clairvoyant => "clairvoyant",
            PolicySpec::Oracle => "oracle",
            PolicySpec::Thompson => "thompson",
            PolicySpec::Gradient2 => "gradient2",
            PolicySpec::Vegas => "vegas",
            PolicySpec::Aimd => "aimd",
            PolicySpec::VectorArc => "vector-arc",
            PolicySpec::OracleLimits => "oracle-limits",
        }
    }

    /// Builds the policy for one run.
    pub(crate) fn build(
        &self,
        scenario_config: Option<&Config>,
        limits: Limits,
        stall_s: f64,
        seed: u64,
    ) -> Result<Box<dyn Policy>, String> {
        let rng = SmallRng::seed_from_u64(seed);
        Ok(match self {
            PolicySpec::Coordinator { config, .. } => {
                let config = config
                    .as_deref()
                    .or(scenario_config)
                    .cloned()
                    .unwrap_or_default();
                Box::new(CoordinatorPolicy::new(config, limits, rng)?)
            }
            PolicySpec::LassiePairwise => Box::new(baselines::LassiePairwise::new(
                limits,
                stall_s,
                rng,
                Instant::now(),
            )?),
            PolicySpec::Random => baselines::queued(baselines::Random, limits, rng),
            PolicySpec::RoundRobin => {
                baselines::queued(baselines::RoundRobin::default(), limits, rng)
            }
            PolicySpec::P2cOpcount => {
                baselines::queued(baselines::P2cOpcount::mongodb(), limits, rng)
            }
            PolicySpec::MongoErrorBias => {
                baselines::queued(baselines::MongoErrorBias::default(), limits, rng)
            }
            PolicySpec::P2cPeakEwma => {
                baselines::queued(baselines::P2cPeakEwma::default(), limits, rng)
            }
            // Linkerd's least loaded is the rule of MongoDB's operation count, without SDAM.
            PolicySpec::LeastLoaded => {
                baselines::queued(baselines::P2cOpcount::least_loaded(), limits, rng)
            }
            PolicySpec::LeastPending => baselines::queued(baselines::LeastPending, limits, rng),
            PolicySpec::DynamicSnitch => {
                let own = SmallRng::seed_from_u64(seed ^ 0x005e_edd5);
                baselines::queued(baselines::DynamicSnitch::new(own), limits, rng)
            }
            PolicySpec::C3 => baselines::queued(baselines::C3::new(false), limits, rng),
            PolicySpec::C3Rate => baselines::queued(baselines::C3::new(true), limits, rng),
            PolicySpec::Clairvoyant => baselines::queued(baselines::Clairvoyant, limits, rng),
            PolicySpec::Oracle => baselines::queued(baselines::Oracle, limits, rng),
            PolicySpec::Thompson => baselines::queued(baselines::Thompson::default(), limits, rng),
            PolicySpec::Gradient2 => {
                let l = baselines::Limited::new(|_| limiters::Gradient2::default(), seed ^ 0x6d);
                baselines::queued(l, limits, rng)
            }
            PolicySpec::Vegas => {
                let l = baselines::Limited::new(limiters::Vegas::new, seed ^ 0x6d);
                baselines::queued(l, limits, rng)
            }
            PolicySpec::Aimd => {
                let l = baselines::Limited::new(|_| limiters::Aimd::default(), seed ^ 0x6d);
                baselines::queued(l, limits, rng)
            }
            PolicySpec::VectorArc => {
                let l = baselines::Limited::new(|_| limiters::VectorArc::default(), seed ^ 0x6d);
                baselines::queued(l, limits, rng)
            }
            PolicySpec::OracleLimits => {
                baselines::queued(baselines::OracleLimits::default(), limits, rng)
            }
        })
    }
}

/// Maps virtual seconds onto `Instant`s for the core: a fixed base plus the offset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock(pub(crate) Instant);

impl Clock {
    /// The instant `now` virtual seconds after the base. Times past any clock (a timeout of
    /// 1e300 ms) saturate at a distant instant, a century out, which the run never reaches.
    pub(crate) fn at(self, now: f64) -> Instant {
        const FAR_S: f64 = 100.0 * 365.25 * 86_400.0;
        let now = if now.is_nan() { 0.0 } else { now };
        let offset = Duration::from_secs_f64(now.clamp(0.0, FAR_S));
        // A platform whose clock cannot reach a century out gets a year.
        self.0
            .checked_add(offset)
            .or_else(|| self.0.checked_add(Duration::from_secs(365 * 86_400)))
            .unwrap_or(self.0)
    }
}

/// A multiply-rotate hasher (FxHash's): the simulator's maps are keyed by ids it made itself,
/// so SipHash's flooding resistance buys nothing and costs a third of a decision.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        // The multiply moves entropy up; fold it back so the table's low index bits get it.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// Candidate ids by candidate, for policies that talk to a [`Core`] (a grant names its
/// candidate by slot, see `CoordinatorPolicy::by_slot`).
#[derive(Debug, Default)]
pub(crate) struct Ids {
    pub(crate) by_cand: Vec<Option<CandidateId>>,
}

impl Ids {
    pub(crate) fn insert(&mut self, cand: Cand, id: CandidateId) {
        let i = cand as usize;
        if self.by_cand.len() <= i {
            self.by_cand.resize(i + 1, None);
        }
        self.by_cand[i] = Some(id);
    }

    pub(crate) fn id(&self, cand: Cand) -> Option<&CandidateId> {
        self.by_cand.get(cand as usize).and_then(|x| x.as_ref())
    }
}

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
                // The engine ends attempts itself; a lease reclaim is only possible with
                // `limits.max_attempt_s` shorter than the attempt timeout.
                Event::Reclaimed { .. } => continue,
                // Only with `set_close_events`, which the policy leaves off.
                Event::Closed { .. } => continue,
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
        let request = match eligible {
            None => Request::any(),
            Some(list) => Request::only(list.iter().filter_map(|&c| self.ids.id(c).cloned())),
        };
        // The caller's retry loop, as the scenario says: its last attempt is drawn by its
        // odds of success as well.
        let request = request.with_attempts(world.workload.retries.saturating_add(1));
        if self.requests.len() <= req as usize {
            self.requests.resize(req as usize + 1, (None, None));
            self.latest.resize(req as usize + 1, (None, None));
        }
        self.latest[req as usize] = (None, None);
        let request = match self.timeout_s {
            Some(t) => request.with_deadline(self.clock.at(now + t)),
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
                self.out.push_back(Decision::Reject { req });
                self.drain(None);
            }
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
            let next = if retry { Next::Retry } else { Next::Finish };
            let at = self.instant(now);
            let _ = self.core.done(attempt, next, at, &mut self.rng);
            self.requests[req as usize].1 = None;
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
