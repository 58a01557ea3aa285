//! Unit tests of the model's arithmetic: component formulas, channel masses, outcome rules,
//! ejection lengths, and config validation paths.

use std::collections::BTreeMap;

use super::*;
use crate::vocab::{CandidateInfo, FailureClass, Outcome};

mod censored;
mod failing_streak;
mod fleet_relative;
mod hopeless;
mod shed_relief;

/// A score context with nothing in flight, no limit and no fleet spread.
pub(super) fn ctx(overall: Overall) -> ScoreContext {
    ScoreContext {
        overall,
        now_s: 0.0,
        bucket: 0,
        stake_total: 0.0,
        in_flight: 0,
        limit: u32::MAX,
        pending_ms: 0.0,
        spread: 0.0,
        center: f64::NAN,
        probes: super::ProbePeriods::default(),
        heal_at_s: f64::NEG_INFINITY,
        probe_at_s: 0.0,
        queueing: 0.0,
        load_scale: 1.0,
        own_queueing: 0.0,
        overload_follows_load: true,
        queue_time: 1.0,
    }
}

fn model(config: Config) -> ScoreModel {
    ScoreModel::new(config).expect("valid config")
}

#[test]
fn relative_components_follow_their_curves() {
    let m = model(Config::lassie());
    let overall = Overall {
        connect_ms: Some(100.0),
        ttfb_ms: Some(200.0),
        bandwidth_bps: Some(1e6),
        ..Overall::default()
    };
    let stats = Stats {
        connect_ms: Some(50.0),
        ttfb_ms: Some(400.0),
        bandwidth_bps: Some(2e6),
        ..Stats::default()
    };
    let c = m.components(&m.fixed(&CandidateInfo::new("a")), &stats, &ctx(overall));
    assert!((c.connect - (-0.5f64).exp()).abs() < 1e-12);
    assert!((c.ttfb - (-2.0f64).exp()).abs() < 1e-12);
    // Twice the average bandwidth scores higher than the average: 1 - e^-2 > 1 - e^-1.
    assert!((c.bandwidth - (1.0 - (-2.0f64).exp())).abs() < 1e-12);
    // Without own data a candidate sits at the average.
    let unknown = m.components(
        &m.fixed(&CandidateInfo::new("b")),
        &Stats::default(),
        &ctx(overall),
    );
    assert!((unknown.connect - (-1.0f64).exp()).abs() < 1e-12);
    assert!((unknown.bandwidth - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
    assert_eq!(unknown.success, 1.0);
}

#[test]
fn static_components() {
    let mut config = Config::livepeer();
    config.tag_weights = BTreeMap::from([("verified".into(), 3.0), ("fast-retrieval".into(), 1.0)]);
    let m = model(config);
    let info = CandidateInfo::new("a")
        .with_stake(30.0)
        .with_price(200.0)
        .with_tag("verified");
    let fixed = m.fixed(&info);
    assert_eq!(fixed.tags, 0.75);
    let mut cx = ctx(Overall::default());
    cx.stake_total = 120.0;
    cx.in_flight = 1;
    cx.limit = 4;
    let c = m.components(&fixed, &Stats::default(), &cx);
    assert_eq!(c.stake, 0.25);
    assert!((c.price - (-2.0f64).exp()).abs() < 1e-12);
    assert_eq!(c.load, 0.75);
    assert_eq!(c.uniform, 1.0);
    // The tag weights enter the sum mode score undivided: 0.75 * (3 + 1) = 3.
    let mut sum = Config::lassie();
    sum.tag_weights = BTreeMap::from([("verified".into(), 3.0), ("fast-retrieval".into(), 1.0)]);
    let m = model(sum);
    let only_tags = Components {
        tags: fixed.tags,
        ..Components::default()
    };
    assert_eq!(m.score(&only_tags), 3.0);
}

#[test]
fn channel_masses_carry_the_floor_and_the_weights() {
    let mut c = Config::livepeer();
    c.weights.stake = 0.3;
    c.weights.price = 0.5;
    c.weights.uniform = 0.2;
    c.floor = 0.1;
    let m = model(c);
    let masses: Vec<(ChannelKind, f64)> =
        m.channels().iter().map(|ch| (ch.kind, ch.mass)).collect();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert_eq!(masses.len(), 3);
    assert!(close(masses[0].1, 0.9 * 0.3) && close(masses[1].1, 0.9 * 0.5));
    // The uniform channel takes the floor and the uniform weight's share.
    assert_eq!(masses[2].0, ChannelKind::Uniform);
    assert!(close(masses[2].1, 0.1 + 0.9 * 0.2));
    let total: f64 = masses.iter().map(|m| m.1).sum();
    assert!(close(total, 1.0));

    let mut s = Config::lassie();
    s.floor = 0.05;
    let m = model(s);
    let kinds: Vec<_> = m.channels().iter().map(|ch| (ch.kind, ch.mass)).collect();
    assert_eq!(
        kinds,
        [(ChannelKind::SumScore, 0.95), (ChannelKind::Uniform, 0.05)]
    );
}

#[test]
fn outcomes_feed_the_statistics_by_class() {
    let mut c = Config::default();
    c.ema.alpha = 0.5;
    c.ema.success_prior = 1.0;
    c.ema.first_sample_replaces_prior = false;
    c.ejection.enabled = true;
    c.ejection.consecutive_failures = 2;
    let m = model(c);
    let mut stats = Stats::default();
    let mut overall = Overall::default();
    let fail = |class| Outcome::failure(class);
    assert!(
        !m.observe(
            &mut stats,
            &mut overall,
            &fail(FailureClass::Cancelled),
            None,
            0.0,
            5
        )
        .eject
    );
    assert_eq!(stats, Stats::default(), "cancelled counts nowhere");
    assert!(
        !m.observe(
            &mut stats,
            &mut overall,
            &fail(FailureClass::Overload),
            None,
            0.0,
            5
        )
        .eject
    );
    assert_eq!(stats.success, Some(0.5));
    assert_eq!(stats.window.counts(5, 10), (1, 1));
    // The second failure in a row asks for an ejection.
    assert!(
        m.observe(
            &mut stats,
            &mut overall,
            &fail(FailureClass::Timeout),
            None,
            0.0,
            5
        )
        .eject
    );
    assert_eq!(stats.window.counts(5, 10), (1, 2));
    assert_eq!(stats.success, Some(0.25));
    // An application error is a normal result: a success that ends the streak.
    assert!(
        !m.observe(
            &mut stats,
            &mut overall,
            &fail(FailureClass::Application),
            None,
            0.0,
            5
        )
        .eject
    );
    assert_eq!(
        (stats.success, stats.consecutive_failures),
        (Some(0.625), 0)
    );
    assert_eq!((stats.attempts, stats.successes), (3, 1));
    // Timings come only with successes; bandwidth is bytes per second.
    m.observe(
        &mut stats,
        &mut overall,
        &Outcome::success_with(10.0, 20.0, 500, 250.0),
        None,
        0.0,
        5,
    );
    assert_eq!(
        (stats.connect_ms, stats.ttfb_ms, stats.bandwidth_bps),
        (Some(10.0), Some(20.0), Some(2000.0))
    );
    assert_eq!(overall.connect_ms, Some(10.0));
    // A zero-length attempt says nothing about bandwidth.
    m.observe(
        &mut stats,
        &mut overall,
        &Outcome::success_with(10.0, 20.0, 500, 0.0),
        None,
        0.0,
        5,
    );
    assert_eq!(stats.bandwidth_bps, Some(2000.0));
}

#[test]
fn ejections_grow_linearly_and_are_capped() {
    let mut c = Config::default();
    c.ejection.base_s = 30.0;
    c.ejection.max_s = 100.0;
    let m = model(c);
    let mut stats = Stats::default();
    let mut ends = Vec::new();
    for _ in 0..5 {
        m.eject(&mut stats, 0.0);
        ends.push(stats.ejected_until_s.unwrap());
    }
    assert_eq!(ends, [30.0, 60.0, 90.0, 100.0, 100.0]);
    assert_eq!(stats.consecutive_failures, 0);
}

#[test]
fn validation_reports_every_problem_with_its_path() {
    let mut c = Config::default();
    c.weights.success = f64::NAN;
    c.weights.connect = -1.0;
    c.ema.alpha = 0.0;
    c.ema.overall_alpha = 1.5;
    c.floor = 2.0;
    c.window.buckets = 17;
    c.ejection.max_s = 1.0;
    c.refresh_ms = 0;
    c.time_exponent = -1.0;
    c.load.gate = f64::NAN;
    c.load.background_overload = 1.5;
    c.tag_weights.insert("verified".into(), f64::INFINITY);
    let err = c.validate().unwrap_err();
    assert_eq!(
        err.paths(),
        [
            "weights.success",
            "weights.connect",
            "tag_weights.verified",
            "time_exponent",
            "load.gate",
            "ema.alpha",
            "ema.overall_alpha",
            "floor",
            "window.buckets",
            "ejection.max_s",
            "refresh_ms",
            "load.background_overload",
        ],
        "{err}"
    );
    for preset in PRESETS {
        Config::preset(preset).unwrap().validate().unwrap();
    }
}

/// An exponent at which the largest draw weight overflows is refused (every weight would be
/// infinite and the draw silently uniform); one just under it works and still ranks.
#[test]
fn an_exponent_that_overflows_the_weights_is_refused() {
    let refused = Config {
        exponent: 250.0,
        ..Config::default()
    };
    let err = refused.validate().unwrap_err();
    assert_eq!(err.paths(), ["exponent"], "{err}");
    assert!(err.to_string().contains("at most 213.4"), "{err}");
    // Scaled-down weights with the same ratios are fine at that exponent.
    let mut scaled = refused.clone();
    for w in [
        &mut scaled.weights.success,
        &mut scaled.weights.ttfb,
        &mut scaled.weights.overload,
        &mut scaled.weights.load,
    ] {
        *w /= 25.0;
    }
    scaled.validate().unwrap();
    let near = Config {
        exponent: 213.0,
        ..Config::default()
    };
    near.validate().unwrap();
    let m = model(near);
    let good = Stats {
        success: Some(1.0),
        ..Stats::default()
    };
    let bad = Stats {
        success: Some(0.5),
        ..Stats::default()
    };
    let weight = |stats: &Stats| {
        let c = m.components(
            &m.fixed(&CandidateInfo::new("a")),
            stats,
            &ctx(Overall::default()),
        );
        m.channel_value(ChannelKind::SumScore, &c)
    };
    let (wg, wb) = (weight(&good), weight(&bad));
    assert!(wg.is_finite() && wg > wb && wb > 0.0, "{wg} {wb}");
}

#[test]
fn time_exponent_multiplies_the_weight_by_a_time_factor() {
    let overall = Overall {
        attempt_ms: Some(200.0),
        ..Overall::default()
    };
    // Expected time per success: 100 / 0.5 = 200 ms (r = 1) and 300 / 1 = 300 ms (r = 1.5).
    let slow_but_sure = Stats {
        success: Some(1.0),
        attempt_ms: Some(300.0),
        ..Stats::default()
    };
    let fast_but_flaky = Stats {
        success: Some(0.5),
        attempt_ms: Some(100.0),
        ..Stats::default()
    };
    let weight = |config: Config, stats: &Stats| {
        let m = model(config);
        let c = m.components(&m.fixed(&CandidateInfo::new("a")), stats, &ctx(overall));
        (m.score(&c), m.channel_value(ChannelKind::SumScore, &c))
    };
    let mut c = Config {
        time_exponent: 12.0,
        exponent: 24.0,
        ..Config::default()
    };
    c.ema.pooling = false;
    let (score_a, wa) = weight(c.clone(), &fast_but_flaky);
    let (score_b, wb) = weight(c.clone(), &slow_but_sure);
    let expected = (score_a / score_b).powi(24) * (-12.0f64 * (1.0 - 1.5)).exp();
    assert!(
        (wa / wb / expected - 1.0).abs() < 1e-9,
        "{} vs {expected}",
        wa / wb
    );
    // Off, the weight is the sharpened score alone.
    c.time_exponent = 0.0;
    let (score, w) = weight(c, &fast_but_flaky);
    assert!((w / score.powi(24) - 1.0).abs() < 1e-12);
}

#[test]
fn load_counts_only_with_evidence_of_overload() {
    let m = model(Config::default());
    let gate = m.config().load.clone();
    assert_eq!((gate.gate, gate.unknown_samples), (1000.0, 5));
    let known = Stats {
        attempts: 50,
        ..Stats::default()
    };
    // Never overloaded: three attempts in flight cost nothing.
    assert_eq!(
        m.load_component(
            3,
            u32::MAX,
            known.attempts,
            known.overload_evidence,
            true,
            0.0,
            1.0,
            0.0,
            None
        ),
        1.0
    );
    // One overload failure in a thousand outcomes turns the component fully on...
    let overloaded = Stats {
        overload_evidence: 0.001,
        ..known.clone()
    };
    assert_eq!(
        m.load_component(
            3,
            u32::MAX,
            overloaded.attempts,
            overloaded.overload_evidence,
            true,
            0.0,
            1.0,
            0.0,
            None
        ),
        0.25
    );
    assert_eq!(
        m.load_component(
            3,
            4,
            overloaded.attempts,
            overloaded.overload_evidence,
            true,
            0.0,
            1.0,
            0.0,
            None
        ),
        0.25
    );
    // ...and half as much evidence at half the elasticity: 0.25 ^ 0.5.
    let some = Stats {
        overload_evidence: 0.0005,
        ..known
    };
    assert!(
        (m.load_component(
            3,
            u32::MAX,
            some.attempts,
            some.overload_evidence,
            true,
            0.0,
            1.0,
            0.0,
            None
        ) - 0.5)
            .abs()
            < 1e-6
    );
    // A candidate with 2 of 5 outcomes is 60% unknown: 0.25 ^ 0.6.
    let young = Stats {
        attempts: 2,
        ..Stats::default()
    };
    assert!(
        (m.load_component(
            3,
            u32::MAX,
            young.attempts,
            young.overload_evidence,
            true,
            0.0,
            1.0,
            0.0,
            None
        ) - 0.25f64.powf(0.6))
        .abs()
            < 1e-12
    );
    // Overload failures that do not follow the load: a trickle of 3 % costs nothing, a
    // server failing outright is spread all the same, and with no background share every
    // failure counts alike.
    assert_eq!(
        m.load_component(3, u32::MAX, 50, 0.03, false, 0.0, 1.0, 0.0, None),
        1.0
    );
    assert_eq!(
        m.load_component(3, u32::MAX, 50, 0.3, false, 0.0, 1.0, 0.0, None),
        0.25
    );
    assert_eq!(
        m.load_component(3, u32::MAX, 50, 0.03, true, 0.0, 1.0, 0.0, None),
        0.25
    );
    let mut every = Config::default();
    every.load.background_overload = 0.0;
    assert_eq!(
        model(every).load_component(3, u32::MAX, 50, 0.03, false, 0.0, 1.0, 0.0, None),
        0.25
    );
    // lassie counts load for everyone.
    let c = Config {
        load: LoadConfig::ALWAYS,
        ..Config::default()
    };
    assert_eq!(
        model(c).load_component(3, u32::MAX, 0, 0.0, true, 0.0, 1.0, 0.0, None),
        0.25
    );
}

#[test]
fn load_power_tables_give_the_computed_value_to_the_bit() {
    // The tables are a shortcut for `powf`: with or without them, every load component is
    // the same bits, whether the evidence is the fleet's queueing, a new candidate's, or
    // neither (then the table is not read).
    let m = model(Config::default());
    for fleet in [0.0f32, 0.0105, 0.37, 0.6, 0.99] {
        let powers = LoadPowers::new(f64::from(fleet));
        for in_flight in 0..12 {
            for attempts in 0..8 {
                for (overload, own) in [(0.0, 0.0), (0.0004, 0.0), (0.0, 0.9)] {
                    let component = |powers| {
                        m.load_component(
                            in_flight,
                            u32::MAX,
                            attempts,
                            overload,
                            true,
                            fleet,
                            1.0,
                            own,
                            powers,
                        )
                    };
                    let (plain, tabled) = (component(None), component(Some(&powers)));
                    assert_eq!(
                        plain.to_bits(),
                        tabled.to_bits(),
                        "{fleet} {in_flight} {attempts}"
                    );
                }
            }
        }
    }
    // A table holds only its own evidence, and only one to eight in flight.
    let powers = LoadPowers::new(0.25);
    assert_eq!(powers.get(1, 0.25), Some(0.5f64.powf(0.25)));
    assert_eq!(powers.get(8, 0.25), Some((1.0f64 / 9.0).powf(0.25)));
    assert_eq!(powers.get(1, 0.3), None);
    assert_eq!(powers.get(0, 0.25), None);
    assert_eq!(powers.get(9, 0.25), None);
}

#[test]
fn partial_evidence_is_an_elasticity_not_a_ceiling() {
    // A fleet that queues in part (evidence 0.6) and a server that never sheds: its queue
    // grows without bound. As a ceiling (1 - 0.6 * (1 - f)) the component would stay above
    // 0.4 however many attempts it holds, above that of a candidate with full evidence and
    // five in flight (1 / 6); as an elasticity it falls with the queue.
    let m = model(Config::default());
    let queue =
        |in_flight: u32| m.load_component(in_flight, u32::MAX, 500, 0.0, true, 0.6, 1.0, 0.0, None);
    let deep = queue(280);
    // (The evidence is an f32: 0.6 to about 1e-8.)
    assert!((deep - 281f64.powf(-0.6)).abs() < 1e-6, "{deep}");
    assert!(deep < m.load_component(5, u32::MAX, 500, 0.5, true, 0.0, 1.0, 0.0, None));
    // Still monotone, and 1 with nothing in flight.
    assert_eq!(queue(0), 1.0);
    assert!(queue(1) > queue(2) && queue(2) > queue(40));
    // With a per-candidate limit: nothing left at the limit, whatever the evidence.
    assert_eq!(
        m.load_component(8, 8, 500, 0.0, true, 0.6, 1.0, 0.0, None),
        0.0
    );
}

#[test]
fn own_queueing_evidence_counts_as_far_as_the_fleet_queues() {
    // Three in flight, no limit: 1 / (1 + 3) when counted in full; no overload evidence.
    let load = |own_weight: f64, fleet: f32, own: f32| {
        let mut c = Config::default();
        c.load.own_queueing = own_weight;
        model(c).load_component(3, u32::MAX, 50, 0.0, true, fleet, 1.0, own, None)
    };
    // Off (the default): the fleet's evidence alone, 0.25 ^ 0.5.
    assert_eq!(load(0.0, 0.5, 1.0), 0.5);
    // On: an elasticity of 0.5 + 0.5 * (1 - 0.5) = 0.75.
    assert_eq!(load(1.0, 0.5, 1.0), 0.25f64.powf(0.75));
    // In a fleet that hardly queues a candidate's own evidence adds little: 0.05 + 0.05 * 0.95.
    assert!((load(1.0, 0.05, 1.0) - 0.25f64.powf(0.0975)).abs() < 1e-6);
    // Own evidence below the fleet's changes nothing.
    assert_eq!(load(1.0, 0.5, 0.2), 0.5);
}

#[test]
fn overload_evidence_follows_overload_failures_only() {
    let m = model(Config::default());
    let mut stats = Stats::default();
    let mut overall = Overall::default();
    let mut feed = |stats: &mut Stats, o: Outcome| {
        m.observe(stats, &mut overall, &o, Some(10.0), 0.0, 0);
    };
    feed(&mut stats, Outcome::failure(FailureClass::Timeout));
    feed(&mut stats, Outcome::failure(FailureClass::Transport));
    assert_eq!(stats.overload_evidence, 0.0);
    feed(&mut stats, Outcome::failure(FailureClass::Overload));
    assert!((stats.overload_evidence - 0.02).abs() < 1e-7);
    feed(&mut stats, Outcome::success());
    assert!((stats.overload_evidence - 0.0196).abs() < 1e-7);
    // Cancelled attempts say nothing.
    feed(&mut stats, Outcome::failure(FailureClass::Cancelled));
    assert!((stats.overload_evidence - 0.0196).abs() < 1e-7);
}

#[test]
fn warm_up_averages_the_first_samples_then_settles_on_alpha() {
    let mut c = Config::default();
    c.ema.alpha = 0.1;
    // The fixed-weight averages (no drift filter).
    c.ema.drift = 0.0;
    let m = model(c.clone());
    let mut stats = Stats::default();
    let mut overall = Overall::default();
    for (i, t) in [100.0, 200.0, 300.0].into_iter().enumerate() {
        let o = if i == 1 {
            Outcome::failure(FailureClass::Transport)
        } else {
            Outcome::success()
        };
        m.observe(&mut stats, &mut overall, &o, Some(t), 0.0, 0);
    }
    // Plain means: the times 100, 200, 300; success (prior 1, then 1, 0, 1) over 4.
    assert!((stats.attempt_ms.unwrap() - 200.0).abs() < 1e-9);
    assert!((stats.success.unwrap() - 0.75).abs() < 1e-12);
    // From the tenth sample on, each weighs alpha.
    for _ in 3..20 {
        m.observe(
            &mut stats,
            &mut overall,
            &Outcome::success(),
            Some(200.0),
            0.0,
            0,
        );
    }
    let before = stats.attempt_ms.unwrap();
    m.observe(
        &mut stats,
        &mut overall,
        &Outcome::success(),
        Some(1200.0),
        0.0,
        0,
    );
    assert!((stats.attempt_ms.unwrap() - (before + 0.1 * (1200.0 - before))).abs() < 1e-9);
    // Without warm-up the first failure moves success from the prior by alpha only.
    c.ema.warm_up = false;
    let mut cold = Stats::default();
    model(c).observe(
        &mut cold,
        &mut overall,
        &Outcome::failure(FailureClass::Transport),
        Some(10.0),
        0.0,
        0,
    );
    assert!((cold.success.unwrap() - 0.9).abs() < 1e-12);
}

#[test]
fn the_load_fit_takes_answers_only() {
    // A server that answers in 20-26 ms with one or two attempts in flight, then hangs:
    // attempts pile up to 30 in flight and each times out after 2 s; then it refuses in 1 ms
    // with one in flight; then it answers as before. None of that is a queue.
    let mut fit = LoadFit::default();
    let mut feed = |k: u32, outcome: Outcome, ms: f64| {
        if let Some(t) = ScoreModel::time_sample(&outcome, Some(ms)) {
            fit.observe(k, t);
        }
    };
    for i in 0..500u32 {
        feed(1 + i % 2, Outcome::success(), 20.0 + f64::from(i % 7));
    }
    for k in 2..=30 {
        for _ in 0..10 {
            feed(k, Outcome::failure(FailureClass::Timeout), 2000.0);
        }
    }
    for _ in 0..300 {
        feed(1, Outcome::failure(FailureClass::Refused), 1.0);
    }
    for i in 0..500u32 {
        feed(1 + i % 2, Outcome::success(), 20.0 + f64::from(i % 7));
    }
    assert_eq!(fit.evidence(), 0.0, "{fit:?}");
    // An application error is an answer; an overload failure is the overload window's business.
    let app = Outcome::failure(FailureClass::Application);
    assert_eq!(ScoreModel::time_sample(&app, Some(5.0)), Some(5.0));
    let overload = Outcome::failure(FailureClass::Overload);
    assert_eq!(ScoreModel::time_sample(&overload, Some(5.0)), None);
    let cancelled = Outcome::failure(FailureClass::Cancelled);
    assert_eq!(ScoreModel::time_sample(&cancelled, Some(5.0)), None);
}
