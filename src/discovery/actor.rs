//! The `Discovery` actor: drives a [`Catalogue`] with tokio and pushes changes to a sink.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::catalogue::Catalogue;
use super::config::{DiscoveryConfig, DiscoveryError};
use super::events::{Action, CatalogueStats};
use super::{
    FetchError, Fetcher, METRIC_CACHE_AGE, METRIC_CACHE_SIZE, METRIC_IN_FLIGHT,
    METRIC_REFRESH_DURATION, METRIC_REQUESTS,
};
use crate::actor::{
    AddCandidate, Coordinator, CoordinatorHandle, RemoveCandidate, Stop, UpdateCandidate,
};
use crate::vocab::{CandidateId, CandidateInfo};

/// A change to the coordinator's candidate set.
#[derive(Clone, Debug, PartialEq, Message)]
#[rtype(result = "()")]
pub enum CandidateChange {
    /// A candidate with fresh info, new to the coordinator.
    Add(CandidateInfo),
    /// New info for a candidate the coordinator has.
    Update(CandidateInfo),
    /// A candidate whose info expired or which the source dropped.
    Remove(CandidateId),
}

/// Where discovery pushes candidate changes (the coordinator, or anything else).
pub trait CandidateSink: 'static {
    /// Applies one change; changes arrive in order.
    fn apply(&mut self, change: CandidateChange);
}

impl<F: FnMut(CandidateChange) + 'static> CandidateSink for F {
    fn apply(&mut self, change: CandidateChange) {
        self(change)
    }
}

/// Any actor handling [`CandidateChange`]; `do_send` keeps the order of one sender.
impl CandidateSink for Recipient<CandidateChange> {
    fn apply(&mut self, change: CandidateChange) {
        self.do_send(change);
    }
}

/// The coordinator: changes become [`AddCandidate`], [`UpdateCandidate`] and
/// [`RemoveCandidate`], sent in order with `do_send`; the coordinator counts any it refuses.
impl CandidateSink for Addr<Coordinator> {
    fn apply(&mut self, change: CandidateChange) {
        send_change(self, change);
    }
}

/// The coordinator behind a handle, as for [`Addr<Coordinator>`]: `Discovery::new(config,
/// ids, fetcher, handle.clone())`. The clone is a handle like any other: a coordinator started
/// with [`Coordinator::start_in_thread`] keeps running while discovery holds it.
impl CandidateSink for CoordinatorHandle {
    fn apply(&mut self, change: CandidateChange) {
        send_change(self.addr(), change);
    }
}

fn send_change(coordinator: &Addr<Coordinator>, change: CandidateChange) {
    match change {
        CandidateChange::Add(info) => coordinator.do_send(AddCandidate(info)),
        CandidateChange::Update(info) => coordinator.do_send(UpdateCandidate(info)),
        CandidateChange::Remove(id) => coordinator.do_send(RemoveCandidate(id)),
    }
}

/// A request arrived needing these capabilities (counts as demand; may trigger a
/// pool-threshold refresh). Answers how many candidates are eligible for it now.
#[derive(Clone, Debug, Default, Message)]
#[rtype(result = "usize")]
pub struct Demand {
    /// Capabilities the request needs.
    pub required: Vec<String>,
}

/// Like [`Demand`], answering the pool itself: eligible candidates, fastest responder first.
#[derive(Clone, Debug, Default, Message)]
#[rtype(result = "Vec<CandidateInfo>")]
pub struct Pool {
    /// Capabilities the request needs.
    pub required: Vec<String>,
}

/// Too few working candidates in a pool: refresh now (within the threshold backoff).
#[derive(Clone, Copy, Debug, Default, Message)]
#[rtype(result = "()")]
pub struct PoolLow;

/// Start a refresh pass now unless one is running.
#[derive(Clone, Copy, Debug, Default, Message)]
#[rtype(result = "()")]
pub struct RefreshNow;

/// Replace the set of known candidates.
#[derive(Clone, Debug, Default, Message)]
#[rtype(result = "()")]
pub struct SetCandidates(pub Vec<CandidateId>);

/// Apply a region's perf scores (from the `http` feature's `perf_scores` or elsewhere).
#[derive(Clone, Debug, Default, Message)]
#[rtype(result = "()")]
pub struct SetPerfScores {
    /// The region the scores are for, e.g. `FRA`.
    pub region: String,
    /// Score per candidate.
    pub scores: Vec<(CandidateId, f64)>,
}

/// Ask for the catalogue's state.
#[derive(Clone, Copy, Debug, Default, Message)]
#[rtype(result = "DiscoveryStatus")]
pub struct Snapshot;

/// The catalogue's state, answered to [`Snapshot`].
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoveryStatus {
    /// Running totals.
    pub stats: CatalogueStats,
    /// Candidates the coordinator has.
    pub cache_size: usize,
    /// Known candidates.
    pub known: usize,
    /// Fetches running now.
    pub in_flight: usize,
    /// Whether a refresh pass is running.
    pub refreshing: bool,
    /// Whether refreshing is paused for lack of requests.
    pub paused: bool,
}

/// The discovery actor. See the [module docs](super).
///
/// # Panics
///
/// Starting it (`Actor::start` and the like) panics outside a running actix `System`;
/// [`Discovery::new`] itself does not. With a coordinator run by
/// [`Coordinator::start_in_thread`], discovery still needs a System on its own side, and its
/// sink is `handle.clone()` (or `handle.addr().clone()`).
pub struct Discovery<F: Fetcher> {
    catalogue: Catalogue,
    fetcher: Arc<F>,
    sink: Box<dyn CandidateSink>,
    initial: Vec<CandidateId>,
    running: HashMap<CandidateId, SpawnHandle>,
    timer: Option<(Instant, SpawnHandle)>,
    reported: CatalogueStats,
    /// The `coordinator` label of every series ([`Discovery::with_metrics_name`]).
    label: Option<metrics::Label>,
    /// Fetcher panics since the last warning of them, and when that was.
    panics: (u64, Option<Instant>),
}

impl<F: Fetcher> fmt::Debug for Discovery<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("catalogue", &self.catalogue)
            .field("running", &self.running.len())
            .finish_non_exhaustive()
    }
}

/// Polls a future, catching a panic in it as `Err(message)`, so one panicking fetch does not
/// take the actor (and every later refresh) down with it.
struct CatchUnwind<Fut>(Pin<Box<Fut>>);

impl<Fut: Future> Future for CatchUnwind<Fut> {
    type Output = Result<Fut::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".to_string());
                Poll::Ready(Err(message))
            }
        }
    }
}

/// At most one warning of fetcher panics in this long: a source that is down can make every
/// fetch of a pass panic, and each is counted as a failed fetch anyway.
const PANIC_WARNING_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest panic message kept (in the warning and the fetch's error), in characters.
const PANIC_MESSAGE_CHARS: usize = 200;

/// How often the cache gauges are refreshed when nothing changes.
const GAUGE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(15);

/// The actor's clock: tokio's, so tests can pause and advance time.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl<F: Fetcher> Discovery<F> {
    /// Warns of a fetcher panic, at most once in [`PANIC_WARNING_EVERY`], with the count since
    /// the last warning.
    fn said_panic(&mut self, id: &CandidateId, panic: &str) {
        let now = now();
        self.panics.0 += 1;
        if self
            .panics
            .1
            .is_none_or(|said| now.duration_since(said) >= PANIC_WARNING_EVERY)
        {
            tracing::warn!(
                candidate = %id,
                panic,
                panics = self.panics.0,
                "discovery fetcher panicked ({} time(s) since the last warning, each counted as \
                 a failed fetch; the next warning in a minute at the earliest)",
                self.panics.0
            );
            self.panics = (0, Some(now));
        }
    }

    /// Discovery over `candidates`, fetching with `fetcher`, pushing changes to `sink`.
    /// The shuffle order comes from entropy; use [`Discovery::with_seed`] to fix it.
    pub fn new<S: CandidateSink>(
        config: DiscoveryConfig,
        candidates: Vec<CandidateId>,
        fetcher: F,
        sink: S,
    ) -> Result<Self, DiscoveryError> {
        Ok(Discovery {
            catalogue: Catalogue::new(config, now(), rand::make_rng::<SmallRng>())?,
            fetcher: Arc::new(fetcher),
            sink: Box::new(sink),
            initial: candidates,
            running: HashMap::new(),
            timer: None,
            reported: CatalogueStats::default(),
            label: None,
            panics: (0, None),
        })
    }

    /// Labels every discovery series `coordinator="<name>"` (builder style), as
    /// [`CoordinatorMetrics::named`](crate::metrics::CoordinatorMetrics::named) labels the
    /// coordinator's it feeds: for a process running several coordinators, each with its
    /// discovery.
    pub fn with_metrics_name(mut self, name: &str) -> Self {
        self.label = Some(crate::metrics::coordinator_label(name));
        self
    }

    /// Fixes the shuffle order's seed (builder style).
    pub fn with_seed(mut self, seed: u64) -> Self {
        let config = self.catalogue.config().clone();
        if let Ok(c) = Catalogue::new(config, now(), SmallRng::seed_from_u64(seed)) {
            self.catalogue = c;
        }
        self
    }

    /// Carries out the catalogue's actions, records metrics and re-arms the timer.
    fn drive(&mut self, ctx: &mut Context<Self>) {
        let mut changed = false;
        while let Some(action) = self.catalogue.poll_action() {
            changed |= !matches!(action, Action::Fetch(_) | Action::Cancel(_));
            match action {
                Action::Fetch(id) => {
                    let fetcher = Arc::clone(&self.fetcher);
                    let key = id.clone();
                    let slot = id.clone();
                    let fut = CatchUnwind(Box::pin(async move { fetcher.fetch(&key).await }));
                    let handle = ctx.spawn(fut.into_actor(self).map(
                        move |result, act: &mut Self, ctx| {
                            let result = result.unwrap_or_else(|panic| {
                                let panic = super::shortened(&panic, PANIC_MESSAGE_CHARS);
                                act.said_panic(&id, &panic);
                                Err(FetchError::Failed(format!("fetcher panicked: {panic}")))
                            });
                            act.running.remove(&id);
                            if act.stop_if_unreachable(ctx) {
                                return;
                            }
                            act.catalogue.fetched(&id, result, now());
                            act.drive(ctx);
                        },
                    ));
                    // actix first polls a spawned future after this handler returns, so the
                    // handle is stored before the result callback can remove it.
                    self.running.insert(slot, handle);
                }
                Action::Cancel(id) => {
                    if let Some(handle) = self.running.remove(&id) {
                        ctx.cancel_future(handle);
                    }
                }
                Action::Add(info) => self.sink.apply(CandidateChange::Add(info)),
                Action::Update(info) => self.sink.apply(CandidateChange::Update(info)),
                Action::Remove(id) => self.sink.apply(CandidateChange::Remove(id)),
                Action::RefreshDone(report) => {
                    crate::metrics::recording_as(self.label.as_ref(), || {
                        metrics::histogram!(METRIC_REFRESH_DURATION)
                            .record(report.duration.as_secs_f64());
                    });
                    tracing::debug!(?report, "discovery refresh done");
                }
            }
        }
        self.record_metrics(changed);
        self.arm_timer(ctx);
    }

    /// Counters and the in-flight gauge every time; the cache gauges (a scan of the cache)
    /// only when the coordinator's set changed (and every [`GAUGE_INTERVAL`]), under the
    /// coordinator's name when one is given.
    fn record_metrics(&mut self, changed: bool) {
        let label = self.label.clone();
        crate::metrics::recording_as(label.as_ref(), || self.record_metrics_now(changed));
    }

    fn record_metrics_now(&mut self, changed: bool) {
        let s = self.catalogue.stats();
        let r = self.reported;
        for (result, now, before) in [
            ("ok", s.ok, r.ok),
            ("error", s.errors, r.errors),
            ("timeout", s.timeouts, r.timeouts),
            ("invalid", s.invalid, r.invalid),
        ] {
            if now > before {
                metrics::counter!(METRIC_REQUESTS, "result" => result).increment(now - before);
            }
        }
        self.reported = s;
        metrics::gauge!(METRIC_IN_FLIGHT).set(self.catalogue.in_flight() as f64);
        if changed {
            let t = now();
            metrics::gauge!(METRIC_CACHE_SIZE).set(self.catalogue.cache_size() as f64);
            let age = self
                .catalogue
                .oldest_age(t)
                .map_or(0.0, |d| d.as_secs_f64());
            metrics::gauge!(METRIC_CACHE_AGE).set(age);
        }
    }

    /// Stops the actor once no address of it is left (its timers would otherwise keep it
    /// fetching for ever); answers whether it did.
    fn stop_if_unreachable(&mut self, ctx: &mut Context<Self>) -> bool {
        if ctx.connected() {
            return false;
        }
        tracing::debug!("discovery stops: no address of it is left");
        ctx.stop();
        true
    }

    fn arm_timer(&mut self, ctx: &mut Context<Self>) {
        let next = self.catalogue.next_deadline();
        if self.timer.as_ref().map(|(t, _)| *t) == next {
            return;
        }
        if let Some((_, handle)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        if let Some(at) = next {
            let delay = at.saturating_duration_since(now());
            let handle = ctx.run_later(delay, |act, ctx| {
                act.timer = None;
                if act.stop_if_unreachable(ctx) {
                    return;
                }
                act.catalogue.tick(now());
                act.drive(ctx);
            });
            self.timer = Some((at, handle));
        }
    }
}

impl<F: Fetcher> Actor for Discovery<F> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The cache age grows between changes; keep the gauge current.
        // It also notices, at the latest, when every address is gone.
        ctx.run_interval(GAUGE_INTERVAL, |act, ctx| {
            if !act.stop_if_unreachable(ctx) {
                act.record_metrics(true);
            }
        });
        let initial = std::mem::take(&mut self.initial);
        self.catalogue.set_candidates(initial, now());
        self.drive(ctx);
    }
}

impl<F: Fetcher> Handler<Demand> for Discovery<F> {
    type Result = usize;

    fn handle(&mut self, msg: Demand, ctx: &mut Context<Self>) -> usize {
        let n = self.catalogue.demand(&msg.required, now());
        self.drive(ctx);
        n
    }
}

impl<F: Fetcher> Handler<Pool> for Discovery<F> {
    type Result = MessageResult<Pool>;

    fn handle(&mut self, msg: Pool, ctx: &mut Context<Self>) -> Self::Result {
        let t = now();
        self.catalogue.demand(&msg.required, t);
        let pool = self
            .catalogue
            .eligible(&msg.required, t)
            .into_iter()
            .cloned()
            .collect();
        self.drive(ctx);
        MessageResult(pool)
    }
}

impl<F: Fetcher> Handler<PoolLow> for Discovery<F> {
    type Result = ();

    fn handle(&mut self, _: PoolLow, ctx: &mut Context<Self>) {
        self.catalogue.pool_low(now());
        self.drive(ctx);
    }
}

impl<F: Fetcher> Handler<RefreshNow> for Discovery<F> {
    type Result = ();

    fn handle(&mut self, _: RefreshNow, ctx: &mut Context<Self>) {
        self.catalogue.refresh_now(now());
        self.drive(ctx);
    }
}

impl<F: Fetcher> Handler<SetCandidates> for Discovery<F> {
    type Result = ();

    fn handle(&mut self, msg: SetCandidates, ctx: &mut Context<Self>) {
        self.catalogue.set_candidates(msg.0, now());
        self.drive(ctx);
    }
}

impl<F: Fetcher> Handler<SetPerfScores> for Discovery<F> {
    type Result = ();

    fn handle(&mut self, msg: SetPerfScores, ctx: &mut Context<Self>) {
        self.catalogue
            .set_perf_scores(&msg.region, msg.scores, now());
        self.drive(ctx);
    }
}

impl<F: Fetcher> Handler<Snapshot> for Discovery<F> {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        let t = now();
        MessageResult(DiscoveryStatus {
            stats: self.catalogue.stats(),
            cache_size: self.catalogue.cache_size(),
            known: self.catalogue.known().len(),
            in_flight: self.catalogue.in_flight(),
            refreshing: self.catalogue.refreshing(),
            paused: self.catalogue.paused(t),
        })
    }
}

/// [`Stop`] (the coordinator's message) stops discovery too: running fetches are dropped, no
/// pass or timer runs again and the sink gets no more changes (the coordinator keeps the
/// candidates it has). Dropping every address (`Addr`, `Recipient`) also stops it, at its
/// next timer or fetch answer and at most 15 s later.
impl<F: Fetcher> Handler<Stop> for Discovery<F> {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
