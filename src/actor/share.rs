//! Sharing with a fleet: the messages a transport (e.g. `crate::fleet`, feature `fleet`)
//! sends. Each answers from the core's state at once; none touches the network.

use std::sync::Arc;

use actix::{Context, Handler, Message, MessageResult};
use tokio::sync::Notify;

use super::timer::now;
use super::Coordinator;
use crate::digest::{Applied, Digest, DigestError};

/// Names this coordinator in its digests
/// ([`Core::set_share_identity_at`](crate::core::Core::set_share_identity_at)): a digest
/// taken now is numbered `seq_base`, one taken `d` ms later `seq_base + d`, however long the
/// coordinator ran before. `seq_base` must grow across restarts (the wall-clock time in
/// milliseconds, as the NATS transport passes) so the others do not take a restarted
/// coordinator's digests for replays.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct SetShareIdentity {
    /// The sender name.
    pub name: String,
    /// The sequence number of a digest taken now (later ones add the milliseconds since).
    pub seq_base: u64,
}

/// Asks for this coordinator's digest of what it learned, to publish it
/// ([`Core::take_digest`](crate::core::Core::take_digest), every fresh candidate; its
/// `prev_seq` is the digest asked for before). A transport may split it into parts
/// ([`Digest::part`]) to fit its messages.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Digest")]
pub struct TakeDigest;

/// Asks for this coordinator's digest only if its own outcomes changed sharply since the last
/// one was taken ([`Core::digest_urgent`](crate::core::Core::digest_urgent)): `None`
/// otherwise. A transport publishes it at once instead of at the next period.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Option<Digest>")]
pub struct TakeUrgentDigest;

/// Asks to be woken when this coordinator has an urgent digest: the answer is notified
/// ([`Notify::notify_one`], so a wake-up between two waits is kept) after each outcome that
/// leaves [`Core::digest_urgent`](crate::core::Core::digest_urgent) true; take the digest
/// with [`TakeUrgentDigest`]. Every caller gets the same [`Notify`]: one transport per
/// coordinator.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Arc<Notify>")]
pub struct WatchUrgentDigests;

/// Applies another coordinator's digest as remote evidence
/// ([`Core::apply_digest_from`](crate::core::Core::apply_digest_from)). `from` is the sender
/// the transport vouches for; a digest naming another is refused. A refused digest changes
/// nothing and its error says why; entries refused one by one are counted in [`Applied`].
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Applied, DigestError>")]
pub struct ApplyDigest {
    /// The sender the transport vouches for.
    pub from: String,
    /// The digest.
    pub digest: Digest,
}

impl Handler<SetShareIdentity> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: SetShareIdentity, _: &mut Context<Self>) {
        self.core
            .set_share_identity_at(msg.name, now(), msg.seq_base);
    }
}

impl Handler<TakeDigest> for Coordinator {
    type Result = MessageResult<TakeDigest>;

    fn handle(&mut self, _: TakeDigest, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.take_digest(now(), false))
    }
}

impl Handler<TakeUrgentDigest> for Coordinator {
    type Result = MessageResult<TakeUrgentDigest>;

    fn handle(&mut self, _: TakeUrgentDigest, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.core
                .digest_urgent()
                .then(|| self.core.take_digest(now(), false)),
        )
    }
}

impl Handler<WatchUrgentDigests> for Coordinator {
    type Result = MessageResult<WatchUrgentDigests>;

    fn handle(&mut self, _: WatchUrgentDigests, _: &mut Context<Self>) -> Self::Result {
        let notify = self.urgent.get_or_insert_with(Arc::default).clone();
        // A change seen before anyone watched is still news.
        self.wake_urgent();
        MessageResult(notify)
    }
}

impl Coordinator {
    /// Wakes the watcher of urgent digests, if there is one and the core has one.
    pub(super) fn wake_urgent(&self) {
        if let Some(notify) = &self.urgent {
            if self.core.digest_urgent() {
                notify.notify_one();
            }
        }
    }
}

impl Handler<ApplyDigest> for Coordinator {
    type Result = Result<Applied, DigestError>;

    fn handle(&mut self, msg: ApplyDigest, ctx: &mut Context<Self>) -> Self::Result {
        let result = self.core.apply_digest_from(now(), &msg.from, &msg.digest);
        self.settle(ctx);
        result
    }
}
