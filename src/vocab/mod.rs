//! The vocabulary every layer speaks: candidate ids and info, requests, outcomes and the ids of
//! requests and attempts.
//!
//! It sits at the bottom of the crate and imports nothing from it: the scoring model, the
//! decision records, the errors and the core all import these words downward. The public paths
//! are the re-exports in [`crate::core`] and at the crate root.

mod candidate;
mod feedback;
mod ids;
mod outcome;
mod outcome_builder;
mod request;

pub use candidate::CandidateInfo;
pub use feedback::ServerFeedback;
pub use ids::{AttemptId, CandidateId, RequestId};
pub use outcome::{FailureClass, Outcome, Success};
pub use request::{Eligible, Next, Request};
