//! What the estimator is told (an outcome with its grant's circumstances) and what it saves.

use serde::{Deserialize, Serialize};

/// What one outcome tells the estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Signal {
    /// A success that took this long (milliseconds, grant to answer).
    Success(f64),
    /// The candidate said it is overloaded.
    Overload,
    /// The attempt timed out.
    Timeout,
    /// Any other failure: no evidence about load.
    Other,
}

/// One outcome with the circumstances of its attempt's grant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// What the outcome says.
    pub signal: Signal,
    /// The candidate's attempts in flight when the attempt was granted, itself included.
    pub concurrency: u32,
    /// The candidate's limit in force when the attempt was granted.
    pub limit: u32,
    /// When the attempt was granted, seconds.
    pub granted_s: f64,
}

/// The learned part of an estimator, saved in snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSnapshot {
    /// The limit (fractional; the integer part is in force).
    pub limit: f64,
    /// The no-load latency estimate, milliseconds.
    pub no_load_ms: Option<f64>,
    /// The light-load latency's relative variance.
    pub noise: f64,
    /// Still doubling (no queueing or overload seen yet).
    pub slow_start: bool,
}

impl LimitSnapshot {
    /// Checks that every number is usable; `what` names the candidate in the message.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if !(self.limit.is_finite() && self.limit >= 1.0) {
            return Err(format!("{what}.limit = {}: must be at least 1", self.limit));
        }
        if let Some(n) = self.no_load_ms {
            if !(n.is_finite() && n >= 0.0) {
                return Err(format!(
                    "{what}.no_load_ms = {n}: must be finite and not negative"
                ));
            }
        }
        if !(self.noise.is_finite() && self.noise >= 0.0) {
            return Err(format!(
                "{what}.noise = {}: must be finite and not negative",
                self.noise
            ));
        }
        Ok(())
    }
}
