//! The actor's clock and its one timer.
//!
//! Every handler reads the time through [`now`]: tokio's clock, so a test that pauses it
//! (`tokio::time::pause`) drives the coordinator in virtual time and never sleeps for real.
//!
//! The core says when it next needs to be called ([`Core::next_wakeup`]: the earliest waiting
//! deadline, the oldest attempt's lease end, or its next refresh). The actor keeps one
//! timer, armed at the earliest of that instant and its own two chores, and replaces it
//! whenever that moves (re-read after every core call, in `settle`):
//!
//! - **housekeeping**, every `refresh_ms` of the config: cancel waiting requests whose worker
//!   went away, drop subscribers that left, emit the gauges;
//! - **periodic snapshots**, when [`Coordinator::with_snapshots`] asked for them: the snapshot
//!   is taken on the actor, the write runs on tokio's blocking pool (see `saver.rs`).
//!
//! A chore whose next due time does not fit the clock (a period such as `Duration::MAX`) is
//! never due again: due times are added with `checked_add`, never `+`.
//!
//! [`Core::next_wakeup`]: crate::core::Core::next_wakeup

use std::time::{Duration, Instant};

use actix::{ActorContext, AsyncContext, Context};

use super::Coordinator;
use crate::core::RequestId;

/// The actor's clock: tokio's, as a [`std::time::Instant`]. The only place the actor reads the
/// time (the decision-cost metric aside, which measures real time spent).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// How late past its due time the timer (or any call, the timer being always armed) must
/// find the clock for the actor to take it that it was stopped meanwhile (a paused process or
/// machine, a suspended laptop): the running attempts' clocks then skip the pause
/// ([`Core::driver_paused`](crate::core::Core::driver_paused)).
pub(crate) const PAUSED_AFTER: Duration = Duration::from_secs(2);

/// The one armed timer and the actor's own chores' next due times.
#[derive(Debug, Default)]
pub(crate) struct Timer {
    /// The instant the armed timer fires at, and its handle.
    armed: Option<(Instant, actix::SpawnHandle)>,
    /// When the last armed timer was due (not before it was armed), until a call checks it
    /// for a pause.
    due: Option<Instant>,
    /// When the actor last called the core: a flooded mailbox delays the timer (actix reads
    /// messages before timers) but keeps this fresh, a stopped process does not.
    ran: Option<Instant>,
    /// When housekeeping is next due (set when the actor starts).
    housekeeping_due: Option<Instant>,
    /// When the gauges are next due: at housekeeping, but no more often than the core's
    /// coarse refresh, which a large fleet stretches (`refresh_per_candidate_us`): setting
    /// them walks every candidate.
    gauges_due: Option<Instant>,
    /// When the next periodic snapshot is due, if periodic snapshots are on.
    snapshot_due: Option<Instant>,
}

impl Timer {
    /// Forgets the armed timer and the due times (the actor is restarting; its spawned
    /// futures are gone).
    pub(crate) fn reset(&mut self) {
        *self = Timer::default();
    }
}

impl Coordinator {
    /// The housekeeping period: the config's `refresh_ms`.
    fn housekeeping_every(&self) -> Duration {
        Duration::from_millis(self.core.config().refresh_ms.max(1))
    }

    /// The snapshot period, when periodic snapshots are on.
    fn snapshot_every(&self) -> Option<Duration> {
        let every = self.persistence.as_ref().and_then(|p| p.every)?;
        Some(every.max(Duration::from_millis(1)))
    }

    /// When housekeeping is next due after `now`; `None` (never) past the clock's range.
    fn next_housekeeping(&self, now: Instant) -> Option<Instant> {
        now.checked_add(self.housekeeping_every())
    }

    /// When the next periodic snapshot is due after `now`: `None` when they are off, or when
    /// the period reaches past the clock's range (`Duration::MAX`: never).
    fn next_snapshot(&self, now: Instant) -> Option<Instant> {
        self.snapshot_every()
            .and_then(|every| now.checked_add(every))
    }

    /// Schedules the chores from `now` (when the actor starts) and arms the timer.
    pub(crate) fn start_timer(&mut self, ctx: &mut Context<Self>) {
        let now = now();
        self.timer.housekeeping_due = self.next_housekeeping(now);
        self.timer.snapshot_due = self.next_snapshot(now);
        self.arm_timer(ctx);
    }

    /// Arms the one timer at the earliest thing due, replacing the armed one if that moved.
    pub(crate) fn arm_timer(&mut self, ctx: &mut Context<Self>) {
        let at = [self.timer.housekeeping_due, self.timer.snapshot_due]
            .into_iter()
            .flatten()
            .fold(self.core.next_wakeup(), Instant::min);
        if let Some((armed, handle)) = self.timer.armed {
            if armed == at {
                return;
            }
            ctx.cancel_future(handle);
        }
        let now = now();
        self.timer.due = Some(at.max(now));
        let delay = at.saturating_duration_since(now);
        let handle = ctx.run_later(delay, |act, ctx| {
            act.timer.armed = None;
            act.on_timer(ctx);
        });
        self.timer.armed = Some((at, handle));
    }

    /// Tells the core of a pause when `now` is more than [`PAUSED_AFTER`] past both the armed
    /// timer's due time and the actor's last call to the core: the actor was stopped, since
    /// the timer would have run and nothing else did. Once per arming.
    pub(crate) fn check_paused(&mut self, now: Instant) {
        let ran = self.timer.ran.replace(now);
        let Some(due) = self.timer.due else {
            return;
        };
        // Late past the due time and past the last call: nothing ran in between.
        let late = now.saturating_duration_since(ran.map_or(due, |r| r.max(due)));
        if late > PAUSED_AFTER {
            self.timer.due = None;
            tracing::info!(
                paused_s = late.as_secs_f64(),
                "coordinator: stopped for a while; running attempts skip the pause"
            );
            self.core.driver_paused(late, now);
        }
    }

    /// Ends `request` if nobody is left to hear about it (its reply is closed): one that waits
    /// is cancelled; one kept open (`Next::Keep`) with nothing waiting or running is finished,
    /// or it would stay open for good. Counted in `abandoned`; whether it ended.
    pub(crate) fn end_if_abandoned(&mut self, request: RequestId, now: Instant) -> bool {
        let closed = self
            .ledger
            .reply_mut(request)
            .is_some_and(|r| r.is_closed());
        let (Some(waiting), Some(running)) = (
            self.core.waiting_asks(request),
            self.core.running_attempts(request),
        ) else {
            return false;
        };
        let ended = match (closed, waiting > 0, running == 0) {
            (true, true, _) => self.core.cancel(request, now).is_ok(),
            (true, false, true) => self.core.finish(request).is_ok(),
            _ => false,
        };
        if ended {
            self.shell.abandoned += 1;
        }
        ended
    }

    /// The timer fired: housekeeping, the core's tick and a snapshot, each if due.
    fn on_timer(&mut self, ctx: &mut Context<Self>) {
        let now = now();
        // Before anything re-arms the timer (which forgets how late this one ran).
        self.check_paused(now);
        let housekeeping = self.timer.housekeeping_due.is_some_and(|due| due <= now);
        if housekeeping && !ctx.connected() {
            // No address, handle or permit is left: nobody can ask anything more. The timer
            // re-arming itself would keep the actor (its snapshot file, its thread) alive for
            // good; it stops instead, saving its snapshot as at any stop.
            tracing::debug!("coordinator stops: no address of it is left");
            ctx.stop();
            return;
        }
        if housekeeping {
            self.timer.housekeeping_due = self.next_housekeeping(now);
            // Open requests whose worker is gone.
            let gone: Vec<_> = self
                .ledger
                .iter_mut()
                .filter(|(_, reply)| reply.is_closed())
                .map(|(request, _)| request)
                .collect();
            for request in gone {
                self.end_if_abandoned(request, now);
            }
            self.carried.prune(&self.core);
            if self.subscribers.prune() {
                self.core.set_record_rate(self.subscribers.core_rate());
            }
        }
        let snapshot = self.timer.snapshot_due.is_some_and(|due| due <= now);
        if snapshot {
            self.timer.snapshot_due = self.next_snapshot(now);
        }
        if self.core.next_wakeup() <= now {
            self.timed(|core, rng, now| core.tick(now, rng));
        }
        // Delivers what the tick decided and re-arms the timer.
        self.settle(ctx);
        if housekeeping && self.timer.gauges_due.is_none_or(|due| due <= now) {
            self.metrics.on_gauges(&self.core);
            self.snapshot_metrics();
            let every = self
                .core
                .config()
                .refresh_period_s(self.core.candidate_count());
            // A period past what an Instant can hold sets them at every housekeeping.
            self.timer.gauges_due = Duration::try_from_secs_f64(every)
                .ok()
                .and_then(|d| now.checked_add(d));
        }
        if snapshot {
            // Written on tokio's blocking pool; counted and logged there, and a failed or
            // skipped save is tried again the next period.
            self.save_snapshot_periodic();
        }
    }
}
