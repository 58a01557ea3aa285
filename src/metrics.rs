//! Metric names, descriptions and recording through the `metrics` facade.
//!
//! The library only emits; executables install an exporter (see the `prometheus` feature).
//! (Placeholder: the recording functions are filled in by the observability work.)

use crate::core::{CandidateId, Core, Event, Outcome};

/// Records the coordinator's metrics, capping candidate labels.
#[derive(Debug, Default)]
pub struct CoordinatorMetrics {
    _cap: usize,
}

impl CoordinatorMetrics {
    /// A recorder that labels at most `cap` candidates by name; the rest become `other`.
    pub fn new(cap: usize) -> Self {
        CoordinatorMetrics { _cap: cap }
    }

    /// Records a grant, rejection or reclaim.
    pub fn on_event(&mut self, _event: &Event) {}

    /// Records an attempt's outcome.
    pub fn on_outcome(&mut self, _candidate: &CandidateId, _outcome: &Outcome) {}

    /// Records how long one decision (a handler's core call) took, seconds.
    pub fn on_decision_cost(&mut self, _seconds: f64) {}

    /// Records gauges read from the core: waiting, in flight vs limits, components, counters.
    pub fn on_gauges(&mut self, _core: &Core) {}
}
