//! Tests of the attempt-time filter.

use super::*;

/// An answer of `x` ms, `dt` seconds after the 20th sample, no lag, no cap.
fn answer(m: Option<f64>, v: f32, r: f32, x: f64, dt: f64, fleet: Option<f64>) -> Filtered {
    update(
        m,
        v,
        r,
        x,
        dt,
        0.1,
        20,
        Sample::Answer,
        false,
        false,
        1.0,
        0.0,
        fleet,
    )
}

/// A sample of `x` ms of kind `sample` for the estimate `(mean, var, noise)`, `dt` seconds
/// after its `n`-th: drift 0.1, no cap, no lag, no fleet floor.
fn step(
    (m, v, r): (Option<f64>, f32, f32),
    x: f64,
    dt: f64,
    n: u64,
    sample: Sample,
    was_failing: bool,
) -> Filtered {
    update(
        m,
        v,
        r,
        x,
        dt,
        0.1,
        n,
        sample,
        was_failing,
        false,
        1.0,
        0.0,
        None,
    )
}

fn run(samples: &[f64], dt: f64, drift: f64) -> (Option<f64>, f32, f32) {
    let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
    for (n, &x) in samples.iter().enumerate() {
        let f = update(
            m,
            v,
            r,
            x,
            dt,
            drift,
            n as u64,
            Sample::Answer,
            false,
            false,
            1.0,
            lag,
            None,
        );
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
                m,
                v,
                r,
                x,
                60.0,
                0.1,
                n as u64,
                Sample::Answer,
                false,
                false,
                max_gain,
                lag,
                None,
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
    let answer = step((m, v, r), 20.0, 0.01, 200, Sample::Answer, false);
    assert!(answer.changed, "{answer:?}");
    assert!(answer.mean_ms < 30.0, "{answer:?}");
    // A failure as fast moves the estimate by its usual weight only.
    let failure = step((m, v, r), 20.0, 0.01, 200, Sample::Failure, false);
    assert!(failure.surprise && !failure.changed, "{failure:?}");
    assert!(failure.mean_ms > 250.0, "{failure:?}");
    // From a candidate whose failures are common (not overload), it is not even a surprise.
    let common = step((m, v, r), 20.0, 0.01, 200, Sample::CommonFailure, false);
    assert!(!common.surprise && !common.changed, "{common:?}");
    assert!(common.mean_ms > 250.0, "{common:?}");
    // So does an answer that is slow: one slow answer may be an outlier.
    let slow = step((m, v, r), 3000.0, 0.01, 200, Sample::Answer, false);
    assert!(slow.surprise && !slow.changed, "{slow:?}");
}

#[test]
fn failures_are_common_from_one_attempt_in_ten() {
    // The prior alone (no record) counts as common: a new candidate's refusals say little.
    assert!(failures_common(0, 0));
    // 40 answers and no failure: rare. One failure in ten: common.
    assert!(!failures_common(40, 40));
    assert!(!failures_common(97, 100));
    assert!(failures_common(90, 100));
    assert!(failures_common(50, 100));
    // A record that says more successes than attempts (it cannot) reads as rare, not NaN.
    assert!(!failures_common(200, 100));
}

#[test]
fn common_fast_refusals_among_answers_are_no_surprise_and_timeouts_are() {
    // Half the requests refused in 1-4 ms, the others answered in 45-55 ms, with runs of
    // two and three refusals in a row; busy (a sample every 10 ms).
    let pattern = [
        true, false, false, true, true, false, false, false, true, false,
    ];
    let run = |kind: Sample| {
        let (mut m, mut v, mut r, mut lag) = (None, 0.0f32, 0.0f32, 0.0f32);
        let mut surprises = 0;
        for n in 0..400u64 {
            let served = pattern[n as usize % pattern.len()];
            let (x, sample) = if served {
                (45.0 + (n % 11) as f64, Sample::Answer)
            } else {
                (1.0 + (n % 4) as f64, kind)
            };
            let f = update(
                m, v, r, x, 0.01, 0.1, n, sample, false, false, 1.0, lag, None,
            );
            if n >= 20 && f.surprise {
                surprises += 1;
            }
            (m, v, r, lag) = (Some(f.mean_ms), f.var, f.noise, f.lag);
        }
        (surprises, m.unwrap(), v, r, lag)
    };
    // Read as rare failures, the refusals are surprises again and again.
    let (rare, ..) = run(Sample::Failure);
    assert!(rare > 50, "{rare} surprises from rare-failure refusals");
    let (surprises, m, v, r, lag) = run(Sample::CommonFailure);
    assert_eq!(surprises, 0, "common fast refusals read as surprises");
    assert!((10.0..45.0).contains(&m), "{m}");
    // Failures far slower than expected (a hang's timeouts), even common ones: the first
    // is a surprise, the second in a row a change, and the estimate follows.
    let timeout = |m: f64, v: f32, r: f32, lag: f32| {
        update(
            Some(m),
            v,
            r,
            2000.0,
            0.01,
            0.1,
            400,
            Sample::CommonFailure,
            false,
            false,
            1.0,
            lag,
            None,
        )
    };
    let first = timeout(m, v, r, lag);
    assert!(first.surprise && !first.changed, "{first:?}");
    let second = timeout(first.mean_ms, first.var, first.noise, first.lag);
    assert!(second.changed && second.mean_ms > 1000.0, "{second:?}");
}

#[test]
fn an_answer_after_failures_is_a_change_even_at_the_failures_pace() {
    // Fast refusals (2-4 ms), then an answer at 5 ms: no surprising time, but the
    // candidate that only failed has answered.
    let xs: Vec<f64> = (0..50).map(|i| 2.0 + (i % 3) as f64).collect();
    let (m, v, r) = run(&xs, 0.1, 0.1);
    let plain = step((m, v, r), 5.0, 0.1, 50, Sample::Answer, false);
    assert!(!plain.changed, "{plain:?}");
    let after_failures = step((m, v, r), 5.0, 0.1, 50, Sample::Answer, true);
    assert!(after_failures.changed, "{after_failures:?}");
    assert!(after_failures.gain >= 0.8, "{after_failures:?}");
    // A failure from a failing candidate is no news.
    let failure = step((m, v, r), 5.0, 0.1, 50, Sample::Failure, true);
    assert!(!failure.changed, "{failure:?}");
}

#[test]
fn a_change_moves_the_estimate_on_the_ratio_scale() {
    // Hung: every attempt timed out at 1.7 s. Then one answer in 33 ms.
    let xs = vec![1700.0; 40];
    let (m, v, r) = run(&xs, 0.5, 0.1);
    let f = step((m, v, r), 33.0, 0.5, 40, Sample::Answer, false);
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
    let free = step((m, v, r), 10.0, 1.0, 20, Sample::Answer, false);
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
        Sample::Answer,
        true,
        false,
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
            Sample::Answer,
            false,
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
        let f = update(
            m,
            v,
            r,
            x,
            0.05,
            0.1,
            n,
            if served {
                Sample::Answer
            } else {
                Sample::Failure
            },
            false,
            false,
            1.0,
            lag,
            None,
        );
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
            Sample::Answer,
            false,
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
        let f = update(
            m,
            v,
            r,
            x,
            dt,
            0.1,
            i as u64,
            Sample::Answer,
            false,
            false,
            1.0,
            lag,
            None,
        );
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
            Sample::Answer,
            false,
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
        Sample::Failure,
        false,
        false,
        1.0,
        -3.0,
        None,
    );
    assert_eq!(f.lag, -3.0);
}

#[test]
fn a_lag_that_fires_on_a_close_answer_gives_it_half_the_weight() {
    // 70 ms against 100 ms: 0.64 standard deviations under, no surprise; the lag sum at its
    // threshold fires on it. Its own deviation (e^2 = 0.13) is below the sample variance
    // (0.3): the floor `p >= r` gives it half the weight.
    let f = update(
        Some(100.0),
        0.01,
        0.3,
        70.0,
        0.0,
        0.1,
        500,
        Sample::Answer,
        false,
        false,
        1.0,
        -6.0,
        None,
    );
    assert!(f.changed && !f.surprise, "{f:?}");
    assert!(f.gain >= 0.5 - 1e-9, "{f:?}");
    assert!(f.mean_ms < 100.0 * 0.7f64.powf(0.49), "{f:?}");
}

/// A candidate that has answered in 18-22 ms for a while, as the filter holds it.
fn steady_state() -> (Option<f64>, f32, f32) {
    let xs: Vec<f64> = (0..200).map(|i| 18.0 + (i % 5) as f64).collect();
    run(&xs, 0.1, 0.1)
}

#[test]
fn a_surprise_that_begins_a_change_teaches_the_noise_nothing() {
    let steady = steady_state();
    let noise = steady.2.abs();
    let first = step(steady, 400.0, 0.1, 200, Sample::Answer, false);
    assert!(first.surprise && !first.changed, "{first:?}");
    assert_eq!(
        first.noise.abs(),
        noise,
        "the lesson waits for the next sample"
    );
    let second = step(
        (Some(first.mean_ms), first.var, first.noise),
        400.0,
        0.1,
        201,
        Sample::Answer,
        false,
    );
    assert!(second.changed, "{second:?}");
    assert!(second.noise.abs() <= noise, "{} > {noise}", second.noise);
}

#[test]
fn an_outlier_is_learned_at_the_next_sample() {
    let steady = steady_state();
    let noise = steady.2.abs();
    let outlier = step(steady, 400.0, 0.1, 200, Sample::Answer, false);
    assert!(outlier.noise < 0.0, "flagged: {outlier:?}");
    // The next sample lands on the estimate the outlier left (a fast one would be a change
    // back, which drops the lesson like any change).
    let next = step(
        (Some(outlier.mean_ms), outlier.var, outlier.noise),
        outlier.mean_ms,
        0.1,
        201,
        Sample::Answer,
        false,
    );
    assert!(!next.changed && !next.surprise, "{next:?}");
    assert!(next.noise > 1.2 * noise, "{} against {noise}", next.noise);
}

#[test]
fn a_candidate_whose_failures_are_common_learns_a_surprise_at_once() {
    let (m, v, r) = steady_state();
    let noise = r.abs();
    let f = update(
        m,
        v,
        r,
        400.0,
        0.1,
        0.1,
        200,
        Sample::Answer,
        false,
        true,
        1.0,
        0.0,
        None,
    );
    assert!(f.surprise && !f.changed, "{f:?}");
    assert!(f.noise.abs() > 1.2 * noise, "{} against {noise}", f.noise);
}
