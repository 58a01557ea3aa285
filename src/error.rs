//! Errors: what went wrong and what to fix, and the checks of caller input that find it.
//!
//! Beside the vocabulary at the bottom of the crate: it names ids, and the scoring config's
//! [`ConfigError`] lives here so that every layer above can return it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::vocab::{AttemptId, CandidateId, RequestId};

mod checks;

/// An error from the coordinator's API: bad input or a reference to something that is gone.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The candidate id is not known (never added, or removed).
    #[error("unknown candidate `{0}`")]
    UnknownCandidate(CandidateId),
    /// A candidate with this id exists already; use `update_candidate` to change it.
    #[error("candidate `{0}` already exists; update it instead of adding it again")]
    DuplicateCandidate(CandidateId),
    /// A field of a candidate's static info is unusable.
    #[error("candidate `{id}`: field `{field}` {problem}")]
    InvalidCandidate {
        /// The candidate.
        id: CandidateId,
        /// The field path, e.g. `perf_scores.FRA`.
        field: String,
        /// What is wrong, e.g. `is NaN`.
        problem: String,
    },
    /// A number in an outcome is unusable (NaN, infinite or negative, or a server's report
    /// out of its bounds).
    #[error("outcome field `{field}` = {value} {problem}")]
    InvalidOutcome {
        /// The field, e.g. `connect_ms`.
        field: &'static str,
        /// The value given.
        value: f64,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The attempt is unknown: already done, taken back, or never granted.
    #[error("unknown attempt {0} (already done, reclaimed, or never granted)")]
    UnknownAttempt(AttemptId),
    /// A second outcome for the same attempt; only the first counts.
    #[error("attempt {0} already reported an outcome; only the first counts")]
    DuplicateOutcome(AttemptId),
    /// The request is unknown: finished, rejected, or never made.
    #[error("unknown request {0} (finished, rejected, or never made)")]
    UnknownRequest(RequestId),
    /// The request itself is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A limit is malformed.
    #[error("invalid limits: {0}")]
    InvalidLimits(String),
    /// A snapshot is unusable (wrong version, a bad number, malformed).
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
    /// The scoring config is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Why a request was answered without a grant. Every waiting request ends granted, rejected
/// with one of these ([`Core::cancel`](crate::Core::cancel) included), or finished by its
/// caller with [`Core::finish`](crate::Core::finish), which drops its waiting asks without a
/// rejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rejection {
    /// Its deadline passed before a slot was free.
    DeadlinePassed,
    /// The waiting queue was full (`max_waiting`).
    QueueFull,
    /// No candidate it may use exists (none eligible, all tried, or all removed).
    NoEligibleCandidate,
    /// The caller cancelled it.
    Cancelled,
    /// The coordinator restarted while it waited; ask again.
    CoordinatorRestarted,
    /// Too little of its deadline was left when a slot came free: less than twice the drawn
    /// candidate's learned no-load latency (adaptive limits only). Granting it would most
    /// likely time out after the grant and keep the candidate busy for nothing.
    DeadlineTooClose,
    /// Its last running attempt outlived the lease ([`Limits::max_attempt_s`]) and was taken
    /// back, which ended the request; make a new one. The actor tells the worker that asked;
    /// the core itself shows it as [`Event::Reclaimed`] and counts it in
    /// [`Counters::reclaimed`].
    ///
    /// [`Limits::max_attempt_s`]: crate::core::Limits::max_attempt_s
    /// [`Event::Reclaimed`]: crate::core::Event::Reclaimed
    /// [`Counters::reclaimed`]: crate::core::Counters::reclaimed
    Reclaimed,
}

impl Rejection {
    /// A short stable label, used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::DeadlinePassed => "deadline_passed",
            Rejection::QueueFull => "queue_full",
            Rejection::NoEligibleCandidate => "no_eligible_candidate",
            Rejection::Cancelled => "cancelled",
            Rejection::CoordinatorRestarted => "coordinator_restarted",
            Rejection::DeadlineTooClose => "deadline_too_close",
            Rejection::Reclaimed => "reclaimed",
        }
    }

    /// Every reason, for metrics and dashboards.
    pub const ALL: [Rejection; 7] = [
        Rejection::DeadlinePassed,
        Rejection::QueueFull,
        Rejection::NoEligibleCandidate,
        Rejection::Cancelled,
        Rejection::CoordinatorRestarted,
        Rejection::DeadlineTooClose,
        Rejection::Reclaimed,
    ];
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejection::DeadlinePassed => "the deadline passed before a slot was free",
            Rejection::QueueFull => "the waiting queue is full",
            Rejection::NoEligibleCandidate => "no eligible candidate exists",
            Rejection::Cancelled => "cancelled",
            Rejection::CoordinatorRestarted => "the coordinator restarted; ask again",
            Rejection::DeadlineTooClose => {
                "too little of the deadline was left to be served in time"
            }
            Rejection::Reclaimed => {
                "its last attempt outlived the lease (max_attempt_s) and was taken back"
            }
        })
    }
}

impl std::error::Error for Rejection {}

/// One thing wrong with a config, with its field path.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    /// The field path, e.g. `ema.alpha` (empty for the whole document).
    pub path: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(path: &str, message: impl fmt::Display) -> Self {
        Problem {
            path: path.to_string(),
            message: message.to_string(),
        }
    }
}

/// Every problem found in a config, each with its field path.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The problems, in document order where there is one.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    pub(crate) fn single(path: &str, message: impl fmt::Display) -> Self {
        ConfigError {
            problems: vec![Problem::new(path, message)],
        }
    }

    /// The field paths with problems.
    pub fn paths(&self) -> Vec<&str> {
        self.problems.iter().map(|p| p.path.as_str()).collect()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config:")?;
        for p in &self.problems {
            if p.path.is_empty() {
                write!(f, "\n  - {}", p.message)?;
            } else {
                write!(f, "\n  - {}: {}", p.path, p.message)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
