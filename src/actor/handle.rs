//! An async handle for code without actors: `acquire(request).await` returns a [`Permit`],
//! and every operator message has a method with one flat error ([`HandleError`]).

use std::sync::Arc;

use actix::{Addr, MailboxError};
use tokio::sync::{mpsc, oneshot};

use super::messages::{
    Abandon, AddCandidate, Cancel, Explain, Finish, GetState, Ready, Reask, RemoveCandidate, Reply,
    RestoreSnapshot, SetArmShare, SetConfig, SetLimits, StopAndWatch, SubscribeChannel,
    TakeSnapshot, UpdateCandidate,
};
use super::permit::{Answer, Permit};
use super::state::State;
use super::thread::OwnThread;
use super::Coordinator;
use crate::core::{CandidateId, CandidateInfo, Limits, Request, RequestId};
use crate::decision::DecisionRecord;
use crate::error::{Error, Rejection};
use crate::score::Config;
use crate::snapshot::Snapshot;

/// The coordinator has stopped; nothing more can be asked of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the coordinator has stopped")]
pub struct CoordinatorGone;

/// Closed or timed out, the caller can only give up or start a new coordinator; the actix error
/// type stays out of the public API.
fn gone(_: MailboxError) -> CoordinatorGone {
    CoordinatorGone
}

/// Why [`CoordinatorHandle::acquire`] returned no permit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The coordinator answered without a slot.
    #[error("request rejected: {0}")]
    Rejected(Rejection),
    /// The request is malformed (nothing was queued); the error says what to fix.
    #[error(transparent)]
    Invalid(Error),
    /// The coordinator stopped before answering.
    #[error(transparent)]
    CoordinatorGone(#[from] CoordinatorGone),
    /// [`Permit::retry`] on a permit a worker actor received: its request's next grant goes
    /// to the worker, as with `done(Next::Retry)`, not to this call.
    #[error(
        "retry() is for permits from acquire(); this permit's next grant goes to its worker actor"
    )]
    NotFromAcquire,
}

/// Why a [`CoordinatorHandle`] method other than `acquire` failed: one flat error instead of
/// actix's `MailboxError` around the message's own `Result`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HandleError {
    /// The coordinator answered with an error: nothing changed; the error says why (an
    /// unknown candidate or request, an invalid config, ...).
    #[error(transparent)]
    Refused(#[from] Error),
    /// The coordinator stopped before answering.
    #[error(transparent)]
    CoordinatorGone(#[from] CoordinatorGone),
}

/// Sends a message whose answer is a `Result<T, Error>` and flattens the two failures.
async fn ask<M, T>(addr: &Addr<Coordinator>, msg: M) -> Result<T, HandleError>
where
    M: actix::Message<Result = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
    Coordinator: actix::Handler<M>,
{
    Ok(addr.send(msg).await.map_err(gone)??)
}

/// Cancels a waiting request when the `acquire` future that waits for it is dropped.
pub(crate) struct AbandonOnDrop<'a> {
    pub(crate) addr: &'a Addr<Coordinator>,
    pub(crate) request: Option<RequestId>,
}

impl AbandonOnDrop<'_> {
    /// The answer came: nothing to cancel.
    pub(crate) fn disarm(mut self) {
        self.request = None;
    }
}

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            self.addr.do_send(Abandon(request));
        }
    }
}

/// Waits for the one answer of an `acquire` call (or of [`Permit::retry`]); `guard` cancels
/// the request if this is dropped first.
pub(crate) async fn answer_of(
    rx: oneshot::Receiver<Answer>,
    guard: AbandonOnDrop<'_>,
) -> Result<Permit, AcquireError> {
    let answer = rx.await;
    guard.disarm();
    match answer {
        Ok(Answer::Granted(permit)) => Ok(permit),
        Ok(Answer::Rejected { reason, .. }) => Err(AcquireError::Rejected(reason)),
        // The reply was dropped without an answer: only a stopping coordinator does that.
        Err(_) => Err(CoordinatorGone.into()),
    }
}

/// A cloneable handle on a running [`Coordinator`]. Its futures work on any async runtime and
/// from any thread (the handle is `Send + Sync`); the coordinator itself runs inside an actix
/// `System`: the caller's ([`Coordinator::start_handle`]) or a thread of its own
/// ([`Coordinator::start_in_thread`]).
///
/// ```
/// use selection_coordinator::actor::Coordinator;
/// use selection_coordinator::{CandidateInfo, Config, Limits, Outcome, Request};
///
/// actix::System::new().block_on(async {
///     let handle = Coordinator::with_seed(Config::default(), Limits::default(), 1)?
///         .with_candidate(CandidateInfo::new("a"))?
///         .start_handle();
///     let mut permit = handle.acquire(Request::any()).await?;
///     assert_eq!(permit.candidate().as_str(), "a");
///     permit.report(Outcome::success());
///     drop(permit); // releases the slot
///     Ok::<_, Box<dyn std::error::Error>>(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct CoordinatorHandle {
    addr: Addr<Coordinator>,
    /// The coordinator's own thread, when [`Coordinator::start_in_thread`] started it.
    thread: Option<Arc<OwnThread>>,
}

impl CoordinatorHandle {
    /// A handle on a started coordinator.
    pub fn new(addr: Addr<Coordinator>) -> Self {
        CoordinatorHandle { addr, thread: None }
    }

    /// A handle on a coordinator running on its own thread.
    pub(crate) fn in_thread(thread: OwnThread, addr: Addr<Coordinator>) -> Self {
        CoordinatorHandle {
            addr,
            thread: Some(Arc::new(thread)),
        }
    }

    /// The actor's address, for every other message.
    pub fn addr(&self) -> &Addr<Coordinator> {
        &self.addr
    }

    /// Waits for a slot for `request` (parallelism 1).
    ///
    /// Report the attempt with [`Permit::report`]; dropping the permit releases the slot. If
    /// this future is dropped while waiting, the request is cancelled at once, or its grant is
    /// taken back at once if it comes first. (Dropped in the instant between the coordinator
    /// taking the request in and this future hearing so, it is cancelled at the next
    /// housekeeping pass instead.)
    ///
    /// If a supervised coordinator restarts while the request waits, the request is asked once
    /// more by itself; a second restart in a row returns
    /// [`Rejection::CoordinatorRestarted`].
    pub async fn acquire(&self, request: Request) -> Result<Permit, AcquireError> {
        match self.acquire_once(request.clone()).await {
            Err(AcquireError::Rejected(Rejection::CoordinatorRestarted)) => {
                tracing::debug!("coordinator restarted while waiting; asking once more");
                self.acquire_once(request).await
            }
            other => other,
        }
    }

    async fn acquire_once(&self, request: Request) -> Result<Permit, AcquireError> {
        let (tx, rx) = oneshot::channel();
        let ready = Ready {
            request,
            reply: Reply::Once(Some(tx)),
        };
        let id = self
            .addr
            .send(ready)
            .await
            .map_err(gone)?
            .map_err(AcquireError::Invalid)?;
        // Dropped before the answer (a caller's timeout, an aborted task): the request stops
        // waiting now, so it holds no place in the queue nor against `max_waiting`.
        let guard = AbandonOnDrop {
            addr: &self.addr,
            request: Some(id),
        };
        answer_of(rx, guard).await
    }

    /// A snapshot of the coordinator's state.
    pub async fn state(&self) -> Result<State, CoordinatorGone> {
        self.addr.send(GetState).await.map_err(gone)
    }

    /// Changes the limits; raising one grants at once. Invalid limits (a global limit of 0,
    /// ...) are refused with [`HandleError::Refused`] and nothing changes.
    pub async fn set_limits(&self, limits: Limits) -> Result<(), HandleError> {
        ask(&self.addr, SetLimits(limits)).await
    }

    /// Subscribes to decision records: `rate` is the share of decisions to receive (0 to 1),
    /// `capacity` bounds the channel (records a full channel cannot take are dropped and
    /// counted). The capacity is clamped to 1 ..= [`SubscribeChannel::MAX_CAPACITY`]
    /// (2^20 records): `usize::MAX` gets the maximum. Drop the receiver to unsubscribe.
    ///
    /// Records exist only in a build with the `decision-records` feature (a default one):
    /// without it the subscription receives nothing, and a warning is logged.
    pub async fn subscribe_channel(
        &self,
        rate: f64,
        capacity: usize,
    ) -> Result<mpsc::Receiver<DecisionRecord>, CoordinatorGone> {
        self.addr
            .send(SubscribeChannel { rate, capacity })
            .await
            .map_err(gone)
    }

    /// Adds a candidate ([`AddCandidate`]); waiting requests may be granted at once. An
    /// invalid or already known candidate is [`HandleError::Refused`].
    pub async fn add_candidate(&self, info: CandidateInfo) -> Result<(), HandleError> {
        ask(&self.addr, AddCandidate(info)).await
    }

    /// Replaces a candidate's static info, keeping its statistics ([`UpdateCandidate`]). An
    /// unknown candidate or invalid info is [`HandleError::Refused`].
    pub async fn update_candidate(&self, info: CandidateInfo) -> Result<(), HandleError> {
        ask(&self.addr, UpdateCandidate(info)).await
    }

    /// Removes a candidate ([`RemoveCandidate`]): its running attempts finish, it is never
    /// granted again. An unknown candidate is [`HandleError::Refused`].
    pub async fn remove_candidate(&self, id: impl Into<CandidateId>) -> Result<(), HandleError> {
        ask(&self.addr, RemoveCandidate(id.into())).await
    }

    /// Replaces the scoring config (hot reload, [`SetConfig`]); statistics, waiting requests
    /// and attempts are kept. An invalid config is [`HandleError::Refused`] and the old one
    /// stays.
    pub async fn set_config(&self, config: Config) -> Result<(), HandleError> {
        ask(&self.addr, SetConfig(config)).await
    }

    /// Changes one live A/B arm's share ([`SetArmShare`]). An unknown arm or a share the
    /// config refuses is [`HandleError::Refused`] and the old config stays.
    pub async fn set_arm_share(
        &self,
        arm: impl Into<String>,
        share: f64,
    ) -> Result<(), HandleError> {
        let arm = arm.into();
        ask(&self.addr, SetArmShare { arm, share }).await
    }

    /// A dry run ([`Explain`]): what a draw for `request` would do now, without granting
    /// anything. A malformed request is [`HandleError::Refused`].
    pub async fn explain(&self, request: Request) -> Result<DecisionRecord, HandleError> {
        ask(&self.addr, Explain(request)).await
    }

    /// Cancels a request ([`Cancel`], the id is [`Permit::request`]): its waiting asks are
    /// answered with [`Rejection::Cancelled`]; running attempts run to their end. A request
    /// that has ended is [`HandleError::Refused`] with [`Error::UnknownRequest`].
    pub async fn cancel(&self, request: RequestId) -> Result<(), HandleError> {
        ask(&self.addr, Cancel { request }).await
    }

    /// Asks for one more attempt for a request kept open with
    /// [`Next::Keep`](crate::Next::Keep) ([`Reask`]). Its grant goes where the request's
    /// answers go: a worker actor (a permit from [`CoordinatorHandle::acquire`] ends its
    /// request when released).
    pub async fn reask(&self, request: RequestId) -> Result<(), HandleError> {
        ask(&self.addr, Reask { request }).await
    }

    /// Closes a request kept open with [`Next::Keep`](crate::Next::Keep) ([`Finish`]),
    /// dropping its waiting asks silently.
    pub async fn finish(&self, request: RequestId) -> Result<(), HandleError> {
        ask(&self.addr, Finish { request }).await
    }

    /// Loads a snapshot held in memory ([`RestoreSnapshot`]): what another coordinator, or
    /// this one earlier, learned. An unusable number anywhere is [`HandleError::Refused`] and
    /// nothing changes.
    pub async fn restore_snapshot(&self, snapshot: Snapshot) -> Result<(), HandleError> {
        ask(&self.addr, RestoreSnapshot(snapshot)).await
    }

    /// What the coordinator has learned now ([`TakeSnapshot`]; nothing is written).
    pub async fn take_snapshot(&self) -> Result<Snapshot, CoordinatorGone> {
        self.addr.send(TakeSnapshot).await.map_err(gone)
    }

    /// Stops the coordinator (as [`Stop`](super::Stop): waiting requests are answered with
    /// [`Rejection::CoordinatorRestarted`], permits still out become inert) and returns once
    /// it is gone: its snapshot saved when a store is configured, and for a coordinator
    /// started with [`Coordinator::start_in_thread`], its thread ended. Returns at once if it
    /// is gone already.
    ///
    /// A supervised coordinator ([`Coordinator::start_supervised_handle`]) restarts instead
    /// (see [`Stop`](super::Stop)): for it this returns once the stop is delivered.
    pub async fn stop(&self) {
        let watch = self.addr.send(StopAndWatch).await.ok().flatten();
        let watch = match &self.thread {
            Some(thread) => Some(thread.ended()),
            None => watch,
        };
        if let Some(mut gone) = watch {
            // Nothing is ever sent: this returns when the sender is dropped.
            let _ = gone.changed().await;
        }
    }
}
