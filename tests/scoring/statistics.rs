//! How outcomes feed the statistics: failure classes, the overload window, decay toward the
//! prior, and outlier ejection.

use super::*;

fn window_config() -> Config {
    let mut c = Config {
        weights: Weights {
            success: 1.0,
            overload: 1.0,
            ..Weights::ZERO
        },
        ..Config::default()
    };
    c.ema.alpha = 0.5;
    c.ema.success_prior = 1.0;
    c.ema.first_sample_replaces_prior = false;
    c.ema.half_life_s = None;
    // The fixed-weight averages these tests compute by hand (no drift filter).
    c.ema.drift = 0.0;
    c.window.buckets = 10;
    c.window.bucket_s = 1.0;
    c.window.min_samples = 10;
    c.ejection.enabled = false;
    c
}

#[test]
fn failure_classes_feed_the_right_statistics() {
    // (class, success EMA after 10 samples, overload component, attempts counted, successes)
    let half10 = 0.5f64.powi(10);
    let cases = [
        (Some(FailureClass::Overload), half10, 0.0, 10, 0),
        (Some(FailureClass::Timeout), half10, 1.0, 10, 0),
        (Some(FailureClass::Transport), half10, 1.0, 10, 0),
        (Some(FailureClass::Refused), half10, 1.0, 10, 0),
        (Some(FailureClass::Application), 1.0, 1.0, 10, 10),
        (Some(FailureClass::Cancelled), 1.0, 1.0, 0, 0),
        (None, 1.0, 1.0, 10, 10),
    ];
    for (class, success, overload, attempts, successes) in cases {
        let (mut core, mut rng, now) = new_core(window_config());
        add_all(&mut core, &mut rng, now, vec![CandidateInfo::new("a")]);
        let outcome = class.map_or(Outcome::success(), Outcome::failure);
        // Nine samples are under the window's minimum: no effect yet.
        for _ in 0..9 {
            attempt_on(&mut core, &mut rng, now, "a", outcome);
        }
        let view = core.candidate(&"a".into()).unwrap();
        assert_eq!(view.components.overload, 1.0, "{class:?} before 10 samples");
        attempt_on(&mut core, &mut rng, now, "a", outcome);
        let view = core.candidate(&"a".into()).unwrap();
        let label = format!("{class:?}");
        assert_close(view.components.success, success, 1e-12, &label);
        assert_close(view.components.overload, overload, 1e-12, &label);
        assert_eq!(view.stats.attempts, attempts, "{label} attempts");
        assert_eq!(view.stats.successes, successes, "{label} successes");
        let streak = if success < 1.0 { 10 } else { 0 };
        assert_eq!(view.stats.consecutive_failures, streak, "{label} streak");
    }
}

#[test]
fn overload_rate_counts_only_overload_over_all_outcomes_and_forgets() {
    let (mut core, mut rng, now) = new_core(window_config());
    add_all(&mut core, &mut rng, now, vec![CandidateInfo::new("a")]);
    for k in 0..20 {
        let outcome = if k % 4 == 0 {
            Outcome::failure(FailureClass::Overload)
        } else if k % 4 == 1 {
            Outcome::failure(FailureClass::Timeout)
        } else {
            Outcome::success()
        };
        attempt_on(&mut core, &mut rng, now, "a", outcome);
    }
    // 5 overload errors out of 20 outcomes.
    let view = core.candidate(&"a".into()).unwrap();
    assert_close(view.components.overload, 0.75, 1e-12, "overload");
    // Ten 1 s buckets later the window is empty again.
    let later = now + Duration::from_secs(10);
    core.tick(later, &mut rng);
    let view = core.candidate(&"a".into()).unwrap();
    assert_eq!(view.components.overload, 1.0);
}

#[test]
fn stale_statistics_decay_toward_the_prior_with_the_half_life() {
    let mut c = window_config();
    c.weights.connect = 1.0;
    c.ema.half_life_s = Some(10.0);
    c.refresh_ms = 100;
    let (mut core, mut rng, now) = new_core(c);
    add_all(
        &mut core,
        &mut rng,
        now,
        vec![CandidateInfo::new("a"), CandidateInfo::new("b")],
    );
    // a: three failures from the prior 1: 0.5, 0.25, 0.125.
    for _ in 0..3 {
        attempt_on(
            &mut core,
            &mut rng,
            now,
            "a",
            Outcome::failure(FailureClass::Timeout),
        );
    }
    // b connects in 100 ms, then a in 400: a's EMA 400, overall 100 + 0.2 * 300 = 160.
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "b",
        Outcome::success_with(100.0, 1.0, 1, 1.0),
    );
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "a",
        Outcome::success_with(400.0, 1.0, 1, 1.0),
    );
    // a's last sample (a success) took its EMA to 0.125 + 0.5 (1 - 0.125) = 0.5625.
    let s0 = 0.5625;
    for (secs, factor) in [(10, 0.5), (20, 0.25), (30, 0.125)] {
        let t = now + Duration::from_secs(secs);
        core.tick(t, &mut rng);
        let view = core.candidate(&"a".into()).unwrap();
        let what = format!("after {secs} s");
        assert_close(
            view.components.success,
            1.0 + (s0 - 1.0) * factor,
            1e-9,
            &what,
        );
        let x = 160.0 + (400.0 - 160.0) * factor;
        assert_close(view.components.connect, (-x / 160.0).exp(), 1e-9, &what);
    }
    // A fresh sample first brings the stored value to now, then applies the EMA.
    let t = now + Duration::from_secs(30);
    attempt_on(
        &mut core,
        &mut rng,
        t,
        "a",
        Outcome::failure(FailureClass::Timeout),
    );
    let decayed = 1.0 + (s0 - 1.0) * 0.125;
    let stats = core.candidate(&"a".into()).unwrap().stats.clone();
    assert_close(
        stats.success.unwrap(),
        decayed * 0.5,
        1e-9,
        "stored success",
    );
}

fn ejection_config(max_share: f64) -> Config {
    let mut c = window_config();
    c.weights.uniform = 1.0;
    c.ejection.enabled = true;
    c.ejection.consecutive_failures = 3;
    c.ejection.base_s = 10.0;
    c.ejection.max_s = 25.0;
    c.ejection.max_share = max_share;
    c.refresh_ms = 100;
    c
}

fn four(core: &mut Core, rng: &mut SmallRng, now: Instant) {
    let infos = ["a", "b", "c", "d"].map(CandidateInfo::new).to_vec();
    add_all(core, rng, now, infos);
}

#[test]
fn ejection_after_consecutive_failures_grows_per_repeat_and_is_capped() {
    let (mut core, mut rng, t0) = new_core(ejection_config(0.5));
    four(&mut core, &mut rng, t0);
    let ejected = |core: &Core| core.candidate(&"a".into()).unwrap().ejected;
    let mut start = t0;
    // First ejection 10 s, second 20 s, third 30 s capped at 25 s.
    for (round, length) in [(1u32, 10u64), (2, 20), (3, 25)] {
        // Two failures and a success do not eject: the streak is consecutive.
        attempt_on(
            &mut core,
            &mut rng,
            start,
            "a",
            Outcome::failure(FailureClass::Timeout),
        );
        attempt_on(
            &mut core,
            &mut rng,
            start,
            "a",
            Outcome::failure(FailureClass::Timeout),
        );
        attempt_on(&mut core, &mut rng, start, "a", Outcome::success());
        assert!(
            !ejected(&core),
            "round {round}: a success breaks the streak"
        );
        for _ in 0..3 {
            attempt_on(
                &mut core,
                &mut rng,
                start,
                "a",
                Outcome::failure(FailureClass::Refused),
            );
        }
        assert!(ejected(&core), "round {round}: ejected after 3 failures");
        assert_eq!(core.counters().ejections, round as u64);
        let record = core.explain(&Request::any(), start).unwrap();
        assert!(record.candidates.iter().all(|c| c.id.as_str() != "a"));
        assert_eq!(record.filters[0].filter, "ejection");
        let before_end = start + Duration::from_millis(length * 1000 - 200);
        core.tick(before_end, &mut rng);
        assert!(
            ejected(&core),
            "round {round}: still ejected before {length} s"
        );
        let after_end = start + Duration::from_millis(length * 1000 + 200);
        core.tick(after_end, &mut rng);
        assert!(!ejected(&core), "round {round}: back after {length} s");
        start = after_end;
    }
}

#[test]
fn ejection_never_exceeds_the_max_share_and_falls_back_when_all_are_out() {
    let (mut core, mut rng, now) = new_core(ejection_config(0.5));
    four(&mut core, &mut rng, now);
    for id in ["a", "b", "c"] {
        for _ in 0..3 {
            attempt_on(
                &mut core,
                &mut rng,
                now,
                id,
                Outcome::failure(FailureClass::Overload),
            );
        }
    }
    // Half of 4 candidates: a and b are ejected, c is not although it qualifies.
    let ejected: Vec<bool> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| core.candidate(&(*id).into()).unwrap().ejected)
        .collect();
    assert_eq!(ejected, [true, true, false, false]);
    assert_eq!(core.counters().ejections, 2);
    // A request that may only use ejected candidates takes the panic fallback.
    let record = core.explain(&Request::only(["a", "b"]), now).unwrap();
    assert_eq!(record.candidates.len(), 2);
    assert_eq!(record.fallbacks[0].filter, "ejection");
}

/// A fleet that answers in well under a millisecond still shuns a candidate that fails half
/// its tries: the tries and the fleet's average are floored alike, so the time component does
/// not underflow every weight to a uniform draw.
#[test]
fn a_sub_millisecond_fleet_still_shuns_failures() {
    let flaky_share = |ms: f64| {
        let (mut core, mut rng, now) = new_core(Config::default());
        add_all(
            &mut core,
            &mut rng,
            now,
            vec![
                CandidateInfo::new("a"),
                CandidateInfo::new("b"),
                CandidateInfo::new("flaky"),
            ],
        );
        let ok = Outcome::success_with(ms, ms, 1000, ms);
        let mut now = now;
        for round in 0..2000 {
            now += Duration::from_millis(1);
            for id in ["a", "b"] {
                attempt_on(&mut core, &mut rng, now, id, ok);
            }
            let flaky = if round % 2 == 0 {
                ok
            } else {
                Outcome::failure(FailureClass::Refused)
            };
            attempt_on(&mut core, &mut rng, now, "flaky", flaky);
        }
        let p = probs(&mut core, &Request::any(), now);
        assert_eq!(p["a"], p["b"], "{ms} ms: {p:?}");
        p["flaky"]
    };
    // A third each would be the uniform draw.
    for ms in [1.0, 0.01, 0.001] {
        let p = flaky_share(ms);
        assert!(p < 0.2, "{ms} ms: the flaky candidate's share {p}");
    }
}

/// One overload failure, then hundreds of answers: its evidence fades to exactly 0, not to a
/// subnormal number the fading can no longer move.
#[test]
fn one_overload_is_forgotten_entirely() {
    let (mut core, mut rng, now) = new_core(Config::default());
    add_all(&mut core, &mut rng, now, vec![CandidateInfo::new("a")]);
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "a",
        Outcome::failure(FailureClass::Overload),
    );
    let evidence = |core: &Core| core.candidate(&"a".into()).unwrap().stats.overload_evidence;
    assert!(evidence(&core) > 0.0);
    for _ in 0..5_000 {
        attempt_on(&mut core, &mut rng, now, "a", Outcome::success());
    }
    assert_eq!(evidence(&core), 0.0);
}
