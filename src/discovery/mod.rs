//! Discovery: a cached, batched catalogue of candidate info instead of a per-request fan-out.
//!
//! Fetching every candidate's info each time a request (a stream) starts costs `n` parallel
//! requests per start, growing with both the number of candidates and the number of starts.
//! Discovery instead keeps one catalogue fresh in the background and builds every request's
//! pool from it:
//!
//! - **Refresh passes.** Every [`DiscoveryConfig::interval_s`] the catalogue fetches every
//!   known candidate's info through a user-supplied [`Fetcher`], in a shuffled order (seeded
//!   RNG), in **batches** of at most [`DiscoveryConfig::batch_size`] fetches at once. A batch
//!   ends when all its fetches have answered or been cut; the next batch then starts.
//! - **Growing cutoff.** A batch's fetches are checked at 0.5 s, 1 s, 2 s, 4 s and 6 s after
//!   it started (from [`DiscoveryConfig::cutoff_start_s`], doubling, capped at
//!   [`DiscoveryConfig::cutoff_max_s`]). At a checkpoint, if any candidate has answered in the
//!   current pass, the fetches still running are cut (counted as timeouts); if none has, the
//!   wait grows to the next checkpoint. At the last one everything left is cut.
//! - **Expiry.** Fetched info is valid for [`DiscoveryConfig::expiry_s`]. When it expires the
//!   candidate is removed from the coordinator (it can never be granted on stale info) and
//!   refetched at once; it is added back when fresh info arrives. A failed refresh of a
//!   candidate whose info is still valid keeps that info until it expires: the coordinator's
//!   own outcome statistics and ejection react to a dead candidate faster than discovery can.
//! - **Tie-break by latency.** Within a batch, answers are pushed to the coordinator fastest
//!   first. The coordinator's deterministic mode breaks ties by the order candidates were
//!   added, so on the first fill the fastest responder of each batch wins ties over slower
//!   ones. Later refreshes update a candidate in place and keep its position; a candidate
//!   removed (expired, dropped by the source) and added again goes to the end of the order.
//!   The latest measured latency stays in the catalogue ([`Catalogue::eligible`] returns
//!   candidates fastest first) for pool builders that want it.
//! - **Capabilities at draw time.** The cache holds each candidate's capabilities; a request
//!   names the ones it needs (`Request::requiring`) and the coordinator checks them when it
//!   draws. [`Catalogue::eligible`] applies the same check for pools built from the cache.
//! - **Idle pause.** When no request has arrived for [`DiscoveryConfig::idle_pause_s`], no new
//!   pass starts (a running one finishes). The next request resumes discovery at once if a
//!   refresh is due or info has expired.
//! - **Pool threshold.** When a request finds fewer eligible candidates than the threshold
//!   (default `min(8, ceil(n/2))` of `n` known candidates), a pass starts at once instead of
//!   waiting for the interval, at most once per [`DiscoveryConfig::threshold_backoff_s`].
//!
//! The state machine is [`Catalogue`]: sans-IO like the core, it takes `now` on every call and
//! tells its driver what to do through [`Action`]s. The [`Discovery`] actor drives it with
//! tokio (fetches, cutoffs, timers) and pushes candidate changes to a [`CandidateSink`] such as
//! the coordinator. `sim` (feature `sim`) drives the same catalogue in virtual time to compare it with the
//! per-request fan-out. [`Stop`](crate::actor::Stop) stops the actor, as does dropping its
//! last address (noticed within 15 s). With the `http` feature, `perf_scores` polls a regional
//! performance-score document over HTTP. `docs/discovery.md` has the figures.
//!
//! ```
//! # #[cfg(feature = "actor")]
//! # fn main() {
//! use actix::prelude::*;
//! use selection_coordinator::actor::{Coordinator, GetState};
//! use selection_coordinator::discovery::{Demand, Discovery, DiscoveryConfig, FetchError, Fetcher};
//! use selection_coordinator::{CandidateId, CandidateInfo, Config, Limits};
//!
//! /// Stands in for an RPC asking a candidate for its info.
//! struct Info;
//! impl Fetcher for Info {
//!     async fn fetch(&self, id: &CandidateId) -> Result<CandidateInfo, FetchError> {
//!         Ok(CandidateInfo::new(id.clone()).with_capability("h264"))
//!     }
//! }
//!
//! System::new().block_on(async {
//!     let coordinator = Coordinator::new(Config::default(), Limits::default())?.start();
//!     let ids = vec![CandidateId::new("a"), CandidateId::new("b")];
//!     let discovery = Discovery::new(DiscoveryConfig::default(), ids, Info, coordinator.clone())?
//!         .start();
//!     // A stream starts: it counts as demand and says what it needs.
//!     let eligible = discovery.send(Demand { required: vec!["h264".into()] }).await?;
//!     # let _ = eligible;
//!     actix::clock::sleep(std::time::Duration::from_millis(50)).await;
//!     assert_eq!(coordinator.send(GetState).await?.candidates.len(), 2);
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })
//! .unwrap();
//! # }
//! # #[cfg(not(feature = "actor"))]
//! # fn main() {}
//! ```

#[cfg(feature = "actor")]
mod actor;
mod catalogue;
mod config;
mod events;
#[cfg(feature = "sim")]
pub mod sim;

#[cfg(feature = "http")]
pub mod perf_scores;

use std::future::Future;

#[cfg(feature = "actor")]
pub use actor::{
    CandidateChange, CandidateSink, Demand, Discovery, DiscoveryStatus, Pool, PoolLow, RefreshNow,
    SetCandidates, SetPerfScores, Snapshot,
};
pub use catalogue::Catalogue;
pub use config::{DiscoveryConfig, DiscoveryError, MAX_SECONDS};
pub use events::{Action, CatalogueStats, EntryView, RefreshReason, RefreshReport};

use crate::vocab::{CandidateId, CandidateInfo};

/// `text` (from a fetcher or a remote document, for a log line or an error) cut to `chars`
/// characters, marked where it was cut.
#[cfg(feature = "actor")]
pub(crate) fn shortened(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(feature = "actor")]
pub use crate::metrics::names::{
    DISCOVERY_CACHE_AGE as METRIC_CACHE_AGE, DISCOVERY_CACHE_SIZE as METRIC_CACHE_SIZE,
    DISCOVERY_IN_FLIGHT as METRIC_IN_FLIGHT, DISCOVERY_REFRESH_DURATION as METRIC_REFRESH_DURATION,
    DISCOVERY_REQUESTS as METRIC_REQUESTS, PERF_SCORE_ERRORS as METRIC_PERF_SCORE_ERRORS,
    PERF_SCORE_UPDATES as METRIC_PERF_SCORE_UPDATES,
};

/// Why fetching one candidate's info failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The candidate did not answer in time.
    #[error("timed out")]
    Timeout,
    /// The candidate answered with an error or could not be reached.
    #[error("fetch failed: {0}")]
    Failed(String),
}

/// Gets one candidate's info (for Livepeer: an `OrchestratorInfo` RPC).
///
/// Implement it with `async fn fetch(&self, id: &CandidateId) -> Result<CandidateInfo,
/// FetchError>`; the future must be `Send` because the actor runs many at once. Discovery
/// bounds how many run at once and cuts slow ones, so the fetcher need not time out itself.
/// A fetch that panics is caught and counted as a failed fetch (logged at `warn`); the actor
/// keeps running.
pub trait Fetcher: Send + Sync + 'static {
    /// Fetches `id`'s info. The returned info's id must be `id`.
    fn fetch(
        &self,
        id: &CandidateId,
    ) -> impl Future<Output = Result<CandidateInfo, FetchError>> + Send;
}

#[cfg(all(test, feature = "actor"))]
mod tests {
    use super::shortened;

    #[test]
    fn shortened_keeps_exactly_the_given_number_of_characters() {
        assert_eq!(shortened("abcdef", 3), "abc...");
        assert_eq!(shortened("äöüß", 2), "äö...");
        assert_eq!(shortened("abc", 3), "abc");
        assert_eq!(shortened("", 0), "");
    }
}
