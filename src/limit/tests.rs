use super::*;

fn cfg() -> AdaptiveConfig {
    AdaptiveConfig {
        enabled: true,
        ..AdaptiveConfig::default()
    }
}

#[test]
fn the_default_config_is_valid_and_off() {
    let c = AdaptiveConfig::default();
    let mut p = Vec::new();
    c.check(&mut p);
    assert!(p.is_empty(), "{p:?}");
    assert!(!c.enabled);
}

#[test]
fn every_bad_field_is_named() {
    let c = AdaptiveConfig {
        enabled: true,
        initial: 0,
        min: 0,
        max: 0,
        tolerance: f64::NAN,
        backoff: 1.0,
        window_samples: 0,
        no_load_alpha: 0.0,
    };
    let mut p = Vec::new();
    c.check(&mut p);
    let paths: Vec<&str> = p.iter().map(|x| x.path.as_str()).collect();
    for f in [
        "adaptive.min",
        "adaptive.tolerance",
        "adaptive.backoff",
        "adaptive.window_samples",
        "adaptive.no_load_alpha",
    ] {
        assert!(paths.contains(&f), "{f} missing from {paths:?}");
    }
    let c = AdaptiveConfig {
        min: 5,
        max: 4,
        initial: 9,
        ..AdaptiveConfig::default()
    };
    let mut p = Vec::new();
    c.check(&mut p);
    let paths: Vec<&str> = p.iter().map(|x| x.path.as_str()).collect();
    assert!(paths.contains(&"adaptive.max") && paths.contains(&"adaptive.initial"));
}

#[test]
fn growth_doubles_until_queueing_then_jumps_to_the_unqueued_concurrency() {
    // A candidate that answers in 100 ms up to 8 in flight and queues beyond (M/D/8).
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    let mut t = 0.0;
    for _ in 0..400 {
        let k = e.limit();
        let ms = 100.0 * (f64::from(k) / 8.0).max(1.0);
        t += ms / 1000.0 / f64::from(k);
        e.observe(&c, Signal::Success(ms), k, t);
    }
    let l = e.limit();
    assert!((8..=9).contains(&l), "limit {l}");
    let n = e.no_load_ms().unwrap();
    assert!((n - 100.0).abs() < 1e-6, "no-load {n}");
}

#[test]
fn a_window_needs_its_samples_and_one_no_load_latency() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    // Nine quick successes at the limit: no window has ended, nothing moves.
    for i in 0..9 {
        e.observe(&c, Signal::Success(50.0), 4, 0.001 * f64::from(i));
    }
    assert_eq!(e.limit(), 4);
    // The tenth, 10 ms in: still inside one no-load latency (50 ms).
    e.observe(&c, Signal::Success(50.0), 4, 0.01);
    assert_eq!(e.limit(), 4);
    // Past it: the window ends, the limit doubles (slow start).
    e.observe(&c, Signal::Success(50.0), 4, 0.06);
    assert_eq!(e.limit(), 8);
}

#[test]
fn other_failures_are_ignored() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    let before = e.clone();
    for i in 0..100 {
        assert!(!e.observe(&c, Signal::Other, 4, f64::from(i)));
    }
    assert_eq!(e, before);
}

#[test]
fn a_snapshot_round_trips_and_is_checked() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    for i in 0..50 {
        e.observe(&c, Signal::Success(20.0), e.limit(), f64::from(i) * 0.01);
    }
    let s = e.snapshot();
    assert!(s.check("a").is_ok());
    let r = Estimator::restore(&c, &s, 100.0);
    assert_eq!(r.snapshot(), s);
    let bad = LimitSnapshot {
        limit: f64::NAN,
        ..s
    };
    assert!(bad.check("a").unwrap_err().contains("a.limit"));
    let bad = LimitSnapshot {
        no_load_ms: Some(-1.0),
        ..s
    };
    assert!(bad.check("a").unwrap_err().contains("no_load_ms"));
}
