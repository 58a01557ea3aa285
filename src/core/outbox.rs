//! What the core hands its driver: events and sampled decision records in order, and the
//! counters of what it decided, rejected and took back.

use std::collections::VecDeque;

use super::{CloseReason, Counters, Event, RequestId};
use crate::decision::DecisionRecord;

/// The core's output side; see the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct Outbox {
    events: VecDeque<Event>,
    /// Whether a request's end is told as [`Event::Closed`].
    close_events: bool,
    records: VecDeque<DecisionRecord>,
    /// Share of decisions recorded, in `[0, 1]`.
    record_rate: f64,
    /// The sampling accumulator: a decision is recorded each time it passes 1.
    record_acc: f64,
    pub(super) counters: Counters,
}

impl Outbox {
    /// Queues an event for the driver.
    #[inline]
    pub(super) fn push(&mut self, event: Event) {
        self.events.push_back(event);
    }

    /// The next event, oldest first.
    #[inline]
    pub(super) fn poll(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Tells that a request ended, if the driver asked for [`Event::Closed`].
    #[inline]
    pub(super) fn closed(&mut self, request: RequestId, reason: CloseReason) {
        if self.close_events {
            self.events.push_back(Event::Closed { request, reason });
        }
    }

    pub(super) fn set_close_events(&mut self, on: bool) {
        self.close_events = on;
    }

    /// Sets the share of decisions recorded (clamped to `[0, 1]`; not a number: none).
    pub(super) fn set_record_rate(&mut self, rate: f64) {
        self.record_rate = if rate.is_finite() {
            rate.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// Whether this decision is recorded: a deterministic accumulator, so choosing what to
    /// record takes no random number (see [`Core::set_record_rate`](super::Core::set_record_rate) for what a recorded draw
    /// changes). Without the `decision-records` feature this is a constant
    /// false and the recording code compiles away: the baseline that shows records cost
    /// nothing while off.
    #[inline]
    pub(super) fn sample_record(&mut self) -> bool {
        cfg!(feature = "decision-records") && self.record_rate > 0.0 && {
            self.record_acc += self.record_rate;
            if self.record_acc >= 1.0 {
                self.record_acc -= 1.0;
                true
            } else {
                false
            }
        }
    }

    pub(super) fn push_record(&mut self, record: DecisionRecord) {
        self.records.push_back(record);
    }

    /// The next decision record, oldest first.
    pub(super) fn poll_record(&mut self) -> Option<DecisionRecord> {
        self.records.pop_front()
    }
}

#[cfg(all(test, feature = "decision-records"))]
mod tests {
    use super::*;

    #[test]
    fn records_a_steady_share_of_decisions() {
        let mut out = Outbox::default();
        assert!(!(0..10).any(|_| out.sample_record()), "off by default");
        out.set_record_rate(0.25);
        let picked: Vec<bool> = (0..8).map(|_| out.sample_record()).collect();
        assert_eq!(
            picked,
            [false, false, false, true, false, false, false, true]
        );
        out.set_record_rate(f64::NAN);
        assert!(!out.sample_record());
        out.set_record_rate(7.0);
        assert!((0..3).all(|_| out.sample_record()));
    }

    #[test]
    fn closed_events_only_when_asked_for() {
        let mut out = Outbox::default();
        let r = RequestId::new(1, 0);
        out.closed(r, CloseReason::Finished);
        assert_eq!(out.poll(), None);
        out.set_close_events(true);
        out.closed(r, CloseReason::Finished);
        assert_eq!(
            out.poll(),
            Some(Event::Closed {
                request: r,
                reason: CloseReason::Finished
            })
        );
    }

    #[test]
    fn the_accumulator_keeps_its_remainder() {
        let mut out = Outbox::default();
        out.set_record_rate(0.4);
        let n = (0..100).filter(|_| out.sample_record()).count();
        assert!((39..=40).contains(&n), "{n} of 100 at 0.4");
    }
}
