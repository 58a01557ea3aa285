//! The actix [`Coordinator`] actor, its messages, permits and the async handle.
//!
//! The actor is a thin driver around the pure [`Core`]: each handler reads the clock once,
//! forwards the message to the core with that `now` and the actor's RNG, then drains the
//! core's events and delivers them. Nothing about choosing a candidate lives here.
//!
//! # Message flow
//!
//! ```text
//!  worker                      Coordinator (actor)                 Core
//!  ──────                      ───────────────────                 ────
//!  Ready{request, recipient} ─▶ core.ready(request, now, rng) ───▶ queue, draw per free slot
//!                               drain core.poll_event():
//!  Answer::Granted(Permit)   ◀─   Granted  → Permit{attempt, candidate, coordinator}
//!  Answer::Rejected{reason}  ◀─   Rejected → reason
//!  permit.first_byte()       ─▶ core.first_byte(attempt)        ─▶ no longer waiting (optional)
//!  permit.report(outcome)    ─▶ core.outcome(attempt, outcome)  ─▶ statistics → scores
//!  permit.done(next)         ─▶ core.done(attempt, next)        ─▶ slot free → next grant
//!  (drop permit)             ─▶ core.done(attempt, Finish)         (no report: no statistics)
//! ```
//!
//! - **Grants to a gone worker are taken back.** If the worker's mailbox is closed when a grant
//!   is delivered, the attempt is released at once and the slot goes to the next waiter. A
//!   grant queued in a mailbox that closes later is dropped with it, and dropping a [`Permit`]
//!   releases its slot, so a worker that stops mid-attempt never leaks a slot.
//! - **One timer, on tokio's clock.** The core says when it next needs [`Core::tick`]
//!   ([`Core::next_wakeup`]: the earliest waiting deadline, the oldest attempt's lease end
//!   ([`Limits::max_attempt_s`]), or its next score refresh, which also ends ejections). The actor
//!   keeps a single timer armed at the earliest of that and its own chores (every `refresh_ms`:
//!   gauges, cancelling waiting requests whose worker went away; periodic snapshots), and
//!   replaces it when that moves. Every handler reads the time from tokio's clock through one
//!   function, so tests run the actor on paused time (`tokio::time::pause`).
//! - **Bad input never panics.** Errors from worker messages (a stray `Done`, a second report)
//!   are counted in [`ShellCounters`] and ignored; messages that have a result also return it.
//! - **Decision records** are built only while someone subscribes ([`Subscribe`] for actors,
//!   [`SubscribeChannel`] for tokio code), at the highest rate asked for.
//! - **Crashes lose only what was learned since the last snapshot.** Started with
//!   [`Coordinator::start_supervised`], the actor restarts after a stop or crash, rebuilt from
//!   the snapshot of [`Coordinator::with_snapshots`] (saved periodically, on stop and at
//!   System shutdown); waiting requests are answered with
//!   [`Rejection::CoordinatorRestarted`], and the attempts of permits of the earlier
//!   incarnation are carried into the new core (their slots stay held, their reports are
//!   learned). See `docs/reliability.md`.
//! - **Snapshot writes leave the actor free.** A periodic or requested ([`SaveSnapshot`])
//!   save takes the snapshot on the actor and writes it on tokio's blocking pool, one write at
//!   a time and never an older snapshot over a newer one; only the save at stop writes on the
//!   actor's thread, so it is on disk before the actor is gone.
//! - **Code without actors** uses [`CoordinatorHandle`]: [`CoordinatorHandle::acquire`]
//!   returns the same [`Permit`], and the operator messages have methods with one error type
//!   ([`HandleError`]).
//! - **An actix `System` must be running** where the coordinator starts
//!   ([`Coordinator::start`] and the other `start` methods panic outside one). A service on
//!   plain tokio starts it with [`Coordinator::start_in_thread`], on a thread with a `System`
//!   of its own, and uses the handle from any runtime.
//!
//! # Embedding the coordinator in an actix application
//!
//! ```
//! use actix::prelude::*;
//! use selection_coordinator::actor::{Answer, Coordinator, GetState, Ready};
//! use selection_coordinator::{CandidateInfo, Config, Limits, Outcome, Request};
//!
//! /// A worker that runs one attempt per grant.
//! struct Worker;
//! impl Actor for Worker {
//!     type Context = Context<Self>;
//! }
//! impl Handler<Answer> for Worker {
//!     type Result = ();
//!     fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
//!         if let Answer::Granted(mut permit) = answer {
//!             // ... run the attempt against permit.candidate(); with no first byte by
//!             // permit.deadline() (advice), report a timeout and retry ...
//!             permit.report(Outcome::success_with(12.0, 30.0, 4096, 45.0));
//!             // Dropping the permit releases the slot; `permit.done(next)` says more.
//!         }
//!     }
//! }
//!
//! actix::System::new().block_on(async {
//!     let limits = Limits { global: 2, ..Limits::default() };
//!     let coordinator = Coordinator::with_seed(Config::default(), limits, 7)?
//!         .with_candidate(CandidateInfo::new("a"))?
//!         .with_candidate(CandidateInfo::new("b").with_tag("verified"))?
//!         .start();
//!     let worker = Worker.start();
//!     for _ in 0..3 {
//!         coordinator
//!             .send(Ready::new(Request::any(), worker.clone().recipient()))
//!             .await??;
//!     }
//!     // Let the worker run; every attempt ends and the state shows it.
//!     actix::clock::sleep(std::time::Duration::from_millis(50)).await;
//!     let state = coordinator.send(GetState).await?;
//!     assert_eq!(state.counters.decisions, 3);
//!     assert_eq!(state.in_flight, 0);
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })
//! .unwrap();
//! ```

mod carry;
mod handle;
mod handlers;
mod ledger;
mod messages;
mod permit;
mod persist;
mod records;
mod saver;
mod share;
mod state;
mod thread;
mod timer;

use std::time::Instant;

use actix::{Actor, Addr, AsyncContext, Context, Supervised, Supervisor};
use rand::rngs::SmallRng;
use rand::SeedableRng;

pub use handle::{AcquireError, CoordinatorGone, CoordinatorHandle, HandleError};
#[doc(hidden)]
pub use messages::Crash;
pub use messages::{
    AddCandidate, Cancel, Decision, Done, Explain, Finish, FirstByte, GetState, Ready, Reask,
    RemoveCandidate, Report, RestoreSnapshot, SaveSnapshot, SetArmShare, SetConfig, SetLimits,
    Stop, Subscribe, SubscribeChannel, TakeSnapshot, UpdateCandidate,
};
pub use permit::{Answer, Permit};
pub use persist::{LoadOutcome, SnapshotStatus};
pub use share::{ApplyDigest, SetShareIdentity, TakeDigest, TakeUrgentDigest, WatchUrgentDigests};
pub use state::{CandidateState, ShellCounters, State};

use crate::core::{CandidateInfo, CloseReason, Core, Event, Limits, Next};
use crate::error::{Error, Rejection};
use crate::metrics::CoordinatorMetrics;
use crate::score::Config;
use ledger::Ledger;
use persist::Persistence;
use records::Subscribers;
use timer::{now, Timer};

/// The coordinator actor: owns the [`Core`], its RNG, timers, metrics and subscribers.
/// See the [module docs](self) for the message flow.
#[derive(Debug)]
pub struct Coordinator {
    core: Core,
    rng: SmallRng,
    metrics: CoordinatorMetrics,
    ledger: Ledger,
    subscribers: Subscribers,
    shell: ShellCounters,
    /// The one timer: the core's next wake-up, housekeeping and periodic snapshots.
    timer: Timer,
    /// Bumped at every restart; permits carry the one that granted them.
    incarnation: u64,
    /// Attempts of earlier incarnations the core took over, by the permits' ids.
    carried: carry::Carried,
    persistence: Option<Persistence>,
    snapshots: SnapshotStatus,
    /// Set by a simulated crash: stop without the farewell save.
    crashing: bool,
    mailbox_capacity: Option<usize>,
    /// Notified when the core has an urgent digest ([`WatchUrgentDigests`]); `None` until a
    /// transport asks.
    urgent: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Dropped with the coordinator: its receivers learn it is gone (its stop save written).
    gone: tokio::sync::watch::Sender<()>,
    /// Started under a supervisor: a stop is a restart.
    supervised: bool,
}

impl Coordinator {
    /// A coordinator whose draws use an RNG seeded from entropy.
    pub fn new(config: Config, limits: Limits) -> Result<Self, Error> {
        Self::with_rng(config, limits, rand::make_rng::<SmallRng>())
    }

    /// A coordinator whose draws are reproducible from `seed`.
    pub fn with_seed(config: Config, limits: Limits, seed: u64) -> Result<Self, Error> {
        Self::with_rng(config, limits, SmallRng::seed_from_u64(seed))
    }

    fn with_rng(config: Config, limits: Limits, rng: SmallRng) -> Result<Self, Error> {
        let mut core = Core::new(config, now())?.with_limits(limits)?;
        // The ledger forgets a request when the core says it ended.
        core.set_close_events(true);
        Ok(Coordinator {
            core,
            rng,
            metrics: CoordinatorMetrics::new(crate::metrics::DEFAULT_LABEL_CAP),
            ledger: Ledger::default(),
            subscribers: Subscribers::default(),
            shell: ShellCounters::default(),
            timer: Timer::default(),
            incarnation: 0,
            carried: carry::Carried::default(),
            persistence: None,
            snapshots: SnapshotStatus::default(),
            crashing: false,
            mailbox_capacity: None,
            urgent: None,
            gone: tokio::sync::watch::channel(()).0,
            supervised: false,
        })
    }

    /// Adds a candidate before the actor starts (builder style).
    pub fn with_candidate(mut self, info: CandidateInfo) -> Result<Self, Error> {
        self.core.add_candidate(info, now(), &mut self.rng)?;
        Ok(self)
    }

    /// Replaces the metrics recorder (for example to change the candidate label cap).
    pub fn with_metrics(mut self, metrics: CoordinatorMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The largest mailbox capacity, 2^20 messages: actix counts every address against the
    /// capacity and cannot hold one near `usize::MAX`.
    pub const MAX_MAILBOX_CAPACITY: usize = 1 << 20;

    /// Sets how many messages sent with `send` may queue before senders wait (actix's default
    /// is 16), clamped to 1 ..= [`Coordinator::MAX_MAILBOX_CAPACITY`]. `do_send`, which
    /// permits and grants use, is never held back.
    pub fn with_mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = Some(capacity.clamp(1, Self::MAX_MAILBOX_CAPACITY));
        self
    }

    /// Starts the actor on the current actix `System` and returns its address (the same as
    /// [`Actor::start`], documented here).
    ///
    /// # Panics
    ///
    /// Outside a running actix `System` (tokio's `spawn_local called from outside of a
    /// task::LocalSet`): call it inside `#[actix::main]`, `#[actix::test]`,
    /// `actix::System::new().block_on(..)` or an `actix_rt` runtime. A service on plain tokio
    /// uses [`Coordinator::start_in_thread`] instead.
    pub fn start(self) -> Addr<Coordinator> {
        Actor::start(self)
    }

    /// Starts the actor and returns a handle for code without actors.
    ///
    /// # Panics
    ///
    /// Outside a running actix `System`, as [`Coordinator::start`]; see
    /// [`Coordinator::start_in_thread`] for plain tokio.
    pub fn start_handle(self) -> CoordinatorHandle {
        CoordinatorHandle::new(self.start())
    }

    /// Starts the actor under an actix [`Supervisor`]: when it stops (a crash, or [`Stop`])
    /// while any address of it is alive, it restarts with the same mailbox, rebuilt from the
    /// last saved snapshot (see [`Coordinator::with_snapshots`]). Requests that were waiting
    /// are answered with [`Rejection::CoordinatorRestarted`]; the attempts of permits granted
    /// before the restart are carried into the new core, which holds their slots until they
    /// are released and learns their reports ([`ShellCounters::carried`]).
    ///
    /// # Panics
    ///
    /// Outside a running actix `System`, as [`Coordinator::start`].
    pub fn start_supervised(mut self) -> Addr<Coordinator> {
        self.supervised = true;
        Supervisor::start(move |_| self)
    }

    /// [`Coordinator::start_supervised`], returning a handle for code without actors.
    ///
    /// # Panics
    ///
    /// Outside a running actix `System`, as [`Coordinator::start`].
    pub fn start_supervised_handle(self) -> CoordinatorHandle {
        CoordinatorHandle::new(self.start_supervised())
    }

    /// Runs one core call at the actor's [`now`](timer::now): the one path through which every
    /// handler gives the core the time.
    fn call<T>(&mut self, f: impl FnOnce(&mut Core, &mut SmallRng, Instant) -> T) -> T {
        let now = now();
        self.check_paused(now);
        f(&mut self.core, &mut self.rng, now)
    }

    /// [`Coordinator::call`] for a call that may draw, timing it in real time for the
    /// decision-cost metric.
    fn timed<T>(&mut self, f: impl FnOnce(&mut Core, &mut SmallRng, Instant) -> T) -> T {
        let started = Instant::now();
        let out = self.call(f);
        self.metrics
            .on_decision_cost(started.elapsed().as_secs_f64());
        out
    }

    /// Counts an error from the core and drops it: the contract for worker messages.
    fn ignore(&mut self, result: Result<(), Error>) {
        if let Err(e) = result {
            tracing::debug!(error = %e, "coordinator ignored a message");
            self.shell.count(&e);
        }
    }

    /// Counts an error and passes the result on (messages that have a result).
    fn counted<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &result {
            self.shell.count(e);
        }
        result
    }

    /// A management call answered with the core's result: timed, its error counted, and what
    /// it decided delivered.
    fn command<T>(
        &mut self,
        ctx: &mut Context<Self>,
        f: impl FnOnce(&mut Core, &mut SmallRng, Instant) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let result = self.timed(f);
        let result = self.counted(result);
        self.settle(ctx);
        result
    }

    /// After every core call: deliver what the core decided, publish records, re-arm timers.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        while let Some(event) = self.core.poll_event() {
            self.metrics.on_event(&event);
            match event {
                Event::Granted(grant) => {
                    let request = grant.request;
                    let answer =
                        Answer::Granted(Permit::new(grant, self.incarnation, ctx.address()));
                    let undelivered = match self.ledger.reply_mut(request) {
                        Some(reply) => reply.deliver(answer).err().map(|a| *a),
                        None => Some(answer),
                    };
                    if let Some(Answer::Granted(permit)) = undelivered {
                        self.take_back(permit);
                    }
                }
                Event::Rejected { request, reason } => {
                    if let Some(reply) = self.ledger.reply_mut(request) {
                        // A rejection nobody hears needs no follow-up.
                        let _ = reply.deliver(Answer::Rejected { request, reason });
                    }
                }
                // Counted by the metrics above. A reclaimed attempt's permit finds it gone at
                // its own `done` or drop (counted as stale); a timed-out one's released it.
                Event::Reclaimed { .. } | Event::TimedOut(_) => {}
                Event::Closed { request, reason } => {
                    // A worker slower than the lease hears that its request ended, rather than
                    // waiting for an answer to a later `Retry` that can no longer come.
                    if reason == CloseReason::Reclaimed {
                        // Counted only where it is heard: a permit from `acquire` had its
                        // one answer (the grant), so it is not told.
                        if let Some(reply) = self.ledger.reply_mut(request) {
                            let reason = Rejection::Reclaimed;
                            if reply.deliver(Answer::Rejected { request, reason }).is_ok() {
                                self.metrics.on_event(&Event::Rejected { request, reason });
                            }
                        }
                    }
                    self.ledger.closed(request);
                }
            }
        }
        self.publish_records();
        self.arm_timer(ctx);
    }

    /// The worker is gone: free the slot now so it goes to the next waiter (whose grant the
    /// `settle` loop then delivers).
    fn take_back(&mut self, permit: Permit) {
        let attempt = permit.disarm();
        self.shell.taken_back += 1;
        let result = self.timed(|core, rng, now| core.done(attempt, Next::Finish, now, rng));
        if let Err(e) = result {
            self.shell.count(&e);
        }
    }

    fn publish_records(&mut self) {
        let rate = self.subscribers.core_rate();
        let mut left = false;
        while let Some(record) = self.core.poll_record() {
            let out = self.subscribers.publish(record, rate);
            self.shell.records_dropped += out.dropped;
            left |= out.left;
        }
        if left {
            self.core.set_record_rate(self.subscribers.core_rate());
        }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(capacity) = self.mailbox_capacity {
            ctx.set_mailbox_capacity(capacity);
        }
        // The gauges (and the counters at zero) from the start, not from the first tick.
        self.metrics.on_gauges(&self.core);
        self.snapshot_metrics();
        self.start_timer(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // Waiting workers would otherwise wait forever.
        self.answer_waiting();
        if !std::mem::take(&mut self.crashing) {
            // On this thread: the actor must not be gone before its last snapshot is written.
            let _ = self.save_snapshot_now();
        }
    }
}

impl Supervised for Coordinator {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Attempts from before the restart are carried into the new core.
        self.rebuild();
    }
}
