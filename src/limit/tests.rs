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
    // `max` lowered alone below the default start: the message says where the start came from.
    let c = AdaptiveConfig {
        max: 2,
        ..AdaptiveConfig::default()
    };
    let mut p = Vec::new();
    c.check(&mut p);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].message.contains("set adaptive.initial too"), "{p:?}");
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
    // Nine answer fast (slow start adds three for each, up to four times the limit they
    // were granted at, plus three): the window waits for the tenth.
    for _ in 0..9 {
        queued.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(queued.limit(), 19);
    // The tenth was queued long: the window's mean is 1.9 x the no-load latency, queueing.
    queued.observe(&c, at(Signal::Success(500.0), 4, 4, 1.0), 1.5);
    assert!(queued.limit() < 4, "limit {}", queued.limit());
    // The same window answered fast throughout: in slow start every success granted at the
    // full limit adds three (to at most four times it, plus three).
    for _ in 0..10 {
        e.granted(&c, 4, 1.0);
    }
    for _ in 0..10 {
        e.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(e.limit(), 19);
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
    // A base of 0, as earlier builds could save it, is read as none (learned again) rather
    // than refused with the whole snapshot.
    let zero = LimitSnapshot {
        no_load_ms: Some(0.0),
        ..s
    };
    assert!(zero.check("a").is_ok());
    let restored = Estimator::restore(&AdaptiveConfig::default(), &zero, 0.0);
    assert_eq!(restored.no_load_ms(), None);
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
    // Ten grants at the full limit of 4, answered fast: the limit grows by three for each,
    // up to four times 4, plus three.
    for _ in 0..10 {
        e.granted(&c, 4, 1.0);
    }
    for _ in 0..10 {
        e.observe(&c, at(Signal::Success(50.0), 4, 4, 1.0), 1.05);
    }
    assert_eq!(e.limit(), 19);
    // The attempt granted at 9 in flight is refused: 8 is the most the candidate took.
    e.observe(&c, at(Signal::Overload, 9, 19, 1.06), 1.061);
    assert_eq!(e.limit(), 8);
}

/// Vector's shallow knee, closed loop: 100 ms up to 10 in flight, x1.1 per attempt past it
/// (fixed at the grant), attempts time out after 1 s. Returns (time, limit) at every change.
fn knee_trace(requests: u32) -> Vec<(f64, u32)> {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    let mut running: Vec<(f64, f64, u32, u32)> = Vec::new();
    let (mut now, mut started, mut trace) = (0.0, 0, vec![(0.0, e.limit())]);
    loop {
        while (running.len() as u32) < e.limit() && started < requests {
            let k = running.len() as u32 + 1;
            let ms = 100.0 * 1.1f64.powi(k.saturating_sub(10) as i32);
            e.granted(&c, k, now);
            running.push((now + (ms / 1000.0).min(1.0), now, k, e.limit()));
            started += 1;
        }
        let Some(i) = (0..running.len()).min_by(|&a, &b| running[a].0.total_cmp(&running[b].0))
        else {
            break;
        };
        let (end, granted, k, limit) = running.swap_remove(i);
        now = end;
        let ms = (end - granted) * 1000.0;
        let signal = if ms >= 999.9 {
            Signal::Timeout
        } else {
            Signal::Success(ms)
        };
        let before = e.limit();
        e.observe(&c, at(signal, k, limit, granted), now);
        if e.limit() != before {
            trace.push((now, e.limit()));
        }
    }
    trace
}

/// On Vector's shallow knee the limit settles within 10-12 (Vector's own expected mean), and
/// no attempt times out once it has.
#[test]
fn the_knee_limit_settles_at_the_knee() {
    let trace = knee_trace(1000);
    let settled: Vec<u32> = trace.iter().filter(|p| p.0 > 3.0).map(|p| p.1).collect();
    assert!(!settled.is_empty());
    assert!(settled.iter().all(|l| (10..=12).contains(l)), "{settled:?}");
}

/// An estimator past its slow start at `limit`, with a no-load latency of 50 ms.
fn steady(c: &AdaptiveConfig, limit: f64) -> Estimator {
    let saved = LimitSnapshot {
        limit,
        no_load_ms: Some(50.0),
        noise: 0.0,
        slow_start: false,
    };
    Estimator::restore(c, &saved, 0.0)
}

/// One window of `n` grants at `k` in flight from `t`, each answered in `ms`.
fn window(e: &mut Estimator, c: &AdaptiveConfig, n: u32, k: u32, ms: f64, t: f64) {
    for _ in 0..n {
        e.granted(c, k, t);
    }
    for _ in 0..n {
        e.observe(c, at(Signal::Success(ms), k, k, t), t + ms / 1000.0);
    }
}

/// A probe is one attempt past the limit: the limit in force is one more only until that
/// attempt is granted, and grows only if it came back about as fast as without load.
#[test]
fn a_probe_is_one_attempt_past_the_limit() {
    let c = cfg();
    let mut e = steady(&c, 4.0);
    // A clean window at the full limit: the probe opens.
    window(&mut e, &c, 10, 4, 50.0, 0.0);
    assert_eq!(e.limit(), 5);
    // A grant within the limit is not the probe; the one past it is, and closes it.
    assert!(!e.granted(&c, 4, 0.06));
    assert!(e.granted(&c, 5, 0.06));
    assert_eq!(e.limit(), 4);
    // It waited 25 ms behind the others: the limit stays.
    let mut queued = e.clone();
    assert!(!queued.observe(&c, at(Signal::Success(75.0), 5, 4, 0.06), 0.135));
    assert_eq!(queued.limit(), 4);
    // Refused: the limit stays too.
    let mut refused = e.clone();
    assert!(!refused.observe(&c, at(Signal::Overload, 5, 4, 0.06), 0.061));
    assert_eq!(refused.limit(), 4);
    // As fast as without load: the limit grows by one.
    assert!(e.observe(&c, at(Signal::Success(50.0), 5, 4, 0.06), 0.11));
    assert_eq!(e.limit(), 5);
}

/// A latency cut needs two windows in a row that queued, and is undone when the window at
/// the lower limit is as slow: latency that does not come down with the concurrency is not
/// the candidate's queue (a loaded client machine, the network), and becomes its no-load
/// latency. Latency that does come down keeps the cut.
#[test]
fn a_latency_cut_the_latency_did_not_follow_is_undone() {
    let c = cfg();
    let mut e = steady(&c, 16.0);
    // One window 1.5 x slower: held.
    window(&mut e, &c, 16, 16, 75.0, 0.0);
    assert_eq!(e.limit(), 16);
    // A second: cut to the concurrency that would have served it without waiting.
    window(&mut e, &c, 16, 16, 75.0, 0.1);
    assert_eq!(e.limit(), 10);
    // At 10 in flight the latency came down to no wait: queueing, the cut stands.
    let mut queued = e.clone();
    window(&mut queued, &c, 10, 10, 50.0, 0.2);
    // (A clean window at the full limit: a probe may go one past it.)
    assert_eq!(queued.limit_f64().floor(), 10.0);
    assert_eq!(queued.no_load_ms(), Some(50.0));
    // It stayed 1.5 x: undone, and 75 ms is the no-load latency now.
    window(&mut e, &c, 10, 10, 75.0, 0.2);
    assert_eq!(e.limit(), 16);
    assert_eq!(e.no_load_ms(), Some(75.0));
}

/// A first byte of 0 ms says nothing of the no-load latency: a base of 0 would leave the
/// estimator in slow start at its initial limit for good.
#[test]
fn a_zero_latency_sets_no_base() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    e.observe(&c, at(Signal::Success(0.0), 1, 4, 0.0), 0.0);
    assert_eq!(e.no_load_ms(), None);
    e.observe(&c, at(Signal::Success(20.0), 1, 4, 0.0), 0.02);
    assert_eq!(e.no_load_ms(), Some(20.0));
}

/// A first answer of 1e-300 ms, then ordinary ones: the noise stays finite (it overflowed to
/// infinity and then NaN, and a snapshot holding it could not be read back).
#[test]
fn an_absurdly_small_first_answer_keeps_the_noise_finite() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    e.observe(&c, at(Signal::Success(1e-300), 1, 4, 0.0), 0.001);
    for i in 1..50 {
        let t = f64::from(i) * 0.02;
        e.granted(&c, 1, t);
        e.observe(&c, at(Signal::Success(20.0), 1, 4, t), t + 0.02);
    }
    let s = e.snapshot();
    assert!(s.noise.is_finite(), "{s:?}");
    assert!(s.check("limit").is_ok(), "{s:?}");
}

/// Under a static cap below the learned limit, successes at the cap grow the learned limit to
/// at most four times the cap (one slow-start round), not to `max`: raising the cap later
/// would release the difference at once.
#[test]
fn a_lower_static_cap_bounds_the_slow_start() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    for i in 0..2000 {
        let t = f64::from(i) * 0.001;
        e.observe(&c, at(Signal::Success(20.0), 4, 4, t), t + 0.02);
    }
    assert!(e.limit() <= 19, "learned {}", e.limit());
    // Where the learned limit is the one in force, slow start still grows it fourfold.
    let mut free = Estimator::new(&c, 0.0);
    for _ in 0..4 {
        free.observe(&c, at(Signal::Success(20.0), 4, 4, 0.0), 0.02);
    }
    assert_eq!(free.limit(), 16);
}

/// Attempts granted at the instant of a cut but under the limit before it are not light load
/// under the new one: they do not raise the no-load latency.
#[test]
fn attempts_granted_at_the_instant_of_a_cut_under_the_old_limit_stay_out() {
    let c = cfg();
    let mut e = alone_at_50_ms(&c);
    // An overload at 1 s ends the slow start and cuts the limit to 3.
    e.observe(&c, at(Signal::Overload, 4, 4, 1.0), 1.0);
    assert_eq!(e.limit(), 3);
    // Granted at 1 s with 6 in flight under a limit of 20 (light by that limit), 100 ms.
    e.observe(&c, at(Signal::Success(100.0), 6, 20, 1.0), 1.1);
    assert_eq!(e.no_load_ms(), Some(50.0));
    // Granted at 1 s alone: within the new limit, light, and it counts.
    e.observe(&c, at(Signal::Success(100.0), 1, 3, 1.0), 1.1);
    assert!(e.no_load_ms().unwrap() > 50.0, "{:?}", e.no_load_ms());
}

/// A limit resumed from a snapshot may be far above what the candidate now runs, so that
/// every attempt is light: until a cut, light samples only lower the no-load latency.
#[test]
fn a_resumed_limit_does_not_let_the_no_load_latency_drift_up() {
    let c = cfg();
    let saved = LimitSnapshot {
        limit: 500.0,
        no_load_ms: Some(20.0),
        noise: 0.0,
        slow_start: false,
    };
    let mut e = Estimator::restore(&c, &saved, 0.0);
    for i in 1..=200 {
        let t = f64::from(i) * 0.01;
        e.observe(&c, at(Signal::Success(60.0), 200, 500, t), t + 0.06);
    }
    assert_eq!(e.no_load_ms(), Some(20.0));
    e.observe(&c, at(Signal::Success(10.0), 200, 500, 3.0), 3.01);
    assert!(e.no_load_ms().unwrap() < 20.0, "{:?}", e.no_load_ms());
}

/// One odd early sample (a 0.5 ms answer before 20 ms ones) sets a noise that light-load
/// samples, rare near a busy candidate's capacity, would never bring down; a window whose
/// own spread is far under it does.
#[test]
fn an_outliers_noise_comes_down_with_a_steady_window() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    e.observe(&c, at(Signal::Success(0.5), 1, 4, 0.0), 0.001);
    // An overload ends the slow start; a light answer after it moves the estimate.
    e.observe(&c, at(Signal::Overload, 4, 4, 0.01), 0.01);
    e.observe(&c, at(Signal::Success(20.0), 1, 3, 0.02), 0.04);
    let noisy = e.snapshot().noise;
    assert!(noisy > 100.0, "noise {noisy}");
    // A window of ten grants at 3 in flight, all answered in 20 ms.
    let t = 1.0;
    for _ in 0..10 {
        e.granted(&c, 3, t);
    }
    for _ in 0..10 {
        e.observe(&c, at(Signal::Success(20.0), 3, 3, t), t + 0.02);
    }
    assert!(e.snapshot().noise < 1e-9, "noise {}", e.snapshot().noise);
}

/// The same, from a window holding two answers only (the 20 ms one granted at 0.02 s and one of
/// these ten; the other nine are ignored failures): two answers already have a spread.
#[test]
fn two_answers_in_a_window_are_enough_to_bring_the_noise_down() {
    let c = cfg();
    let mut e = Estimator::new(&c, 0.0);
    e.observe(&c, at(Signal::Success(0.5), 1, 4, 0.0), 0.001);
    e.observe(&c, at(Signal::Overload, 4, 4, 0.01), 0.01);
    e.observe(&c, at(Signal::Success(20.0), 1, 3, 0.02), 0.04);
    assert!(e.snapshot().noise > 100.0);
    let t = 1.0;
    for _ in 0..10 {
        e.granted(&c, 3, t);
    }
    for i in 0..10 {
        let signal = if i < 1 {
            Signal::Success(20.0)
        } else {
            Signal::Other
        };
        e.observe(&c, at(signal, 3, 3, t), t + 0.02);
    }
    assert!(e.snapshot().noise < 1e-9, "noise {}", e.snapshot().noise);
}
