//! The update rules: how an outcome moves a candidate's statistics, and ejection.

use super::evidence;
use super::stats::ema;
use super::{Overall, ScoreModel, Stats};
use crate::vocab::{FailureClass, Outcome};

/// Weight of the newest outcome in [`Stats::overload_evidence`]: about 50 outcomes of memory,
/// long enough that a candidate that overloads under bursts keeps its load penalty between
/// them (a window of seconds would forget it and pile work on again).
const OVERLOAD_EVIDENCE_ALPHA: f32 = 0.02;

impl ScoreModel {
    /// The attempt time an outcome contributes: a success's first byte when reported, else
    /// the whole attempt (`elapsed_ms`, timed by the core).
    pub(crate) fn time_sample(outcome: &Outcome, elapsed_ms: Option<f64>) -> Option<f64> {
        match outcome {
            Outcome::Failure(FailureClass::Cancelled) => None,
            Outcome::Success(s) => s.ttfb_ms.or(elapsed_ms),
            Outcome::Failure(_) => elapsed_ms,
        }
        .filter(|t| t.is_finite() && *t >= 0.0)
    }

    /// Applies an outcome to the statistics. Returns true when the candidate should be ejected
    /// now (the caller checks the ejected share).
    pub(crate) fn observe(
        &self,
        stats: &mut Stats,
        overall: &mut Overall,
        outcome: &Outcome,
        elapsed_ms: Option<f64>,
        now_s: f64,
        bucket: u64,
    ) -> bool {
        let cfg = &self.config;
        // Warm-up: a running mean until its weight falls to alpha. The success prior counts as
        // one sample (unless the first sample replaces it); the times have no prior, and the
        // success-only ones (connect, ttfb, bandwidth) count successes.
        let (a, a_time, a_ok) = if cfg.ema.warm_up {
            let n = stats.attempts as f64;
            let prior = if cfg.ema.first_sample_replaces_prior {
                0.0
            } else {
                1.0
            };
            (
                cfg.ema.alpha.max(1.0 / (n + 1.0 + prior)),
                cfg.ema.alpha.max(1.0 / (n + 1.0)),
                cfg.ema.alpha.max(1.0 / (stats.successes as f64 + 1.0)),
            )
        } else {
            (cfg.ema.alpha, cfg.ema.alpha, cfg.ema.alpha)
        };
        let (mut a, mut a_ok) = (a, a_ok);
        let oa = cfg.ema.overall_alpha;
        let buckets = cfg.window.buckets as usize;
        let (success_sample, overload) = match outcome {
            Outcome::Failure(FailureClass::Cancelled) => return false,
            Outcome::Success(_) | Outcome::Failure(FailureClass::Application) => (1.0, false),
            Outcome::Failure(FailureClass::Overload) => (0.0, true),
            Outcome::Failure(_) => (0.0, false),
        };
        // Bring stored values to "now" first, so decay is real and not only a view.
        let decay = self.decay_factor(stats, now_s);
        if decay < 1.0 {
            let prior = cfg.ema.success_prior;
            stats.success = stats.success.map(|s| prior + (s - prior) * decay);
            let pull = |x: &mut Option<f64>, o: Option<f64>| {
                if let (Some(v), Some(o)) = (x.as_mut(), o) {
                    *v = o + (*v - o) * decay;
                }
            };
            pull(&mut stats.connect_ms, overall.connect_ms);
            pull(&mut stats.ttfb_ms, overall.ttfb_ms);
            pull(&mut stats.bandwidth_bps, overall.bandwidth_bps);
            pull(&mut stats.attempt_ms, overall.attempt_ms);
        }
        // Time to a result: a success's first byte when reported, else the whole attempt.
        let first_byte = match outcome {
            Outcome::Success(s) => s.ttfb_ms.or(elapsed_ms),
            Outcome::Failure(_) => elapsed_ms,
        };
        if let Some(t) = first_byte.filter(|t| t.is_finite() && *t >= 0.0) {
            match Some(cfg.ema.drift).filter(|d| *d > 0.0) {
                Some(drift) => {
                    let since = stats.last_sample_s.map_or(0.0, |l| now_s - l);
                    let f = evidence::update(
                        stats.attempt_ms,
                        stats.attempt_var,
                        if stats.attempt_surprise {
                            -stats.attempt_noise
                        } else {
                            stats.attempt_noise
                        },
                        t,
                        since,
                        drift,
                        stats.attempts,
                    );
                    stats.attempt_ms = Some(f.mean_ms);
                    stats.attempt_var = f.var;
                    stats.attempt_noise = f.noise.abs();
                    stats.attempt_surprise = f.noise.is_sign_negative();
                    // A surprising time says the candidate may have changed: the sample
                    // moves its other averages (success, first byte, ...) as much as the
                    // filter trusts it. Otherwise they keep their own steady weights.
                    if f.surprise {
                        a = a.max(f.gain);
                        a_ok = a_ok.max(f.gain);
                    } else {
                        // The success average ages with the time estimate, at half its pace:
                        // a stale candidate's success moves with its probes too.
                        a = a.max(0.5 * f.gain);
                    }
                }
                None => stats.attempt_ms = Some(ema(stats.attempt_ms, t, a_time)),
            }
            overall.attempt_ms = Some(ema(overall.attempt_ms, t, oa));
        }
        let previous = match stats.success {
            Some(s) => Some(s),
            None if cfg.ema.first_sample_replaces_prior => None,
            None => Some(cfg.ema.success_prior),
        };
        stats.success = Some(ema(previous, success_sample, a));
        stats.window.record(bucket, buckets, overload);
        let o = if overload { 1.0 } else { 0.0 };
        stats.overload_evidence += OVERLOAD_EVIDENCE_ALPHA * (o - stats.overload_evidence);
        stats.attempts += 1;
        stats.last_sample_s = Some(now_s);
        if success_sample > 0.0 {
            stats.successes += 1;
            stats.consecutive_failures = 0;
            if let Outcome::Success(s) = outcome {
                if let Some(c) = s.connect_ms {
                    stats.connect_ms = Some(ema(stats.connect_ms, c, a_ok));
                    overall.connect_ms = Some(ema(overall.connect_ms, c, oa));
                }
                if let Some(t) = s.ttfb_ms {
                    stats.ttfb_ms = Some(ema(stats.ttfb_ms, t, a_ok));
                    overall.ttfb_ms = Some(ema(overall.ttfb_ms, t, oa));
                }
                if let (Some(bytes), Some(d)) = (s.bytes, s.duration_ms) {
                    let bw = bytes as f64 / (d / 1000.0);
                    // A zero duration, or one so short the rate overflows, says nothing about bandwidth.
                    if d > 0.0 && bw.is_finite() {
                        stats.bandwidth_bps = Some(ema(stats.bandwidth_bps, bw, a_ok));
                        overall.bandwidth_bps = Some(ema(overall.bandwidth_bps, bw, oa));
                    }
                }
            }
            false
        } else {
            stats.consecutive_failures = stats.consecutive_failures.saturating_add(1);
            cfg.ejection.enabled
                && stats.consecutive_failures >= cfg.ejection.consecutive_failures
                && stats.ejected_until_s.is_none_or(|u| u <= now_s)
        }
    }

    /// Starts an ejection: its length grows with each repeat, capped.
    pub(crate) fn eject(&self, stats: &mut Stats, now_s: f64) {
        let e = &self.config.ejection;
        stats.ejections = stats.ejections.saturating_add(1);
        let secs = (e.base_s * stats.ejections as f64).min(e.max_s);
        stats.ejected_until_s = Some(now_s + secs);
        stats.consecutive_failures = 0;
    }
}
