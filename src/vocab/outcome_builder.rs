//! Named setters for a successful [`Outcome`]'s measurements, taking [`Duration`]s, so the
//! four numbers of [`Outcome::success_with`] cannot be swapped.

use std::time::Duration;

use super::{Outcome, Success};

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
    }
}
