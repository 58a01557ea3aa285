//! Evidence that ages: the attempt-time estimate as a local-level Kalman filter.
//!
//! With `ema.drift` set, a candidate's expected attempt time is not an EMA with a fixed weight
//! per sample but the mean of a one-dimensional Kalman filter whose state is allowed to wander
//! by `drift` (a share of itself) per square root of a second. The weight of a new sample is
//! the filter's gain `K = P / (P + R)`: `P` the estimate's variance, which grows with the time
//! since the last sample, `R` a sample's own variance around the estimate, learned. So:
//!
//! - a busy candidate, sampled many times a second, keeps a small `P`: its estimate averages
//!   many samples and is steady;
//! - a shunned candidate, probed now and then, has a large `P` when the next probe lands: the
//!   probe weighs nearly as much as everything before it, so a healed candidate is seen as
//!   healed after one or two probes instead of the dozens a fixed weight needs;
//! - a sample far outside what the filter expects may be an outlier and moves the estimate by
//!   its usual weight; a second one in a row is a change (a degradation, a heal): the estimate's
//!   variance is raised to the size of the surprise, so that sample weighs nearly everything
//!   and the estimate follows at once;
//! - a *served* attempt (a success, or an application error: the server answered) far faster
//!   than expected is a change at once: a server cannot answer fast by accident, while it can
//!   time out once by accident. A shunned candidate is sampled only by rare probes, so waiting
//!   for a second surprise would double the time it takes a healed server to return; if the
//!   fast answer was a fluke, the draws it attracts correct the estimate within a few samples.
//!   Failures never take this shortcut: a fast refusal says nothing of how fast it serves.
//!   One fast answer only brings a candidate back to the fleet's level (the all-candidate
//!   average attempt time), never below it: a slow candidate that healed is back among the
//!   others at once, while a candidate whose times are heavy-tailed (an exponential answers
//!   in under a tenth of its mean one time in ten) is not taken for the fastest of the fleet
//!   on one lucky answer. Anything faster than the fleet is learned from further answers,
//!   which a candidate back at the fleet's level gets at once.
//!
//! - a failure faster than expected, other than overload, from a candidate whose record says
//!   failures are common (one attempt in ten or more) is no surprise at all: a candidate that
//!   refuses half its requests in a millisecond and answers the others in fifty would read as
//!   changed at every second refusal in a row, its estimate thrown between the two paces
//!   ([`Sample::CommonFailure`]). A candidate that rarely fails keeps the test (one that
//!   starts refusing everything is a change at its second refusal), and a failure slower than
//!   expected (a hang's timeouts) is a surprise from any candidate.
//!
//! - an answer from a candidate that was failing (its success average below
//!   [`FAILING_SUCCESS`] after at least [`FAILING_STREAK`] failures in a row) is a change at
//!   once too: a server that has only failed for a while does not answer by accident. The time
//!   of its answer may be close to that of its failures (a server that refused in a millisecond
//!   answering in a few), so the rule does not wait for a surprising time.
//!
//! - answers that keep falling on one side of the estimate, each too close to be a surprise,
//!   are a change as well: a two-sided CUSUM of their standardized deviations (the lag sum,
//!   [`LAG_SLACK`], [`LAG_THRESHOLD`]) catches an estimate that lags a drift, or a healed
//!   candidate seen through rare probes, each of which would otherwise move it by the
//!   filter's small gain.
//!
//! On a change the estimate moves on the ratio scale its variances live on: a step of the
//! gain from a value fifty times larger (a hang's timeouts) would otherwise leave a residue
//! larger than the new sample itself.
//!
//! With `ema.max_gain` below 1 (off by default), the growth of the estimate's variance with
//! time stops where a sample that is not a change would weigh `max_gain`: a candidate sampled
//! once a minute still averages several samples, and the tests above, which read the capped
//! variance, are quicker to call a real change one. Pooling then reads the capped variance
//! too, and trusts such estimates more (`docs/tuning.md`, "Evidence that ages by time, at low
//! traffic").
//!
//! Variances are relative (squared natural-log ratios), so one `drift` fits candidates of any
//! speed. The filter's gain also sets how fast the candidate's other averages move (success,
//! connect, first byte, bandwidth): evidence of any kind ages alike.

/// A sample's relative variance is learned within these bounds: at least ~10 % spread, and at
/// most [`NOISE_CEILING`].
const MIN_NOISE: f64 = 0.01;
/// The filter's gain and its tests read a sample's variance as at most this (a spread of about
/// 0.7 natural-log units, a factor 2): a noisy past never makes a candidate deaf to a change.
const MAX_NOISE: f64 = 0.5;
/// How far a sample's variance is learned, past [`MAX_NOISE`]: heavy-tailed times
/// (exponential ones spread by about 1.6 natural-log units squared) average to an estimate
/// noisier than the gain assumes, and [`estimate_var`] says so to pooling.
const NOISE_CEILING: f64 = 2.0 * MAX_NOISE;
/// The largest variance an estimate reads right after a sample: the filter's is below the
/// sample's, at most [`MAX_NOISE`], and [`estimate_var`] at most doubles it. Remote evidence
/// claims no more when blended as a prior.
pub(crate) const MAX_SAMPLED_VAR: f64 = NOISE_CEILING;
/// What a sample's variance is taken to be before any is learned (about 50 % spread).
const PRIOR_NOISE: f64 = 0.25;
/// Weight of the newest squared surprise in the learned sample variance, after the warm-up.
const NOISE_ALPHA: f64 = 0.05;
/// A sample further than this many standard deviations from the estimate is a regime change.
const CHANGE_SIGMAS: f64 = 3.0;
/// The lag test's slack and threshold, in standard deviations of a served answer around
/// the estimate: a two-sided CUSUM of the deviations less the slack. On a busy steady
/// candidate with normal deviations it fires about once in 1,300 answers, on one sampled once
/// a second not in 20,000 (`tests::a_steady_candidate_rarely_reads_as_lagging`); rare probes
/// of a healed candidate answering about 2.6 standard deviations under its estimate fire it at
/// the fourth (a deviation of three or more is a surprise, and two of those in a row a change,
/// already).
const LAG_SLACK: f64 = 0.5;
const LAG_THRESHOLD: f64 = 6.0;
/// A candidate whose success average is below this, after [`FAILING_STREAK`] failures in a
/// row, is failing: its next answer is a change, and its heal may be the others' (see
/// [`failing`]).
pub(crate) const FAILING_SUCCESS: f64 = 0.3;
/// The failures in a row that make a low success average a failing candidate: a flaky one or
/// one shedding load answers between fewer.
pub(crate) const FAILING_STREAK: u32 = 3;

/// The variance of the attempt-time estimate as pooling reads it: the filter's variance `var`,
/// scaled by how much more a sample varies (`noise`, as stored: its sign is a flag) than the
/// filter's gain assumes. The gain reads a sample's variance as at most [`MAX_NOISE`], so that
/// a change is seen within a sample or two; the price is an estimate that wanders more than
/// its variance says on candidates whose times are heavy-tailed, and identical candidates
/// would then look different. At most twice the filter's variance.
#[inline]
pub(crate) fn estimate_var(var: f32, noise: f32) -> f32 {
    let excess = f64::from(noise.abs()) / MAX_NOISE;
    if excess > 1.0 {
        (f64::from(var) * excess.min(NOISE_CEILING / MAX_NOISE)) as f32
    } else {
        var
    }
}

/// Whether a candidate is failing: its success average (as the draw reads it) is below
/// [`FAILING_SUCCESS`] and its last [`FAILING_STREAK`] outcomes or more were failures.
#[inline]
pub(crate) fn failing(success: Option<f64>, consecutive_failures: u32) -> bool {
    consecutive_failures >= FAILING_STREAK && success.is_some_and(|s| s < FAILING_SUCCESS)
}

/// A failure's share of a candidate's record (with one success and one failure as a prior)
/// from which its failures are common: a fast one is then no surprise ([`Sample::CommonFailure`]).
/// At a tenth, two failures in a row happen one time in a hundred.
const COMMON_FAILURE_SHARE: f64 = 0.1;

/// What a sample is the time of, as the filter's tests read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sample {
    /// An answer: a success, or an application error (the server answered).
    Answer,
    /// A failure: an overload failure, or any failure of a candidate that rarely fails.
    Failure,
    /// A failure other than overload from a candidate whose record says failures are common
    /// ([`failures_common`]): one faster than the estimate is no surprise (see the module
    /// docs). Overload failures keep the test: a burst of them says the candidate's load or
    /// state changed, and a server that sheds fast is shunned through it sooner
    /// (`docs/tuning.md`, "Common fast failures are no surprise").
    CommonFailure,
}

/// Whether failures are common in a record of `successes` answers in `attempts`: their share,
/// with one success and one failure as a prior, is at least [`COMMON_FAILURE_SHARE`].
#[inline]
pub(crate) fn failures_common(successes: u64, attempts: u64) -> bool {
    let failures = attempts.saturating_sub(successes) as f64;
    failures + 1.0 >= COMMON_FAILURE_SHARE * (attempts as f64 + 2.0)
}

/// The filter's state after a sample, and the sample's weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Filtered {
    /// The new estimate, ms.
    pub(crate) mean_ms: f64,
    /// The estimate's relative variance.
    pub(crate) var: f32,
    /// A sample's learned relative variance.
    pub(crate) noise: f32,
    /// The weight the sample got, in (0, 1].
    pub(crate) gain: f64,
    /// The sample was the second in a row far outside what the filter expected, an answer far
    /// faster than expected, or an answer from a failing candidate: the candidate changed.
    pub(crate) changed: bool,
    /// The sample was far outside what the filter expected (first or second in a row).
    pub(crate) surprise: bool,
    /// The served answers' signed cumulative deviation after this sample (see
    /// [`Stats::attempt_lag`](super::Stats::attempt_lag)).
    pub(crate) lag: f32,
}

/// The estimate's relative variance `dt_s` seconds after its last sample.
#[inline]
pub(crate) fn aged_var(var: f32, drift: f64, dt_s: f64) -> f64 {
    f64::from(var) + drift * drift * dt_s.max(0.0)
}

/// One filter step: the estimate `mean_ms` (with `var`, `noise`), `dt_s` seconds after its last
/// sample, takes the sample `sample_ms`; `samples` is how many it had before (it paces how fast
/// the sample variance is learned); `sample`: what the time is of (an answer or a failure, see
/// [`Sample`]); `was_failing`: the candidate was [`failing`]
/// before this sample; `failures_common`: its record says failures are common
/// ([`failures_common`]: a first surprise then teaches the sample variance at once, see
/// below); `fleet_ms`: the all-candidate average attempt time, the lowest one fast
/// answer may bring the estimate to (`None`: no floor).
#[allow(clippy::too_many_arguments)]
pub(crate) fn update(
    mean_ms: Option<f64>,
    var: f32,
    noise: f32,
    sample_ms: f64,
    dt_s: f64,
    drift: f64,
    samples: u64,
    sample: Sample,
    was_failing: bool,
    failures_common: bool,
    max_gain: f64,
    lag: f32,
    fleet_ms: Option<f64>,
) -> Filtered {
    // Times are compared as ratios: at least a microsecond, like the averages' 1 ms floor.
    let x = sample_ms.max(1e-3);
    let Some(m) = mean_ms.filter(|m| m.is_finite() && *m > 0.0) else {
        return Filtered {
            mean_ms: sample_ms,
            var: PRIOR_NOISE as f32,
            noise: PRIOR_NOISE as f32,
            gain: 1.0,
            changed: false,
            surprise: false,
            lag: 0.0,
        };
    };
    // The sign of the stored noise carries one bit: the previous sample was a surprise.
    let pending = noise < 0.0;
    let noise = noise.abs();
    // A sample's variance as learned, and as the gain and the tests read it.
    let learned_r = if noise > 0.0 {
        f64::from(noise).clamp(MIN_NOISE, NOISE_CEILING)
    } else {
        PRIOR_NOISE
    };
    let r = learned_r.min(MAX_NOISE);
    let mut p = aged_var(var, drift, dt_s);
    // The variance at which a sample weighs `max_gain`: `p / (p + r) = max_gain`.
    if max_gain < 1.0 {
        p = p.min(max_gain / (1.0 - max_gain) * r);
    }
    let e = (x / m).ln();
    let e2 = e * e;
    let cs = CHANGE_SIGMAS;
    let served = sample == Sample::Answer;
    // A common failure faster than the estimate is no surprise (see [`Sample::CommonFailure`]);
    // a failure slower than expected (a hang's timeouts) always may be.
    let surprise = e2 > cs * cs * (p + r) && !(sample == Sample::CommonFailure && e < 0.0);
    // The served answers' deviations, each in the standard deviations the filter expects
    // (clipped, so one outlier counts as at most a surprise), summed one side at a time as
    // in a two-sided CUSUM: answers that keep falling on one side of the estimate, each too
    // close to be a surprise, say it lags a change (a drift, or a heal seen through rare
    // probes whose every answer moves it by a small gain).
    let (new_lag, lagging) = if served {
        let z = (e / (p + r).sqrt()).clamp(-cs, cs);
        let lag = f64::from(lag);
        let up = (lag.max(0.0) + z - LAG_SLACK).max(0.0);
        let down = ((-lag).max(0.0) - z - LAG_SLACK).max(0.0);
        let g = if up >= down { up } else { -down };
        (g, g.abs() > LAG_THRESHOLD)
    } else {
        (f64::from(lag), false)
    };
    // A second surprise in a row, an answer far faster than expected, an answer from a
    // failing candidate, or answers that keep falling on one side: the candidate changed.
    let recovered = served && was_failing;
    let changed = recovered || lagging || (surprise && (pending || (served && e < 0.0)));
    if changed {
        // The estimate is as uncertain as the surprise is large, so this sample weighs nearly
        // everything; an answer after failures at least four fifths, however close its time.
        p = p.max(e2);
        if recovered {
            p = p.max(4.0 * r);
        }
        if lagging {
            // At least half the weight, however close this answer's own time.
            p = p.max(r);
        }
    }
    let gain = p / (p + r);
    let mut mean = if changed {
        // The old regime says little of the new one: move on the ratio scale.
        m * (x / m).powf(gain)
    } else {
        m + gain * (sample_ms - m)
    };
    // One fast answer, and nothing else, brings the estimate down to the fleet's level at most.
    if changed && !(pending || recovered || lagging) {
        if let Some(fleet) = fleet_ms.filter(|f| f.is_finite() && *f > 0.0) {
            mean = mean.max(m.min(fleet));
        }
    }
    // The sample variance is learned from surprises clipped at the threshold, so one outlier
    // (or the first sample of a change) does not make the filter deaf to the next; a candidate
    // that is really that variable raises it over a few dozen samples.
    // From 1 / NOISE_ALPHA samples on, 1 / (samples + 1) is below the floor: no division.
    let b = if samples as f64 >= 1.0 / NOISE_ALPHA {
        NOISE_ALPHA
    } else {
        (1.0 / (samples as f64 + 1.0)).max(NOISE_ALPHA)
    };
    let seen = e2.min(cs * cs * (p + learned_r));
    // Past the gain's cap only answers teach it: a failure's time (a fast refusal among
    // answers, a timeout) says how the outcomes mix, not how the answers spread.
    let ceiling = if served {
        NOISE_CEILING
    } else {
        learned_r.max(MAX_NOISE)
    };
    // A first surprise may be an outlier: it only marks the estimate as in doubt.
    let flagged = surprise && !changed;
    // What a first surprise teaches the sample variance waits for the next sample (the flag
    // is the stored noise's sign): if that one is no change, the surprise was an outlier and
    // is learned then, at the clip it had; if it is a change, the surprise was the change's
    // first sample and teaches nothing (nor does a slow outlier followed by an answer at the
    // old pace: that answer is a fast-side change back). Each switch of a flapping server
    // would otherwise raise the variance until its answers surprise no more, and its return
    // after the flapping would wait for a dozen probes. A candidate whose failures are common
    // learns at once, as before: its surprises come in pairs in the ordinary course (a
    // provider's timeouts), and they are its spread (`docs/tuning.md`, "A surprise that turns
    // out to be a change teaches the noise nothing" and the section after it).
    let deferred = !failures_common;
    let mut base = learned_r;
    if deferred && pending && !changed {
        let clipped = cs * cs * (p + learned_r);
        base += b * ((clipped - p).max(0.0) - base);
    }
    let learned = if deferred && flagged {
        base
    } else {
        base + b * ((seen - p).max(0.0) - base)
    }
    .clamp(MIN_NOISE, ceiling);
    Filtered {
        mean_ms: if mean.is_finite() { mean.max(0.0) } else { m },
        var: ((1.0 - gain) * p).min(f64::from(f32::MAX)) as f32,
        noise: if flagged {
            -(learned as f32)
        } else {
            learned as f32
        },
        gain: if gain.is_finite() {
            gain.clamp(0.0, 1.0)
        } else {
            1.0
        },
        changed,
        surprise,
        lag: if changed { 0.0 } else { new_lag as f32 },
    }
}

#[cfg(test)]
mod tests;
