//! Requests: what a unit of work asks of the coordinator, and what a worker does next.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::ids::CandidateId;

/// Which candidates a request may use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Eligible {
    /// Every candidate (the fast path: an O(log n) draw over a sum tree).
    #[default]
    All,
    /// Only these candidates (an O(k) draw).
    Only(Vec<CandidateId>),
}

/// A unit of work that needs a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Request {
    /// Which candidates it may use.
    pub eligible: Eligible,
    /// How many attempts it runs at once (each on a different candidate). Default 1.
    pub parallelism: u32,
    /// Candidates it must not use, by id: an id no candidate has yet, or one removed and
    /// added again, stays excluded for as long as the request is open.
    pub exclude: Vec<CandidateId>,
    /// When it stops waiting; a waiting request past its deadline is rejected.
    #[serde(skip)]
    pub deadline: Option<Instant>,
    /// Capabilities a candidate must offer.
    pub capabilities: Vec<String>,
    /// An optional key (for sticky assignment such as A/B arms).
    pub key: Option<String>,
    /// How many attempts the caller makes at most, the first included (`None`: unknown). The
    /// last of them is drawn by its odds of success as well as its time
    /// (`last_attempt.failure_cost` in the config): with no try left, a failure fails the
    /// request. At least 1.
    pub attempts: Option<u32>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            eligible: Eligible::All,
            parallelism: 1,
            exclude: Vec::new(),
            deadline: None,
            capabilities: Vec::new(),
            key: None,
            attempts: None,
        }
    }
}

impl Request {
    /// A request that may use any candidate, one attempt at a time.
    pub fn any() -> Self {
        Request::default()
    }

    /// A request limited to these candidates.
    pub fn only<I, C>(ids: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<CandidateId>,
    {
        Request {
            eligible: Eligible::Only(ids.into_iter().map(Into::into).collect()),
            ..Request::default()
        }
    }

    /// Sets how many attempts run at once (builder style).
    pub fn with_parallelism(mut self, n: u32) -> Self {
        self.parallelism = n;
        self
    }

    /// Sets the deadline (builder style).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Excludes a candidate by id, present or not (builder style).
    pub fn excluding(mut self, id: impl Into<CandidateId>) -> Self {
        self.exclude.push(id.into());
        self
    }

    /// Requires a capability (builder style).
    pub fn requiring(mut self, capability: impl Into<String>) -> Self {
        self.capabilities.push(capability.into());
        self
    }

    /// Sets the sticky key (builder style).
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Says how many attempts the caller makes at most, the first included (builder style):
    /// the last is drawn by its odds of success as well as its time. `with_attempts(1)` for a
    /// caller that never retries, `with_attempts(retries + 1)` for a retry loop.
    pub fn with_attempts(mut self, n: u32) -> Self {
        self.attempts = Some(n);
        self
    }
}

/// What the worker does after an attempt's slot is released.
///
/// A request is one unit of work (one operation, one retrieval), and [`Next`] is about that
/// unit only. A worker that loops over units of work ends each one with [`Next::Finish`] and
/// asks for the next with a fresh request (a new `Ready`, `acquire` or `Core::ready`).
/// It must not loop with [`Next::Retry`]: a retry excludes every candidate the request has
/// tried, so after as many units as there are candidates it is rejected with
/// `NoEligibleCandidate`, even though every candidate is healthy.
///
/// ```text
/// loop {
///     permit = ready(Request::any())          // a fresh request per unit of work
///     outcome = run(permit.candidate())
///     permit.report(outcome)
///     if failed && tries_left { permit.done(Next::Retry) /* same unit, another candidate */ }
///     else { permit.done(Next::Finish) }      // this unit is over; loop for the next
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// The request is complete: drop its waiting asks; it ends once its attempts are done.
    /// A looping worker ends every unit of work with this, then sends a fresh request.
    #[default]
    Finish,
    /// Ask again for one more attempt at the same unit of work, excluding every candidate
    /// already tried (a retry after a failure). Not for the next unit of work: see [`Next`].
    Retry,
    /// Keep the request open without asking; call `reask` or `finish` later.
    Keep,
}
