//! # selection-coordinator
//!
//! One coordinator owns every candidate (provider, server, orchestrator), what it has learned
//! about them, and the queue of requests waiting for a slot. Each time capacity appears it makes
//! **one many-way weighted draw** for the oldest request it can serve, so no waiter ever waits
//! on another waiter's comparison: nothing can deadlock.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod actor;
pub mod core;
pub mod decision;
mod error;
pub mod metrics;
pub mod score;
pub mod sim;
pub mod snapshot;

pub use crate::core::{
    AttemptId, CandidateId, CandidateInfo, Core, Eligible, Event, FailureClass, Grant, Limits,
    Next, Outcome, Request, RequestId, Success,
};
pub use crate::decision::{DecisionReason, DecisionRecord};
pub use crate::error::{Error, Rejection};
pub use crate::score::{Config, ConfigError, Mode};
