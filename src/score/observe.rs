//! The update rules: how an outcome moves a candidate's statistics, and ejection.

use super::config::AttemptTime;
use super::evidence::{self, Sample};
use super::stats::{
    ema, finite_or_zero, pack_lag, pack_opt, saturate_u16, unpack_lag, unpack_opt, ATTEMPT_MS,
    BANDWIDTH_BPS, CONNECT_MS, EJECTED_UNTIL_S, LAST_SAMPLE_S, SUCCESS, TTFB_MS,
};
#[cfg(test)]
use super::Stats;
use super::{Overall, PackedStats, ScoreModel};
use crate::vocab::{FailureClass, Outcome};

/// Weight of the newest outcome in [`Stats::overload_evidence`]: about 50 outcomes of memory,
/// long enough that a candidate that overloads under bursts keeps its load penalty between
/// them (a window of seconds would forget it and pile work on again).
const OVERLOAD_EVIDENCE_ALPHA: f32 = 0.02;
/// Evidence below this is none (see its use).
pub(crate) const EVIDENCE_GONE: f32 = 1e-6;

/// What an outcome did to a candidate's statistics, for the core to act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The candidate should be ejected now (the caller checks the ejected share).
    pub(crate) eject: bool,
    /// An answer from a candidate that was failing (`evidence::failing`): it healed, and the
    /// others failing with it may have too.
    pub(crate) recovered: bool,
}

/// `a.max(b)` for two numbers that are not NaN: the same value, without the NaN handling
/// that `f64::max` adds (the weights here are positive: the config's alpha, validated in
/// (0, 1], a warm-up weight, or the filter's gain, always in [0, 1]).
#[inline]
fn max_of(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

impl ScoreModel {
    /// The time an outcome contributes to the load fit ([`super::LoadFit`]): a served
    /// attempt's first byte when reported, else the whole attempt (`elapsed_ms`, timed by the
    /// core). A served attempt is a success or an application error (the server answered).
    /// Other failures give none: a timeout lasts the caller's timeout and a refusal a round
    /// trip, whatever the server holds, so they say nothing of how its answers slow with its
    /// queue; counted, a fleet that fails fast or hangs reads as queueing, and the load gate
    /// then spreads traffic away from the best server long after it has healed.
    #[inline]
    pub(crate) fn time_sample(outcome: &Outcome, elapsed_ms: Option<f64>) -> Option<f64> {
        match outcome {
            Outcome::Success(s) => s.ttfb_ms.or(elapsed_ms),
            Outcome::Failure(FailureClass::Application) => elapsed_ms,
            Outcome::Failure(_) => None,
        }
        .filter(|t| *t >= 0.0 && *t < f64::INFINITY)
    }

    /// Applies an outcome to a candidate's statistics, in place in their packed form (each
    /// value read and written exactly as unpacking, updating and packing them would), and says
    /// whether the candidate should be ejected now (the caller checks the ejected share) and
    /// whether it recovered.
    #[inline]
    pub(crate) fn observe_packed(
        &self,
        stats: &mut PackedStats,
        overall: &mut Overall,
        outcome: &Outcome,
        elapsed_ms: Option<f64>,
        now_s: f64,
        bucket: u64,
    ) -> Observed {
        let cfg = &self.config;
        let attempts = u64::from(stats.attempts);
        // Warm-up: a running mean until its weight falls to alpha. The success prior counts as
        // one sample (unless the first sample replaces it); the times have no prior, and the
        // success-only ones (connect, ttfb, bandwidth) count successes.
        let a = self.success_weight(attempts);
        let (a_time, a_ok) = if cfg.ema.warm_up {
            (
                max_of(cfg.ema.alpha, 1.0 / (attempts as f64 + 1.0)),
                max_of(
                    cfg.ema.alpha,
                    1.0 / (u64::from(stats.successes) as f64 + 1.0),
                ),
            )
        } else {
            (cfg.ema.alpha, cfg.ema.alpha)
        };
        let (mut a, mut a_ok) = (a, a_ok);
        let oa = cfg.ema.overall_alpha;
        let buckets = cfg.window.buckets as usize;
        let (success_sample, overload) = match outcome {
            Outcome::Failure(FailureClass::Cancelled) => return Observed::default(),
            Outcome::Success(_) | Outcome::Failure(FailureClass::Application) => (1.0, false),
            Outcome::Failure(FailureClass::Overload) => (0.0, true),
            Outcome::Failure(_) => (0.0, false),
        };
        // Bring stored values to "now" first, so decay is real and not only a view.
        let decay = self.decay_factor(stats, now_s);
        let v = &mut stats.values;
        let mut success = unpack_opt(v[SUCCESS]);
        let mut connect_ms = unpack_opt(v[CONNECT_MS]);
        let mut ttfb_ms = unpack_opt(v[TTFB_MS]);
        let mut bandwidth_bps = unpack_opt(v[BANDWIDTH_BPS]);
        let mut attempt_ms = unpack_opt(v[ATTEMPT_MS]);
        if decay < 1.0 {
            let prior = cfg.ema.success_prior;
            success = success.map(|s| prior + (s - prior) * decay);
            let pull = |x: &mut Option<f64>, o: Option<f64>| {
                if let (Some(v), Some(o)) = (x.as_mut(), o) {
                    *v = o + (*v - o) * decay;
                }
            };
            pull(&mut connect_ms, overall.connect_ms);
            pull(&mut ttfb_ms, overall.ttfb_ms);
            pull(&mut bandwidth_bps, overall.bandwidth_bps);
            pull(&mut attempt_ms, overall.attempt_ms);
        }
        // Time to a result: a success's first byte when reported (or, counted to completion,
        // its whole duration), else the whole attempt as the core timed it.
        let result_ms = match outcome {
            Outcome::Success(s) => match cfg.ema.attempt_time {
                AttemptTime::FirstByte => s.ttfb_ms.or(elapsed_ms),
                AttemptTime::Completion => s.duration_ms.or(elapsed_ms),
            },
            Outcome::Failure(_) => elapsed_ms,
        };
        let mut recovered = false;
        // The filter called a change on a failure (see the failure branch below).
        let mut changed_on_failure = false;
        if let Some(t) = result_ms.filter(|t| *t >= 0.0 && *t < f64::INFINITY) {
            match Some(cfg.ema.drift).filter(|d| *d > 0.0) {
                Some(drift) => {
                    let since = unpack_opt(v[LAST_SAMPLE_S]).map_or(0.0, |l| now_s - l);
                    let was_failing =
                        evidence::failing(success, u32::from(stats.consecutive_failures));
                    // The record read once: it classes a failure and tells the filter how
                    // a surprise teaches the noise.
                    let common = evidence::failures_common(u64::from(stats.successes), attempts);
                    let sample = if success_sample > 0.0 {
                        Sample::Answer
                    } else if !overload && common {
                        Sample::CommonFailure
                    } else {
                        Sample::Failure
                    };
                    // The stored noise carries the surprise flag in its sign, as the filter
                    // takes it.
                    let f = evidence::update(
                        attempt_ms,
                        stats.attempt_var,
                        stats.attempt_noise,
                        t,
                        since,
                        drift,
                        attempts,
                        sample,
                        was_failing,
                        common,
                        cfg.ema.max_gain,
                        unpack_lag(stats.attempt_lag),
                        overall.attempt_ms,
                    );
                    stats.attempt_lag = pack_lag(f.lag);
                    changed_on_failure = f.changed && sample != Sample::Answer;
                    recovered = was_failing && sample == Sample::Answer;
                    attempt_ms = Some(f.mean_ms);
                    stats.attempt_var = finite_or_zero(f.var);
                    let noise = finite_or_zero(f.noise.abs());
                    stats.attempt_noise = if f.noise.is_sign_negative() {
                        -noise
                    } else {
                        noise
                    };
                    // A surprising time, or a change, says the candidate may have changed:
                    // the sample moves its other averages (success, first byte, ...) as much
                    // as the filter trusts it. Otherwise they keep their own steady weights.
                    if f.surprise || f.changed {
                        a = max_of(a, f.gain);
                        a_ok = max_of(a_ok, f.gain);
                    } else {
                        // The other averages age with the time estimate, at half its pace:
                        // a stale candidate's success and first byte move with its probes
                        // too.
                        a = max_of(a, 0.5 * f.gain);
                        a_ok = max_of(a_ok, 0.5 * f.gain);
                    }
                }
                None => attempt_ms = Some(ema(attempt_ms, t, a_time)),
            }
            overall.attempt_ms = Some(ema(overall.attempt_ms, t, oa));
        }
        let previous = match success {
            Some(s) => Some(s),
            None if cfg.ema.first_sample_replaces_prior => None,
            None => Some(cfg.ema.success_prior),
        };
        let v = &mut stats.values;
        v[SUCCESS] = ema(previous, success_sample, a);
        v[ATTEMPT_MS] = pack_opt(attempt_ms);
        v[LAST_SAMPLE_S] = now_s;
        stats.window.record(bucket, buckets, overload);
        let o = if overload { 1.0 } else { 0.0 };
        stats.overload_evidence += OVERLOAD_EVIDENCE_ALPHA * (o - stats.overload_evidence);
        // In `f32` the fading stops at a subnormal (the step rounds to 0) instead of reaching
        // 0: what is left after about 700 answers without an overload is none.
        if stats.overload_evidence < EVIDENCE_GONE {
            stats.overload_evidence = 0.0;
        }
        stats.attempts = stats.attempts.saturating_add(1);
        if success_sample > 0.0 {
            stats.successes = stats.successes.saturating_add(1);
            stats.consecutive_failures = 0;
            if let Outcome::Success(s) = outcome {
                if let Some(c) = s.connect_ms {
                    connect_ms = Some(ema(connect_ms, c, a_ok));
                    overall.connect_ms = Some(ema(overall.connect_ms, c, oa));
                }
                if let Some(t) = s.ttfb_ms {
                    if let Some(avg) = ttfb_ms {
                        cfg.deadline.learn_spread(
                            &mut overall.ttfb_spread,
                            &mut overall.ttfb_spread_answers,
                            t,
                            avg,
                        );
                    }
                    ttfb_ms = Some(ema(ttfb_ms, t, a_ok));
                    overall.ttfb_ms = Some(ema(overall.ttfb_ms, t, oa));
                }
                if let (Some(bytes), Some(d)) = (s.bytes, s.duration_ms) {
                    let bw = bytes as f64 / (d / 1000.0);
                    // A zero duration, or one so short the rate overflows, says nothing about bandwidth.
                    if d > 0.0 && bw.is_finite() {
                        bandwidth_bps = Some(ema(bandwidth_bps, bw, a_ok));
                        overall.bandwidth_bps = Some(ema(overall.bandwidth_bps, bw, oa));
                    }
                }
            }
            let v = &mut stats.values;
            v[CONNECT_MS] = pack_opt(connect_ms);
            v[TTFB_MS] = pack_opt(ttfb_ms);
            v[BANDWIDTH_BPS] = pack_opt(bandwidth_bps);
            Observed {
                eject: false,
                recovered,
            }
        } else {
            let v = &mut stats.values;
            v[CONNECT_MS] = pack_opt(connect_ms);
            v[TTFB_MS] = pack_opt(ttfb_ms);
            v[BANDWIDTH_BPS] = pack_opt(bandwidth_bps);
            let failures = u32::from(stats.consecutive_failures).saturating_add(1);
            stats.consecutive_failures = saturate_u16(failures);
            // A change called on a failure moved the success average most of the way to 0:
            // the candidate is failing from here (`evidence::failing`), so its next answer is
            // a change too, instead of climbing back by one average step per answer while it
            // counts fewer failures in a row than a failing candidate needs.
            if changed_on_failure {
                let streak = saturate_u16(evidence::FAILING_STREAK);
                stats.consecutive_failures = stats.consecutive_failures.max(streak);
            }
            Observed {
                eject: cfg.ejection.enabled
                    && failures >= cfg.ejection.consecutive_failures
                    && unpack_opt(v[EJECTED_UNTIL_S]).is_none_or(|u| u <= now_s),
                recovered: false,
            }
        }
    }

    /// The weight of the newest outcome in a candidate's success average after `attempts`
    /// earlier ones: with `ema.warm_up` a running mean (the prior counted as one sample unless
    /// the first sample replaces it) until its weight falls to `ema.alpha`; `ema.alpha` after.
    #[inline]
    pub(crate) fn success_weight(&self, attempts: u64) -> f64 {
        let ema = &self.config.ema;
        if !ema.warm_up {
            return ema.alpha;
        }
        let prior = if ema.first_sample_replaces_prior {
            0.0
        } else {
            1.0
        };
        max_of(ema.alpha, 1.0 / (attempts as f64 + 1.0 + prior))
    }

    /// [`ScoreModel::observe_packed`] on unpacked statistics (for tests).
    #[cfg(test)]
    pub(crate) fn observe(
        &self,
        stats: &mut Stats,
        overall: &mut Overall,
        outcome: &Outcome,
        elapsed_ms: Option<f64>,
        now_s: f64,
        bucket: u64,
    ) -> Observed {
        let mut packed = PackedStats::pack(stats);
        let observed =
            self.observe_packed(&mut packed, overall, outcome, elapsed_ms, now_s, bucket);
        *stats = packed.unpack();
        observed
    }

    /// [`ScoreModel::eject_packed`] on unpacked statistics (for tests).
    #[cfg(test)]
    pub(crate) fn eject(&self, stats: &mut Stats, now_s: f64) {
        let mut packed = PackedStats::pack(stats);
        self.eject_packed(&mut packed, now_s);
        *stats = packed.unpack();
    }

    /// Starts an ejection: its length grows with each repeat, capped.
    pub(crate) fn eject_packed(&self, stats: &mut PackedStats, now_s: f64) {
        let e = &self.config.ejection;
        let ejections = u32::from(stats.ejections).saturating_add(1);
        let secs = (e.base_s * ejections as f64).min(e.max_s);
        stats.ejections = u8::try_from(ejections).unwrap_or(u8::MAX);
        stats.values[EJECTED_UNTIL_S] = now_s + secs;
        stats.consecutive_failures = 0;
    }
}
