//! # selection-coordinator
//!
//! Choose which candidate (storage provider, database server, transcoding orchestrator) gets the
//! next unit of work, with one coordinator that owns all the state.
//!
//! ## The model
//!
//! - A **candidate** has static info ([`CandidateInfo`]: tags, stake, price, regional perf scores,
//!   capabilities, its own in-flight limit) and learned statistics ([`score::Stats`]).
//! - A **request** ([`Request`]) needs a candidate: any, or an explicit subset; it may run
//!   several attempts at once (`parallelism`), exclude candidates, require capabilities and carry
//!   a deadline. A retry excludes what it already tried.
//! - A **slot** is permission to run one attempt. [`Limits`] bound attempts in flight globally,
//!   per candidate and per request, and the number of waiting requests; all change at run time.
//! - The **coordinator** owns candidates, statistics, the waiting queue and the slots. Whenever
//!   capacity appears (a request arrives, an attempt is done, a limit is raised, a candidate is
//!   added) it serves the oldest request it can serve with **one weighted draw** over that
//!   request's eligible candidates that have free capacity, and repeats until nothing more can be
//!   granted. A request that cannot be served now is skipped, never blocking those behind it;
//!   nothing waits on a comparison with another waiter, so nothing can deadlock.
//! - A **worker** asks for a slot, gets a grant (a candidate and a permit), reports the
//!   [`Outcome`] (timings and bytes, or a classified failure) and releases the slot. Outcomes
//!   update the statistics, the statistics the scores ([`score`]), the scores the next draw.
//!
//! ## Layers
//!
//! - [`core`]: the pure state machine ([`Core`]); it takes `now` and an RNG on every call and
//!   reads no clock, so the simulator and the tests drive it deterministically.
//! - [`actor`]: the actix [`actor::Coordinator`] that drives the core in real time, delivers
//!   grants as [`actor::Permit`]s, runs the timers, and emits [`metrics`]; plus an async handle.
//! - `sim` (feature `sim`): the discrete-event simulator behind `selcoord simulate`.
//! - [`snapshot`]: what was learned, saved and restored across restarts.
//!
//! ## Features
//!
//! The core ([`core`], [`score`], [`decision`], [`snapshot`] and the discovery
//! [`Catalogue`](discovery::Catalogue)) is always built and needs no async runtime. Each layer
//! above it is a Cargo feature:
//!
//! | feature | adds | pulls in |
//! |---|---|---|
//! | `actor` | [`actor`] (the coordinator actor, permits, the async handle), the discovery actor, [`metrics`] | actix, tokio, metrics |
//! | `sim` | `sim` and `discovery::sim`: the simulator and its SVG plots | plotters |
//! | `cli` | the `selcoord` binary (`simulate`, `explain`, `demo`); implies `actor` and `sim` | clap, indicatif |
//! | `prometheus` | `metrics::install_prometheus`; implies `actor` | metrics-exporter-prometheus |
//! | `http` | `discovery::perf_scores` over HTTP; implies `actor` | hyper |
//! | `fleet` | `fleet`: sharing digests with other coordinators over NATS; implies `actor` | async-nats |
//! | `decision-records` | decision records (`Core::set_record_rate`); off, the recording code is compiled out | |
//!
//! The default is `cli`, `prometheus` and `decision-records`. A library that drives the core
//! itself depends on the crate with `default-features = false`; one embedding the actor adds
//! `features = ["actor", "decision-records"]` (without `decision-records`, subscriptions to
//! decision records receive nothing).
//!
//! ## Randomness
//!
//! Every core call that draws takes the caller's RNG as `&mut R` with `R:`
//! [`rand::Rng`] of rand **0.10** (`SmallRng`, `StdRng`, `rand::rng()`, or `&mut dyn Rng`), so
//! a seeded RNG makes every decision reproducible. An RNG of another rand major does not
//! implement that trait; the crate re-exports the rand it uses as
//! [`selection_coordinator::rand`](crate::rand) for callers that do not depend on rand
//! themselves.
//!
//! ## A decision through the pure core
//!
//! ```
//! use std::time::Instant;
//! use rand::{rngs::SmallRng, SeedableRng};
//! use selection_coordinator::{CandidateInfo, Config, Core, Event, Next, Outcome, Request};
//!
//! let now = Instant::now();
//! let mut rng = SmallRng::seed_from_u64(1);
//! let mut core = Core::new(Config::default(), now)?;
//! core.add_candidate(CandidateInfo::new("a"), now, &mut rng)?;
//! core.add_candidate(CandidateInfo::new("b").with_tag("verified"), now, &mut rng)?;
//!
//! core.ready(Request::any(), now, &mut rng)?;
//! let Some(Event::Granted(grant)) = core.poll_event() else { unreachable!() };
//! core.outcome(grant.attempt, Outcome::success_with(10.0, 25.0, 65_536, 40.0), now)?;
//! core.done(grant.attempt, Next::Finish, now, &mut rng)?;
//! assert_eq!(core.in_flight(), 0);
//! # Ok::<(), selection_coordinator::Error>(())
//! ```
#![forbid(unsafe_code)]
// On docs.rs (nightly): mark each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The crate page and the discovery page link the actor's items, which a build without the
// `actor` feature does not have: there those links read as plain text.
#![cfg_attr(not(feature = "actor"), allow(rustdoc::broken_intra_doc_links))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[cfg(feature = "actor")]
pub mod actor;
pub mod core;
pub mod decision;
pub mod digest;
pub mod discovery;
mod error;
#[cfg(feature = "fleet")]
pub mod fleet;
#[doc(hidden)]
pub mod input;
pub mod limit;
#[cfg(feature = "actor")]
pub mod metrics;
// Property-test settings (a fixed seed), shared with the integration tests.
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "../tests/support/props.rs"]
mod proptest_seed;
pub mod score;
#[cfg(feature = "sim")]
pub mod sim;
pub mod snapshot;
mod vocab;

#[cfg(feature = "actor")]
pub use crate::actor::{AcquireError, Answer, Coordinator, CoordinatorHandle, HandleError, Permit};
pub use crate::core::{
    AttemptId, CandidateId, CandidateInfo, CloseReason, Core, Eligible, Event, FailureClass, Grant,
    Limits, Next, Outcome, Reported, Request, RequestId, ServerFeedback, Success,
};
pub use crate::decision::{DecisionReason, DecisionRecord};
pub use crate::error::{Error, Rejection};
pub use crate::score::{Config, ConfigError, Mode};
/// The rand release the core's RNG parameters take (0.10), re-exported so that a caller's RNG
/// is of the same release.
pub use rand;

/// The README's example is compiled and run as a doc test.
#[cfg(all(doctest, feature = "actor"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
