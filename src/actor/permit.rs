//! What a worker receives: an [`Answer`], and with a grant the [`Permit`] that owns the slot.

use std::fmt;
use std::time::Duration;

use actix::{Addr, Message};
use tokio::sync::oneshot;

use super::handle::{answer_of, AbandonOnDrop};
use super::messages::{Done, Dropped, FirstByte, Report, RetryAcquire};
use super::{AcquireError, Coordinator, CoordinatorGone};
use crate::core::{AttemptId, CandidateId, Grant, Next, Outcome, RequestId};
use crate::error::{Error, Rejection};

/// The coordinator's answer to a [`Ready`](super::Ready): a slot or a reason why not.
///
/// A request with parallelism `n` receives up to `n` answers, one per attempt.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub enum Answer {
    /// A slot: run the attempt against [`Permit::candidate`], then report and release it.
    Granted(Permit),
    /// No slot, and none will come for this ask.
    Rejected {
        /// The request.
        request: RequestId,
        /// Why.
        reason: Rejection,
    },
}

/// Permission to run one attempt against one candidate.
///
/// Report what happened with [`Permit::report`] and release the slot with [`Permit::done`].
/// Dropping a permit without `done` releases the slot as [`Next::Finish`]; if nothing was
/// reported the attempt leaves no trace in the statistics (as a cancelled attempt), unless it
/// had no first byte and the deadline advised with it ([`Permit::deadline`]) had passed: then
/// it counts as a timeout ([`Core::done`](crate::Core::done)).
/// That is what makes a crashed or stopped worker harmless: its permit is dropped with it.
pub struct Permit {
    grant: Grant,
    /// The coordinator incarnation that granted it: after a restart its messages are stale.
    incarnation: u64,
    /// `None` once the slot has been released (or taken back before delivery).
    coordinator: Option<Addr<Coordinator>>,
    /// Whether an outcome was reported: only the first one counts.
    reported: bool,
}

impl Permit {
    pub(crate) fn new(grant: Grant, incarnation: u64, coordinator: Addr<Coordinator>) -> Self {
        Permit {
            grant,
            incarnation,
            coordinator: Some(coordinator),
            reported: false,
        }
    }

    /// Where to run the attempt.
    pub fn candidate(&self) -> &CandidateId {
        &self.grant.candidate
    }

    /// The attempt's id.
    pub fn attempt(&self) -> AttemptId {
        self.grant.attempt
    }

    /// The request served.
    pub fn request(&self) -> RequestId {
        self.grant.request
    }

    /// The coordinator incarnation that granted the attempt (see
    /// [`State::incarnation`](super::State::incarnation)). A supervised coordinator that
    /// restarts carries the attempts running into its new core, and its report and release
    /// reach the attempt under the id the new core gave it; messages naming an attempt of an
    /// earlier incarnation that was not carried are counted as stale and ignored (the new
    /// core reuses attempt ids).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Everything about the grant: probability, how it was chosen, how long it waited.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// How long a first byte is worth waiting for, from the grant: the coordinator's advice
    /// ([`Grant::deadline_ms`]). With no first byte by then, report
    /// `Outcome::failure(FailureClass::Timeout)` and retry elsewhere. `None`: wait for the
    /// caller's own timeout.
    pub fn deadline(&self) -> Option<Duration> {
        self.grant
            .deadline_ms
            .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
    }

    /// Says the attempt's first byte came, when its outcome is reported only later (at the end
    /// of a transfer). Optional, but without it an attempt that has answered still counts as
    /// one waiting for an answer until its outcome, which charges long transfers as slow
    /// answers (see `weights.time_to_success` in docs/config.toml).
    pub fn first_byte(&self) {
        if let Some(addr) = &self.coordinator {
            addr.do_send(FirstByte {
                attempt: self.grant.attempt,
                incarnation: self.incarnation,
            });
        }
    }

    /// Reports the attempt's outcome; the statistics learn from it. Only the first report of
    /// an attempt counts. An outcome [`Outcome::validate`] refuses (a NaN or negative time),
    /// or a second report, is not sent: it is logged as a warning (`tracing`) and ignored.
    /// [`Permit::try_report`] returns that error instead.
    pub fn report(&mut self, outcome: Outcome) {
        if let Err(e) = self.try_report(outcome) {
            tracing::warn!(attempt = %self.grant.attempt, "outcome not reported: {e}");
        }
    }

    /// [`Permit::report`], saying why an outcome was not sent: [`Error::InvalidOutcome`] for
    /// one [`Outcome::validate`] refuses (nothing is reported, so a corrected outcome may
    /// follow), [`Error::DuplicateOutcome`] once an outcome was reported.
    ///
    /// ```
    /// use selection_coordinator::actor::Coordinator;
    /// use selection_coordinator::{CandidateInfo, Config, Error, Limits, Outcome, Request};
    ///
    /// actix::System::new().block_on(async {
    ///     let handle = Coordinator::with_seed(Config::default(), Limits::default(), 1)?
    ///         .with_candidate(CandidateInfo::new("a"))?
    ///         .start_handle();
    ///     let mut permit = handle.acquire(Request::any()).await?;
    ///     let bad = Outcome::success_with(f64::NAN, 20.0, 4096, 35.0);
    ///     assert!(matches!(permit.try_report(bad), Err(Error::InvalidOutcome { .. })));
    ///     permit.try_report(Outcome::success())?;
    ///     let again = permit.try_report(Outcome::success());
    ///     assert!(matches!(again, Err(Error::DuplicateOutcome(_))));
    ///     Ok::<_, Box<dyn std::error::Error>>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_report(&mut self, outcome: Outcome) -> Result<(), Error> {
        outcome.validate()?;
        if self.reported {
            return Err(Error::DuplicateOutcome(self.grant.attempt));
        }
        self.reported = true;
        if let Some(addr) = &self.coordinator {
            addr.do_send(Report {
                attempt: self.grant.attempt,
                incarnation: self.incarnation,
                outcome,
            });
        }
        Ok(())
    }

    /// Releases the slot and says what the request does next.
    ///
    /// [`Next::Retry`] asks for another attempt (excluding every candidate tried); the grant
    /// arrives as a new [`Answer`] at the worker that sent the `Ready`. A permit from
    /// [`CoordinatorHandle::acquire`](super::CoordinatorHandle::acquire) has nowhere to deliver
    /// a second answer, so for it every `next` acts as [`Next::Finish`]: call
    /// [`Permit::retry`] instead.
    pub fn done(mut self, next: Next) {
        if let Some(addr) = self.coordinator.take() {
            addr.do_send(Done {
                attempt: self.grant.attempt,
                incarnation: self.incarnation,
                next,
            });
        }
    }

    /// Ends this attempt and waits for its request's next one: what [`Permit::done`] with
    /// [`Next::Retry`] does for a worker actor, for a permit from
    /// [`CoordinatorHandle::acquire`](super::CoordinatorHandle::acquire). Report the
    /// outcome first. The request goes on (its deadline, its key and arm, its place among the
    /// coordinator's counts) and every candidate it tried is excluded, so the retry never
    /// draws a candidate that just failed it; a fresh `acquire` could. This is how the
    /// simulator runs a scenario's `retries`.
    ///
    /// Errors: [`AcquireError::Rejected`] when no attempt comes (no untried candidate is
    /// left: [`Rejection::NoEligibleCandidate`]; the deadline passed; the request was
    /// cancelled or its attempt taken back at its lease end; the coordinator restarted, which,
    /// unlike `acquire`, it does not ask past), [`AcquireError::NotFromAcquire`]
    /// for a worker actor's permit (its next grant goes to the worker). Dropping the future
    /// while it waits cancels the request.
    pub async fn retry(self) -> Result<Permit, AcquireError> {
        let Some(addr) = self.coordinator.clone() else {
            return Err(CoordinatorGone.into());
        };
        let (tx, rx) = oneshot::channel();
        // Dropped once the coordinator has the retry, this cancels the waiting request.
        let guard = AbandonOnDrop {
            addr: &addr,
            request: Some(self.grant.request),
        };
        // The permit travels with the message: dropped unread (this future dropped first),
        // it frees the attempt as it would here.
        match addr
            .send(RetryAcquire {
                permit: self,
                reply: tx,
            })
            .await
        {
            Ok(Ok(())) => answer_of(rx, guard).await,
            Ok(Err(e)) => {
                guard.disarm();
                Err(e)
            }
            Err(_) => {
                guard.disarm();
                Err(CoordinatorGone.into())
            }
        }
    }

    /// Disarms the drop release: the coordinator has already taken the slot back.
    pub(crate) fn disarm(mut self) -> AttemptId {
        self.coordinator = None;
        self.grant.attempt
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(addr) = self.coordinator.take() {
            // Fails silently if the coordinator is gone, and then there is no slot to free.
            addr.do_send(Dropped {
                attempt: self.grant.attempt,
                incarnation: self.incarnation,
            });
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("attempt", &self.grant.attempt)
            .field("request", &self.grant.request)
            .field("candidate", &self.grant.candidate)
            .field("incarnation", &self.incarnation)
            .field("released", &self.coordinator.is_none())
            .finish()
    }
}
