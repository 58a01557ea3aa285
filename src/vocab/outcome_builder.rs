//! Named setters for a successful [`Outcome`]'s measurements, taking [`Duration`]s, so the
//! four numbers of [`Outcome::success_with`] cannot be swapped.

use std::time::Duration;

use super::{Outcome, ServerFeedback, Success};

impl Outcome {
    /// Sets the time to connect. A failure carries no measurements and is returned unchanged.
    #[must_use]
    pub fn connect(self, d: Duration) -> Self {
        self.with(|s| s.connect_ms = Some(Outcome::millis(d)))
    }

    /// Sets the time to the first byte. A failure is returned unchanged.
    #[must_use]
    pub fn first_byte(self, d: Duration) -> Self {
        self.with(|s| s.ttfb_ms = Some(Outcome::millis(d)))
    }

    /// Sets the bytes transferred. A failure is returned unchanged.
    #[must_use]
    pub fn bytes(self, n: u64) -> Self {
        self.with(|s| s.bytes = Some(n))
    }

    /// Sets the whole attempt's duration. A failure is returned unchanged.
    #[must_use]
    pub fn duration(self, d: Duration) -> Self {
        self.with(|s| s.duration_ms = Some(Outcome::millis(d)))
    }

    /// Attaches the server's report of its queue and service time (checked when the outcome
    /// is reported: see [`ServerFeedback`]). A failure is returned unchanged.
    #[must_use]
    pub fn feedback(self, report: ServerFeedback) -> Self {
        self.with(|s| s.feedback = Some(report))
    }

    fn with(mut self, set: impl FnOnce(&mut Success)) -> Self {
        if let Outcome::Success(s) = &mut self {
            set(s);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::FailureClass;

    #[test]
    fn named_setters_fill_the_fields_they_name() {
        let o = Outcome::success()
            .duration(Duration::from_millis(250))
            .bytes(7)
            .first_byte(Duration::from_micros(1500))
            .connect(Duration::from_secs(1));
        assert_eq!(
            o,
            Outcome::Success(Success {
                connect_ms: Some(1000.0),
                ttfb_ms: Some(1.5),
                bytes: Some(7),
                duration_ms: Some(250.0),
                feedback: None,
            })
        );
        assert_eq!(o, Outcome::success_with(1000.0, 1.5, 7, 250.0));
        // Unset fields stay unset.
        assert_eq!(
            Outcome::success().bytes(3),
            Outcome::Success(Success {
                bytes: Some(3),
                ..Success::default()
            })
        );
    }

    #[test]
    fn a_failure_stays_a_failure() {
        let f = Outcome::failure(FailureClass::Overload)
            .connect(Duration::from_millis(5))
            .bytes(9);
        assert_eq!(f, Outcome::Failure(FailureClass::Overload));
        let report = ServerFeedback::new(2, Duration::from_millis(4));
        assert_eq!(
            Outcome::failure(FailureClass::Timeout).feedback(report),
            Outcome::Failure(FailureClass::Timeout)
        );
    }

    #[test]
    fn feedback_is_kept_and_checked() {
        let report = ServerFeedback::new(2, Duration::from_micros(1500));
        let o = Outcome::success().feedback(report);
        let Outcome::Success(s) = o else {
            panic!("a success")
        };
        assert_eq!(
            s.feedback,
            Some(ServerFeedback {
                queue: 2,
                service_ms: 1.5
            })
        );
        assert!(o.validate().is_ok());
        // Old serialised outcomes (no `feedback`) still read, and a success without one
        // serialises as before.
        let old: Outcome = serde_json::from_str(r#"{"success":{"ttfb_ms":3.0}}"#).unwrap();
        assert_eq!(old, Outcome::success().first_byte(Duration::from_millis(3)));
        assert!(!serde_json::to_string(&old).unwrap().contains("feedback"));
        let back: Outcome = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        for (bad, field) in [
            (
                ServerFeedback {
                    queue: 0,
                    service_ms: f64::NAN,
                },
                "feedback.service_ms",
            ),
            (
                ServerFeedback {
                    queue: 0,
                    service_ms: f64::INFINITY,
                },
                "feedback.service_ms",
            ),
            (
                ServerFeedback {
                    queue: 0,
                    service_ms: -1.0,
                },
                "feedback.service_ms",
            ),
            (
                ServerFeedback {
                    queue: 0,
                    service_ms: 4e6,
                },
                "feedback.service_ms",
            ),
            (
                ServerFeedback {
                    queue: u32::MAX,
                    service_ms: 1.0,
                },
                "feedback.queue",
            ),
        ] {
            match Outcome::success().feedback(bad).validate() {
                Err(crate::Error::InvalidOutcome { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        // The bounds themselves are accepted.
        let edge = ServerFeedback {
            queue: ServerFeedback::MAX_QUEUE,
            service_ms: ServerFeedback::MAX_SERVICE_MS,
        };
        assert!(Outcome::success().feedback(edge).validate().is_ok());
    }
}
