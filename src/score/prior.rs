//! Remote evidence merged as a prior: the pooled averages other coordinators reported on a
//! candidate, blended with the local statistics before the components are computed.
//!
//! The blend only ever produces statistics a stream of local outcomes could have produced:
//! every averaged value is a convex combination of the local value and remote values that were
//! checked to lie in the range a local outcome can report (success in `[0, 1]`, times and
//! bandwidth finite and non-negative, error counts at most the totals). The prior's weight is
//! at most [`ShareConfig::max_prior_samples`](super::ShareConfig) local samples.

use super::evidence::MAX_SAMPLED_VAR;
use super::stats::ErrorWindow;
use super::{ScoreModel, Stats};

/// One sender's last report on one candidate, as the core keeps it (values already checked).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RemoteEvidence {
    /// Success average in `[0, 1]`.
    pub(crate) success: f64,
    /// Time to a result, ms (NaN: none).
    pub(crate) attempt_ms: f64,
    /// That estimate's variance, squared natural-log units.
    pub(crate) attempt_var: f64,
    /// First byte, ms (NaN: none).
    pub(crate) ttfb_ms: f64,
    /// Connect, ms (NaN: none).
    pub(crate) connect_ms: f64,
    /// Bandwidth, bytes per second (NaN: none).
    pub(crate) bandwidth_bps: f64,
    /// Overload errors and outcomes over the sender's window.
    pub(crate) overload: (u32, u32),
    /// Samples behind the averages (a running total).
    pub(crate) samples: u64,
    /// Of those, successes (a running total).
    pub(crate) successes: u64,
    /// When its newest sample was taken, seconds on the receiving core's clock.
    pub(crate) sample_s: f64,
}

/// Weighted sums of one value over the senders that reported it.
#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    sum: f64,
    weight: f64,
}

impl Acc {
    fn add(&mut self, x: f64, w: f64) {
        if x.is_finite() {
            self.sum += w * x;
            self.weight += w;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.sum / self.weight)
    }
}

/// Several senders' reports on one candidate, pooled.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Pooled {
    /// Samples behind them (each sender's counted up to the average's memory).
    samples: f64,
    success: Option<f64>,
    ttfb_ms: Option<f64>,
    connect_ms: Option<f64>,
    bandwidth_bps: Option<f64>,
    /// Mean time to a result, ms.
    attempt_ms: Option<f64>,
    /// The variance of its natural log (independent senders weighted by their samples).
    time_var: f64,
    /// The senders' overload windows: errors and outcomes, each sender's scaled to count at
    /// most as many outcomes as its samples do.
    errors: f64,
    total: f64,
    /// The newest sample behind them, seconds on the receiving core's clock.
    newest_s: f64,
    /// Outcomes the senders saw since their previous digests (attempts, successes), decaying,
    /// as of `recent_s`.
    recent: (f64, f64),
    recent_s: f64,
}

/// The convex blend of a local value (weight `wl`) and a remote one (weight `wr`).
fn mix(local: Option<f64>, wl: f64, remote: Option<f64>, wr: f64) -> Option<f64> {
    match (local, remote) {
        (Some(l), Some(r)) if wl + wr > 0.0 => Some((wl * l + wr * r) / (wl + wr)),
        (Some(l), Some(_)) => Some(l),
        (l, None) => l,
        (None, r) => r,
    }
}

impl ScoreModel {
    /// How many samples an exponential average of the config's `alpha` remembers.
    fn memory(&self) -> f64 {
        (1.0 / self.config.ema.alpha).ceil()
    }

    /// The weight of local evidence: its samples up to the average's memory, halving every
    /// `share.local_half_life_s` since the last one.
    pub(crate) fn local_weight(&self, local: &Stats, now_s: f64) -> f64 {
        let Some(last) = local.last_sample_s else {
            return 0.0;
        };
        let n = (local.attempts as f64).min(self.memory());
        let age = (now_s - last).max(0.0);
        n * (-age / self.config.share.local_half_life_s).exp2()
    }

    /// Pools the senders' reports on one candidate (those neither expired nor in their
    /// blackout): sample-weighted averages and overload windows, recent counts summed.
    /// `None`: nothing usable.
    pub(crate) fn pool<'a>(
        &self,
        evidence: impl Iterator<Item = &'a RemoteEvidence>,
        recent: (f64, f64, f64),
    ) -> Option<Pooled> {
        let memory = self.memory();
        let mut p = Pooled::default();
        let (mut success, mut ttfb, mut connect, mut bandwidth) = (
            Acc::default(),
            Acc::default(),
            Acc::default(),
            Acc::default(),
        );
        let mut time = Acc::default();
        let (mut var_sum, mut time_weight) = (0.0f64, 0.0f64);
        let mut newest = f64::NEG_INFINITY;
        for e in evidence {
            let n = (e.samples as f64).min(memory);
            if n <= 0.0 {
                continue;
            }
            p.samples += n;
            newest = newest.max(e.sample_s);
            // While a sender has no more samples than an average remembers, its counts give
            // its plain success rate, without the optimistic prior its average started from:
            // pooled over many senders with a sample or two each, those priors would add up
            // to a bias toward success.
            let rate = if (e.samples as f64) <= memory {
                e.successes.min(e.samples) as f64 / e.samples as f64
            } else {
                e.success
            };
            success.add(rate, n);
            ttfb.add(e.ttfb_ms, n);
            connect.add(e.connect_ms, n);
            bandwidth.add(e.bandwidth_bps, n);
            if e.attempt_ms.is_finite() {
                // Averaged as the senders' own averages were, sample by sample: a mean of
                // their logs would be a geometric mean, far below the real one for a candidate
                // that mixes fast successes and slow timeouts.
                time.add(e.attempt_ms, n);
                var_sum += n * n * e.attempt_var;
                time_weight += n;
            }
            // A sender's window weighs what its samples do, as its averages above: its error
            // share counted over at most `n` outcomes. Summed as raw counts, one sender
            // claiming a window far larger than its samples set the pooled share alone.
            let (errors, total) = (f64::from(e.overload.0), f64::from(e.overload.1));
            if total > 0.0 {
                let w = total.min(n);
                p.errors += errors / total * w;
                p.total += w;
            }
        }
        if p.samples <= 0.0 {
            return None;
        }
        p.success = success.mean();
        p.ttfb_ms = ttfb.mean();
        p.connect_ms = connect.mean();
        p.bandwidth_bps = bandwidth.mean();
        p.attempt_ms = time.mean();
        p.time_var = if time_weight > 0.0 {
            var_sum / (time_weight * time_weight)
        } else {
            0.0
        };
        p.newest_s = newest;
        p.recent = (recent.0, recent.1);
        p.recent_s = recent.2;
        Some(p)
    }

    /// The local statistics with pooled remote evidence blended in (`None`: the prior weighs
    /// nothing, use the local statistics as they are).
    pub(crate) fn blend(
        &self,
        local: &Stats,
        pooled: &Pooled,
        now_s: f64,
        bucket: u64,
    ) -> Option<Stats> {
        let share = &self.config.share;
        let cap = share.max_prior_samples;
        // The senders' averages weigh what their samples are worth, up to the cap.
        let remote_weight = (share.remote_weight * pooled.samples).min(cap);
        // The outcomes the senders saw since their previous digests are the freshest remote
        // evidence on success: each counts as one outcome, and they take the cap first; the
        // senders' averages fill what is left of it.
        let decay = (-(now_s - pooled.recent_s).max(0.0) / share.local_half_life_s).exp2();
        let (ra, rs) = (pooled.recent.0 * decay, pooled.recent.1 * decay);
        let recent_weight = if share.remote_weight > 0.0 {
            ra.min(cap)
        } else {
            0.0
        };
        let fill = remote_weight.min(cap - recent_weight);
        let success_weight = recent_weight + fill;
        if remote_weight <= 0.0 || success_weight <= 0.0 {
            return None;
        }
        let remote_success = match pooled.success {
            Some(avg) if recent_weight > 0.0 => {
                Some((recent_weight * (rs / ra) + fill * avg) / success_weight)
            }
            other => other,
        };
        let local_weight = self.local_weight(local, now_s);
        let mut out = local.clone();
        // Success: a candidate never sampled here keeps the optimistic prior as one sample,
        // as a first local outcome would (unless the first sample replaces it).
        let ema = &self.config.ema;
        let (own, own_weight) = match local.success {
            Some(s) => (s, local_weight),
            None if ema.first_sample_replaces_prior => (ema.success_prior, 0.0),
            None => (ema.success_prior, 1.0),
        };
        out.success = mix(Some(own), own_weight, remote_success, success_weight);
        out.ttfb_ms = mix(local.ttfb_ms, local_weight, pooled.ttfb_ms, remote_weight);
        out.connect_ms = mix(
            local.connect_ms,
            local_weight,
            pooled.connect_ms,
            remote_weight,
        );
        out.bandwidth_bps = mix(
            local.bandwidth_bps,
            local_weight,
            pooled.bandwidth_bps,
            remote_weight,
        );
        // The time blends as the averages do; its estimate's variance (log units) as that of
        // independent estimates weighted by their samples, the remote one inflated by what a
        // remote sample is worth. The remote variance counts no higher than a local
        // estimate's right after a sample, nor than the local estimate's own: pooling shrinks
        // a time towards the fleet's by its variance, and a sender claiming doubt would
        // otherwise pull a well-sampled time all the way there, further than local outcomes
        // could move it. Evidence heard never makes a local estimate less certain.
        if let Some(t) = pooled.attempt_ms {
            let var_remote = (pooled.time_var / share.remote_weight).min(MAX_SAMPLED_VAR);
            out.attempt_ms = mix(local.attempt_ms, local_weight, Some(t), remote_weight);
            let var = match local.attempt_ms {
                Some(_) if local_weight + remote_weight > 0.0 => {
                    let (a, b) = (local_weight, remote_weight);
                    let own = f64::from(local.attempt_var);
                    (a * a * own + b * b * var_remote.min(own)) / ((a + b) * (a + b))
                }
                Some(_) => f64::from(local.attempt_var),
                None => var_remote,
            };
            out.attempt_var = if var.is_finite() { var as f32 } else { 0.0 };
        }
        // The overload window: the remote counts, scaled to weigh at most the prior's samples,
        // are added to the local ones in the current bucket.
        let (errors, total) = (pooled.errors, pooled.total);
        if total > 0.0 {
            let buckets = self.config.window.buckets as usize;
            let (e, t) = local.window.counts(bucket, buckets);
            let scale = (remote_weight / total).min(1.0);
            let (re, rt) = ((errors * scale).round(), (total * scale).round());
            if rt > 0.0 {
                let merged = (e + re as u32, t + rt as u32);
                out.window = ErrorWindow::from_relative(&[merged], bucket, buckets);
            }
        }
        // Decay (with `ema.half_life_s`) counts from the freshest evidence.
        let newest = pooled.newest_s;
        if newest.is_finite() {
            out.last_sample_s = Some(local.last_sample_s.map_or(newest, |l| l.max(newest)));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Config;

    fn evidence(samples: u64, overload: (u32, u32)) -> RemoteEvidence {
        RemoteEvidence {
            success: 1.0,
            attempt_ms: 10.0,
            attempt_var: 0.1,
            ttfb_ms: 10.0,
            connect_ms: f64::NAN,
            bandwidth_bps: f64::NAN,
            overload,
            samples,
            successes: samples,
            sample_s: 0.0,
        }
    }

    #[test]
    fn a_senders_window_weighs_no_more_than_its_samples() {
        let model = ScoreModel::new(Config::default()).unwrap();
        let mut senders: Vec<RemoteEvidence> = (0..20).map(|_| evidence(100, (0, 1_000))).collect();
        // One sender with a single sample claims a window of a million overload errors.
        senders.push(evidence(1, (1_000_000, 1_000_000)));
        let p = model.pool(senders.iter(), (0.0, 0.0, 0.0)).unwrap();
        let memory = model.memory();
        assert_eq!(p.total, 20.0 * memory + 1.0);
        assert_eq!(p.errors, 1.0);
        // Windows of fewer outcomes than the samples count as they are.
        let p = model
            .pool(
                [evidence(100, (1, 4)), evidence(100, (0, 2))].iter(),
                (0.0, 0.0, 0.0),
            )
            .unwrap();
        assert_eq!((p.errors, p.total), (1.0, 6.0));
    }
}
