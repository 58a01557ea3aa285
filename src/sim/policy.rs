//! The `Policy` trait the engine drives, policy names, and the `coordinator` policy, which
//! hands every decision to the real [`Core`](crate::core::Core).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::baselines;
use super::baselines::limiters;
use super::queue::Queues;
use super::scenario::Workload;
use super::truths::Truths;

mod coordinator;
use crate::core::{CandidateId, CandidateInfo, Limits, Outcome};
use crate::score::Config;
pub(crate) use coordinator::CoordinatorPolicy;

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
    /// The lease of `req`'s running attempt (`limits.max_attempt_s`) ran out: the policy took
    /// its slot back, ended the request and hears nothing more of that attempt. Every policy
    /// reclaims (the baselines with `baselines::leases`).
    Reclaimed { req: Req },
}

/// What only the oracles (`oracle`, `clairvoyant`) may look at: the hidden truth, the real
/// queues and service rates.
#[derive(Clone, Copy, Debug)]
pub(crate) struct World<'a> {
    pub(crate) truth: &'a Truths,
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
    /// When the policy next decides something at a set time (virtual seconds): a waiting
    /// request's deadline or an attempt's lease end. The engine calls [`Policy::tick`] then,
    /// as the actor's timer calls the core at [`Core::next_wakeup`]. `None` (the default):
    /// nothing timed; the periodic tick does.
    ///
    /// [`Core::next_wakeup`]: crate::core::Core::next_wakeup
    fn next_wakeup_s(&self) -> Option<f64> {
        None
    }
    /// The caller of `req`, which waits for a grant, gave up: the policy may drop it at once
    /// (then it answers `Reject`). By default it keeps it, and the engine hands back the
    /// grant it later makes.
    fn cancel(&mut self, _req: Req, _now: f64) {}
    /// `req`'s attempt was reclaimed ([`Decision::Reclaimed`]) and its worker asks again,
    /// or its caller retries with a new request after `done` ended the old one (`caller.retry
    /// = "fresh"`, nothing excluded): a new request to the policy of the same caller, with the
    /// same `eligible` candidates, the same caller's deadline, `attempts` attempts left in its
    /// retry loop.
    fn ask_again(
        &mut self,
        req: Req,
        eligible: Option<&[Cand]>,
        _attempts: u32,
        now: f64,
        world: &World<'_>,
    ) {
        self.ready(req, eligible, now, world);
    }
    /// Whether the policy's callers act as the scenario's `[caller]` says (the coordinators);
    /// the others keep their own callers.
    fn takes_caller(&self) -> bool {
        false
    }
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
    /// Linkerd's least loaded with its default failure accrual (Finagle): five failures in a
    /// row take an endpoint out for a jittered backoff of 5 s to 300 s.
    LeastLoadedAccrual,
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
    /// Knows the truth, and counts a success's time to its completion (the transfer included).
    OracleCompletion,
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
pub const POLICY_NAMES: [&str; 24] = [
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
    "least-loaded-accrual",
    "least-pending",
    "dynamic-snitch",
    "c3",
    "c3-rate",
    "clairvoyant",
    "oracle",
    "oracle-completion",
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
            "least-loaded-accrual" => PolicySpec::LeastLoadedAccrual,
            "least-pending" => PolicySpec::LeastPending,
            "dynamic-snitch" => PolicySpec::DynamicSnitch,
            "c3" => PolicySpec::C3,
            "c3-rate" => PolicySpec::C3Rate,
            "clairvoyant" => PolicySpec::Clairvoyant,
            "oracle" => PolicySpec::Oracle,
            "oracle-completion" => PolicySpec::OracleCompletion,
            "thompson" => PolicySpec::Thompson,
            "gradient2" => PolicySpec::Gradient2,
            "vegas" => PolicySpec::Vegas,
            "aimd" => PolicySpec::Aimd,
            "vector-arc" => PolicySpec::VectorArc,
            "oracle-limits" => PolicySpec::OracleLimits,
            other => match other.strip_prefix("coordinator:") {
                Some(spec) => {
                    // Beside the scenario file while one is loaded (its `policies`), else
                    // from the working directory (`--policies`).
                    let config = super::scenario::coordinator_config(spec)
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
            PolicySpec::LeastLoadedAccrual => "least-loaded-accrual",
            PolicySpec::LeastPending => "least-pending",
            PolicySpec::DynamicSnitch => "dynamic-snitch",
            PolicySpec::C3 => "c3",
            PolicySpec::C3Rate => "c3-rate",
            PolicySpec::Clairvoyant => "clairvoyant",
            PolicySpec::Oracle => "oracle",
            PolicySpec::OracleCompletion => "oracle-completion",
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
                let own = SmallRng::seed_from_u64(seed ^ 0x0000_5da3);
                baselines::queued(baselines::P2cOpcount::mongodb(own), limits, rng)
            }
            PolicySpec::MongoErrorBias => {
                baselines::queued(baselines::MongoErrorBias::default(), limits, rng)
            }
            PolicySpec::P2cPeakEwma => {
                baselines::queued(baselines::P2cPeakEwma::default(), limits, rng)
            }
            // Linkerd's least loaded is the rule of MongoDB's operation count, without SDAM;
            // with accrual, Finagle's failure accrual instead.
            PolicySpec::LeastLoaded => {
                baselines::queued(baselines::P2cOpcount::least_loaded(), limits, rng)
            }
            PolicySpec::LeastLoadedAccrual => {
                let own = SmallRng::seed_from_u64(seed ^ 0x00ac_c2a1);
                let picker = baselines::P2cOpcount::least_loaded_with_accrual(own);
                baselines::queued(picker, limits, rng)
            }
            PolicySpec::LeastPending => baselines::queued(baselines::LeastPending, limits, rng),
            PolicySpec::DynamicSnitch => {
                let own = SmallRng::seed_from_u64(seed ^ 0x005e_edd5);
                baselines::queued(baselines::DynamicSnitch::new(own), limits, rng)
            }
            PolicySpec::C3 => baselines::queued(baselines::C3::new(false), limits, rng),
            PolicySpec::C3Rate => baselines::queued(baselines::C3::new(true), limits, rng),
            PolicySpec::Clairvoyant => baselines::queued(baselines::Clairvoyant, limits, rng),
            PolicySpec::Oracle => baselines::queued(baselines::Oracle::default(), limits, rng),
            PolicySpec::OracleCompletion => {
                let oracle = baselines::Oracle {
                    to_completion: true,
                };
                baselines::queued(oracle, limits, rng)
            }
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

/// Candidate ids by candidate, for policies that talk to a [`Core`](crate::core::Core) (a
/// grant names its candidate by slot, see `CoordinatorPolicy::by_slot`).
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
