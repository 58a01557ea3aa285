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
/// the sample variance is learned); `served`: the sample is the time of an answer (a success or
/// an application error), not of a failure; `was_failing`: the candidate was [`failing`]
/// before this sample; `fleet_ms`: the all-candidate average attempt time, the lowest one fast
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
    served: bool,
    was_failing: bool,
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
    let surprise = e2 > cs * cs * (p + r);
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
    let learned = (learned_r + b * ((seen - p).max(0.0) - learned_r)).clamp(MIN_NOISE, ceiling);
    // A first surprise may be an outlier: it only marks the estimate as in doubt.
    let flagged = surprise && !changed;
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
mod tests {
    use super::*;

    /// An answer of `x` ms, `dt` seconds after the 20th sample, no lag, no cap.
    fn answer(m: Option<f64>, v: f32, r: f32, x: f64, dt: f64, fleet: Option<f64>) -> Filtered {
        update(m, v, r, x, dt, 0.1, 20, true, false, 1.0, 0.0, fleet)
    }

    fn run(samples: &[f64], dt: f64, drift: f64) -> (Option<f64>, f32, f32) {
        let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
        for (n, &x) in samples.iter().enumerate() {
            let f = update(m, v, r, x, dt, drift, n as u64, true, false, 1.0, lag, None);
            m = Some(f.mean_ms);
            v = f.var;
            r = f.noise;
            lag = f.lag;
        }
        (m, v, r)
    }

    #[test]
    fn first_samples_average_evenly() {
        let (m, _, _) = run(&[10.0, 20.0], 0.0, 0.0);
        assert!((m.unwrap() - 15.0).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn a_busy_steady_candidate_converges_and_its_variance_shrinks() {
        let xs: Vec<f64> = (0..400).map(|i| 10.0 + (i % 5) as f64).collect();
        let (m, v, _) = run(&xs, 0.01, 0.3);
        let m = m.unwrap();
        assert!((11.0..13.0).contains(&m), "{m}");
        assert!(v < 0.01, "{v}");
    }

    #[test]
    fn a_stale_estimate_follows_a_changed_candidate_within_a_few_samples() {
        // Shunned while slow: one sample a second. Then it heals.
        let mut xs = vec![300.0; 20];
        xs.extend([10.0, 10.0, 10.0]);
        let (m, _, _) = run(&xs, 1.0, 0.3);
        assert!(m.unwrap() < 20.0, "{m:?}");
    }

    #[test]
    fn a_capped_gain_averages_rare_samples_and_still_follows_a_change() {
        // One sample a minute, alternating 50 and 150 ms (mean 100): uncapped, the variance
        // grows past a sample's between samples and the estimate is nearly the last sample;
        // with the gain capped at 0.2 it averages.
        let step = |max_gain: f64, xs: &[f64]| {
            let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
            let mut gains = Vec::new();
            for (n, &x) in xs.iter().enumerate() {
                let f = update(
                    m, v, r, x, 60.0, 0.1, n as u64, true, false, max_gain, lag, None,
                );
                (m, v, r, lag) = (Some(f.mean_ms), f.var, f.noise, f.lag);
                gains.push((f.gain, f.changed));
            }
            (m.unwrap(), gains)
        };
        let xs: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
            .collect();
        let (free, gains) = step(1.0, &xs);
        assert!(gains[30..].iter().all(|(g, _)| *g > 0.8), "{gains:?}");
        assert!(free > 130.0, "uncapped: mostly the last sample, {free}");
        let (capped, gains) = step(0.2, &xs);
        assert!(
            gains[10..].iter().all(|(g, c)| *c || *g <= 0.2 + 1e-9),
            "{gains:?}"
        );
        assert!(
            (85.0..125.0).contains(&capped),
            "capped: an average, {capped}"
        );
        // A hang then a heal: the changes still weigh nearly all.
        let mut xs = vec![100.0; 20];
        xs.extend([3000.0, 3000.0, 3000.0]);
        let (hung, _) = step(0.2, &xs);
        assert!(hung > 2000.0, "{hung}");
        xs.extend([100.0, 100.0]);
        let (healed, _) = step(0.2, &xs);
        assert!(healed < 200.0, "{healed}");
    }

    #[test]
    fn a_busy_estimate_is_not_thrown_by_one_outlier() {
        let mut xs = vec![10.0; 200];
        xs.push(40.0);
        let (m, _, _) = run(&xs, 0.005, 0.3);
        // One 4x sample moves a steady estimate only part of the way.
        assert!(m.unwrap() < 20.0, "{m:?}");
        // A second one in a row is a change: the estimate follows.
        xs.push(40.0);
        let (m, _, _) = run(&xs, 0.005, 0.3);
        assert!(m.unwrap() > 35.0, "{m:?}");
    }

    #[test]
    fn one_fast_answer_is_a_change_and_one_fast_failure_is_not() {
        // A busy candidate, slow and steady (200-400 ms), then one sample at 20 ms.
        let xs: Vec<f64> = (0..200).map(|i| 200.0 + (i % 3) as f64 * 100.0).collect();
        let (m, v, r) = run(&xs, 0.01, 0.1);
        let answer = update(m, v, r, 20.0, 0.01, 0.1, 200, true, false, 1.0, 0.0, None);
        assert!(answer.changed, "{answer:?}");
        assert!(answer.mean_ms < 30.0, "{answer:?}");
        // A failure as fast moves the estimate by its usual weight only.
        let failure = update(m, v, r, 20.0, 0.01, 0.1, 200, false, false, 1.0, 0.0, None);
        assert!(failure.surprise && !failure.changed, "{failure:?}");
        assert!(failure.mean_ms > 250.0, "{failure:?}");
        // So does an answer that is slow: one slow answer may be an outlier.
        let slow = update(m, v, r, 3000.0, 0.01, 0.1, 200, true, false, 1.0, 0.0, None);
        assert!(slow.surprise && !slow.changed, "{slow:?}");
    }

    #[test]
    fn an_answer_after_failures_is_a_change_even_at_the_failures_pace() {
        // Fast refusals (2-4 ms), then an answer at 5 ms: no surprising time, but the
        // candidate that only failed has answered.
        let xs: Vec<f64> = (0..50).map(|i| 2.0 + (i % 3) as f64).collect();
        let (m, v, r) = run(&xs, 0.1, 0.1);
        let plain = update(m, v, r, 5.0, 0.1, 0.1, 50, true, false, 1.0, 0.0, None);
        assert!(!plain.changed, "{plain:?}");
        let after_failures = update(m, v, r, 5.0, 0.1, 0.1, 50, true, true, 1.0, 0.0, None);
        assert!(after_failures.changed, "{after_failures:?}");
        assert!(after_failures.gain >= 0.8, "{after_failures:?}");
        // A failure from a failing candidate is no news.
        let failure = update(m, v, r, 5.0, 0.1, 0.1, 50, false, true, 1.0, 0.0, None);
        assert!(!failure.changed, "{failure:?}");
    }

    #[test]
    fn a_change_moves_the_estimate_on_the_ratio_scale() {
        // Hung: every attempt timed out at 1.7 s. Then one answer in 33 ms.
        let xs = vec![1700.0; 40];
        let (m, v, r) = run(&xs, 0.5, 0.1);
        let f = update(m, v, r, 33.0, 0.5, 0.1, 40, true, false, 1.0, 0.0, None);
        assert!(f.changed, "{f:?}");
        // An arithmetic step of the same gain would leave it near 80 ms.
        assert!(f.mean_ms < 40.0, "{f:?}");
    }

    #[test]
    fn one_fast_answer_brings_a_slow_candidate_back_to_the_fleet_level_not_below() {
        // Shunned while slow (300 ms); the fleet answers in 30 ms on average. One answer in
        // 10 ms is a change, and the estimate lands at the fleet's level.
        let xs = vec![300.0; 20];
        let (m, v, r) = run(&xs, 1.0, 0.1);
        let capped = answer(m, v, r, 10.0, 1.0, Some(30.0));
        assert!(capped.changed, "{capped:?}");
        assert!((29.9..30.1).contains(&capped.mean_ms), "{capped:?}");
        // Without a fleet level it goes to about the answer, as a second fast answer would.
        let free = update(m, v, r, 10.0, 1.0, 0.1, 20, true, false, 1.0, 0.0, None);
        assert!(free.mean_ms < 12.0, "{free:?}");
        // A candidate already faster than the fleet is not moved below itself by one answer.
        let xs = vec![20.0; 20];
        let (m, v, r) = run(&xs, 0.01, 0.1);
        let fast = answer(m, v, r, 0.5, 0.01, Some(30.0));
        assert!(fast.changed, "{fast:?}");
        assert!((fast.mean_ms - m.unwrap()).abs() < 1e-9, "{fast:?}");
        // An answer after failures is not held to the fleet's level.
        let recovered = update(
            m,
            v,
            r,
            0.5,
            0.01,
            0.1,
            20,
            true,
            true,
            1.0,
            0.0,
            Some(30.0),
        );
        assert!(recovered.mean_ms < 5.0, "{recovered:?}");
    }

    #[test]
    fn heavy_tailed_answers_teach_a_noise_past_the_gain_cap_and_failures_do_not() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        // Exponential answers, mean 10 ms, 20 a second.
        let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
        for n in 0..2000u64 {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            let f = update(
                m,
                v,
                r,
                -10.0 * u.ln(),
                0.05,
                0.1,
                n,
                true,
                false,
                1.0,
                lag,
                None,
            );
            (m, v, r, lag) = (Some(f.mean_ms), f.var, f.noise, f.lag);
        }
        let noise = r.abs();
        assert!(f64::from(noise) > MAX_NOISE, "learned {noise}");
        assert!(estimate_var(v, r) > v, "{} against {v}", estimate_var(v, r));
        assert!(estimate_var(v, r) <= 2.0 * v);
        // Answers at 10 ms and fast refusals at 1 ms, half and half: the mix is wide, but
        // only answers teach past the cap.
        let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
        for n in 0..2000u64 {
            let served = n % 2 == 0;
            let x = if served { 10.0 } else { 1.0 };
            let f = update(m, v, r, x, 0.05, 0.1, n, served, false, 1.0, lag, None);
            (m, v, r, lag) = (Some(f.mean_ms), f.var, f.noise, f.lag);
        }
        assert!(f64::from(r.abs()) <= MAX_NOISE + 1e-6, "learned {r}");
        assert_eq!(estimate_var(v, r), v);
    }

    #[test]
    fn failing_needs_a_low_success_and_a_streak() {
        assert!(failing(Some(0.1), 3));
        assert!(!failing(Some(0.1), 2));
        assert!(!failing(Some(0.5), 10));
        assert!(!failing(None, 10));
    }

    #[test]
    fn hostile_inputs_stay_finite() {
        for x in [0.0, 1e300, f64::MIN_POSITIVE] {
            let f = update(
                Some(10.0),
                0.1,
                0.1,
                x,
                1e12,
                1e3,
                5,
                true,
                false,
                1.0,
                0.0,
                None,
            );
            assert!(f.mean_ms.is_finite() && f.var.is_finite() && f.noise.is_finite());
            assert!((0.0..=1.0).contains(&f.gain));
        }
    }

    /// Normal deviates by Box-Muller from a seeded generator.
    fn normals(seed: u64, n: usize) -> Vec<f64> {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let u1: f64 = rng.random::<f64>().max(1e-12);
                let u2: f64 = rng.random();
                (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect()
    }

    /// Changes the lag test made: samples whose update changed the estimate without being a
    /// surprise (the other two rules need one).
    fn lag_changes(samples: &[f64], dt: f64) -> usize {
        let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
        let mut n = 0;
        for (i, &x) in samples.iter().enumerate() {
            let f = update(m, v, r, x, dt, 0.1, i as u64, true, false, 1.0, lag, None);
            n += usize::from(f.changed && !f.surprise);
            (m, v, r, lag) = (Some(f.mean_ms), f.var, f.noise, f.lag);
        }
        n
    }

    #[test]
    fn a_steady_candidate_rarely_reads_as_lagging() {
        // 20,000 answers, lognormal with a 30 % spread, busy (100 a second) and rare (one a
        // second, the filter's variance growing between them).
        for (seed, dt) in [(1, 0.01), (2, 1.0)] {
            let xs: Vec<f64> = normals(seed, 20_000)
                .iter()
                .map(|z| 20.0 * (0.3 * z).exp())
                .collect();
            let n = lag_changes(&xs, dt);
            assert!(
                n <= 20,
                "{n} lag changes in 20,000 steady answers (dt {dt})"
            );
        }
    }

    #[test]
    fn answers_that_keep_falling_on_one_side_read_as_a_change() {
        // A shunned candidate's estimate (50 ms) after its heal: probes a second apart answer
        // in 10 ms, the first about 2.6 standard deviations under it, none a surprise.
        let probe = |m: f64, v: f32, lag: f32| {
            update(
                Some(m),
                v,
                0.3,
                10.0,
                1.0,
                0.1,
                500,
                true,
                false,
                1.0,
                lag,
                None,
            )
        };
        let first = probe(50.0, 0.06, 0.0);
        assert!(
            !first.surprise && !first.changed && first.lag < 0.0,
            "{first:?}"
        );
        let (mut with, mut without) = ((50.0, 0.06f32, 0.0f32), (50.0, 0.06f32));
        let mut fired = None;
        for i in 1..=5 {
            let f = probe(with.0, with.1, with.2);
            if f.changed && fired.is_none() {
                fired = Some(i);
            }
            with = (f.mean_ms, f.var, f.lag);
            let g = probe(without.0, without.1, 0.0);
            assert!(
                !g.changed,
                "without the lag sum no single answer is a change"
            );
            without = (g.mean_ms, g.var);
        }
        assert_eq!(fired, Some(4), "the lag sum fires at the fourth answer");
        assert!(with.0 < 15.0, "with the lag test: {:.1} ms", with.0);
        assert!(without.0 > 20.0, "without it: {:.1} ms", without.0);
        // The sum restarts after the change.
        assert_eq!(with.2, 0.0);
    }

    #[test]
    fn failures_leave_the_lag_sum_alone() {
        let f = update(
            Some(20.0),
            0.01,
            0.1,
            2.0,
            0.01,
            0.1,
            200,
            false,
            false,
            1.0,
            -3.0,
            None,
        );
        assert_eq!(f.lag, -3.0);
    }
}
