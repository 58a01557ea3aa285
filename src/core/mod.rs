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
//! so nothing waits on anything but capacity: there is no deadlock to fall into.

mod arms;
mod candidate;
mod draw;
mod index;
mod pool;
mod request;
mod select;
mod snapshot;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use rand::Rng;
use serde::{Deserialize, Serialize};

pub use arms::ShadowStats;
pub use candidate::{CandidateId, CandidateInfo};
pub use request::{AttemptId, Eligible, FailureClass, Next, Outcome, Request, RequestId, Success};

use crate::decision::{DecisionReason, DecisionRecord, ShadowVerdict};
use crate::error::{Error, Rejection};
use crate::score::{
    Components, Config, Fixed, Learned, LoadFit, Overall, PackedStats, ScoreModel, Stats,
};
use draw::SumTree;
use index::IdIndex;
use select::{DrawSet, Drawn, Evaluation, Slot};

/// "No limit" for the `u32` limits.
pub const UNLIMITED: u32 = u32::MAX;

/// The tuning knobs. All can change at run time ([`Core::set_limits`]); raising one grants
/// immediately.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Attempts in flight over all candidates.
    pub global: u32,
    /// Attempts in flight per candidate (a candidate's own `max_in_flight` overrides it).
    pub per_candidate: u32,
    /// The highest parallelism a request may ask for.
    pub max_parallelism: u32,
    /// Requests waiting at once; more are rejected with [`Rejection::QueueFull`].
    pub max_waiting: usize,
    /// An attempt running longer than this many seconds is reclaimed as a timeout (a lease
    /// against workers that never report). `None`: no lease.
    pub max_attempt_s: Option<f64>,
}

impl Default for Limits {
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
    fn validate(&self) -> Result<(), Error> {
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
#[derive(Clone, Debug, PartialEq)]
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
    /// The arm that drew it (an index into [`Core::arm_names`]), when arms are configured.
    pub arm: Option<usize>,
}

/// What the core tells its driver.
#[derive(Clone, Debug, PartialEq)]
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
    pub rejections: [u64; 5],
    /// Ejections started.
    pub ejections: u64,
    /// Attempts reclaimed by the lease.
    pub reclaimed: u64,
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
    /// Its in-flight limit.
    pub limit: u32,
    /// Whether it is ejected now.
    pub ejected: bool,
    /// Whether it was removed (it stays visible while attempts on it finish).
    pub removed: bool,
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
    exclude: Vec<Key>,
    caps: Vec<String>,
}

#[derive(Debug, Default)]
struct ReqSlot {
    gen: u32,
    active: bool,
    in_fast: bool,
    in_general: bool,
    keep_open: bool,
    /// Cancelled or rejected: it asks for nothing more (a later `Retry` finishes it).
    closed: bool,
    pending: u32,
    in_flight: u32,
    parallelism: u32,
    seq: u64,
    arrival_s: f64,
    deadline_ns: u64,
    /// Its arm (index into the core's arms; 0 without arms).
    arm: u8,
    extras: Option<Box<Extras>>,
}

impl ReqSlot {
    fn set(&self) -> DrawSet<'_> {
        match &self.extras {
            None => DrawSet::ALL,
            Some(x) => DrawSet {
                eligible: x.eligible.as_deref(),
                exclude: &x.exclude,
                caps: &x.caps,
            },
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct AttemptSlot {
    gen: u32,
    active: bool,
    reported: bool,
    /// The caller said a first byte came: no longer evidence of a slow answer.
    answered: bool,
    key: Key,
    request: u32,
    /// The candidate's attempts in flight when this one was granted, itself included.
    concurrency: u32,
    granted_s: f64,
}

const NO_DEADLINE: u64 = u64::MAX;

/// `Core::oldest_pending` of a slot with no attempt known to be running.
const NO_ATTEMPT: u32 = u32::MAX;

/// The coordinator's state machine. See the [module docs](self).
#[derive(Debug)]
pub struct Core {
    model: ScoreModel,
    limits: Limits,
    epoch: Instant,
    /// The latest `now` seen: a call with the same instant skips the clock arithmetic.
    last_now: Instant,
    now_s: f64,
    /// `now_s` in nanoseconds.
    now_ns: u64,
    /// The window bucket `now_s` falls in.
    bucket: u64,
    next_refresh_s: f64,
    /// When the coarse refresh next recomputes the components no channel reads.
    next_unused_s: f64,
    dirty: bool,

    slots: Vec<Slot>,
    /// Each slot's static info, apart from the slot: only changes and records read it.
    infos: Vec<CandidateInfo>,
    /// Each slot's id, densely packed: a grant reads one without touching the info.
    ids: Vec<CandidateId>,
    free_slots: Vec<u32>,
    by_id: IdIndex,
    trees: Vec<SumTree>,
    usable_count: usize,
    avail: usize,
    avail_pass: usize,
    ejected_count: usize,
    live_count: usize,
    stake_total: f64,
    overall: Overall,
    next_added: u64,

    requests: Vec<ReqSlot>,
    free_requests: Vec<u32>,
    fast: VecDeque<(u64, u32)>,
    general: BTreeMap<u64, u32>,
    deadlines: BTreeSet<(u64, u64, u32)>,
    waiting: usize,
    next_seq: u64,

    attempts: Vec<AttemptSlot>,
    free_attempts: Vec<u32>,
    global_in_flight: u32,

    events: VecDeque<Event>,
    records: VecDeque<DecisionRecord>,
    record_rate: f64,
    record_acc: f64,
    counters: Counters,
    eval: Evaluation,
    saved_leaves: Vec<(usize, usize, f64)>,
    arms: Vec<arms::ArmState>,
    shadows: Vec<arms::ShadowState>,
    /// Candidates whose score leaves are written at the next draw.
    stale: Vec<u32>,
    /// Per slot, an attempt of it still running without a report as of the last full refresh,
    /// the oldest then ([`NO_ATTEMPT`] for none); see [`Core::pending_ms`].
    oldest_pending: Vec<u32>,
    /// Fleet-wide inputs of pooled estimates and the probe schedule.
    pool: pool::Pool,
    /// Per slot, whether its candidate slows under concurrency.
    load_fit: Vec<LoadFit>,
}

impl Core {
    /// A core with the given scoring config and default [`Limits`]; `now` is its epoch.
    pub fn new(config: Config, now: Instant) -> Result<Self, Error> {
        let model = ScoreModel::new(config)?;
        let trees = vec![SumTree::default(); model.channels().len()];
        let mut core = Core {
            model,
            limits: Limits::default(),
            epoch: now,
            last_now: now,
            now_ns: 0,
            bucket: 0,
            now_s: 0.0,
            next_refresh_s: 0.0,
            next_unused_s: 0.0,
            dirty: false,
            slots: Vec::new(),
            infos: Vec::new(),
            ids: Vec::new(),
            free_slots: Vec::new(),
            by_id: IdIndex::default(),
            trees,
            usable_count: 0,
            avail: 0,
            avail_pass: 0,
            ejected_count: 0,
            live_count: 0,
            stake_total: 0.0,
            overall: Overall::default(),
            next_added: 0,
            requests: Vec::new(),
            free_requests: Vec::new(),
            fast: VecDeque::new(),
            general: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            waiting: 0,
            next_seq: 0,
            attempts: Vec::new(),
            free_attempts: Vec::new(),
            global_in_flight: 0,
            pool: pool::Pool::default(),
            load_fit: Vec::new(),
            events: VecDeque::new(),
            records: VecDeque::new(),
            record_rate: 0.0,
            record_acc: 0.0,
            counters: Counters::default(),
            eval: Evaluation::default(),
            saved_leaves: Vec::new(),
            arms: Vec::new(),
            shadows: Vec::new(),
            stale: Vec::new(),
            oldest_pending: Vec::new(),
        };
        core.time_changed();
        core.build_variants()?;
        Ok(core)
    }

    /// Sets the limits at construction (builder style).
    pub fn with_limits(mut self, limits: Limits) -> Result<Self, Error> {
        limits.validate()?;
        self.limits = limits;
        Ok(self)
    }

    fn advance(&mut self, now: Instant) {
        if now <= self.last_now {
            return;
        }
        self.last_now = now;
        let t = now.saturating_duration_since(self.epoch).as_secs_f64();
        if t > self.now_s {
            self.now_s = t;
            self.time_changed();
        }
    }

    /// Derived clock values, computed once per new `now` rather than at every use (the
    /// float-to-integer conversions showed on the decision path).
    fn time_changed(&mut self) {
        self.now_ns = (self.now_s * 1e9) as u64;
        self.bucket =
            select::BUCKET_BASE + (self.now_s / self.model.config().window.bucket_s) as u64;
    }

    fn deadline_ns(&self, deadline: Option<Instant>) -> u64 {
        match deadline {
            None => NO_DEADLINE,
            Some(d) => {
                let ns = d.saturating_duration_since(self.epoch).as_nanos();
                ns.min(u64::MAX as u128 - 1) as u64
            }
        }
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    // ----- candidates -------------------------------------------------------------------

    /// Adds a candidate. Errors if the id exists or a number in its info is unusable.
    pub fn add_candidate<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        self.add_with_stats(info, Stats::default(), now, rng)
    }

    /// Adds a candidate with previously learned statistics (from a snapshot).
    pub fn add_with_stats<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        stats: Stats,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        info.validate()?;
        if self.by_id.contains(&self.ids, info.id.as_str()) {
            return Err(Error::DuplicateCandidate(info.id));
        }
        self.advance(now);
        let (idx, gen) = match self.free_slots.pop() {
            Some(i) => (i, self.slots[i as usize].gen.wrapping_add(1)),
            None => (self.slots.len() as u32, 0),
        };
        self.stake_total += info.stake;
        let slot = Slot {
            stats: PackedStats::pack(&stats),
            learned: Learned::default(),
            fixed: Fixed::default(),
            own_limit: info.max_in_flight.unwrap_or(0),
            in_flight: 0,
            gen,
            added_seq: self.next_added,
            live: true,
            usable: false,
            available: false,
            perf_ok: true,
            price_ok: true,
            ejected: false,
            in_tree: false,
            // A reused slot may still be listed for the next draw's leaf writes.
            stale: self.slots.get(idx as usize).is_some_and(|s| s.stale),
        };
        self.next_added += 1;
        if idx as usize == self.slots.len() {
            if self.slots.len() == self.slots.capacity() {
                // A candidate takes about 400 bytes across these vectors: growing by a
                // sixteenth instead of doubling keeps the unused tail under 6.25 % (still
                // amortised O(1): each move copies at most 16 times what was added since).
                let more = (self.slots.len() / 16).max(16);
                self.slots.reserve_exact(more);
                self.infos.reserve_exact(more);
                self.ids.reserve_exact(more);
                self.oldest_pending.reserve_exact(more);
                self.load_fit.reserve_exact(more);
            }
            self.slots.push(slot);
            self.oldest_pending.push(NO_ATTEMPT);
            self.load_fit.push(LoadFit::default());
            self.ids.push(info.id.clone());
            self.infos.push(info);
        } else {
            self.slots[idx as usize] = slot;
            self.load_fit[idx as usize] = LoadFit::default();
            self.ids[idx as usize] = info.id.clone();
            self.infos[idx as usize] = info;
        }
        self.by_id.insert(&self.ids, idx);
        self.live_count += 1;
        self.refresh_static(idx as usize);
        self.refresh_leaf(idx as usize);
        if self.model.config().weights.stake > 0.0 {
            self.dirty = true; // every stake share moved
        }
        self.pump(rng);
        Ok(())
    }

    /// Replaces a candidate's static info (statistics are kept).
    pub fn update_candidate<R: Rng + ?Sized>(
        &mut self,
        info: CandidateInfo,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        info.validate()?;
        let idx = self
            .by_id
            .get(&self.ids, info.id.as_str())
            .ok_or_else(|| Error::UnknownCandidate(info.id.clone()))? as usize;
        self.advance(now);
        self.stake_total += info.stake - self.infos[idx].stake;
        self.infos[idx] = info;
        self.refresh_static(idx);
        self.refresh_leaf(idx);
        self.dirty = true;
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Removes a candidate. Attempts on it run to their end and report; it is never granted
    /// again. Waiting requests left with no candidate are rejected.
    pub fn remove_candidate<R: Rng + ?Sized>(
        &mut self,
        id: &CandidateId,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let idx = self
            .by_id
            .remove(&self.ids, id.as_str())
            .ok_or_else(|| Error::UnknownCandidate(id.clone()))? as usize;
        self.advance(now);
        self.stake_total -= self.infos[idx].stake;
        self.slots[idx].live = false;
        self.live_count -= 1;
        self.refresh_static(idx);
        self.refresh_leaf(idx);
        if self.slots[idx].in_flight == 0 {
            self.free_slots.push(idx as u32);
        }
        self.dirty = true;
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Replaces the scoring config (hot reload): statistics, waiting requests and attempts are
    /// kept; an invalid config is refused and the old one stays.
    pub fn set_config<R: Rng + ?Sized>(
        &mut self,
        config: Config,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let model = ScoreModel::new(config)?;
        self.advance(now);
        let old_arms: Vec<String> = self.arm_names().into_iter().map(String::from).collect();
        let old = std::mem::replace(&mut self.model, model);
        if let Err(e) = self.build_variants() {
            self.model = old;
            self.build_variants()?;
            return Err(e);
        }
        self.remap_arms(&old_arms, rng);
        self.time_changed(); // the bucket width may have changed
        self.rebuild_trees();
        self.reject_ineligible();
        self.pump(rng);
        Ok(())
    }

    /// Changes the limits. Raising one grants immediately.
    pub fn set_limits<R: Rng + ?Sized>(
        &mut self,
        limits: Limits,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        limits.validate()?;
        self.advance(now);
        let per_candidate_changed = limits.per_candidate != self.limits.per_candidate;
        self.limits = limits;
        if per_candidate_changed {
            self.refresh_all();
        }
        self.pump(rng);
        Ok(())
    }

    fn key_of(&self, id: &CandidateId) -> Option<Key> {
        self.by_id.get(&self.ids, id.as_str()).map(|idx| Key {
            idx,
            gen: self.slots[idx as usize].gen,
        })
    }

    // ----- requests ---------------------------------------------------------------------

    /// A request arrives. Returns its id; its grant or rejection comes as an [`Event`].
    ///
    /// Errors (nothing is queued) for malformed requests: parallelism 0 or above
    /// `max_parallelism`, an empty eligible set, an unknown candidate in the eligible set.
    pub fn ready<R: Rng + ?Sized>(
        &mut self,
        request: Request,
        now: Instant,
        rng: &mut R,
    ) -> Result<RequestId, Error> {
        request.validate()?;
        if request.parallelism > self.limits.max_parallelism {
            return Err(Error::InvalidRequest(format!(
                "parallelism {} exceeds max_parallelism {}",
                request.parallelism, self.limits.max_parallelism
            )));
        }
        let eligible = match &request.eligible {
            Eligible::All => None,
            Eligible::Only(ids) => {
                let mut keys = Vec::with_capacity(ids.len());
                for id in ids {
                    let k = self
                        .key_of(id)
                        .ok_or_else(|| Error::UnknownCandidate(id.clone()))?;
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                Some(keys)
            }
        };
        self.advance(now);
        let exclude: Vec<Key> = request
            .exclude
            .iter()
            .filter_map(|id| self.key_of(id))
            .collect();
        let extras = if eligible.is_none() && exclude.is_empty() && request.capabilities.is_empty()
        {
            None
        } else {
            Some(Box::new(Extras {
                eligible,
                exclude,
                caps: request.capabilities,
            }))
        };
        let deadline_ns = self.deadline_ns(request.deadline);
        let (idx, gen) = match self.free_requests.pop() {
            Some(i) => (i, self.requests[i as usize].gen.wrapping_add(1)),
            None => {
                self.requests.push(ReqSlot::default());
                (self.requests.len() as u32 - 1, 0)
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let arm = self.assign_arm(request.key.as_deref(), rng);
        self.requests[idx as usize] = ReqSlot {
            gen,
            active: true,
            in_fast: false,
            in_general: false,
            keep_open: false,
            closed: false,
            pending: 0,
            in_flight: 0,
            parallelism: request.parallelism,
            seq,
            arrival_s: self.now_s,
            deadline_ns,
            arm,
            extras,
        };
        let id = RequestId::new(idx, gen);
        if self.waiting >= self.limits.max_waiting {
            self.reject(idx, Rejection::QueueFull);
            return Ok(id);
        }
        if !self.has_eligible(self.requests[idx as usize].set()) {
            self.reject(idx, Rejection::NoEligibleCandidate);
            return Ok(id);
        }
        if deadline_ns <= self.now_ns() {
            self.reject(idx, Rejection::DeadlinePassed);
            return Ok(id);
        }
        self.requests[idx as usize].pending = request.parallelism;
        self.enqueue(idx);
        self.pump(rng);
        Ok(id)
    }

    fn request_index(&self, id: RequestId) -> Result<u32, Error> {
        match self.requests.get(id.index()) {
            Some(r) if r.active && r.gen == id.generation() => Ok(id.index() as u32),
            _ => Err(Error::UnknownRequest(id)),
        }
    }

    /// Asks for one more attempt for an open request, excluding every candidate it tried.
    pub fn reask<R: Rng + ?Sized>(
        &mut self,
        id: RequestId,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.advance(now);
        let r = &self.requests[idx as usize];
        if r.closed {
            return Err(Error::InvalidRequest(format!(
                "request {id} was cancelled or rejected; make a new one"
            )));
        }
        if r.pending + r.in_flight >= r.parallelism {
            return Err(Error::InvalidRequest(format!(
                "request {id} already has {} attempts running or asked for (parallelism {})",
                r.pending + r.in_flight,
                r.parallelism
            )));
        }
        self.requests[idx as usize].pending += 1;
        if !self.has_eligible(self.requests[idx as usize].set()) {
            self.reject(idx, Rejection::NoEligibleCandidate);
            return Ok(());
        }
        self.enqueue(idx);
        self.pump(rng);
        Ok(())
    }

    /// The request is complete: its waiting asks are dropped (no event), and it ends once its
    /// running attempts are done.
    pub fn finish(&mut self, id: RequestId) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.drop_pending(idx);
        self.requests[idx as usize].keep_open = false;
        self.maybe_retire(idx);
        Ok(())
    }

    /// Cancels a request: its waiting asks are rejected with [`Rejection::Cancelled`] (no event
    /// when nothing waits); its running attempts run to their end, and a later `Retry` for
    /// them finishes the request instead of asking again.
    pub fn cancel(&mut self, id: RequestId, now: Instant) -> Result<(), Error> {
        let idx = self.request_index(id)?;
        self.advance(now);
        let r = &mut self.requests[idx as usize];
        r.keep_open = false;
        if r.pending > 0 {
            // Someone waits for an answer: tell them.
            self.reject(idx, Rejection::Cancelled);
        } else {
            r.closed = true;
            self.maybe_retire(idx);
        }
        Ok(())
    }

    fn enqueue(&mut self, idx: u32) {
        let r = &mut self.requests[idx as usize];
        if r.pending == 0 || r.in_fast || r.in_general {
            return;
        }
        self.waiting += 1;
        if r.extras.is_none() {
            r.in_fast = true;
            self.fast.push_back((r.seq, idx));
        } else {
            r.in_general = true;
            self.general.insert(r.seq, idx);
        }
        if r.deadline_ns != NO_DEADLINE {
            self.deadlines.insert((r.deadline_ns, r.seq, idx));
        }
    }

    /// Takes a request out of the queue and drops its pending asks.
    fn drop_pending(&mut self, idx: u32) {
        let r = &mut self.requests[idx as usize];
        if r.in_fast || r.in_general {
            self.waiting -= 1;
        }
        if r.in_general {
            self.general.remove(&r.seq);
        }
        // Fast entries are removed lazily (the head check skips inactive ones).
        r.in_fast = false;
        r.in_general = false;
        if r.deadline_ns != NO_DEADLINE {
            self.deadlines.remove(&(r.deadline_ns, r.seq, idx));
        }
        r.pending = 0;
    }

    fn reject(&mut self, idx: u32, reason: Rejection) {
        self.drop_pending(idx);
        let r = &mut self.requests[idx as usize];
        r.keep_open = false;
        r.closed = true;
        let id = RequestId::new(idx, r.gen);
        self.counters.rejections[Rejection::ALL
            .iter()
            .position(|x| *x == reason)
            .unwrap_or(0)] += 1;
        self.events.push_back(Event::Rejected {
            request: id,
            reason,
        });
        self.maybe_retire(idx);
    }

    fn maybe_retire(&mut self, idx: u32) {
        let r = &mut self.requests[idx as usize];
        if r.active && r.pending == 0 && r.in_flight == 0 && !r.keep_open {
            r.active = false;
            r.extras = None;
            self.free_requests.push(idx);
        }
    }

    /// Rejects waiting requests that no longer have any candidate they may use.
    fn reject_ineligible(&mut self) {
        let mut doomed = Vec::new();
        for (&_, &idx) in &self.general {
            if !self.has_eligible(self.requests[idx as usize].set()) {
                doomed.push(idx);
            }
        }
        if !self.has_eligible(DrawSet::ALL) {
            for &(seq, idx) in &self.fast {
                let r = &self.requests[idx as usize];
                if r.active && r.in_fast && r.seq == seq {
                    doomed.push(idx);
                }
            }
        }
        for idx in doomed {
            self.reject(idx, Rejection::NoEligibleCandidate);
        }
    }

    // ----- attempts ---------------------------------------------------------------------

    fn attempt_index(&self, id: AttemptId) -> Result<usize, Error> {
        match self.attempts.get(id.index()) {
            Some(a) if a.active && a.gen == id.generation() => Ok(id.index()),
            _ => Err(Error::UnknownAttempt(id)),
        }
    }

    /// Reports what happened in an attempt; updates the statistics. Only the first report of
    /// an attempt counts ([`Error::DuplicateOutcome`] for the rest).
    pub fn outcome(&mut self, id: AttemptId, outcome: Outcome, now: Instant) -> Result<(), Error> {
        outcome.validate()?;
        let a = self.attempt_index(id)?;
        if self.attempts[a].reported {
            return Err(Error::DuplicateOutcome(id));
        }
        self.advance(now);
        self.attempts[a].reported = true;
        let k = self.attempts[a].key;
        let elapsed_ms = (self.now_s - self.attempts[a].granted_s).max(0.0) * 1000.0;
        if self.attempts[a].key.gen == self.slots[k.idx as usize].gen {
            if let Some(t) = ScoreModel::time_sample(&outcome, Some(elapsed_ms)) {
                self.load_fit[k.idx as usize].observe(self.attempts[a].concurrency, t);
            }
        }
        self.apply_outcome(k.idx as usize, &outcome, Some(elapsed_ms));
        Ok(())
    }

    /// Says an attempt has its first byte (the outcome may follow much later, at the end of
    /// a transfer). Optional: until an attempt reports either, its age counts as evidence that
    /// the candidate is slow to answer (see `weights.time_to_success`), and without this call
    /// a long transfer counts as such until its outcome.
    pub fn first_byte(&mut self, id: AttemptId) -> Result<(), Error> {
        let a = self.attempt_index(id)?;
        self.attempts[a].answered = true;
        Ok(())
    }

    fn apply_outcome(&mut self, idx: usize, outcome: &Outcome, elapsed_ms: Option<f64>) {
        let bucket = self.bucket();
        let now_s = self.now_s;
        let slot = &mut self.slots[idx];
        let mut stats = slot.stats.unpack();
        let eject = self.model.observe(
            &mut stats,
            &mut self.overall,
            outcome,
            elapsed_ms,
            now_s,
            bucket,
        );
        if eject {
            let cap = (self.model.config().ejection.max_share * self.live_count as f64).floor();
            if (self.ejected_count as f64) < cap && slot.live {
                self.model.eject(&mut stats, now_s);
                self.counters.ejections += 1;
            }
        }
        slot.stats = PackedStats::pack(&stats);
        self.refresh_leaf_from(idx, &stats);
    }

    /// Releases an attempt's slot and says what the request does next.
    pub fn done<R: Rng + ?Sized>(
        &mut self,
        id: AttemptId,
        next: Next,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Error> {
        let a = self.attempt_index(id)?;
        self.advance(now);
        let att = self.attempts[a];
        self.release_attempt(a);
        let ridx = att.request;
        let next = if self.requests[ridx as usize].closed {
            Next::Finish
        } else {
            next
        };
        match next {
            Next::Finish => {
                self.drop_pending(ridx);
                self.requests[ridx as usize].keep_open = false;
            }
            Next::Retry | Next::Keep => {
                let r = &mut self.requests[ridx as usize];
                let x = r.extras.get_or_insert_with(Default::default);
                if !x.exclude.contains(&att.key) {
                    x.exclude.push(att.key);
                }
                if next == Next::Keep {
                    r.keep_open = true;
                } else if r.pending + r.in_flight < r.parallelism {
                    r.pending += 1;
                    // It has exclusions now: it moves from the fast queue to the general one.
                    if r.in_fast {
                        r.in_fast = false;
                        self.waiting -= 1;
                        if r.deadline_ns != NO_DEADLINE {
                            self.deadlines.remove(&(r.deadline_ns, r.seq, ridx));
                        }
                    }
                    if self.has_eligible(self.requests[ridx as usize].set()) {
                        self.enqueue(ridx);
                    } else {
                        self.reject(ridx, Rejection::NoEligibleCandidate);
                    }
                }
            }
        }
        self.maybe_retire(ridx);
        self.pump(rng);
        Ok(())
    }

    fn release_attempt(&mut self, a: usize) {
        let att = &mut self.attempts[a];
        att.active = false;
        let att = *att;
        self.free_attempts.push(a as u32);
        let idx = att.key.idx as usize;
        self.slots[idx].in_flight -= 1;
        self.global_in_flight -= 1;
        if self.slots[idx].live {
            self.refresh_load(idx);
        } else if self.slots[idx].in_flight == 0 {
            self.free_slots.push(idx as u32);
        }
        self.requests[att.request as usize].in_flight -= 1;
    }

    // ----- time -------------------------------------------------------------------------

    /// Advances time: rejects requests past their deadline, reclaims attempts past the lease,
    /// refreshes scores when due, and grants what it can.
    pub fn tick<R: Rng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.advance(now);
        let now_ns = self.now_ns();
        while let Some(&(d, seq, idx)) = self.deadlines.first() {
            if d > now_ns {
                break;
            }
            self.deadlines.remove(&(d, seq, idx));
            self.reject(idx, Rejection::DeadlinePassed);
        }
        if let Some(lease) = self.limits.max_attempt_s {
            let cutoff = self.now_s - lease;
            for a in 0..self.attempts.len() {
                let att = self.attempts[a];
                if att.active && att.granted_s <= cutoff {
                    let req_gen = self.requests[att.request as usize].gen;
                    if !att.reported {
                        self.apply_outcome(
                            att.key.idx as usize,
                            &Outcome::Failure(FailureClass::Timeout),
                            Some((self.now_s - att.granted_s) * 1000.0),
                        );
                    }
                    let candidate = self.ids[att.key.idx as usize].clone();
                    self.release_attempt(a);
                    self.counters.reclaimed += 1;
                    self.events.push_back(Event::Reclaimed {
                        request: RequestId::new(att.request, req_gen),
                        attempt: AttemptId::new(a as u32, att.gen),
                        candidate,
                    });
                    self.maybe_retire(att.request);
                }
            }
        }
        if self.now_s >= self.next_refresh_s {
            self.dirty = true;
        }
        self.pump(rng);
    }

    /// The earliest deadline among waiting requests (for the driver's timer).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines
            .first()
            .map(|&(d, _, _)| self.epoch + std::time::Duration::from_nanos(d))
    }

    // ----- granting ---------------------------------------------------------------------

    fn fast_head(&mut self) -> Option<(u64, u32)> {
        while let Some(&(seq, idx)) = self.fast.front() {
            let r = &self.requests[idx as usize];
            if r.active && r.in_fast && r.seq == seq && r.pending > 0 {
                return Some((seq, idx));
            }
            self.fast.pop_front();
        }
        None
    }

    /// Grants until nothing more can be granted.
    fn pump<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        if self.dirty || self.now_s >= self.next_refresh_s {
            self.refresh_all();
        }
        // Within one pump capacity only shrinks, so a general request found unservable stays
        // unservable: the scan resumes after it instead of restarting.
        let mut cursor: Option<u64> = None;
        loop {
            if self.waiting == 0 {
                // Nothing waits: the fast queue holds only entries already served (they are
                // removed lazily), so it empties at once.
                self.fast.clear();
                break;
            }
            if self.global_in_flight >= self.limits.global || self.avail == 0 {
                break;
            }
            let fast = self.fast_head();
            let bound = fast.map(|(s, _)| s).unwrap_or(u64::MAX);
            let start = cursor.map(|c| c + 1).unwrap_or(0);
            let mut chosen = None;
            for (&seq, &idx) in self.general.range(start..bound) {
                if self.servable(self.requests[idx as usize].set()) {
                    chosen = Some(idx);
                    break;
                }
                cursor = Some(seq);
            }
            let idx = match (chosen, fast) {
                (Some(idx), _) => idx,
                (None, Some((_, idx))) => idx,
                (None, None) => break,
            };
            if !self.grant_one(idx, rng) {
                break;
            }
        }
    }

    /// Grants one attempt to request `idx`. Returns false if nothing could be drawn (which the
    /// servability check rules out; kept as a guard against looping).
    fn grant_one<R: Rng + ?Sized>(&mut self, idx: u32, rng: &mut R) -> bool {
        let now_ns = self.now_ns();
        if self.requests[idx as usize].deadline_ns <= now_ns {
            self.reject(idx, Rejection::DeadlinePassed);
            return true;
        }
        // Without the feature this is a constant false and the recording code compiles away:
        // the baseline that shows records cost nothing while off.
        let record = cfg!(feature = "decision-records") && self.record_rate > 0.0 && {
            self.record_acc += self.record_rate;
            if self.record_acc >= 1.0 {
                self.record_acc -= 1.0;
                true
            } else {
                false
            }
        };
        let extras = self.requests[idx as usize].extras.take();
        let set = match &extras {
            None => DrawSet::ALL,
            Some(x) => DrawSet {
                eligible: x.eligible.as_deref(),
                exclude: &x.exclude,
                caps: &x.caps,
            },
        };
        let arm = (!self.arms.is_empty()).then_some(self.requests[idx as usize].arm as usize);
        let shadows = if self.shadows.is_empty() {
            0
        } else {
            self.sample_shadows()
        };
        // Shadows replay the live draw's roll over the same set, so the live draw is evaluated.
        let drawn = self.draw(set, rng, record, shadows != 0, arm);
        let verdicts = match drawn {
            Some((d, _)) if shadows != 0 => self.judge_shadows(set, d.idx, d.roll, shadows),
            _ => Vec::new(),
        };
        self.requests[idx as usize].extras = extras;
        let Some((d, evaluated)) = drawn else {
            return false;
        };
        // Book the slot.
        let cidx = d.idx as usize;
        // Plain loads of the winner's id bytes and slot lines first: on a fleet larger than
        // the cache they all miss, and issued together the misses overlap, where the id's
        // locked reference-count increment below, and the outcome's statistics update later,
        // would otherwise take them one after another.
        std::hint::black_box((
            self.ids[cidx].as_str().as_bytes().first().copied(),
            self.slots[cidx].touch(),
        ));
        let key = Key {
            idx: d.idx,
            gen: self.slots[cidx].gen,
        };
        self.slots[cidx].in_flight += 1;
        self.global_in_flight += 1;
        self.refresh_load(cidx);
        let a = match self.free_attempts.pop() {
            Some(a) => a,
            None => {
                self.attempts.push(AttemptSlot::default());
                self.attempts.len() as u32 - 1
            }
        };
        let agen = self.attempts[a as usize].gen.wrapping_add(1);
        self.attempts[a as usize] = AttemptSlot {
            gen: agen,
            active: true,
            reported: false,
            answered: false,
            key,
            request: idx,
            concurrency: self.slots[cidx].in_flight,
            granted_s: self.now_s,
        };
        let attempt = AttemptId::new(a, agen);
        let r = &mut self.requests[idx as usize];
        r.pending -= 1;
        r.in_flight += 1;
        let request = RequestId::new(idx, r.gen);
        let waited_s = self.now_s - r.arrival_s;
        if r.pending == 0 {
            self.drop_pending(idx);
        } else {
            // Parallel attempts go to different candidates.
            let x = r.extras.get_or_insert_with(Default::default);
            x.exclude.push(key);
            if r.in_fast {
                r.in_fast = false;
                r.in_general = true;
                self.general.insert(r.seq, idx);
            }
        }
        self.counters.decisions += 1;
        if !evaluated {
            self.counters.tree_decisions += 1;
        }
        let reason_ix = DecisionReason::ALL
            .iter()
            .position(|x| *x == d.reason)
            .unwrap_or(0);
        self.counters.by_reason[reason_ix] += 1;
        let candidate = self.ids[cidx].clone();
        if record && evaluated {
            self.push_record(request, attempt, &d, arm, &candidate, verdicts);
        }
        self.events.push_back(Event::Granted(Grant {
            request,
            attempt,
            candidate,
            probability: d.probability,
            reason: d.reason,
            waited_s,
            arm,
        }));
        true
    }

    /// Builds and queues the record of an evaluated decision. Out of line and marked cold:
    /// records are sampled, and keeping their construction out of the grant path keeps that
    /// path's code as compact as in a build without records.
    #[cold]
    #[inline(never)]
    fn push_record(
        &mut self,
        request: RequestId,
        attempt: AttemptId,
        d: &Drawn,
        arm: Option<usize>,
        winner: &CandidateId,
        shadows: Vec<ShadowVerdict>,
    ) {
        let record = DecisionRecord {
            time_s: self.now_s,
            request,
            attempt: Some(attempt),
            reason: d.reason,
            candidates: self.considered_with(
                arm.and_then(|a| self.arms.get(a)?.model.as_ref()),
                &self.eval,
            ),
            filters: self.eval.filters.clone(),
            fallbacks: self.eval.fallbacks.clone(),
            roll: d.roll,
            winner: Some(winner.clone()),
            winner_probability: d.probability,
            arm: arm.and_then(|a| self.arms.get(a)).map(|a| a.name.clone()),
            shadows,
        };
        self.records.push_back(record);
    }

    // ----- output -----------------------------------------------------------------------

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Records a share of decisions (0 = none, the default; 1 = every decision). Sampling is
    /// a deterministic accumulator, so recording never changes which candidates win. Without
    /// the `decision-records` feature (on by default) nothing is ever recorded.
    pub fn set_record_rate(&mut self, rate: f64) {
        self.record_rate = if rate.is_finite() {
            rate.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// The next decision record, oldest first.
    pub fn poll_record(&mut self) -> Option<DecisionRecord> {
        self.records.pop_front()
    }

    // ----- queries ----------------------------------------------------------------------

    /// What a draw for `request` would do now, without granting anything: every candidate in
    /// the drawn set with components and probability, filters and fallbacks.
    pub fn explain(&mut self, request: &Request, now: Instant) -> Result<DecisionRecord, Error> {
        request.validate()?;
        self.advance(now);
        if self.dirty || self.now_s >= self.next_refresh_s {
            self.refresh_all();
        }
        let eligible = match &request.eligible {
            Eligible::All => None,
            Eligible::Only(ids) => Some(
                ids.iter()
                    .map(|id| {
                        self.key_of(id)
                            .ok_or_else(|| Error::UnknownCandidate(id.clone()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let exclude: Vec<Key> = request
            .exclude
            .iter()
            .filter_map(|id| self.key_of(id))
            .collect();
        let set = DrawSet {
            eligible: eligible.as_deref(),
            exclude: &exclude,
            caps: &request.capabilities,
        };
        let mut ev = std::mem::take(&mut self.eval);
        self.evaluate(set, &mut ev, true);
        let candidates = self.considered(&ev);
        let best = candidates
            .iter()
            .enumerate()
            .max_by(|a, b| {
                a.1.probability
                    .total_cmp(&b.1.probability)
                    .then(b.0.cmp(&a.0))
            })
            .map(|(_, c)| (c.id.clone(), c.probability));
        let record = DecisionRecord {
            time_s: self.now_s,
            request: RequestId::new(u32::MAX, 0),
            attempt: None,
            reason: if self.model.config().deterministic {
                DecisionReason::Deterministic
            } else if !ev.fallbacks.is_empty() {
                DecisionReason::Fallback
            } else if candidates.len() == 1 {
                DecisionReason::OnlyChoice
            } else {
                DecisionReason::Draw
            },
            candidates,
            filters: ev.filters.clone(),
            fallbacks: ev.fallbacks.clone(),
            roll: None,
            winner: best.as_ref().map(|b| b.0.clone()),
            winner_probability: best.map(|b| b.1).unwrap_or(0.0),
            arm: None,
            shadows: Vec::new(),
        };
        self.eval = ev;
        Ok(record)
    }

    /// Each candidate's probability of winning a draw for `request` now.
    pub fn probabilities(
        &mut self,
        request: &Request,
        now: Instant,
    ) -> Result<Vec<(CandidateId, f64)>, Error> {
        Ok(self
            .explain(request, now)?
            .candidates
            .into_iter()
            .map(|c| (c.id, c.probability))
            .collect())
    }

    /// Probability of `id` in the O(log n) tree for an unrestricted request (0 if it is not
    /// drawable); the tree path's own arithmetic, for checking it against [`Core::explain`].
    pub fn tree_probability(&self, id: &CandidateId) -> f64 {
        match self.by_id.get(&self.ids, id.as_str()) {
            Some(idx) if self.slots[idx as usize].in_tree => self.leaf_probability(idx as usize),
            _ => 0.0,
        }
    }

    /// One candidate.
    pub fn candidate(&self, id: &CandidateId) -> Option<CandidateView<'_>> {
        self.by_id
            .get(&self.ids, id.as_str())
            .map(|i| self.view(i as usize))
    }

    fn view(&self, i: usize) -> CandidateView<'_> {
        let s = &self.slots[i];
        CandidateView {
            info: &self.infos[i],
            stats: s.stats.unpack(),
            components: self.components_of(i),
            in_flight: s.in_flight,
            limit: self.limit_of(s),
            ejected: s.ejected,
            removed: !s.live,
        }
    }

    /// Every candidate, including removed ones whose attempts are still running, in the order
    /// they were added.
    pub fn candidates(&self) -> impl Iterator<Item = CandidateView<'_>> + '_ {
        let mut order: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].live || self.slots[i].in_flight > 0)
            .collect();
        order.sort_by_key(|&i| self.slots[i].added_seq);
        order.into_iter().map(|i| self.view(i))
    }

    /// Number of live candidates.
    pub fn candidate_count(&self) -> usize {
        self.live_count
    }

    /// Whether a request still exists (waiting, running, or kept open). Once false, every call
    /// naming it is refused with [`Error::UnknownRequest`].
    pub fn is_open(&self, id: RequestId) -> bool {
        self.request_index(id).is_ok()
    }

    /// Requests waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> u32 {
        self.global_in_flight
    }

    /// Open requests (waiting or running).
    pub fn open_requests(&self) -> usize {
        self.requests.len() - self.free_requests.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The scoring config in force.
    pub fn config(&self) -> &Config {
        self.model.config()
    }

    /// The all-candidate averages.
    pub fn overall(&self) -> Overall {
        self.overall
    }

    /// Counters of decisions, rejections, ejections and reclaimed attempts.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Seconds since the epoch, as far as the core has seen.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// The core's epoch (its `now` at construction).
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The candidate an attempt runs on.
    pub fn attempt_candidate(&self, id: AttemptId) -> Option<&CandidateId> {
        let a = self.attempt_index(id).ok()?;
        Some(&self.ids[self.attempts[a].key.idx as usize])
    }

    /// Whether a waiting request could be granted right now. After any call returns this is
    /// false for every waiting request: the core never leaves capacity unused (the
    /// no-stuck-request invariant, checked by the property tests).
    pub fn any_servable_waiting(&self) -> bool {
        if self.global_in_flight >= self.limits.global {
            return false;
        }
        let fast_waiting = self.fast.iter().any(|&(seq, idx)| {
            let r = &self.requests[idx as usize];
            r.active && r.in_fast && r.seq == seq && r.pending > 0
        });
        (fast_waiting && self.servable(DrawSet::ALL))
            || self
                .general
                .values()
                .any(|&idx| self.servable(self.requests[idx as usize].set()))
    }

    /// Recomputes every counter from scratch and compares (for tests). Returns what differs.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut in_flight = 0u32;
        for (i, s) in self.slots.iter().enumerate() {
            let limit = self.limit_of(s);
            if s.live && s.in_flight > limit && s.available {
                return Err(format!("candidate {i} over its limit yet available"));
            }
            in_flight += s.in_flight;
            if !s.live && s.in_tree {
                return Err(format!("removed candidate {i} is drawable"));
            }
            if s.in_tree && s.in_flight >= limit {
                return Err(format!("candidate {i} at capacity is drawable"));
            }
        }
        if in_flight != self.global_in_flight {
            return Err(format!(
                "in flight {} != sum over candidates {}",
                self.global_in_flight, in_flight
            ));
        }
        let active_attempts = self.attempts.iter().filter(|a| a.active).count() as u32;
        if active_attempts != self.global_in_flight {
            return Err("active attempts != in flight".into());
        }
        let avail = self.slots.iter().filter(|s| s.available).count();
        let avail_pass = self.slots.iter().filter(|s| s.in_tree).count();
        let usable = self.slots.iter().filter(|s| s.usable).count();
        if avail != self.avail || avail_pass != self.avail_pass || usable != self.usable_count {
            return Err(format!(
                "counters drifted: avail {avail}/{} pass {avail_pass}/{} usable {usable}/{}",
                self.avail, self.avail_pass, self.usable_count
            ));
        }
        let waiting = self
            .requests
            .iter()
            .filter(|r| r.active && (r.in_fast || r.in_general))
            .count();
        if waiting != self.waiting {
            return Err(format!("waiting {} != queued {waiting}", self.waiting));
        }
        for r in self.requests.iter().filter(|r| r.active) {
            if r.pending + r.in_flight > r.parallelism {
                return Err("a request runs more than its parallelism".into());
            }
        }
        let stale = self.slots.iter().filter(|s| s.stale).count();
        if stale != self.stale.len() {
            return Err(format!(
                "{stale} candidates flagged stale, {} listed",
                self.stale.len()
            ));
        }
        let uniform = self.model.uniform_channel();
        if (self.trees[uniform].total() - avail_pass as f64).abs() > 1e-6 {
            return Err("uniform tree total != drawable count".into());
        }
        Ok(())
    }
}
