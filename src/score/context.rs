//! What scoring reads that is not the candidate's own: the fleet, the clock and the candidate's
//! place in them, as of the last coarse refresh or the moment of the call.

use super::{LoadPowers, Overall, ProbePeriods};

/// What the core knows of the fleet and the clock when it rebuilds a candidate's components
/// from the cached ones ([`ScoreModel::assemble`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FleetState<'a> {
    /// Sum of the live candidates' stakes.
    pub(crate) stake_total: f64,
    /// See [`ScoreContext::probe_at_s`].
    pub(crate) probe_at_s: f64,
    /// See [`ScoreContext::probes`].
    pub(crate) probes: ProbePeriods,
    /// See [`ScoreContext::queueing`].
    pub(crate) queueing: f32,
    /// See [`ScoreContext::load_scale`].
    pub(crate) load_scale: f64,
    /// See [`ScoreContext::heal_at_s`].
    pub(crate) heal_at_s: f64,
    /// The load component's powers of `queueing` ([`LoadPowers`]).
    pub(crate) queueing_powers: &'a LoadPowers,
}

/// Inputs to a component computation that are not the candidate's own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreContext {
    pub(crate) overall: Overall,
    pub(crate) now_s: f64,
    pub(crate) bucket: u64,
    pub(crate) stake_total: f64,
    pub(crate) in_flight: u32,
    pub(crate) limit: u32,
    /// How long the candidate's oldest attempt still running has gone without a result,
    /// milliseconds (0 for none): its time to a result is at least that.
    pub(crate) pending_ms: f64,
    /// With `ema.pooling`: the spread of the candidates' true relative times beyond noise
    /// (squared natural-log ratios), as of the last coarse refresh; 0 shrinks every time
    /// estimate to the fleet's center.
    pub(crate) spread: f64,
    /// With `ema.pooling`: the fleet's center, the mean over candidates of `ln(time per
    /// success)`, as of the last coarse refresh (NaN before the first).
    pub(crate) center: f64,
    /// With `ema.probe_s`: a candidate idle and unsampled for longer than its period is drawn
    /// as if its time were average (`ema.record_probes`: a shorter one for a good record).
    pub(crate) probes: ProbePeriods,
    /// The time probes are judged at: the last coarse refresh, so that whether a probe is
    /// due moves for every candidate at once and the trees (written at refreshes) and the
    /// evaluated draw agree between refreshes.
    pub(crate) probe_at_s: f64,
    /// The fleet's evidence that its candidates slow under concurrency: the mean of their
    /// [`super::LoadFit::evidence`].
    pub(crate) queueing: f32,
    /// What `load.fleet_relative` counts attempts in flight against, as of the last coarse
    /// refresh (`load_gate::fleet_scale`): 1 below one attempt per candidate or without
    /// queueing evidence.
    pub(crate) load_scale: f64,
    /// The candidate's own evidence that it slows under concurrency
    /// ([`super::LoadFit::evidence`]).
    pub(crate) own_queueing: f32,
    /// Whether the candidate's overload failures follow its load
    /// ([`super::LoadFit::overload_follows_load`]).
    pub(crate) overload_follows_load: bool,
    /// How much slower than its average the candidate's next attempt is expected to be at
    /// its present concurrency ([`super::LoadFit::time_factor`]); 1 without a fit.
    pub(crate) queue_time: f64,
    /// With `ema.heal_probes`: when a failing candidate last answered (-inf: never); a
    /// failing candidate idle and last sampled before is drawn as if its time were average.
    pub(crate) heal_at_s: f64,
}

impl ScoreContext {
    /// The fleet's attempt time that a candidate's time per success is read against, floored
    /// at a millisecond as the tries are: in a fleet answering in under a millisecond every
    /// try would otherwise read as many times the average, and the draw weights of all would
    /// underflow to a uniform draw that ignores failures.
    #[inline]
    pub(crate) fn attempt_reference_ms(&self) -> Option<f64> {
        self.overall.attempt_ms.map(|o| o.max(1.0))
    }
}
