//! Who is waiting for the answers of each open request.
//!
//! The core knows requests by id only; the actor must know where to deliver their grants and
//! rejections, and when a request's entry can go. An entry lives exactly as long as the core
//! keeps the request open (asks pending, attempts running, or kept open with `Next::Keep`), so
//! the ledger follows the same transitions the core applies; `State::tracked_requests` against
//! `State::open_requests` shows that the two agree.

use std::collections::HashMap;

use super::messages::Reply;
use crate::core::{AttemptId, Next, RequestId};

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) reply: Reply,
    /// Asks waiting for a slot.
    pub(crate) pending: u32,
    in_flight: u32,
    parallelism: u32,
    keep_open: bool,
    /// Cancelled or rejected: the core turns any later `Retry` or `Keep` into `Finish`.
    closed: bool,
}

impl Entry {
    fn open(&self) -> bool {
        self.pending > 0 || self.in_flight > 0 || self.keep_open
    }
}

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    requests: HashMap<RequestId, Entry>,
    attempts: HashMap<AttemptId, RequestId>,
}

impl Ledger {
    pub(crate) fn len(&self) -> usize {
        self.requests.len()
    }

    /// A request the core accepted. If it was rejected at once, the rejection (drained next)
    /// closes the entry again.
    pub(crate) fn open(&mut self, id: RequestId, parallelism: u32, reply: Reply) {
        self.requests.insert(
            id,
            Entry {
                reply,
                pending: parallelism,
                in_flight: 0,
                parallelism,
                keep_open: false,
                closed: false,
            },
        );
    }

    pub(crate) fn entry_mut(&mut self, id: RequestId) -> Option<&mut Entry> {
        self.requests.get_mut(&id)
    }

    /// The request an attempt belongs to.
    pub(crate) fn request_of(&self, attempt: AttemptId) -> Option<(RequestId, &Entry)> {
        let id = *self.attempts.get(&attempt)?;
        self.requests.get(&id).map(|e| (id, e))
    }

    /// The core granted an attempt of `request`.
    pub(crate) fn granted(&mut self, request: RequestId, attempt: AttemptId) {
        if let Some(e) = self.requests.get_mut(&request) {
            e.pending = e.pending.saturating_sub(1);
            e.in_flight += 1;
            self.attempts.insert(attempt, request);
        }
    }

    /// The core released an attempt (done, or reclaimed: `next = None`).
    pub(crate) fn released(&mut self, attempt: AttemptId, next: Option<Next>) {
        let Some(request) = self.attempts.remove(&attempt) else {
            return;
        };
        let Some(e) = self.requests.get_mut(&request) else {
            return;
        };
        e.in_flight = e.in_flight.saturating_sub(1);
        let next = match next {
            Some(_) if e.closed => Some(Next::Finish),
            other => other,
        };
        match next {
            None => {}
            Some(Next::Finish) => {
                e.pending = 0;
                e.keep_open = false;
            }
            Some(Next::Retry) if e.pending + e.in_flight < e.parallelism => e.pending += 1,
            Some(Next::Retry) => {}
            Some(Next::Keep) => e.keep_open = true,
        }
        self.close_if_done(request);
    }

    /// The core rejected the request's waiting asks.
    pub(crate) fn rejected(&mut self, request: RequestId) {
        if let Some(e) = self.requests.get_mut(&request) {
            e.pending = 0;
            e.keep_open = false;
            e.closed = true;
        }
        self.close_if_done(request);
    }

    /// The core accepted one more ask for the request.
    pub(crate) fn reasked(&mut self, request: RequestId) {
        if let Some(e) = self.requests.get_mut(&request) {
            e.pending += 1;
        }
    }

    /// The request was finished (`cancelled = false`: its waiting asks are dropped) or
    /// cancelled (its waiting asks get a rejection, drained next): it no longer stays open by
    /// itself.
    pub(crate) fn closed(&mut self, request: RequestId, cancelled: bool) {
        if let Some(e) = self.requests.get_mut(&request) {
            e.keep_open = false;
            if cancelled {
                e.closed = true;
            } else {
                e.pending = 0;
            }
        }
        self.close_if_done(request);
    }

    fn close_if_done(&mut self, request: RequestId) {
        if self.requests.get(&request).is_some_and(|e| !e.open()) {
            self.requests.remove(&request);
        }
    }

    /// Waiting requests whose worker is gone.
    pub(crate) fn abandoned(&self) -> Vec<RequestId> {
        self.requests
            .iter()
            .filter(|(_, e)| e.pending > 0 && e.reply.is_closed())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Every request with waiting asks, and its reply (for a farewell when stopping).
    pub(crate) fn waiting_mut(&mut self) -> impl Iterator<Item = (RequestId, &mut Entry)> {
        self.requests
            .iter_mut()
            .filter(|(_, e)| e.pending > 0)
            .map(|(id, e)| (*id, e))
    }
}
