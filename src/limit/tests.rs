use super::*;

/// A sample granted at `k` in flight under limit `limit` at `granted_s`.
fn at(signal: Signal, k: u32, limit: u32, granted_s: f64) -> Sample {
    Sample {
        signal,
        concurrency: k,
        limit,
        granted_s,
    }
}

/// An estimator after one window of ten attempts alone, each answered in 50 ms: its no-load
/// latency is 50 ms and its limit still the initial 4.
fn alone_at_50_ms(c: &AdaptiveConfig) -> Estimator {
    let mut e = Estimator::new(c, 0.0);
    for i in 0..10 {
        let t = f64::from(i) * 0.05;
        e.granted(c, 1, t);
        e.observe(c, at(Signal::Success(50.0), 1, 4, t), t + 0.05);
    }
    assert_eq!((e.limit(), e.no_load_ms()), (4, Some(50.0)));
    e
}

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
fn slow_start_quadruples_per_round_until_queueing_then_jumps_to_the_unqueued_concurrency() {
    // A candidate that answers in 100 ms up to 8 in flight and queues beyond (M/D/8).
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    let mut t = 0.0;
    // Closed loop: rounds of `limit` attempts, each granted as another ends (at the limit),
    // answered together.
    for _ in 0..200 {
        let k = e.limit();
        let ms = 100.0 * (f64::from(k) / 8.0).max(1.0);
        for _ in 0..k {
            e.granted(&c, k, t);
        }
        let done = t + ms / 1000.0;
        for _ in 0..k {
            e.observe(&c, at(Signal::Success(ms), k, k, t), done);
        }
        t = done;
    }
    let l = e.limit();
    assert!((8..=9).contains(&l), "limit {l}");
    let n = e.no_load_ms().unwrap();
    assert!((n - 100.0).abs() < 1e-6, "no-load {n}");
}

#[test]
fn a_window_judges_all_its_grants_not_the_first_answers() {
    let c = AdaptiveConfig {
        window_samples: 10,
        ..cfg()
    };
    // A first window alone: the no-load latency is 50 ms, and the limit was not reached.
    let mut e = alone_at_50_ms(&c);
    let mut queued = e.clone();
    // A window of 10 grants at 4 in flight, from 1 s.
    for _ in 0..10 {
        queued.granted(&c, 4, 1.0);
    }
    // Nine answer fast (slow start adds three for each): the window waits for the tenth.
    for _ in 0..9 {
        queued.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(queued.limit(), 31);
    // The tenth was queued long: the window's mean is 1.9 x the no-load latency, queueing.
    queued.observe(&c, at(Signal::Success(500.0), 4, 4, 1.0), 1.5);
    assert!(queued.limit() < 4, "limit {}", queued.limit());
    // The same window answered fast throughout: in slow start every success granted at the
    // full limit adds three.
    for _ in 0..10 {
        e.granted(&c, 4, 1.0);
    }
    for _ in 0..10 {
        e.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(e.limit(), 34);
}

#[test]
fn other_failures_are_ignored() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    let before = e.clone();
    for i in 0..100 {
        assert!(!e.observe(&c, at(Signal::Other, 4, 4, 0.0), f64::from(i)));
    }
    assert_eq!(e, before);
}

#[test]
fn a_timeout_counts_only_when_its_attempt_ran_long() {
    let c = cfg();
    let mut e = alone_at_50_ms(&c);
    // The caller's deadline hit 20 ms after the grant: the candidate is not to blame.
    let mut short = e.clone();
    short.granted(&c, 4, 1.0);
    assert!(!short.observe(&c, at(Signal::Timeout, 4, 4, 1.0), 1.02));
    assert_eq!(short.limit(), 4);
    // An attempt that ran 1 s (20 no-load latencies) before timing out is back-pressure.
    e.granted(&c, 4, 1.0);
    assert!(e.observe(&c, at(Signal::Timeout, 4, 4, 1.0), 2.0));
    assert!(e.limit() < 4, "limit {}", e.limit());
}

#[test]
fn a_snapshot_round_trips_and_is_checked() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    for i in 0..50 {
        let l = e.limit();
        e.observe(
            &c,
            at(Signal::Success(20.0), l, l, 0.0),
            f64::from(i) * 0.01,
        );
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

/// A closed loop of `workers` against one candidate that serves `cap` attempts at once in
/// `service_ms` and refuses any past that within 0.3 ms (nginx's `limit_conn`): returns the
/// refusals until `successes` succeeded, and the final limit.
fn refusing_server(cap: u32, service_ms: f64, workers: u32, successes: u32) -> (u32, u32) {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    // (end time, granted at, concurrency at grant, limit at grant, refused)
    let mut running: Vec<(f64, f64, u32, u32, bool)> = Vec::new();
    let (mut now, mut ok, mut refused) = (0.0, 0, 0);
    while ok < successes {
        // Grant while under the limit (the workers always have a request waiting).
        while (running.len() as u32) < e.limit().min(workers) {
            let k = running.len() as u32 + 1;
            let serving = running.iter().filter(|r| !r.4).count() as u32;
            let refuse = serving >= cap;
            let end = now + if refuse { 0.0003 } else { service_ms / 1000.0 };
            e.granted(&c, k, now);
            running.push((end, now, k, e.limit(), refuse));
        }
        let i = (0..running.len())
            .min_by(|&a, &b| running[a].0.total_cmp(&running[b].0))
            .unwrap();
        let (end, granted, k, limit, refuse) = running.swap_remove(i);
        now = end;
        let signal = if refuse {
            refused += 1;
            Signal::Overload
        } else {
            ok += 1;
            Signal::Success((end - granted) * 1000.0)
        };
        e.observe(&c, at(signal, k, limit, granted), now);
    }
    (refused, e.limit())
}

/// nginx's `limit_conn` answers 503 within a fraction of a millisecond past its cap: every
/// refusal frees its slot at once, so a limit left above the cap for one cut interval costs a
/// refusal per slot per millisecond. Slow start steps three attempts at a time, a refusal at a
/// concurrency proves it too many even within a cut's interval, and a refused probe makes the
/// next one rarer.
#[test]
fn a_candidate_that_refuses_past_its_capacity_costs_few_refusals() {
    for cap in [2, 4, 8, 16] {
        let (refused, limit) = refusing_server(cap, 20.0, 32, 2000);
        assert!(
            refused <= 30,
            "cap {cap}: {refused} refused over 2000 successes"
        );
        assert_eq!(limit, cap, "cap {cap}");
    }
}

/// A slow start grows fourfold per round trip, so its first failure may find the limit far
/// past the capacity: it is undone in one step, below the failed attempt's concurrency, not
/// only halved.
#[test]
fn the_first_failure_of_a_slow_start_undoes_it_in_one_step() {
    let c = cfg();
    let mut e = alone_at_50_ms(&c);
    // Ten grants at the full limit of 4, answered fast: the limit grows by three for each.
    for _ in 0..10 {
        e.granted(&c, 4, 1.0);
    }
    for _ in 0..10 {
        e.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(e.limit(), 34);
    // The attempt granted at 9 in flight is refused: 8 is the most the candidate took.
    e.observe(&c, at(Signal::Overload, 9, 34, 1.06), 1.061);
    assert_eq!(e.limit(), 8);
}
