//! The published defaults and boundaries of the limit algorithms: each test works one rule of
//! `docs/baselines.md` ("Concurrency limiters") out by hand.

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::*;

fn rng() -> SmallRng {
    SmallRng::seed_from_u64(3)
}

#[test]
fn gradient2_is_application_limited_only_below_half_its_limit() {
    let mut g = Gradient2 {
        estimated: 40.0,
        ..Default::default()
    };
    // inflight = limit / 2 is not below it: the limit moves, 40 x 0.8 + (40 x 1 + 4) x 0.2.
    g.sample(0.1, 20, false, &mut rng());
    assert!((g.estimate() - 40.8).abs() < 1e-12, "{}", g.estimate());
}

#[test]
fn gradient2_never_goes_above_its_maximum_of_200() {
    let mut g = Gradient2 {
        estimated: 199.0,
        ..Default::default()
    };
    let mut r = rng();
    for _ in 0..10 {
        g.sample(0.1, 200, false, &mut r);
    }
    assert_eq!(g.estimate(), 200.0);
}

/// A Vegas limit at `estimated` with a no-load RTT of 100 ms and no probe due soon.
fn vegas(estimated: f64) -> Vegas {
    let mut v = Vegas::new(&mut rng());
    v.estimated = estimated;
    v.rtt_noload = 0.1;
    v.probe_jitter = 0.99;
    v
}

#[test]
fn vegas_decreases_on_a_drop_even_when_application_limited() {
    let mut v = vegas(25.0);
    // One in flight is far below half the limit, but the drop is read first: 25 - log10 = 24.
    v.sample(0.2, 1, true, &mut rng());
    assert_eq!(v.estimate(), 24.0);
}

#[test]
fn vegas_adds_beta_at_a_queue_equal_to_its_threshold() {
    let mut v = vegas(20.0);
    // queue = ceil(20 x (1 - 0.1 / 0.104)) = ceil(0.77) = 1 = threshold: + beta = 6.
    v.sample(0.104, 20, false, &mut rng());
    assert_eq!(v.estimate(), 26.0);
}

#[test]
fn vegas_keeps_its_limit_at_a_queue_equal_to_beta() {
    let mut v = vegas(20.0);
    // queue = ceil(20 x (1 - 0.1 / 0.14)) = ceil(5.71) = 6 = beta: neither below alpha nor
    // above beta.
    v.sample(0.14, 20, false, &mut rng());
    assert_eq!(v.estimate(), 20.0);
}

#[test]
fn vegas_never_goes_above_its_maximum_of_1000() {
    let mut v = vegas(995.0);
    // queue 0 <= threshold: + beta = 6 x log10(995) = 12, clamped to 1000.
    v.sample(0.1, 995, false, &mut rng());
    assert_eq!(v.estimate(), 1000.0);
}

#[test]
fn aimd_truncates_its_backed_off_limit() {
    let mut a = Aimd {
        limit: 25,
        ..Default::default()
    };
    // (int) (25 x 0.9) = (int) 22.5 = 22.
    a.sample(0.1, 25, true, &mut rng());
    assert_eq!(a.limit(), 22);
}

#[test]
fn aimd_never_goes_above_its_maximum_of_200() {
    let mut a = Aimd {
        limit: 199,
        ..Default::default()
    };
    let mut r = rng();
    for _ in 0..3 {
        a.sample(0.1, 200, false, &mut r);
    }
    assert_eq!(a.limit(), 200);
}

/// Starts one attempt at `inflight` and takes its outcome `rtt` later, at `now`.
fn arc(a: &mut VectorArc, inflight: u32, rtt: f64, now: f64, drop: bool) {
    a.started(inflight, now - rtt);
    a.sample_at(rtt, inflight, drop, now, &mut rng());
}

#[test]
fn vector_arc_back_pressure_lasts_one_window() {
    let mut a = VectorArc {
        limit: 10,
        ..Default::default()
    };
    arc(&mut a, 10, 0.1, 0.1, false);
    // A timeout in the window ending at 0.2 s: 10 -> 9.
    arc(&mut a, 10, 0.1, 0.15, false);
    arc(&mut a, 10, 1.0, 0.2, true);
    assert_eq!(a.limit(), 9);
    // The next window (to 0.3 s) is clean, at its limit, at the past mean: one more.
    arc(&mut a, 9, 0.1, 0.31, false);
    assert_eq!(a.limit(), 10);
}

#[test]
fn vector_arc_reaching_the_limit_counts_for_its_window_only() {
    let mut a = VectorArc {
        limit: 10,
        ..Default::default()
    };
    arc(&mut a, 10, 0.1, 0.1, false);
    arc(&mut a, 10, 0.1, 0.2, false);
    assert_eq!(a.limit(), 11);
    // The next window starts below the limit: not reached, at the past mean (no variance):
    // cut, floor(11 x 0.9) = 9.
    arc(&mut a, 5, 0.1, 0.31, false);
    assert_eq!(a.limit(), 9);
}

#[test]
fn vector_arc_never_goes_above_its_maximum_of_200() {
    let mut a = VectorArc {
        limit: 200,
        ..Default::default()
    };
    arc(&mut a, 200, 0.1, 0.1, false);
    // At its limit, no back-pressure, faster than the past mean: it would grow, but not past
    // its maximum (and a faster window is no reason to cut).
    arc(&mut a, 200, 0.05, 0.2, false);
    assert_eq!(a.limit(), 200);
}

#[test]
fn vector_arc_windows_last_one_updated_past_mean() {
    let mut a = VectorArc {
        limit: 20,
        ..Default::default()
    };
    // The first success sets the past mean (0.1 s) and stays in the first window.
    arc(&mut a, 20, 0.1, 0.1, false);
    // The window closes at 0.2 s with a mean of 0.15 s: cut to 18; the past mean becomes
    // 0.1 + 0.4 x 0.05 = 0.12 s, so the next window ends at 0.32 s (not 0.15 s later).
    arc(&mut a, 20, 0.2, 0.2, false);
    assert_eq!(a.limit(), 18);
    // A timeout at 0.33 s closes it: floor(18 x 0.9) = 16.
    arc(&mut a, 18, 1.0, 0.33, true);
    assert_eq!(a.limit(), 16);
}
