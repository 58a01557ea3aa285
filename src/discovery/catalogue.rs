//! The sans-IO catalogue: cached candidate info, refresh passes in batches, the growing
//! cutoff, expiry, idle pause and the pool-threshold trigger.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

use super::config::{DiscoveryConfig, DiscoveryError};
use super::events::{Action, CatalogueStats, EntryView, RefreshReason, RefreshReport};
use super::FetchError;
use crate::vocab::{CandidateId, CandidateInfo};

#[derive(Clone, Copy)]
enum Failure {
    Timeout,
    Error,
    Invalid,
}

#[derive(Debug, Default)]
struct Entry {
    info: Option<CandidateInfo>,
    fetched_at: Option<Instant>,
    expires_at: Option<Instant>,
    latency: Option<Duration>,
    /// What the coordinator holds (info merged with perf scores), if it holds it.
    published: Option<CandidateInfo>,
    failures: u32,
    urgent: bool,
    last_pass: u64,
}

#[derive(Debug)]
struct Batch {
    started: Instant,
    checkpoint: usize,
    pending: BTreeSet<CandidateId>,
    answers: Vec<(Duration, CandidateId)>,
    answered: bool,
    /// Whether it belongs to the running pass (an urgent batch may run before one starts).
    in_pass: bool,
}

#[derive(Debug)]
struct Pass {
    number: u64,
    reason: RefreshReason,
    started: Instant,
    queue: VecDeque<CandidateId>,
    answered: bool,
    fetches: u32,
    ok: u32,
    timed_out: u32,
    failed: u32,
}

/// The discovery state machine. Reads no clock and does no I/O: every call takes `now`, and
/// what to do comes out of [`Catalogue::poll_action`]. See the [module docs](super).
#[derive(Debug)]
pub struct Catalogue {
    config: DiscoveryConfig,
    cutoffs: Vec<Duration>,
    rng: SmallRng,
    known: Vec<CandidateId>,
    entries: HashMap<CandidateId, Entry>,
    batch: Option<Batch>,
    pass: Option<Pass>,
    passes_started: u64,
    urgent: VecDeque<CandidateId>,
    next_refresh: Instant,
    /// The latest `now` seen.
    now: Instant,
    last_demand: Instant,
    last_threshold_refresh: Option<Instant>,
    threshold_wanted: bool,
    /// A lower bound of the earliest expiry among published entries.
    next_expiry: Option<Instant>,
    perf_region: Option<String>,
    perf_scores: HashMap<CandidateId, f64>,
    actions: VecDeque<Action>,
    stats: CatalogueStats,
}

impl Catalogue {
    /// A catalogue with no candidates. The first pass starts as soon as candidates are set;
    /// creation counts as demand, so the cache warms before the first request.
    pub fn new(
        config: DiscoveryConfig,
        now: Instant,
        rng: SmallRng,
    ) -> Result<Self, DiscoveryError> {
        config.validate()?;
        Ok(Catalogue {
            cutoffs: config.cutoffs(),
            config,
            rng,
            known: Vec::new(),
            entries: HashMap::new(),
            batch: None,
            pass: None,
            passes_started: 0,
            urgent: VecDeque::new(),
            next_refresh: now,
            now,
            last_demand: now,
            last_threshold_refresh: None,
            threshold_wanted: false,
            next_expiry: None,
            perf_region: None,
            perf_scores: HashMap::new(),
            actions: VecDeque::new(),
            stats: CatalogueStats::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &DiscoveryConfig {
        &self.config
    }

    /// Replaces the set of known candidates (the candidate source's answer). New ones are
    /// fetched at once (unless idle); dropped ones are removed from the coordinator and their
    /// running fetch is cancelled.
    pub fn set_candidates<I>(&mut self, ids: I, now: Instant)
    where
        I: IntoIterator<Item = CandidateId>,
    {
        let mut wanted: Vec<CandidateId> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            if seen.insert(id.clone()) {
                wanted.push(id);
            }
        }
        let gone: Vec<CandidateId> = self
            .known
            .iter()
            .filter(|id| !seen.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            self.drop_candidate(&id);
        }
        let paused = self.paused(now);
        let first_fill = self.passes_started == 0;
        for id in wanted {
            if !self.entries.contains_key(&id) {
                let mut entry = Entry::default();
                if !paused && !first_fill {
                    entry.urgent = true;
                    self.urgent.push_back(id.clone());
                }
                self.entries.insert(id.clone(), entry);
                self.known.push(id);
            }
        }
        self.step(now);
    }

    /// A request arrived needing `required` capabilities: counts as demand (resumes an idle
    /// catalogue) and, when fewer candidates than the pool threshold are eligible for it,
    /// asks for an immediate refresh. Returns how many are eligible now.
    pub fn demand(&mut self, required: &[String], now: Instant) -> usize {
        self.touch(now);
        self.step(now);
        let eligible = self.eligible_count(required, now);
        if eligible < self.threshold() && self.pass.is_none() {
            self.threshold_wanted = true;
            self.step(now);
        }
        eligible
    }

    /// The coordinator (or a pool builder) found too few working candidates: refresh at once,
    /// within the threshold backoff. Counts as demand.
    pub fn pool_low(&mut self, now: Instant) {
        self.touch(now);
        if self.pass.is_none() {
            self.threshold_wanted = true;
        }
        self.step(now);
    }

    /// Starts a refresh pass now unless one is running (a scheduled pass, ignoring idleness).
    pub fn refresh_now(&mut self, now: Instant) {
        self.touch(now);
        if self.pass.is_none() {
            self.next_refresh = now;
        }
        self.step(now);
    }

    /// Reports a fetch's result. Returns `false` if nothing was waiting for it (it was cut,
    /// its candidate dropped, or it was never asked for); such a result is ignored.
    pub fn fetched(
        &mut self,
        id: &CandidateId,
        result: Result<CandidateInfo, FetchError>,
        now: Instant,
    ) -> bool {
        let Some(batch) = self.batch.as_mut().filter(|b| b.pending.contains(id)) else {
            self.stats.late += 1;
            return false;
        };
        batch.pending.remove(id);
        let latency = now.saturating_duration_since(batch.started);
        let result = match result {
            Ok(info) if info.id != *id => Err(Failure::Invalid),
            Ok(info) => match info.validate() {
                Ok(()) => Ok(info),
                Err(_) => Err(Failure::Invalid),
            },
            Err(FetchError::Timeout) => Err(Failure::Timeout),
            Err(FetchError::Failed(_)) => Err(Failure::Error),
        };
        let entry = self.entries.get_mut(id);
        match (result, entry) {
            (Ok(info), Some(entry)) => {
                self.stats.ok += 1;
                batch.answered = true;
                batch.answers.push((latency, id.clone()));
                if let Some(p) = self.pass.as_mut().filter(|_| batch.in_pass) {
                    p.answered = true;
                    p.ok += 1;
                }
                entry.info = Some(info);
                entry.fetched_at = Some(now);
                entry.expires_at = Some(now + Duration::from_secs_f64(self.config.expiry_s));
                entry.latency = Some(latency);
                entry.failures = 0;
            }
            (Err(failure), entry) => {
                match failure {
                    Failure::Timeout => self.stats.timeouts += 1,
                    Failure::Error => self.stats.errors += 1,
                    Failure::Invalid => self.stats.invalid += 1,
                }
                if let Some(p) = self.pass.as_mut().filter(|_| batch.in_pass) {
                    match failure {
                        Failure::Timeout => p.timed_out += 1,
                        Failure::Error | Failure::Invalid => p.failed += 1,
                    }
                }
                if let Some(entry) = entry {
                    entry.failures += 1;
                }
            }
            (Ok(_), None) => self.stats.late += 1,
        }
        self.step(now);
        true
    }

    /// Sets the perf scores of `region` (from a perf-score source). They are merged into each
    /// candidate's `perf_scores` when it is pushed; candidates the coordinator has are updated
    /// now if their score changed. Scores that are not finite and non-negative are ignored.
    pub fn set_perf_scores<I>(&mut self, region: &str, scores: I, now: Instant)
    where
        I: IntoIterator<Item = (CandidateId, f64)>,
    {
        self.perf_region = Some(region.to_string());
        self.perf_scores = scores
            .into_iter()
            .filter(|(_, s)| s.is_finite() && *s >= 0.0)
            .collect();
        let ids: Vec<CandidateId> = self.known.clone();
        for id in ids {
            if self.entries.get(&id).is_some_and(|e| e.published.is_some()) {
                self.publish(&id);
            }
        }
        self.step(now);
    }

    /// Advances time: cutoffs, expiry, scheduled and threshold passes, next batches.
    pub fn tick(&mut self, now: Instant) {
        self.step(now);
    }

    /// The next action to carry out, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Catalogue::tick`] next has something to do, if ever (without new input).
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut next = self.next_expiry;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if let Some(b) = &self.batch {
            consider(b.started + self.cutoffs[b.checkpoint]);
        }
        // Refreshes only start while not idle: once paused (as of the last call), only a
        // request wakes the catalogue, and a refresh due after the pause begins never comes.
        if self.pass.is_none() && !self.paused(self.now) {
            let before_pause = match self.config.idle_pause_s {
                None => true,
                Some(idle) => self.next_refresh < self.last_demand + Duration::from_secs_f64(idle),
            };
            if before_pause {
                consider(self.next_refresh);
            }
            if self.threshold_wanted {
                if let Some(t) = self.threshold_ready_at() {
                    consider(t);
                }
            }
        }
        next
    }

    /// Candidates with valid info offering every `required` capability, fastest responder
    /// first: the pool a request can be served from.
    pub fn eligible(&self, required: &[String], now: Instant) -> Vec<&CandidateInfo> {
        let mut out: Vec<(&Entry, &CandidateInfo)> = self
            .entries
            .values()
            .filter_map(|e| e.published.as_ref().map(|p| (e, p)))
            .filter(|(e, p)| e.expires_at.is_some_and(|t| t > now) && has_caps(p, required))
            .collect();
        out.sort_by(|(a, pa), (b, pb)| a.latency.cmp(&b.latency).then(pa.id.cmp(&pb.id)));
        out.into_iter().map(|(_, p)| p).collect()
    }

    /// How many candidates [`Catalogue::eligible`] would return.
    pub fn eligible_count(&self, required: &[String], now: Instant) -> usize {
        self.entries
            .values()
            .filter(|e| {
                e.expires_at.is_some_and(|t| t > now)
                    && e.published.as_ref().is_some_and(|p| has_caps(p, required))
            })
            .count()
    }

    /// One candidate's cache entry.
    pub fn entry(&self, id: &CandidateId) -> Option<EntryView<'_>> {
        self.entries.get(id).map(|e| EntryView {
            info: e.info.as_ref(),
            fetched_at: e.fetched_at,
            expires_at: e.expires_at,
            latency: e.latency,
            published: e.published.is_some(),
            failures: e.failures,
            in_flight: self.batch.as_ref().is_some_and(|b| b.pending.contains(id)),
        })
    }

    /// Known candidates.
    pub fn known(&self) -> &[CandidateId] {
        &self.known
    }

    /// Candidates the coordinator has (valid info, pushed).
    pub fn cache_size(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.published.is_some())
            .count()
    }

    /// Age of the oldest info the coordinator has, if any.
    pub fn oldest_age(&self, now: Instant) -> Option<Duration> {
        self.entries
            .values()
            .filter(|e| e.published.is_some())
            .filter_map(|e| e.fetched_at)
            .min()
            .map(|t| now.saturating_duration_since(t))
    }

    /// Fetches running now.
    pub fn in_flight(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.pending.len())
    }

    /// Whether a refresh pass is running.
    pub fn refreshing(&self) -> bool {
        self.pass.is_some()
    }

    /// Whether refreshing is paused because no request arrived for `idle_pause_s`.
    pub fn paused(&self, now: Instant) -> bool {
        self.config.idle_pause_s.is_some_and(|idle| {
            now.saturating_duration_since(self.last_demand) >= Duration::from_secs_f64(idle)
        })
    }

    /// The pool threshold for the current number of known candidates.
    pub fn threshold(&self) -> usize {
        self.config.threshold(self.known.len())
    }

    /// Running totals.
    pub fn stats(&self) -> CatalogueStats {
        self.stats
    }

    // ----- internals ---------------------------------------------------------------------

    fn touch(&mut self, now: Instant) {
        let was_paused = self.paused(now);
        self.last_demand = self.last_demand.max(now);
        if was_paused {
            // Whatever went stale while idle is fetched before anything else.
            for id in &self.known {
                let e = self.entries.get_mut(id).expect("known ids have entries");
                let running = self.batch.as_ref().is_some_and(|b| b.pending.contains(id));
                if e.published.is_none() && !e.urgent && !running {
                    e.urgent = true;
                    self.urgent.push_back(id.clone());
                }
            }
        }
    }

    fn drop_candidate(&mut self, id: &CandidateId) {
        if let Some(entry) = self.entries.remove(id) {
            if entry.published.is_some() {
                self.actions.push_back(Action::Remove(id.clone()));
            }
        }
        self.known.retain(|k| k != id);
        if let Some(b) = self.batch.as_mut() {
            if b.pending.remove(id) {
                self.actions.push_back(Action::Cancel(id.clone()));
            }
        }
    }

    fn step(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.expire(now);
        self.check_cutoff(now);
        if self.batch.as_ref().is_some_and(|b| b.pending.is_empty()) {
            self.finish_batch();
        }
        // A pass that ends late may find the next one already due: go round once more.
        loop {
            if self.pass.is_none() && !self.paused(now) {
                if now >= self.next_refresh {
                    self.start_pass(RefreshReason::Scheduled, now);
                } else if self.threshold_wanted
                    && self.threshold_ready_at().is_none_or(|t| now >= t)
                {
                    self.start_pass(RefreshReason::PoolThreshold, now);
                }
            }
            if self.batch.is_some() || self.start_batch(now) {
                break;
            }
            match self.pass.take() {
                Some(pass) => self.finish_pass(pass, now),
                None => break,
            }
        }
    }

    fn threshold_ready_at(&self) -> Option<Instant> {
        self.last_threshold_refresh
            .map(|t| t + Duration::from_secs_f64(self.config.threshold_backoff_s))
    }

    fn expire(&mut self, now: Instant) {
        if self.next_expiry.is_none_or(|t| now < t) {
            return;
        }
        let paused = self.paused(now);
        let mut next: Option<Instant> = None;
        for id in &self.known {
            let e = self.entries.get_mut(id).expect("known ids have entries");
            if e.published.is_none() {
                continue;
            }
            match e.expires_at {
                Some(t) if t > now => next = Some(next.map_or(t, |n| n.min(t))),
                _ => {
                    e.published = None;
                    self.actions.push_back(Action::Remove(id.clone()));
                    let running = self.batch.as_ref().is_some_and(|b| b.pending.contains(id));
                    if !paused && !e.urgent && !running {
                        e.urgent = true;
                        self.urgent.push_back(id.clone());
                    }
                }
            }
        }
        self.next_expiry = next;
    }

    fn check_cutoff(&mut self, now: Instant) {
        let pass_answered = self.pass.as_ref().is_some_and(|p| p.answered)
            && self.batch.as_ref().is_some_and(|b| b.in_pass);
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let last = self.cutoffs.len() - 1;
        while now >= b.started + self.cutoffs[b.checkpoint] {
            if b.answered || pass_answered || b.checkpoint == last {
                for id in std::mem::take(&mut b.pending) {
                    self.stats.timeouts += 1;
                    if let Some(p) = self.pass.as_mut().filter(|_| b.in_pass) {
                        p.timed_out += 1;
                    }
                    if let Some(e) = self.entries.get_mut(&id) {
                        e.failures += 1;
                    }
                    self.actions.push_back(Action::Cancel(id));
                }
                break;
            }
            b.checkpoint += 1;
        }
    }

    fn finish_batch(&mut self) {
        let Some(mut b) = self.batch.take() else {
            return;
        };
        // Fastest first: the coordinator breaks ties by the order candidates were added.
        b.answers.sort();
        for (_, id) in b.answers {
            if self.entries.contains_key(&id) {
                self.publish(&id);
            }
        }
    }

    /// Pushes an entry's current info (merged with perf scores) if the coordinator's copy
    /// differs.
    fn publish(&mut self, id: &CandidateId) {
        let Some(e) = self.entries.get_mut(id) else {
            return;
        };
        let Some(mut info) = e.info.clone() else {
            return;
        };
        if let (Some(region), Some(score)) = (&self.perf_region, self.perf_scores.get(id)) {
            info.perf_scores.insert(region.clone(), *score);
        }
        match &e.published {
            None => self.actions.push_back(Action::Add(info.clone())),
            Some(old) if *old != info => self.actions.push_back(Action::Update(info.clone())),
            Some(_) => {}
        }
        e.published = Some(info);
        if let Some(t) = e.expires_at {
            self.next_expiry = Some(self.next_expiry.map_or(t, |n| n.min(t)));
        }
    }

    fn start_pass(&mut self, reason: RefreshReason, now: Instant) {
        self.passes_started += 1;
        self.threshold_wanted = false;
        if reason == RefreshReason::PoolThreshold {
            self.stats.threshold_refreshes += 1;
            self.last_threshold_refresh = Some(now);
        }
        let mut order = self.known.clone();
        order.shuffle(&mut self.rng);
        self.pass = Some(Pass {
            number: self.passes_started,
            reason,
            started: now,
            queue: order.into(),
            answered: false,
            fetches: 0,
            ok: 0,
            timed_out: 0,
            failed: 0,
        });
    }

    /// Starts the next batch: urgent refetches first, then the pass's queue.
    fn start_batch(&mut self, now: Instant) -> bool {
        let pass_number = self.pass.as_ref().map_or(0, |p| p.number);
        let mut pending = BTreeSet::new();
        while pending.len() < self.config.batch_size {
            let (id, from_pass) = if let Some(id) = self.urgent.pop_front() {
                (id, false)
            } else if let Some(id) = self.pass.as_mut().and_then(|p| p.queue.pop_front()) {
                (id, true)
            } else {
                break;
            };
            let Some(e) = self.entries.get_mut(&id) else {
                continue; // dropped by the source since it was queued
            };
            if !from_pass {
                e.urgent = false;
            }
            if (from_pass && e.last_pass == pass_number) || pending.contains(&id) {
                continue; // already fetched in this pass
            }
            e.last_pass = pass_number;
            self.actions.push_back(Action::Fetch(id.clone()));
            pending.insert(id);
        }
        if pending.is_empty() {
            return false;
        }
        let n = pending.len();
        self.stats.fetches += n as u64;
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(n);
        let answered = match self.pass.as_mut() {
            Some(p) => {
                p.fetches += n as u32;
                p.answered
            }
            None => false,
        };
        self.batch = Some(Batch {
            started: now,
            checkpoint: 0,
            pending,
            answers: Vec::new(),
            answered,
            in_pass: self.pass.is_some(),
        });
        true
    }

    fn finish_pass(&mut self, pass: Pass, now: Instant) {
        self.stats.passes += 1;
        self.next_refresh = pass.started + Duration::from_secs_f64(self.config.interval_s);
        self.actions.push_back(Action::RefreshDone(RefreshReport {
            reason: pass.reason,
            started: pass.started,
            duration: now.saturating_duration_since(pass.started),
            fetches: pass.fetches,
            answered: pass.ok,
            timed_out: pass.timed_out,
            failed: pass.failed,
        }));
    }
}

fn has_caps(info: &CandidateInfo, required: &[String]) -> bool {
    required.iter().all(|c| info.capabilities.contains(c))
}
