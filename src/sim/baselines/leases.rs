//! `[limits] max_attempt_s` for the baselines, as the coordinator's core keeps it: an attempt
//! still running at the end of its lease is reclaimed (its slot taken back, a timeout
//! recorded, [`Decision::Reclaimed`](crate::sim::policy::Decision::Reclaimed) told to the
//! engine, which ends the attempt and asks again if its worker has a retry left).

use std::collections::VecDeque;

use crate::core::Limits;
use crate::sim::policy::Req;

/// The running attempts' lease ends, oldest grant first. Each grant gets a token; a request
/// whose current token is not the one of an entry has ended that attempt, and the entry is
/// stale (dropped when it reaches the front).
#[derive(Debug)]
pub(crate) struct Leases {
    lease_s: Option<f64>,
    /// (lease end, request, token), in grant order: grants come in time order, so lease ends
    /// do too.
    ends: VecDeque<(f64, Req, u64)>,
    next_token: u64,
}

impl Leases {
    pub(crate) fn new(limits: &Limits) -> Self {
        Leases {
            lease_s: limits.max_attempt_s,
            ends: VecDeque::new(),
            next_token: 1,
        }
    }

    /// An attempt of `req` granted at `now`: its token (0 without leases, never reclaimed).
    pub(crate) fn grant(&mut self, req: Req, now: f64) -> u64 {
        let Some(lease) = self.lease_s else {
            return 0;
        };
        let token = self.next_token;
        self.next_token += 1;
        self.ends.push_back((now + lease, req, token));
        token
    }

    /// Drops ended attempts from the front; `token(req)` is the token of `req`'s running
    /// attempt (0: none).
    pub(crate) fn trim(&mut self, token: impl Fn(Req) -> u64) {
        while let Some(&(_, req, t)) = self.ends.front() {
            if token(req) == t {
                break;
            }
            self.ends.pop_front();
        }
    }

    /// The end of the oldest running attempt's lease (after [`Leases::trim`]).
    pub(crate) fn next_end(&self) -> Option<f64> {
        self.ends.front().map(|e| e.0)
    }

    /// A running attempt whose lease has ended by `now`: its request, removed from the
    /// leases.
    pub(crate) fn expired(&mut self, now: f64, token: impl Fn(Req) -> u64) -> Option<Req> {
        self.trim(&token);
        let &(end, req, _) = self.ends.front()?;
        // Within a nanosecond: the engine's clock counts whole nanoseconds.
        if end <= now + 1e-9 {
            self.ends.pop_front();
            Some(req)
        } else {
            None
        }
    }
}
