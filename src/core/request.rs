//! Requests, attempts and outcomes: what workers send into the core.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::candidate::{check_number, CandidateId};
use crate::error::Error;

/// Identifies a request inside one core. Stale ids (of finished requests) are detected.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(pub(crate) u64);

/// Identifies one granted attempt (the permit). Stale ids are detected.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptId(pub(crate) u64);

macro_rules! slab_id {
    ($t:ident, $prefix:literal) => {
        impl $t {
            pub(crate) fn new(index: u32, generation: u32) -> Self {
                $t(((generation as u64) << 32) | index as u64)
            }
            pub(crate) fn index(self) -> usize {
                (self.0 & 0xffff_ffff) as usize
            }
            pub(crate) fn generation(self) -> u32 {
                (self.0 >> 32) as u32
            }
            /// The raw value, stable for the life of the core (for logs and maps).
            pub fn as_u64(self) -> u64 {
                self.0
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    concat!($prefix, "{}.{}"),
                    self.index(),
                    self.generation()
                )
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}
slab_id!(RequestId, "r");
slab_id!(AttemptId, "a");

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
    /// Candidates it must not use.
    pub exclude: Vec<CandidateId>,
    /// When it stops waiting; a waiting request past its deadline is rejected.
    #[serde(skip)]
    pub deadline: Option<Instant>,
    /// Capabilities a candidate must offer.
    pub capabilities: Vec<String>,
    /// An optional key (for sticky assignment such as A/B arms).
    pub key: Option<String>,
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

    /// Excludes a candidate (builder style).
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

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.parallelism == 0 {
            return Err(Error::InvalidRequest(
                "parallelism must be at least 1".into(),
            ));
        }
        if let Eligible::Only(ids) = &self.eligible {
            if ids.is_empty() {
                return Err(Error::InvalidRequest(
                    "the eligible set is empty: name at least one candidate or use Eligible::All"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// What the worker does after an attempt's slot is released.
///
/// A request is one unit of work (one operation, one retrieval), and [`Next`] is about that
/// unit only. A worker that loops over units of work ends each one with [`Next::Finish`] and
/// asks for the next with a fresh request (a new `Ready`, `acquire` or [`Core::ready`](super::Core::ready)).
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
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

/// Why an attempt failed. Each class feeds the statistics differently (see the scoring docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The candidate said it is overloaded: counts in the error window and in success.
    Overload,
    /// The attempt timed out: counts in success.
    Timeout,
    /// A transport error (reset, broken pipe): counts in success.
    Transport,
    /// The connection was refused: counts in success.
    Refused,
    /// The caller cancelled the attempt: counts nowhere.
    Cancelled,
    /// A normal application-level result such as "duplicate key": counts as a success.
    Application,
}

impl FailureClass {
    /// A short stable label, used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Overload => "overload",
            FailureClass::Timeout => "timeout",
            FailureClass::Transport => "transport",
            FailureClass::Refused => "refused",
            FailureClass::Cancelled => "cancelled",
            FailureClass::Application => "application",
        }
    }

    /// Every class.
    pub const ALL: [FailureClass; 6] = [
        FailureClass::Overload,
        FailureClass::Timeout,
        FailureClass::Transport,
        FailureClass::Refused,
        FailureClass::Cancelled,
        FailureClass::Application,
    ];
}

/// Measurements of a successful attempt; every field is optional. Times are milliseconds,
/// checked to be finite and not negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Success {
    /// Time to connect, ms.
    pub connect_ms: Option<f64>,
    /// Time to first byte, ms.
    pub ttfb_ms: Option<f64>,
    /// Bytes transferred.
    pub bytes: Option<u64>,
    /// Whole attempt duration, ms.
    pub duration_ms: Option<f64>,
}

/// What happened in an attempt.
///
/// A success carries optional measurements; set them by name with [`Durations`](std::time::Duration):
///
/// ```
/// use std::time::Duration;
/// use selection_coordinator::{FailureClass, Outcome};
///
/// let ok = Outcome::success()
///     .connect(Duration::from_millis(12))
///     .first_byte(Duration::from_millis(40))
///     .bytes(65_536)
///     .duration(Duration::from_millis(180));
/// assert_eq!(ok, Outcome::success_with(12.0, 40.0, 65_536, 180.0));
/// let failed = Outcome::failure(FailureClass::Timeout);
/// assert_eq!(failed.label(), "timeout");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It worked.
    Success(Success),
    /// It failed, classified.
    Failure(FailureClass),
}

impl Outcome {
    /// A success without measurements.
    pub fn success() -> Self {
        Outcome::Success(Success::default())
    }

    /// A success with timings (ms) and bytes, in this order: connect, time to first byte,
    /// bytes, whole duration. The named form is harder to mix up:
    /// `Outcome::success().connect(d).first_byte(d).bytes(n).duration(d)`.
    pub fn success_with(connect_ms: f64, ttfb_ms: f64, bytes: u64, duration_ms: f64) -> Self {
        Outcome::Success(Success {
            connect_ms: Some(connect_ms),
            ttfb_ms: Some(ttfb_ms),
            bytes: Some(bytes),
            duration_ms: Some(duration_ms),
        })
    }

    /// A failure of the given class.
    pub fn failure(class: FailureClass) -> Self {
        Outcome::Failure(class)
    }

    /// A short stable label: `success` or the failure class.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Success(_) => "success",
            Outcome::Failure(c) => c.as_str(),
        }
    }

    /// Checks every number: finite and not negative.
    pub fn validate(&self) -> Result<(), Error> {
        if let Outcome::Success(s) = self {
            for (field, v) in [
                ("connect_ms", s.connect_ms),
                ("ttfb_ms", s.ttfb_ms),
                ("duration_ms", s.duration_ms),
            ] {
                if let Some(v) = v {
                    check_number(v).map_err(|problem| Error::InvalidOutcome {
                        field,
                        value: v,
                        problem,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Converts a duration to milliseconds for the fields above.
    pub fn millis(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }
}
