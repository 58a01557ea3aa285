//! The sans-IO core: candidates, statistics, the waiting queue and the slots.
//!
//! [`Core`] reads no clock and does no I/O: every call takes `now` and, where a draw may
//! happen, a caller-supplied RNG. Calls return `Result`s for bad input; grants and rejections
//! come out as [`Event`]s to drain with [`Core::poll_event`]. The actix actor, the simulator and
//! the benches all drive this same type.
//!
//! Granting: whenever capacity appears (a new request, a `done`, a raised limit, a new
//! candidate) the core serves the **oldest servable** request with **one weighted draw** over
//! its eligible candidates that have free capacity, and repeats until nothing more can be
//! granted. A request that cannot be served now is skipped, never blocking the ones behind it,
//! so nothing waits on anything but capacity: there is no deadlock to fall into. (A roll that
//! finds no weight among the free candidates while one with weight is busy waits for that
//! one's release, `hold.rs`: that too is a wait on capacity, never on another request.) Skipped
//! requests are parked until a candidate that could serve them gains capacity, so they cost
//! the grants of others nothing meanwhile.
//!
//! `Core` is one state machine delegating to owned parts, each in its own file:
//!
//! | part | file | holds |
//! |---|---|---|
//! | fleet | `slots.rs` | candidate slots, infos (with the ids), the id index, the channel sum trees, the counts; its refresh (which needs the model, the clock and the limits) is in `fleet.rs` |
//! | wait queue | `queue.rs` | waiting requests in arrival order, their deadlines, the parked ones and what wakes them |
//! | attempts | `attempt_slots.rs` | attempts in flight, their free list and count; outcomes, releases and leases are in `attempts.rs` |
//! | clock | `clock.rs` | the epoch, the latest `now`, the values derived from it, the refresh schedule |
//! | outbox | `outbox.rs` | events, sampled decision records, counters |
//!
//! The request lifecycle is in `requests.rs`, the pump and the booking of a grant in
//! `grant.rs`, the draw itself in `select.rs` (the tree) and `evaluate.rs` (the evaluated set).
//! Scoring reads the model, the limits, the clock, the fleet, the pooled inputs and the
//! attempts through one borrowed view (`scoring.rs`), and a draw borrows the fleet and the
//! evaluation buffer beside it (`select.rs`), so a grant reads its request's draw set in place
//! while the draw writes the fleet: no part is taken out of the core and put back.

mod arms;
mod attempt_slots;
mod attempts;
mod candidates;
mod clock;
mod digest;
mod draw;
mod evaluate;
mod fleet;
mod grant;
mod hold;
mod index;
mod limits;
mod outbox;
mod pool;
mod preference;
mod queries;
mod queue;
mod recent;
mod requests;
mod scoring;
mod select;
mod slots;
mod snapshot;

use std::collections::HashMap;
use std::time::Instant;

use rand::Rng;
use serde::{Deserialize, Serialize};

pub use crate::vocab::{
    AttemptId, CandidateId, CandidateInfo, Eligible, FailureClass, Next, Outcome, Request,
    RequestId, ServerFeedback, Success,
};
pub use arms::ShadowStats;

use crate::decision::{DecisionReason, DecisionRecord, ShadowVerdict};
use crate::error::{Error, Rejection};
use crate::limit::LimitSnapshot;
use crate::score::{
    Components, Config, Fixed, Learned, LoadFit, Overall, PackedStats, ScoreModel, Stats,
};
use attempt_slots::{AttemptSlot, Attempts};
use clock::{Clock, NO_DEADLINE};
use draw::SumTree;
use evaluate::{Detail, Evaluation};
use outbox::Outbox;
use queue::{Queued, WaitQueue};
use select::{DrawSet, Drawn};
use slots::{Fleet, Slot};

/// "No limit" for the `u32` limits.
pub const UNLIMITED: u32 = u32::MAX;

/// The tuning knobs. All can change at run time ([`Core::set_limits`]); raising one grants
/// immediately.
///
/// [`Limits::default()`] limits nothing in flight: `global` and `per_candidate` are
/// [`UNLIMITED`], so every free request is granted at once and only a candidate's own
/// `max_in_flight` (in its [`CandidateInfo`]) caps it. The other defaults: `max_parallelism`
/// 64, `max_waiting` 100,000, no `max_attempt_s` lease. Set the in-flight limits to what the
/// backends can take, e.g. `Limits { global: 32, per_candidate: 8, ..Limits::default() }`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Attempts in flight over all candidates. Default [`UNLIMITED`].
    pub global: u32,
    /// Attempts in flight per candidate (a candidate's own `max_in_flight` overrides it).
    /// Default [`UNLIMITED`].
    pub per_candidate: u32,
    /// The highest parallelism a request may ask for.
    pub max_parallelism: u32,
    /// Requests waiting at once; a new request that cannot be granted at once and finds this
    /// many waiting is rejected with [`Rejection::QueueFull`] (0: never queue). It admits
    /// requests: a request already admitted that asks again (a retry, a reask) waits even
    /// past it, and lowering it refuses new requests but does not turn away those waiting.
    pub max_waiting: usize,
    /// An attempt running longer than this many seconds is reclaimed as a timeout (a lease
    /// against workers that never report). `None`: no lease. [`Core::next_wakeup`] includes
    /// the oldest attempt's lease end, so a driver that ticks then reclaims it on time.
    pub max_attempt_s: Option<f64>,
}

impl Default for Limits {
    /// Unlimited in flight (`global` and `per_candidate` [`UNLIMITED`]), `max_parallelism` 64,
    /// `max_waiting` 100,000, no attempt lease.
    fn default() -> Self {
        Limits {
            global: UNLIMITED,
            per_candidate: UNLIMITED,
            max_parallelism: 64,
            max_waiting: 100_000,
            max_attempt_s: None,
        }
    }
}

impl Limits {
    /// Checks the limits as [`Core::with_limits`] and [`Core::set_limits`] do, before handing
    /// them over (for example after reading them from a file): `global`, `per_candidate` and
    /// `max_parallelism` at least 1 (`max_waiting` may be 0: never queue), a lease finite
    /// and positive. Errors with [`Error::InvalidLimits`], saying which.
    pub fn validate(&self) -> Result<(), Error> {
        if self.global == 0 {
            return Err(Error::InvalidLimits("global must be at least 1".into()));
        }
        if self.per_candidate == 0 {
            return Err(Error::InvalidLimits(
                "per_candidate must be at least 1".into(),
            ));
        }
        if self.max_parallelism == 0 {
            return Err(Error::InvalidLimits(
                "max_parallelism must be at least 1".into(),
            ));
        }
        if let Some(s) = self.max_attempt_s {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::InvalidLimits(format!(
                    "max_attempt_s must be a positive number of seconds, got {s}"
                )));
            }
        }
        Ok(())
    }
}

/// A slot granted to a request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Grant {
    /// The request served.
    pub request: RequestId,
    /// The attempt (the permit's id): report its outcome and release it with `done`.
    pub attempt: AttemptId,
    /// Where to run it.
    pub candidate: CandidateId,
    /// The winner's probability in this draw.
    pub probability: f64,
    /// How it was chosen.
    pub reason: DecisionReason,
    /// Seconds the request waited for this grant.
    pub waited_s: f64,
    /// The arm that drew it (an index into [`Core::arm_names`]), when arms are configured;
    /// `None` also for an attempt whose arm a config change removed since its grant.
    pub arm: Option<usize>,
    /// How long a first byte is worth waiting for, milliseconds from the grant: advice from the
    /// candidate's first-byte average, or the fleet's before it has answered (`[deadline]` in
    /// the config). A worker with no first byte by then gives up, reports
    /// `Outcome::Failure(FailureClass::Timeout)` and retries elsewhere, so a hung candidate
    /// costs its request this long instead of the caller's whole timeout. `None`: wait for the
    /// caller's own timeout (an attempt beside another of its request in flight, any attempt
    /// after one of its request timed out, its last attempt, a fleet without answers yet, or
    /// the advice turned off).
    pub deadline_ms: Option<f64>,
}

/// What the core tells its driver.
///
/// A driver that keeps something per request (where to deliver its answers) learns here when
/// the request ends: with [`Core::set_close_events`] on, every request the core accepted ends
/// with exactly one [`Event::Closed`], after its last grant, rejection or reclaim. Off (the
/// default, so a driver that drains only grants collects nothing) the core never emits it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A request got a slot.
    Granted(Grant),
    /// A request was answered without a slot.
    Rejected {
        /// The request.
        request: RequestId,
        /// Why.
        reason: Rejection,
    },
    /// An attempt outlived its lease (`max_attempt_s`): its slot was taken back and a timeout
    /// recorded. A later `done` for it is a stray.
    Reclaimed {
        /// The request.
        request: RequestId,
        /// The attempt.
        attempt: AttemptId,
        /// Its candidate.
        candidate: CandidateId,
    },
    /// An attempt released with no report and no first byte past the deadline advised with
    /// its grant ([`Core::done`]): recorded as a timeout, as if its caller had reported one.
    /// A driver that counts outcomes counts it among them.
    TimedOut(Reported),
    /// A request ended: nothing of it waits or runs any more and its id is no longer valid.
    /// Emitted only with [`Core::set_close_events`] on.
    Closed {
        /// The request.
        request: RequestId,
        /// Why it ended.
        reason: CloseReason,
    },
}

/// Why a request ended ([`Event::Closed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CloseReason {
    /// Its work is done: [`Core::finish`], or its last attempt released with
    /// [`Next::Finish`] (or with `Retry` when no further ask fitted).
    Finished,
    /// [`Core::cancel`]led (its waiting asks, if any, were rejected with
    /// [`Rejection::Cancelled`]), once its running attempts ended.
    Cancelled,
    /// Its waiting asks were rejected for this reason, once its running attempts ended.
    Rejected(Rejection),
    /// Its last running attempt outlived the lease ([`Limits::max_attempt_s`]) and was
    /// reclaimed ([`Event::Reclaimed`]).
    Reclaimed,
}

/// What a reported outcome belonged to: [`Core::outcome`] returns it, so a driver keeps no
/// map of its own from attempts to candidates or arms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reported {
    /// The request the attempt served.
    pub request: RequestId,
    /// The candidate it ran on.
    pub candidate: CandidateId,
    /// The arm that drew it (an index into [`Core::arm_names`]), when arms are configured.
    pub arm: Option<usize>,
}

/// Counts of things the core ignored or took back; the actor exports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Decisions made (grants).
    pub decisions: u64,
    /// Decisions that used the O(log n) tree.
    pub tree_decisions: u64,
    /// Decisions by reason: draw, only choice, deterministic, fallback.
    pub by_reason: [u64; 4],
    /// Rejections by reason (order of [`Rejection::ALL`]).
    pub rejections: [u64; 7],
    /// Ejections started.
    pub ejections: u64,
    /// Attempts reclaimed by the lease.
    pub reclaimed: u64,
    /// Attempts taken over from an earlier core ([`Core::carry`]).
    #[serde(default)]
    pub carried: u64,
    /// Pauses of the driver the running attempts' clocks skipped ([`Core::driver_paused`]).
    #[serde(default)]
    pub pauses: u64,
    /// Attempts released with no report and no first byte past the deadline advised with
    /// their grant ([`Grant::deadline_ms`]), each counted as a timeout ([`Core::done`]).
    #[serde(default)]
    pub dropped_past_advice: u64,
    /// Draws that left their request waiting for a busy candidate with weight: every free one
    /// had none in the roll's score channel, or the roll picked one failing past hope (twenty
    /// failures in a row, not sheds; see docs/scoring.md, "Waiting for a candidate worth it").
    #[serde(default)]
    pub waited_for_weight: u64,
}

/// A read-only view of one candidate.
#[derive(Clone, Debug)]
pub struct CandidateView<'a> {
    /// Static info.
    pub info: &'a CandidateInfo,
    /// Learned statistics.
    pub stats: Stats,
    /// Components at the last refresh.
    pub components: Components,
    /// Attempts in flight.
    pub in_flight: u32,
    /// Its in-flight limit in force: the lower of the static and the learned one
    /// ([`UNLIMITED`] for none).
    pub limit: u32,
    /// Whether it is ejected now.
    pub ejected: bool,
    /// Whether it was removed (it stays visible while attempts on it finish).
    pub removed: bool,
    /// The adaptive limit's estimate (`None` while adaptive limits are off).
    pub adaptive: Option<LimitSnapshot>,
    /// Grants that filled it up to its learned limit while the static one would have taken
    /// more: each one left later requests waiting for it or going elsewhere.
    pub limited: u64,
}

impl CandidateView<'_> {
    /// The in-flight limit in force now (the lower of the static and the learned one); `None`
    /// for unlimited.
    pub fn limit(&self) -> Option<u32> {
        (self.limit != UNLIMITED).then_some(self.limit)
    }

    /// The estimated no-load latency, milliseconds (`None` while adaptive limits are off or
    /// before the candidate's first success).
    pub fn no_load_ms(&self) -> Option<f64> {
        self.adaptive.and_then(|a| a.no_load_ms)
    }
}

/// A candidate key that survives slot reuse: index and generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

/// The rare parts of a request, boxed so a plain waiting request stays small.
#[derive(Debug, Default)]
struct Extras {
    eligible: Option<Vec<Key>>,
    /// The excluded candidates present, by key (what a draw checks).
    exclude: Vec<Key>,
    /// Every id the request excludes, present or not: a candidate added (or added again)
    /// under one of them gets its new key in `exclude` (`Core::exclude_added`).
    excluded_ids: Vec<CandidateId>,
    caps: Vec<String>,
}

#[derive(Debug, Default)]
struct ReqSlot {
    gen: u32,
    active: bool,
    /// Where it waits, if it does.
    queued: Queued,
    keep_open: bool,
    /// Cancelled or rejected, and why: it asks for nothing more (a later `Retry` finishes it).
    closed: Option<CloseReason>,
    pending: u32,
    in_flight: u32,
    parallelism: u32,
    seq: u64,
    arrival_s: f64,
    deadline_ns: u64,
    /// Its arm (index into the core's arms; 0 without arms).
    arm: u8,
    /// Attempts it may still be granted, this one included ([`NO_BUDGET`]: unknown); at 1 or
    /// less its next draw is its last attempt's.
    attempts_left: u16,
    /// One of its attempts was reported as a timeout: its later attempts get no deadline
    /// advice (see `score::deadline`).
    timed_out: bool,
    extras: Option<Box<Extras>>,
}

impl Extras {
    /// Excludes candidate `id` (present under `key`, if it is) from the request's attempts:
    /// named by the request, or tried by it (a parallel attempt went to it, or it failed and
    /// the request retries). Each once, by key for the draws (servability counts the
    /// excluded candidates) and by id for a later add (`excluding` counts the requests
    /// excluding each id).
    fn exclude(
        &mut self,
        key: Option<Key>,
        id: &CandidateId,
        excluding: &mut HashMap<CandidateId, u32>,
    ) {
        if let Some(key) = key.filter(|k| !self.exclude.contains(k)) {
            self.exclude.push(key);
        }
        if !self.excluded_ids.contains(id) {
            self.excluded_ids.push(id.clone());
            *excluding.entry(id.clone()).or_insert(0) += 1;
        }
    }

    /// What a request with these extras (none: a plain request) may draw from.
    #[inline]
    fn set(extras: Option<&Extras>) -> DrawSet<'_> {
        match extras {
            None => DrawSet::ALL,
            Some(x) => DrawSet {
                eligible: x.eligible.as_deref(),
                exclude: &x.exclude,
                caps: &x.caps,
                last: false,
            },
        }
    }
}

impl ReqSlot {
    #[inline]
    fn set(&self) -> DrawSet<'_> {
        let mut set = Extras::set(self.extras.as_deref());
        set.last = self.attempts_left <= 1;
        set
    }
}

/// `ReqSlot::attempts_left` of a request that did not say how many attempts it makes.
const NO_BUDGET: u16 = u16::MAX;

/// The coordinator's state machine. See the [module docs](self).
#[derive(Debug)]
pub struct Core {
    model: ScoreModel,
    limits: Limits,
    clock: Clock,
    dirty: bool,

    /// The candidates, their trees and counts.
    fleet: Fleet,

    requests: Vec<ReqSlot>,
    free_requests: Vec<u32>,
    /// The generation a new request slot starts at ([`Core::continue_request_ids`]).
    first_request_gen: u32,
    queue: WaitQueue,
    /// How many open requests exclude each id (their `Extras::excluded_ids`), so adding a
    /// candidate looks for requests to update only when one excludes its id.
    excluding: HashMap<CandidateId, u32>,

    attempts: Attempts,

    /// Events, decision records and counters for the driver.
    out: Outbox,
    eval: Evaluation,
    arms: Vec<arms::ArmState>,
    shadows: Vec<arms::ShadowState>,
    /// Fleet-wide inputs of pooled estimates and the probe schedule.
    pool: pool::Pool,
    /// Evidence from other coordinators, when this one shares (`None` until it does).
    share: Option<Box<digest::ShareState>>,
    /// Per slot, the adaptive limit's estimator.
    adaptive: limits::Adaptive,
}

impl Core {
    /// A core with the given scoring config and default [`Limits`]; `now` is its epoch.
    pub fn new(config: Config, now: Instant) -> Result<Self, Error> {
        let model = ScoreModel::new(config)?;
        let channels = model.channels().len();
        let clock = Clock::new(now, model.config().window.bucket_s);
        let mut core = Core {
            model,
            limits: Limits::default(),
            clock,
            dirty: false,
            fleet: Fleet::new(channels),
            requests: Vec::new(),
            free_requests: Vec::new(),
            first_request_gen: 0,
            queue: WaitQueue::default(),
            excluding: HashMap::new(),
            attempts: Attempts::default(),
            pool: pool::Pool::default(),
            adaptive: limits::Adaptive::default(),
            out: Outbox::default(),
            eval: Evaluation::default(),
            arms: Vec::new(),
            shadows: Vec::new(),
            share: None,
        };
        core.build_variants()?;
        Ok(core)
    }

    /// Sets the limits at construction (builder style).
    pub fn with_limits(mut self, limits: Limits) -> Result<Self, Error> {
        limits.validate()?;
        self.limits = limits;
        self.attempts.keep_leases(limits.max_attempt_s.is_some());
        Ok(self)
    }

    #[inline]
    fn advance(&mut self, now: Instant) {
        self.clock.advance(now, self.model.config().window.bucket_s);
    }
}
