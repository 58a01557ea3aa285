//! What a server may piggyback on its response: its queue and its service time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A server's report about itself, sent with a response (as C3's servers do): how many
/// requests were waiting in its queue when the response left, and how long it took to serve
/// this request. Attach it with [`Outcome::feedback`](super::Outcome::feedback); the scoring
/// model turns it into the `feedback` component (see `docs/scoring.md`).
///
/// ```
/// use std::time::Duration;
/// use selection_coordinator::{Outcome, ServerFeedback};
///
/// let report = ServerFeedback::new(3, Duration::from_micros(4_500));
/// let ok = Outcome::success()
///     .first_byte(Duration::from_millis(9))
///     .feedback(report);
/// assert!(ok.validate().is_ok());
/// assert_eq!(report.service_ms, 4.5);
/// // A report past the bounds is refused with a typed error naming the field.
/// let absurd = Outcome::success().feedback(ServerFeedback::new(0, Duration::from_secs(7_200)));
/// assert!(absurd.validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerFeedback {
    /// Requests waiting in the server's queue (not in service) when the response left; at
    /// most [`ServerFeedback::MAX_QUEUE`].
    pub queue: u32,
    /// The server's time to serve this request (or its current mean service time), ms:
    /// finite, not negative, at most [`ServerFeedback::MAX_SERVICE_MS`].
    pub service_ms: f64,
}

impl ServerFeedback {
    /// The longest queue a report may carry: ten million waiting requests. A larger number is
    /// taken for a server bug (an unsigned underflow, say), not a queue.
    pub const MAX_QUEUE: u32 = 10_000_000;

    /// The longest service time a report may carry, ms (one hour).
    pub const MAX_SERVICE_MS: f64 = 3_600_000.0;

    /// A report of `queue` waiting requests and a service time of `service`.
    pub fn new(queue: u32, service: Duration) -> Self {
        ServerFeedback {
            queue,
            service_ms: service.as_secs_f64() * 1000.0,
        }
    }

    /// Which field is out of bounds, its value and what is wrong with it.
    pub(crate) fn problem(&self) -> Option<(&'static str, f64, &'static str)> {
        let s = self.service_ms;
        let service = if s.is_nan() {
            Some("is NaN")
        } else if s.is_infinite() {
            Some("is infinite")
        } else if s < 0.0 {
            Some("is negative")
        } else if s > Self::MAX_SERVICE_MS {
            Some("is above an hour (ServerFeedback::MAX_SERVICE_MS)")
        } else {
            None
        };
        if let Some(p) = service {
            return Some(("feedback.service_ms", s, p));
        }
        (self.queue > Self::MAX_QUEUE).then_some((
            "feedback.queue",
            f64::from(self.queue),
            "is above ten million (ServerFeedback::MAX_QUEUE)",
        ))
    }
}
