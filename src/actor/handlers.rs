//! One handler per message. Each forwards to the core and then settles (delivers events).

use std::path::PathBuf;

use actix::{ActorContext, Context, Handler, MessageResult, ResponseFuture};
use tokio::sync::mpsc;

use super::messages::{
    Abandon, AddCandidate, Cancel, Crash, Done, Dropped, Explain, Finish, FirstByte, GetState,
    Ready, Reask, RemoveCandidate, Reply, Report, RestoreSnapshot, RetryAcquire, SaveSnapshot,
    SetArmShare, SetConfig, SetLimits, Stop, StopAndWatch, Subscribe, SubscribeChannel,
    TakeSnapshot, UpdateCandidate,
};
use super::state::State;
use super::AcquireError;
use super::Coordinator;
use crate::core::{AttemptId, Next, RequestId};
use crate::decision::DecisionRecord;
use crate::error::{Error, Rejection};
use crate::score::{Config, ConfigError};
use crate::snapshot::SnapshotError;

impl Handler<Ready> for Coordinator {
    type Result = Result<RequestId, Error>;

    fn handle(&mut self, msg: Ready, ctx: &mut Context<Self>) -> Self::Result {
        let Ready { request, reply } = msg;
        if reply.is_single() && request.parallelism > 1 {
            let e = Error::InvalidRequest(format!(
                "acquire returns one permit but the request asks for parallelism {}; \
                 use parallelism 1, or a worker actor with the Ready message",
                request.parallelism
            ));
            return self.counted(Err(e));
        }
        let result = self.timed(|core, rng, now| core.ready(request, now, rng));
        let result = self.counted(result);
        if let Ok(id) = result {
            self.ledger.open(id, reply);
        }
        self.settle(ctx);
        result
    }
}

impl Handler<Report> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Report, _: &mut Context<Self>) {
        let Some(attempt) = self.current(msg.incarnation, msg.attempt) else {
            return;
        };
        let result = self.call(|core, _, now| core.outcome(attempt, msg.outcome, now));
        match result {
            Ok(reported) => {
                self.metrics.on_outcome(&reported, &msg.outcome);
                self.wake_urgent();
            }
            Err(e) => self.ignore(Err(e)),
        }
    }
}

impl Handler<FirstByte> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: FirstByte, _: &mut Context<Self>) {
        let Some(attempt) = self.current(msg.incarnation, msg.attempt) else {
            return;
        };
        let result = self.core.first_byte(attempt);
        self.ignore(result);
    }
}

impl Coordinator {
    /// The attempt a permit's message names in the current core: its own id if this
    /// incarnation granted it, the id it was carried under if an earlier one did; `None`
    /// (counted as stale) for an attempt of an earlier incarnation that was not carried.
    fn current(&mut self, incarnation: u64, attempt: AttemptId) -> Option<AttemptId> {
        if incarnation == self.incarnation {
            return Some(attempt);
        }
        let carried = self.carried.get(incarnation, attempt);
        if carried.is_none() {
            self.shell.stale += 1;
        }
        carried
    }

    /// A permit released its attempt: an attempt carried from an earlier incarnation is
    /// forgotten with it.
    fn released(&mut self, incarnation: u64, attempt: AttemptId) {
        if incarnation != self.incarnation {
            self.carried.forget(incarnation, attempt);
        }
    }

    fn release(&mut self, attempt: AttemptId, next: Next, ctx: &mut Context<Self>) -> bool {
        // An `acquire` caller has nowhere to receive a second grant (unless it asks again).
        let answered = self
            .core
            .attempt_request(attempt)
            .and_then(|request| self.ledger.reply(request))
            .is_some_and(|reply| !reply.can_answer());
        let next = if answered { Next::Finish } else { next };
        let result = self.timed(|core, rng, now| core.done(attempt, next, now, rng));
        let ok = result.is_ok();
        self.ignore(result);
        self.settle(ctx);
        ok
    }
}

impl Handler<Done> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Done, ctx: &mut Context<Self>) {
        let Some(attempt) = self.current(msg.incarnation, msg.attempt) else {
            return;
        };
        self.release(attempt, msg.next, ctx);
        self.released(msg.incarnation, msg.attempt);
    }
}

impl Handler<RetryAcquire> for Coordinator {
    type Result = Result<(), AcquireError>;

    fn handle(&mut self, msg: RetryAcquire, ctx: &mut Context<Self>) -> Self::Result {
        let incarnation = msg.permit.incarnation();
        let granted = msg.permit.disarm();
        let restarted = incarnation != self.incarnation;
        let Some((attempt, request)) = self
            .current(incarnation, granted)
            .and_then(|a| Some((a, self.core.attempt_request(a)?)))
        else {
            // Gone with an earlier incarnation, or taken back at its lease end.
            return Err(AcquireError::Rejected(if restarted {
                Rejection::CoordinatorRestarted
            } else {
                Rejection::Reclaimed
            }));
        };
        let result = match self.ledger.reply_mut(request) {
            Some(reply) if reply.is_single() && self.core.takes_retry(request) => {
                *reply = Reply::Once(Some(msg.reply));
                Ok(Next::Retry)
            }
            // A worker actor's request: its next grant goes to the worker, as with
            // `done(Next::Retry)`.
            Some(reply) if !reply.is_single() => Err((Next::Retry, AcquireError::NotFromAcquire)),
            // Closed (cancelled; or carried over from an earlier incarnation, with no caller
            // to answer): a retry would end it, not ask again.
            _ => Err((
                Next::Finish,
                AcquireError::Rejected(if restarted {
                    Rejection::CoordinatorRestarted
                } else {
                    Rejection::Cancelled
                }),
            )),
        };
        let next = match &result {
            Ok(next) | Err((next, _)) => *next,
        };
        self.release(attempt, next, ctx);
        self.released(incarnation, granted);
        result.map(|_| ()).map_err(|(_, e)| e)
    }
}

impl Handler<Dropped> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Dropped, ctx: &mut Context<Self>) {
        let Some(attempt) = self.current(msg.incarnation, msg.attempt) else {
            return;
        };
        if self.release(attempt, Next::Finish, ctx) {
            self.shell.permits_dropped += 1;
        }
        self.released(msg.incarnation, msg.attempt);
    }
}

impl Handler<Cancel> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: Cancel, ctx: &mut Context<Self>) -> Self::Result {
        let result = self.call(|core, _, now| core.cancel(msg.request, now));
        let result = self.counted(result);
        self.settle(ctx);
        result
    }
}

impl Handler<Abandon> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Abandon, ctx: &mut Context<Self>) {
        // Nothing happens when the answer went out first (the request is granted or gone):
        // then the grant was taken back already, or the request ended.
        if self.end_if_abandoned(msg.0, super::timer::now()) {
            self.settle(ctx);
        }
    }
}

impl Handler<Reask> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: Reask, ctx: &mut Context<Self>) -> Self::Result {
        self.command(ctx, |core, rng, now| core.reask(msg.request, now, rng))
    }
}

impl Handler<Finish> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: Finish, ctx: &mut Context<Self>) -> Self::Result {
        let result = self.core.finish(msg.request);
        let result = self.counted(result);
        // Tells the ledger if the request ended.
        self.settle(ctx);
        result
    }
}

impl Handler<AddCandidate> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: AddCandidate, ctx: &mut Context<Self>) -> Self::Result {
        self.command(ctx, |core, rng, now| core.add_candidate(msg.0, now, rng))
    }
}

impl Handler<UpdateCandidate> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: UpdateCandidate, ctx: &mut Context<Self>) -> Self::Result {
        self.command(ctx, |core, rng, now| core.update_candidate(msg.0, now, rng))
    }
}

impl Handler<RemoveCandidate> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: RemoveCandidate, ctx: &mut Context<Self>) -> Self::Result {
        self.command(ctx, |core, rng, now| {
            core.remove_candidate(&msg.0, now, rng)
        })
    }
}

impl Handler<SetLimits> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: SetLimits, ctx: &mut Context<Self>) -> Self::Result {
        self.command(ctx, |core, rng, now| core.set_limits(msg.0, now, rng))
    }
}

impl Handler<SetConfig> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: SetConfig, ctx: &mut Context<Self>) -> Self::Result {
        self.apply_config(msg.0, ctx)
    }
}

impl Handler<SetArmShare> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: SetArmShare, ctx: &mut Context<Self>) -> Self::Result {
        let mut config = self.core.config().clone();
        let Some(arm) = config.arms.iter_mut().find(|a| a.name == msg.arm) else {
            let known: Vec<&str> = self.core.arm_names();
            let e = ConfigError::single(
                "arms",
                format!(
                    "no arm named `{}`; the arms are: {}",
                    msg.arm,
                    if known.is_empty() {
                        "none (the config has no arms)".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            );
            return self.counted(Err(e.into()));
        };
        arm.share = msg.share;
        self.apply_config(config, ctx)
    }
}

impl Coordinator {
    /// Hot reload: the one path for every config change. The core validates and keeps
    /// statistics, waiting requests and attempts; an invalid config leaves the old one.
    fn apply_config(&mut self, config: Config, ctx: &mut Context<Self>) -> Result<(), Error> {
        // Shadow counts restart with the new config: count what the old one saw first.
        self.metrics.on_shadows(&self.core);
        let result = self.timed(|core, rng, now| core.set_config(config, now, rng));
        let result = self.counted(result);
        if result.is_ok() {
            self.metrics.on_config_set(&self.core);
        }
        self.settle(ctx);
        result
    }
}

impl Handler<GetState> for Coordinator {
    type Result = MessageResult<GetState>;

    fn handle(&mut self, _: GetState, _: &mut Context<Self>) -> Self::Result {
        MessageResult(State::read(
            &self.core,
            self.ledger.len(),
            self.shell,
            self.subscribers.len(),
            self.incarnation,
            self.snapshot_status(),
        ))
    }
}

impl Handler<Explain> for Coordinator {
    type Result = Result<DecisionRecord, Error>;

    fn handle(&mut self, msg: Explain, _: &mut Context<Self>) -> Self::Result {
        let result = self.call(|core, _, now| core.explain(&msg.0, now));
        self.counted(result)
    }
}

/// A subscription in a build without decision records would wait for records that never come.
fn warn_if_records_compiled_out() {
    #[cfg(not(feature = "decision-records"))]
    tracing::warn!(
        "decision records are compiled out (feature `decision-records` off): this subscription \
         receives nothing"
    );
}

impl Handler<Subscribe> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        warn_if_records_compiled_out();
        self.subscribers.add_actor(msg.subscriber, msg.rate);
        self.core.set_record_rate(self.subscribers.core_rate());
    }
}

impl Handler<SubscribeChannel> for Coordinator {
    type Result = MessageResult<SubscribeChannel>;

    fn handle(&mut self, msg: SubscribeChannel, _: &mut Context<Self>) -> Self::Result {
        warn_if_records_compiled_out();
        let (tx, rx) = mpsc::channel::<DecisionRecord>(msg.bounded_capacity());
        self.subscribers.add_channel(tx, msg.rate);
        self.core.set_record_rate(self.subscribers.core_rate());
        MessageResult(rx)
    }
}

impl Handler<Stop> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<StopAndWatch> for Coordinator {
    type Result = MessageResult<StopAndWatch>;

    fn handle(&mut self, _: StopAndWatch, ctx: &mut Context<Self>) -> Self::Result {
        ctx.stop();
        MessageResult((!self.supervised).then(|| self.gone.subscribe()))
    }
}

impl Handler<Crash> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: Crash, ctx: &mut Context<Self>) {
        tracing::warn!("coordinator crash requested (fault injection)");
        self.crashing = true;
        ctx.stop();
    }
}

impl Handler<TakeSnapshot> for Coordinator {
    type Result = MessageResult<TakeSnapshot>;

    fn handle(&mut self, _: TakeSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

impl Handler<RestoreSnapshot> for Coordinator {
    type Result = Result<(), Error>;

    fn handle(&mut self, msg: RestoreSnapshot, ctx: &mut Context<Self>) -> Self::Result {
        let downtime = msg.0.downtime(std::time::SystemTime::now());
        self.command(ctx, |core, rng, now| {
            core.restore_after(&msg.0, downtime, now, rng)
        })
    }
}

impl Handler<SaveSnapshot> for Coordinator {
    type Result = ResponseFuture<Result<Option<PathBuf>, SnapshotError>>;

    /// The snapshot is taken now; the write runs on tokio's blocking pool while the actor
    /// goes on, and the answer comes when it is on disk.
    fn handle(&mut self, _: SaveSnapshot, _: &mut Context<Self>) -> Self::Result {
        Box::pin(self.save_snapshot_later())
    }
}
