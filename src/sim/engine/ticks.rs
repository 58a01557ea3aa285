//! The engine's periodic tick, and what it does when nothing can happen any more.

use super::{Engine, Req, TICK_S};

impl Engine<'_> {
    /// When the tick after the one at `now` comes. While a request is open or arrivals are to
    /// come it is `TICK_S` later. Otherwise (leftovers: a queueing server still serving
    /// attempts whose callers gave up, stale ends, timeline events; or a closed loop whose
    /// workers all think) the ticks that would come before the next event are skipped, so a
    /// server busy for days of virtual time costs one tick per event rather than one per
    /// second.
    pub(super) fn next_tick(&self, now: f64) -> f64 {
        let step = now + TICK_S;
        if self.open_requests > 0 || !self.arrivals_done {
            return step;
        }
        match self.heap.peek_ns() {
            Some(ns) => {
                let whole = ((ns as f64 / 1e9 - now) / TICK_S).floor().max(1.0);
                now + whole * TICK_S
            }
            None => step,
        }
    }

    /// Fails every request still open: nothing can ever happen again, and the policy holds
    /// them.
    pub(super) fn fail_stuck(&mut self, now: f64) {
        for i in 0..self.reqs.len() {
            if self.reqs[i].open {
                self.stats.stuck += 1;
                self.finish_request(i as Req, None, now);
                // The policy may still hold it: never hand this slot to a new request.
                self.free_reqs.retain(|&r| r as usize != i);
            }
        }
    }
}
