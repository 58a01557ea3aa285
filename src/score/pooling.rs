//! Pooled time estimates (`ema.pooling`): each candidate's time per success, on a log scale,
//! shrunk toward the fleet's center by its uncertainty against the spread the candidates really
//! show (empirical Bayes). The core computes the center and the spread at each coarse refresh.

use super::{per_success, PackedStats, ScoreContext, ScoreModel, StatsView};

/// A candidate's time per success (log scale) before and after pooling; see
/// [`ScoreModel::pooled_deviation`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pooled {
    pub(crate) raw: f64,
    pub(crate) var: f64,
    pub(crate) shrunk: f64,
}

impl ScoreModel {
    /// Whether time estimates are pooled: `ema.pooling` with the drift filter on (pooling
    /// weighs each estimate by the filter's variance).
    #[inline]
    pub(crate) fn pooling(&self) -> bool {
        self.config.ema.pooling && self.config.ema.drift > 0.0
    }

    /// With pooling on: the candidate's time per success on a log scale, `ln(per_success)`, as
    /// learned (`raw`), the estimate's variance (`var`), and the value the draw uses
    /// (`shrunk`): pulled toward the fleet's center (the mean of every candidate's `raw`) by
    /// `var / (spread + var)`, so a deviation within noise counts for nothing and a clear one
    /// in full. `None` when pooling is off or nothing is known yet.
    pub(crate) fn pooled_deviation<S: StatsView>(
        &self,
        stats: &S,
        ctx: &ScoreContext,
    ) -> Option<Pooled> {
        if !self.pooling() {
            return None;
        }
        let ema = &self.config.ema;
        let t = stats.attempt_ms()?;
        let o = ctx.attempt_reference_ms()?;
        let decay = self.decay_factor(stats, ctx.now_s);
        let prior = ema.success_prior;
        let success = stats
            .success()
            .map_or(prior, |s| prior + (s - prior) * decay);
        let raw = per_success(o + (t.max(1.0) - o) * decay, success).ln();
        // The variance as of the last sample: staleness is the probe schedule's business, and
        // pooling a stale candidate toward the average would spend draws exploring it.
        let var = f64::from(stats.estimate_var());
        let keep = if ctx.spread > 0.0 {
            ctx.spread / (ctx.spread + var)
        } else {
            0.0
        };
        // Until a refresh has found a center, the estimate stands as it is.
        let shrunk = if ctx.center.is_finite() {
            ctx.center + (raw - ctx.center) * keep - self.uncertainty_bonus(keep, var)
        } else {
            raw
        };
        raw.is_finite().then_some(Pooled { raw, var, shrunk })
    }

    /// What the coarse refresh pools of one candidate: `ln(time per success)` and the
    /// estimate's variance, as [`ScoreModel::pooled_deviation`] reads them, from the packed
    /// statistics.
    pub(crate) fn pooled_terms(
        &self,
        packed: &PackedStats,
        ctx: &ScoreContext,
    ) -> Option<(f64, f64)> {
        if self.config.ema.half_life_s.is_some() {
            return self.pooled_deviation(packed, ctx).map(|d| (d.raw, d.var));
        }
        if !self.pooling() {
            return None;
        }
        let (success, t, var) = packed.time_terms();
        let t = t?;
        ctx.overall.attempt_ms?;
        let success = success.unwrap_or(self.config.ema.success_prior);
        let raw = per_success(t.max(1.0), success).ln();
        raw.is_finite().then_some((raw, f64::from(var)))
    }
}
