//! What the catalogue tells its driver, and what it reports about itself.

use std::time::{Duration, Instant};

use crate::vocab::{CandidateId, CandidateInfo};

/// What the catalogue asks its driver to do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Start fetching this candidate's info; report with [`Catalogue::fetched`](super::Catalogue::fetched).
    Fetch(CandidateId),
    /// Stop this fetch: it passed the cutoff (already counted as a timeout).
    Cancel(CandidateId),
    /// Add this candidate to the coordinator.
    Add(CandidateInfo),
    /// Replace this candidate's info in the coordinator (its position and statistics stay).
    Update(CandidateInfo),
    /// Remove this candidate from the coordinator: its info expired or the source dropped it.
    Remove(CandidateId),
    /// A refresh pass ended.
    RefreshDone(RefreshReport),
}

/// What started a refresh pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshReason {
    /// The interval elapsed (or the first fill, or a resume after an idle pause).
    Scheduled,
    /// A request found fewer eligible candidates than the pool threshold.
    PoolThreshold,
}

/// The summary of one refresh pass.
#[derive(Clone, Debug, PartialEq)]
pub struct RefreshReport {
    /// What started it.
    pub reason: RefreshReason,
    /// When it started.
    pub started: Instant,
    /// From its start to its last answer or cut.
    pub duration: Duration,
    /// Fetches started.
    pub fetches: u32,
    /// Fetches that brought valid info.
    pub answered: u32,
    /// Fetches cut by the cutoff or reported as timeouts.
    pub timed_out: u32,
    /// Fetches that failed otherwise or brought unusable info.
    pub failed: u32,
}

/// Running totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatalogueStats {
    /// Fetches started.
    pub fetches: u64,
    /// Fetches that brought valid info.
    pub ok: u64,
    /// Fetches that failed ([`FetchError::Failed`](super::FetchError::Failed)).
    pub errors: u64,
    /// Fetches cut by the cutoff or reported as [`FetchError::Timeout`](super::FetchError::Timeout).
    pub timeouts: u64,
    /// Fetches that brought info for another id or with unusable numbers.
    pub invalid: u64,
    /// Results that arrived after their fetch was cut or its candidate dropped (ignored).
    pub late: u64,
    /// Refresh passes finished.
    pub passes: u64,
    /// Passes started by the pool threshold.
    pub threshold_refreshes: u64,
    /// The most fetches ever running at once.
    pub peak_in_flight: usize,
}

/// A read-only view of one cached candidate.
#[derive(Clone, Copy, Debug)]
pub struct EntryView<'a> {
    /// The last valid info fetched, if any.
    pub info: Option<&'a CandidateInfo>,
    /// When it was fetched.
    pub fetched_at: Option<Instant>,
    /// When it stops being valid.
    pub expires_at: Option<Instant>,
    /// How long its last successful fetch took.
    pub latency: Option<Duration>,
    /// Whether the coordinator has it (valid info, pushed).
    pub published: bool,
    /// Failed fetches since its last success.
    pub failures: u32,
    /// Whether a fetch of it is running.
    pub in_flight: bool,
}
