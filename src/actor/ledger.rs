//! Where to deliver the answers of each open request.
//!
//! The core owns a request's lifecycle; the ledger keeps only how to answer it (the worker's
//! reply), from the moment the core accepts it until the core says it ended
//! ([`Event::Closed`](crate::core::Event::Closed)). It follows no transition of its own, so
//! `State::tracked_requests` equals `State::open_requests` by construction.

use std::collections::HashMap;

use super::messages::Reply;
use crate::core::RequestId;

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    replies: HashMap<RequestId, Reply>,
}

impl Ledger {
    pub(crate) fn len(&self) -> usize {
        self.replies.len()
    }

    /// A request the core accepted. If it was rejected at once, the rejection and its end
    /// (drained next) close the entry again.
    pub(crate) fn open(&mut self, id: RequestId, reply: Reply) {
        self.replies.insert(id, reply);
    }

    /// How to answer `id`, while it is open.
    pub(crate) fn reply(&self, id: RequestId) -> Option<&Reply> {
        self.replies.get(&id)
    }

    /// [`Ledger::reply`], to deliver through.
    pub(crate) fn reply_mut(&mut self, id: RequestId) -> Option<&mut Reply> {
        self.replies.get_mut(&id)
    }

    /// The core ended the request: nothing more will be delivered to it.
    pub(crate) fn closed(&mut self, id: RequestId) {
        self.replies.remove(&id);
    }

    /// Every open request and its reply.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (RequestId, &mut Reply)> {
        self.replies.iter_mut().map(|(id, r)| (*id, r))
    }
}
