//! Sharing with a fleet: the two messages a transport (e.g. [`crate::fleet`]) sends. Both
//! answer from the core's state at once; neither touches the network.

use actix::{Context, Handler, Message, MessageResult};

use super::timer::now;
use super::Coordinator;
use crate::digest::{Applied, Digest, DigestError};

/// Asks for this coordinator's digest of what it learned
/// ([`Core::digest`](crate::core::Core::digest)).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Digest")]
pub struct TakeDigest;

/// Applies another coordinator's digest as remote evidence
/// ([`Core::apply_digest`](crate::core::Core::apply_digest)). A refused digest changes nothing
/// and its error says why; entries refused one by one are counted in [`Applied`].
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Applied, DigestError>")]
pub struct ApplyDigest(pub Digest);

impl Handler<TakeDigest> for Coordinator {
    type Result = MessageResult<TakeDigest>;

    fn handle(&mut self, _: TakeDigest, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.digest(now()))
    }
}

impl Handler<ApplyDigest> for Coordinator {
    type Result = Result<Applied, DigestError>;

    fn handle(&mut self, msg: ApplyDigest, ctx: &mut Context<Self>) -> Self::Result {
        let result = self.core.apply_digest(now(), &msg.0);
        self.settle(ctx);
        result
    }
}
