//! Outcomes: what happened in an attempt, as a worker reports it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ServerFeedback;

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
    /// What the server reported about its queue and service time, if it piggybacks such a
    /// report on its responses ([`Outcome::feedback`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<ServerFeedback>,
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
            feedback: None,
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

    /// Converts a duration to milliseconds for the fields above.
    pub fn millis(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }
}
