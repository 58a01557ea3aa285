//! Properties over random configs, statistics and outcomes, extreme values included.

use super::*;

fn finite_non_negative() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        0.0..1e3,
        prop::num::f64::POSITIVE | prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL,
    ]
}

fn any_finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        finite_non_negative(),
        Just(-f64::MAX),
        prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
    ]
}

fn config_strategy() -> impl Strategy<Value = Config> {
    (
        prop::collection::vec(prop_oneof![Just(0.0), 0.0..10.0, Just(1e6)], 10),
        prop_oneof![Just(Mode::Sum), Just(Mode::Mixture)],
        prop_oneof![Just(1.0), 0.1..8.0],
        prop_oneof![Just(0.0), 0.0..1.0, Just(1.0)],
        prop_oneof![Just(None), (0.01..1e4).prop_map(Some)],
        (0.01..=1.0, 0.01..=1.0, 1e-3..1e6),
    )
        .prop_filter_map(
            "some weight",
            |(w, mode, exponent, floor, half_life, (a, oa, f))| {
                let mut c = Config {
                    mode,
                    weights: Weights {
                        success: w[0],
                        connect: w[1],
                        ttfb: w[2],
                        bandwidth: w[3],
                        overload: w[4],
                        load: w[5],
                        stake: w[6],
                        price: w[7],
                        uniform: w[8],
                        time_to_success: w[2] * 0.5,
                        feedback: 0.0,
                    },
                    tag_weights: [("verified".to_string(), w[9])].into_iter().collect(),
                    exponent,
                    floor,
                    ..Config::default()
                };
                c.ema.alpha = a;
                c.ema.overall_alpha = oa;
                c.ema.half_life_s = half_life;
                c.price.exp_factor = f;
                c.ejection.enabled = false;
                c.validate().ok().map(|_| c)
            },
        )
}

#[derive(Debug, Clone)]
struct Cand {
    stake: f64,
    price: f64,
    verified: bool,
    /// success, connect, ttfb, bandwidth: any finite value (negative ones included).
    values: [Option<f64>; 4],
    window: Vec<(u32, u32)>,
    age_s: f64,
    /// Added with raw statistics (`Core::add_with_stats`) instead of through a snapshot.
    hostile: bool,
    outcomes: Vec<Outcome>,
}

impl Cand {
    fn info(&self, i: usize) -> CandidateInfo {
        let info = CandidateInfo::new(format!("c{i}"))
            .with_stake(self.stake)
            .with_price(self.price);
        if self.verified {
            info.with_tag("verified")
        } else {
            info
        }
    }

    /// The statistics as a snapshot accepts them: finite, not negative, success at most 1.
    fn snapshot(&self, i: usize) -> CandidateSnapshot {
        let [s, c, t, b] = self.values.map(|v| v.map(f64::abs));
        CandidateSnapshot {
            info: self.info(i),
            stats: StatsSnapshot {
                success: s.map(|x| x.min(1.0)),
                connect_ms: c,
                ttfb_ms: t,
                bandwidth_bps: b,
                attempt_ms: t,
                last_sample_age_s: Some(self.age_s),
                window: self.window.iter().map(|&(e, n)| (e.min(n), n)).collect(),
                consecutive_failures: 0,
                ejections: 0,
                ejected_for_s: None,
                attempts: 0,
                successes: 0,
                overload_evidence: 0.0,
                attempt_var: 0.0,
                attempt_noise: 0.0,
                attempt_surprise: false,
                attempt_lag: 0.0,
            },
            limit: None,
            load_fit: None,
            feedback: None,
        }
    }

    fn raw_stats(&self) -> Stats {
        let [success, connect_ms, ttfb_ms, bandwidth_bps] = self.values;
        Stats {
            success,
            connect_ms,
            ttfb_ms,
            bandwidth_bps,
            ..Stats::default()
        }
    }
}

fn outcome_strategy() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (
            finite_non_negative(),
            finite_non_negative(),
            any::<u64>(),
            finite_non_negative()
        )
            .prop_map(|(c, t, b, d)| Outcome::success_with(c, t, b, d)),
        prop_oneof![
            Just(FailureClass::Overload),
            Just(FailureClass::Timeout),
            Just(FailureClass::Transport),
            Just(FailureClass::Refused),
            Just(FailureClass::Cancelled),
            Just(FailureClass::Application),
        ]
        .prop_map(Outcome::failure),
    ]
}

fn cand_strategy() -> impl Strategy<Value = Cand> {
    (
        (finite_non_negative(), finite_non_negative(), any::<bool>()),
        prop::array::uniform4(prop::option::of(any_finite())),
        prop::collection::vec((0u32..50, 0u32..50), 0..12),
        (0.0..1e4f64, any::<bool>()),
        prop::collection::vec(outcome_strategy(), 0..6),
    )
        .prop_map(
            |((stake, price, verified), values, window, (age_s, hostile), outcomes)| Cand {
                stake,
                price,
                verified,
                values,
                window,
                age_s,
                hostile,
                outcomes,
            },
        )
}

fn check_record(record: &DecisionRecord) -> Result<(), TestCaseError> {
    let mut total = 0.0;
    for c in &record.candidates {
        for (name, v) in c.components.entries() {
            prop_assert!(
                v.is_finite() && (0.0..=1.0).contains(&v),
                "{} {name} = {v}",
                c.id
            );
        }
        for (name, v) in [
            ("score", c.score),
            ("weight", c.weight),
            ("p", c.probability),
        ] {
            prop_assert!(v.is_finite() && v >= 0.0, "{} {name} = {v}", c.id);
        }
        total += c.probability;
    }
    if !record.candidates.is_empty() {
        prop_assert!((total - 1.0).abs() < 1e-9, "probabilities sum to {total}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::proptest_seed::config(200))]

    #[test]
    fn components_and_weights_are_never_nan_or_negative(
        config in config_strategy(),
        cands in prop::collection::vec(cand_strategy(), 1..6),
        overall in (
            prop::option::of(finite_non_negative()),
            prop::option::of(finite_non_negative()),
            prop::option::of(finite_non_negative()),
        ),
        later_s in 0.0..100.0f64,
    ) {
        let (mut core, mut rng, now) = new_core(config);
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            saved_at_unix_ms: None,
            overall: Overall {
                connect_ms: overall.0,
                ttfb_ms: overall.1,
                bandwidth_bps: overall.2,
                attempt_ms: overall.1,
                ttfb_spread: overall.2,
                ..Overall::default()
            },
            feedback_reference_ms: None,
            rates: None,
            candidates: cands
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.hostile)
                .map(|(i, c)| c.snapshot(i))
                .collect(),
        };
        core.restore(&snapshot, now, &mut rng).unwrap();
        // Raw statistics are checked as a snapshot's are: unusable ones are refused by field.
        for (i, c) in cands.iter().enumerate().filter(|(_, c)| c.hostile) {
            let [s, ..] = c.values;
            let unusable = c.values.iter().flatten().any(|v| *v < 0.0) || s.is_some_and(|s| s > 1.0);
            match core.add_with_stats(c.info(i), c.raw_stats(), now, &mut rng) {
                Ok(()) => prop_assert!(!unusable, "c{i} added with {:?}", c.values),
                Err(Error::InvalidCandidate { field, .. }) => {
                    prop_assert!(unusable && field.starts_with("stats."), "c{i}: {field}");
                    // Without statistics, so its outcomes below still have a candidate.
                    core.add_candidate(c.info(i), now, &mut rng).unwrap();
                }
                Err(e) => prop_assert!(false, "c{i}: {e}"),
            }
        }
        check_record(&core.explain(&Request::any(), now).unwrap())?;
        let t = now + Duration::from_secs_f64(later_s);
        for (i, c) in cands.iter().enumerate() {
            for o in &c.outcomes {
                attempt_on(&mut core, &mut rng, t, &format!("c{i}"), *o);
            }
        }
        core.tick(t + Duration::from_secs(2), &mut rng);
        let record = core.explain(&Request::any(), t + Duration::from_secs(2)).unwrap();
        check_record(&record)?;
        for c in &record.candidates {
            let p = core.tree_probability(&c.id);
            prop_assert!(p.is_finite() && p >= 0.0);
        }
    }

    #[test]
    fn a_candidate_with_only_failures_keeps_the_floor(
        config in config_strategy(),
        floor in 0.001..0.5f64,
        floor_period_s in prop_oneof![Just(0.0), Just(10.0), 0.1..100.0f64],
        n in 2usize..8,
        failures in prop::collection::vec(
            prop_oneof![
                Just(FailureClass::Overload),
                Just(FailureClass::Timeout),
                Just(FailureClass::Transport),
                Just(FailureClass::Refused),
            ],
            1..30,
        ),
    ) {
        let mut config = config;
        config.floor = floor;
        config.floor_period_s = floor_period_s;
        let (mut core, mut rng, now) = new_core(config);
        for i in 0..n {
            let info = CandidateInfo::new(format!("c{i}")).with_stake(i as f64).with_price(10.0 * i as f64);
            core.add_candidate(info, now, &mut rng).unwrap();
        }
        for class in &failures {
            attempt_on(&mut core, &mut rng, now, "c0", Outcome::failure(*class));
        }
        for i in 1..n {
            attempt_on(&mut core, &mut rng, now, &format!("c{i}"), Outcome::success_with(10.0, 20.0, 1000, 5.0));
        }
        let later = now + Duration::from_secs(1);
        core.tick(later, &mut rng);
        let p = probs(&mut core, &Request::any(), later);
        // The floor in force: the configured one with `floor_period_s` off; at most it, and
        // above 0, with it on (a few decisions a second cannot reach each candidate once per
        // period, so it shrinks).
        let in_force = core.floor_in_force();
        if floor_period_s == 0.0 {
            prop_assert_eq!(in_force, floor);
        }
        prop_assert!(in_force > 0.0 && in_force <= floor, "{in_force} against {floor}");
        let bound = in_force / n as f64;
        prop_assert!(p["c0"] >= bound - 1e-12, "p = {} < floor / n = {bound}", p["c0"]);
        prop_assert!(core.tree_probability(&"c0".into()) >= bound - 1e-12);
    }
}
