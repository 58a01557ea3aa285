//! The messages the [`Coordinator`](super::Coordinator) handles.
//!
//! Workers send [`Ready`], [`Report`] and [`Done`] (the last two usually through their
//! [`Permit`](super::Permit)); operators send the candidate, limit and config messages;
//! observers send [`GetState`], [`Explain`] and the subscriptions.

use std::fmt;
use std::path::PathBuf;

use actix::{Message, Recipient};
use tokio::sync::{mpsc, oneshot};

use super::permit::{Answer, Permit};
use super::state::State;
use crate::core::{
    AttemptId, CandidateId, CandidateInfo, Limits, Next, Outcome, Request, RequestId,
};
use crate::decision::DecisionRecord;
use crate::error::Error;
use crate::score::Config;
use crate::snapshot::{Snapshot, SnapshotError};

/// Where the answers to a request go.
pub(crate) enum Reply {
    /// A worker actor: every answer of the request.
    Worker(Recipient<Answer>),
    /// An `acquire` call: exactly one answer; `None` once it was sent.
    Once(Option<oneshot::Sender<Answer>>),
}

impl Reply {
    /// Whether nobody is listening any more.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Reply::Worker(r) => !r.connected(),
            Reply::Once(Some(tx)) => tx.is_closed(),
            Reply::Once(None) => true,
        }
    }

    /// Whether it can take more than one answer.
    pub(crate) fn is_single(&self) -> bool {
        matches!(self, Reply::Once(_))
    }

    /// Whether an answer can still be delivered: a worker, or an `acquire` call not yet
    /// answered (or asking again, [`Permit::retry`](super::Permit::retry)).
    pub(crate) fn can_answer(&self) -> bool {
        !matches!(self, Reply::Once(None))
    }

    /// Delivers an answer; gives it back (boxed: an undelivered answer is the rare case) if
    /// nobody is listening.
    pub(crate) fn deliver(&mut self, answer: Answer) -> Result<(), Box<Answer>> {
        match self {
            Reply::Worker(r) if r.connected() => {
                // Queued even when the worker's mailbox is full: a grant must not be lost. If
                // the worker stops before reading it, the permit is dropped with its mailbox
                // and releases the slot.
                r.do_send(answer);
                Ok(())
            }
            Reply::Worker(_) => Err(Box::new(answer)),
            Reply::Once(tx) => match tx.take() {
                Some(tx) => tx.send(answer).map_err(Box::new),
                None => Err(Box::new(answer)),
            },
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Worker(_) => f.write_str("Worker"),
            Reply::Once(tx) => write!(f, "Once(open: {})", tx.is_some()),
        }
    }
}

/// A worker wants a slot for `request`. The answer (or answers, with parallelism) arrive at the
/// worker's `Recipient<Answer>`; the handler returns the request's id, or an error if the
/// request is malformed (nothing is queued then).
#[derive(Message, Debug)]
#[rtype(result = "Result<RequestId, Error>")]
pub struct Ready {
    /// What the worker wants.
    pub request: Request,
    pub(crate) reply: Reply,
}

impl Ready {
    /// A request whose answers go to `worker`.
    pub fn new(request: Request, worker: Recipient<Answer>) -> Self {
        Ready {
            request,
            reply: Reply::Worker(worker),
        }
    }
}

/// What happened in an attempt (usually sent by [`Permit::report`](super::Permit::report)).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Report {
    /// The attempt.
    pub attempt: AttemptId,
    /// The incarnation that granted it ([`Permit::incarnation`](super::Permit::incarnation)).
    pub incarnation: u64,
    /// What happened.
    pub outcome: Outcome,
}

/// An attempt's first byte came; its outcome follows (usually sent by
/// [`Permit::first_byte`](super::Permit::first_byte)).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct FirstByte {
    /// The attempt.
    pub attempt: AttemptId,
    /// The incarnation that granted it ([`Permit::incarnation`](super::Permit::incarnation)).
    pub incarnation: u64,
}

/// An attempt's slot is free (usually sent by [`Permit::done`](super::Permit::done)).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Done {
    /// The attempt.
    pub attempt: AttemptId,
    /// The incarnation that granted it ([`Permit::incarnation`](super::Permit::incarnation)).
    pub incarnation: u64,
    /// What the request does next.
    pub next: Next,
}

/// A permit from `acquire` releases its attempt and asks for the request's next one
/// ([`Permit::retry`](super::Permit::retry)): the answer goes to `reply`.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), crate::actor::AcquireError>")]
pub(crate) struct RetryAcquire {
    /// The attempt's permit, carried so that a message dropped unhandled (its sender gave up
    /// before the coordinator read it) releases the attempt as the permit's drop does; the
    /// handler disarms it.
    pub(crate) permit: Permit,
    pub(crate) reply: oneshot::Sender<Answer>,
}

/// A permit was dropped without `Done`.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct Dropped {
    pub(crate) attempt: AttemptId,
    pub(crate) incarnation: u64,
}

/// The caller of [`CoordinatorHandle::acquire`](super::CoordinatorHandle::acquire) dropped its
/// future before the answer: the request is cancelled now if it still waits (and its reply is
/// closed), instead of at the next housekeeping pass.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct Abandon(pub(crate) RequestId);

/// Cancels a request: its waiting asks are answered with
/// [`Rejection::Cancelled`](crate::Rejection::Cancelled); running attempts run to their end.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), Error>")]
pub struct Cancel {
    /// The request.
    pub request: RequestId,
}

/// Asks for one more attempt for a request kept open with [`Next::Keep`].
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), Error>")]
pub struct Reask {
    /// The request.
    pub request: RequestId,
}

/// Closes a request kept open with [`Next::Keep`], dropping its waiting asks silently.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), Error>")]
pub struct Finish {
    /// The request.
    pub request: RequestId,
}

/// Adds a candidate; waiting requests may be granted at once.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct AddCandidate(pub CandidateInfo);

/// Replaces a candidate's static info; its statistics are kept.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct UpdateCandidate(pub CandidateInfo);

/// Removes a candidate; its running attempts finish, it is never granted again.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct RemoveCandidate(pub CandidateId);

/// Changes the limits; raising one grants at once.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), Error>")]
pub struct SetLimits(pub Limits);

/// Replaces the scoring config (hot reload). An invalid config is refused and the old one
/// stays; statistics, waiting requests and attempts are kept.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct SetConfig(pub Config);

/// Changes one live A/B arm's share (hot reload of the config with that share changed, so the
/// same validation applies and the same state is kept). An unknown arm or a share the config
/// refuses is an [`Error::Config`] naming the field; the old config stays.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct SetArmShare {
    /// The arm's name, as in the config.
    pub arm: String,
    /// Its new share (relative to the other arms' shares).
    pub share: f64,
}

/// Asks for a snapshot of the coordinator's state.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "State")]
pub struct GetState;

/// A dry run: what a draw for this request would do now, without granting anything.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<DecisionRecord, Error>")]
pub struct Explain(pub Request);

/// One decision record, delivered to subscribers.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Decision(pub DecisionRecord);

/// Subscribes an actor to decision records.
///
/// `rate` is the share of decisions to receive (0 to 1; out-of-range values are clamped).
/// Delivery never blocks the coordinator: a record the subscriber's full mailbox cannot take is
/// dropped and counted. A subscriber whose mailbox closes is removed.
///
/// Records exist only in a build with the `decision-records` feature (a default one): without
/// it a subscriber receives nothing, and a warning is logged.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Subscribe {
    /// Where records go.
    pub subscriber: Recipient<Decision>,
    /// The share of decisions to receive.
    pub rate: f64,
}

/// Subscribes a tokio channel to decision records and returns its receiver.
///
/// `capacity` bounds the channel, clamped to 1 ..= [`SubscribeChannel::MAX_CAPACITY`]; records
/// a full channel cannot take are dropped and counted. Dropping the receiver ends the
/// subscription. Without the `decision-records` feature nothing is ever sent (see
/// [`Subscribe`]).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "mpsc::Receiver<DecisionRecord>")]
pub struct SubscribeChannel {
    /// The share of decisions to receive (0 to 1).
    pub rate: f64,
    /// The channel's capacity (clamped to 1 ..= [`SubscribeChannel::MAX_CAPACITY`]).
    pub capacity: usize,
}

impl SubscribeChannel {
    /// The largest channel capacity, 2^20 records: a larger `capacity` gets this one (tokio
    /// refuses a channel beyond `usize::MAX >> 3`, and a subscriber that far behind reads
    /// stale records anyway).
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// `capacity` within 1 ..= [`SubscribeChannel::MAX_CAPACITY`].
    pub(crate) fn bounded_capacity(&self) -> usize {
        self.capacity.clamp(1, Self::MAX_CAPACITY)
    }
}

/// Stops the coordinator, saving a snapshot first when a store is configured. Waiting workers
/// are answered with [`Rejection::CoordinatorRestarted`](crate::Rejection::CoordinatorRestarted);
/// permits still out become inert.
///
/// A coordinator started with [`Coordinator::start_supervised`](super::Coordinator::start_supervised)
/// is restarted by its supervisor while any address of it is alive (permits hold one): for it
/// `Stop` is a clean restart. Drop every address, or stop the actix `System`, to end it.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub struct Stop;

/// Stops the coordinator as [`Stop`] does and answers how to learn that it is gone: a receiver
/// whose sender is dropped with the coordinator, or `None` under a supervisor (a stop is a
/// restart there).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Option<tokio::sync::watch::Receiver<()>>")]
pub(crate) struct StopAndWatch;

/// Simulates a crash: the coordinator stops at once without saving, as if it had failed. Under
/// supervision it restarts from the last saved snapshot. For fault-injection tests.
#[doc(hidden)]
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub struct Crash;

/// Returns what the coordinator has learned now, as a [`Snapshot`] (nothing is written).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Snapshot")]
pub struct TakeSnapshot;

/// Loads a snapshot held in memory ([`TakeSnapshot`]'s, or one read with
/// [`Snapshot::from_json`]), as [`Core::restore`](crate::Core::restore) does: candidates it
/// names that the coordinator lacks are added with their statistics, known ones take its
/// statistics (their info is kept), and the fleet-wide averages are replaced. Every number is
/// checked first: an unusable one refuses the whole snapshot and nothing changes. Waiting
/// requests and attempts in flight are kept.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), Error>")]
pub struct RestoreSnapshot(pub Snapshot);

/// Writes a snapshot. It is taken when the message is handled and written on tokio's blocking
/// pool while the coordinator goes on with other messages; the answer comes once it is on
/// disk: the path written, `None` when no store is configured, or the write's error. A write
/// never replaces a newer snapshot with this one (see `docs/reliability.md`).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Option<PathBuf>, SnapshotError>")]
pub struct SaveSnapshot;
