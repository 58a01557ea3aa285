//! Livepeer's published case and defaults, its perf and price filters with their fallbacks,
//! and lassie's score computed by hand.

use super::*;

fn livepeer_case() -> Vec<CandidateInfo> {
    vec![
        CandidateInfo::new("o1").with_stake(100.0).with_price(400.0),
        CandidateInfo::new("o2")
            .with_stake(100_000.0)
            .with_price(700.0),
        CandidateInfo::new("o3")
            .with_stake(300.0)
            .with_price(1000.0),
    ]
}

fn livepeer_case_config() -> Config {
    let mut c = Config::livepeer();
    c.weights.stake = 0.3;
    c.weights.price = 0.7;
    c.weights.uniform = 0.0;
    c
}

#[test]
fn livepeer_published_case() {
    let (mut core, mut rng, now) = new_core(livepeer_case_config());
    add_all(&mut core, &mut rng, now, livepeer_case());
    let p = probs(&mut core, &Request::any(), now);
    // p = 0.3 * stake / sum(stake) + 0.7 * exp(-price / 100) / sum(exp(-price / 100)).
    assert_close(p["o1"], 0.665530, 1e-4, "o1");
    assert_close(p["o2"], 0.331925, 1e-4, "o2");
    assert_close(p["o3"], 0.002545, 1e-4, "o3");
    // The O(log n) tree used by real draws carries the same numbers.
    for (id, want) in [("o1", 0.665530), ("o2", 0.331925), ("o3", 0.002545)] {
        assert_close(core.tree_probability(&id.into()), want, 1e-4, id);
    }
}

#[test]
fn livepeer_preset_defaults_are_stake_and_randomness() {
    let c = Config::livepeer();
    assert_eq!(c.mode, Mode::Mixture);
    assert_eq!(
        (c.weights.stake, c.weights.price, c.weights.uniform),
        (0.7, 0.0, 0.3)
    );
    assert_eq!(c.price.exp_factor, 100.0);
    assert_eq!(c.price.max, None);
    assert!(!c.price.ignore_max_if_none_pass);
    assert_eq!(c.perf.active_min(), None);
    let (mut core, mut rng, now) = new_core(c);
    add_all(&mut core, &mut rng, now, livepeer_case());
    let p = probs(&mut core, &Request::any(), now);
    let total = 100_400.0;
    for (id, stake) in [("o1", 100.0), ("o2", 100_000.0), ("o3", 300.0)] {
        assert_close(p[id], 0.7 * stake / total + 0.3 / 3.0, 1e-12, id);
    }
}

#[test]
fn perf_filter_falls_back_to_all_when_none_pass() {
    let mut c = livepeer_case_config();
    c.perf.region = Some("FRA".into());
    c.perf.min_score = Some(0.9);
    let (mut core, mut rng, now) = new_core(c);
    let infos = livepeer_case()
        .into_iter()
        .zip([0.5, 0.6, 0.7])
        .map(|(i, s)| i.with_perf_score("FRA", s))
        .collect();
    add_all(&mut core, &mut rng, now, infos);
    let record = core.explain(&Request::any(), now).unwrap();
    assert_eq!(record.fallbacks.len(), 1, "{:?}", record.fallbacks);
    assert_eq!(record.fallbacks[0].filter, "perf");
    assert!(record.filters.is_empty());
    let p: HashMap<_, _> = record
        .candidates
        .iter()
        .map(|c| (c.id.to_string(), c.probability))
        .collect();
    assert_close(p["o1"], 0.665530, 1e-4, "o1");
    assert_close(p["o2"], 0.331925, 1e-4, "o2");
    assert_close(p["o3"], 0.002545, 1e-4, "o3");
    // A real draw takes the fallback too (and says so).
    core.ready(Request::any(), now, &mut rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("the fallback must still grant");
    };
    assert_eq!(g.reason.as_str(), "fallback");
}

#[test]
fn perf_filter_keeps_only_passing_candidates_when_some_pass() {
    let mut c = livepeer_case_config();
    c.perf.region = Some("FRA".into());
    c.perf.min_score = Some(0.65);
    let (mut core, mut rng, now) = new_core(c);
    let infos = livepeer_case()
        .into_iter()
        .zip([0.5, 0.9, 0.7])
        .map(|(i, s)| i.with_perf_score("FRA", s))
        .collect();
    add_all(&mut core, &mut rng, now, infos);
    let record = core.explain(&Request::any(), now).unwrap();
    assert!(record.fallbacks.is_empty());
    assert_eq!(record.filters.len(), 1);
    assert_eq!(record.filters[0].filter, "perf");
    assert_eq!(record.filters[0].removed, vec!["o1".into()]);
    // Stake and price shares are taken over the two that remain, as Livepeer does.
    let (s2, s3) = (100_000.0, 300.0);
    let (q2, q3) = ((-7.0f64).exp(), (-10.0f64).exp());
    let p = probs(&mut core, &Request::any(), now);
    assert!(!p.contains_key("o1"));
    assert_close(
        p["o2"],
        0.3 * s2 / (s2 + s3) + 0.7 * q2 / (q2 + q3),
        1e-12,
        "o2",
    );
    assert_close(
        p["o3"],
        0.3 * s3 / (s2 + s3) + 0.7 * q3 / (q2 + q3),
        1e-12,
        "o3",
    );
}

#[test]
fn perf_min_score_zero_is_off_as_in_livepeer() {
    let mut c = livepeer_case_config();
    c.perf.min_score = Some(0.0);
    let (mut core, mut rng, now) = new_core(c);
    // o1 has no score at all; with the filter off it is still drawn and nothing is recorded.
    add_all(&mut core, &mut rng, now, livepeer_case());
    let record = core.explain(&Request::any(), now).unwrap();
    assert!(record.filters.is_empty() && record.fallbacks.is_empty());
    assert_eq!(record.candidates.len(), 3);
}

fn priced(prices: [f64; 3]) -> Vec<CandidateInfo> {
    ["a", "b", "c"]
        .into_iter()
        .zip(prices)
        .map(|(id, p)| CandidateInfo::new(id).with_price(p))
        .collect()
}

fn price_config(ignore_if_none_pass: bool) -> Config {
    let mut c = Config::livepeer();
    c.weights = Weights {
        price: 1.0,
        ..Weights::ZERO
    };
    c.price.max = Some(500.0);
    c.price.ignore_max_if_none_pass = ignore_if_none_pass;
    c
}

#[test]
fn max_price_strict_refuses_when_none_pass() {
    let (mut core, mut rng, now) = new_core(price_config(false));
    add_all(&mut core, &mut rng, now, priced([600.0, 700.0, 800.0]));
    let record = core.explain(&Request::any(), now).unwrap();
    assert!(record.candidates.is_empty());
    assert!(record.fallbacks.is_empty());
    assert_eq!(record.filters.len(), 1);
    assert_eq!(record.filters[0].filter, "price");
    assert_eq!(record.filters[0].removed.len(), 3);
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(matches!(
        core.poll_event(),
        Some(Event::Rejected {
            reason: Rejection::NoEligibleCandidate,
            ..
        })
    ));
}

#[test]
fn max_price_ignored_when_none_pass_if_configured() {
    let (mut core, mut rng, now) = new_core(price_config(true));
    add_all(&mut core, &mut rng, now, priced([600.0, 700.0, 800.0]));
    let record = core.explain(&Request::any(), now).unwrap();
    assert_eq!(record.candidates.len(), 3);
    assert_eq!(record.fallbacks.len(), 1);
    assert_eq!(record.fallbacks[0].filter, "price");
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(matches!(core.poll_event(), Some(Event::Granted(_))));
}

#[test]
fn max_price_removes_the_expensive_when_some_pass_either_way() {
    for ignore in [false, true] {
        let (mut core, mut rng, now) = new_core(price_config(ignore));
        add_all(&mut core, &mut rng, now, priced([400.0, 500.0, 501.0]));
        let record = core.explain(&Request::any(), now).unwrap();
        let ids: Vec<String> = record.candidates.iter().map(|c| c.id.to_string()).collect();
        assert_eq!(ids, ["a", "b"], "ignore_max_if_none_pass = {ignore}");
        assert!(record.fallbacks.is_empty());
        let removed: Vec<String> = record
            .filters
            .iter()
            .flat_map(|f| f.removed.iter().map(|id| id.to_string()))
            .collect();
        assert_eq!(removed, ["c"]);
    }
}

// ----- lassie ----------------------------------------------------------------------------

#[test]
fn lassie_preset_constants() {
    let c = Config::lassie();
    assert_eq!(c.mode, Mode::Sum);
    let w = &c.weights;
    assert_eq!(
        (w.connect, w.ttfb, w.bandwidth, w.success),
        (1.0, 1.0, 0.5, 1.0)
    );
    assert_eq!(c.tag_weights["verified"], 3.0);
    assert_eq!(c.tag_weights["fast-retrieval"], 2.0);
    // lassie's SuccessAlpha / ConnectTimeAlpha 0.5 weigh the old value by 0.5; its overall
    // alpha 0.8 weighs the old value by 0.8, i.e. the newest sample by 0.2.
    assert_eq!((c.ema.alpha, c.ema.overall_alpha), (0.5, 0.2));
    assert!(c.ema.first_sample_replaces_prior);
    assert_eq!((c.exponent, c.floor, c.ema.half_life_s), (1.0, 0.0, None));
}

#[test]
fn lassie_hand_computed_case() {
    let (mut core, mut rng, now) = new_core(Config::lassie());
    add_all(
        &mut core,
        &mut rng,
        now,
        vec![
            CandidateInfo::new("a")
                .with_tag("verified")
                .with_tag("fast-retrieval"),
            CandidateInfo::new("b"),
            CandidateInfo::new("c"),
        ],
    );
    // Samples, in order (alpha 0.5 per candidate, 0.2 for the all-candidate average; the first
    // sample of an EMA is taken as is):
    //   b: success, connect 100 ms, ttfb 200 ms, 1e6 bytes in 1000 ms (1e6 B/s)
    //      b = {100, 200, 1e6}; overall = {100, 200, 1e6}
    //   c: success, connect 300 ms, ttfb 400 ms, 1e6 bytes in 500 ms (2e6 B/s)
    //      c = {300, 400, 2e6}; overall connect 100 + 0.2 (300 - 100) = 140,
    //      ttfb 200 + 0.2 (400 - 200) = 240, bandwidth 1e6 + 0.2 (2e6 - 1e6) = 1.2e6
    //   c: timeout: success EMA 1 + 0.5 (0 - 1) = 0.5
    //   b: success, connect 50, ttfb 100, 1e6 B/s
    //      b connect 100 + 0.5 (50 - 100) = 75, ttfb 200 + 0.5 (100 - 200) = 150, bw 1e6
    //      overall connect 140 + 0.2 (50 - 140) = 122, ttfb 240 + 0.2 (100 - 240) = 212,
    //      bandwidth 1.2e6 + 0.2 (1e6 - 1.2e6) = 1.16e6
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "b",
        Outcome::success_with(100.0, 200.0, 1_000_000, 1000.0),
    );
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "c",
        Outcome::success_with(300.0, 400.0, 1_000_000, 500.0),
    );
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "c",
        Outcome::failure(FailureClass::Timeout),
    );
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "b",
        Outcome::success_with(50.0, 100.0, 1_000_000, 1000.0),
    );
    // Scores (connect and ttfb: exp(-x / overall); bandwidth: 0.5 (1 - exp(-x / overall));
    // a candidate without data sits at the average: exp(-1) and 1 - exp(-1)):
    //   a = 3 + 2 (tags) + e^-1 + e^-1 + 0.5 (1 - e^-1) + 1
    //     = 5 + 0.367879 + 0.367879 + 0.316060 + 1                    = 7.051819
    //   b = e^(-75/122) + e^(-150/212) + 0.5 (1 - e^(-1e6/1.16e6)) + 1
    //     = 0.540774 + 0.492852 + 0.288856 + 1                        = 2.322482
    //   c = e^(-300/122) + e^(-400/212) + 0.5 (1 - e^(-2e6/1.16e6)) + 0.5
    //     = 0.085519 + 0.151557 + 0.410837 + 0.5                      = 1.147913
    //   total 10.522214: p = 0.670184, 0.220722, 0.109094
    // Scores refresh every refresh_ms (1 s in the preset): explain after one refresh so every
    // candidate sees the latest all-candidate averages.
    let later = now + Duration::from_millis(1001);
    core.tick(later, &mut rng);
    let record = core.explain(&Request::any(), later).unwrap();
    let by_id: HashMap<String, _> = record
        .candidates
        .iter()
        .map(|c| (c.id.to_string(), c))
        .collect();
    assert_close(by_id["a"].score, 7.051819, 1e-6, "score a");
    assert_close(by_id["b"].score, 2.322482, 1e-6, "score b");
    assert_close(by_id["c"].score, 1.147913, 1e-6, "score c");
    assert_close(by_id["b"].components.connect, 0.540774, 1e-6, "b connect");
    assert_close(by_id["c"].components.success, 0.5, 1e-12, "c success");
    assert_close(by_id["a"].probability, 0.670184, 1e-6, "p a");
    assert_close(by_id["b"].probability, 0.220722, 1e-6, "p b");
    assert_close(by_id["c"].probability, 0.109094, 1e-6, "p c");
}

#[test]
fn lassie_first_failure_replaces_the_prior() {
    // lassie: a provider whose only attempt failed has success 0, not 0.5.
    let (mut core, mut rng, now) = new_core(Config::lassie());
    add_all(&mut core, &mut rng, now, vec![CandidateInfo::new("a")]);
    attempt_on(
        &mut core,
        &mut rng,
        now,
        "a",
        Outcome::failure(FailureClass::Refused),
    );
    assert_eq!(
        core.candidate(&"a".into()).unwrap().stats.success,
        Some(0.0)
    );
    // Without warm-up, the optimistic prior is the previous value and the failure weighs alpha
    // (fixed-weight averages: no drift filter).
    let mut c = Config::default();
    c.ema.drift = 0.0;
    c.ema.alpha = 0.25;
    c.ema.success_prior = 1.0;
    c.ema.first_sample_replaces_prior = false;
    c.ema.warm_up = false;
    c.ejection.enabled = false;
    let first_failure = |c: Config| {
        let (mut core, mut rng, now) = new_core(c);
        add_all(&mut core, &mut rng, now, vec![CandidateInfo::new("a")]);
        attempt_on(
            &mut core,
            &mut rng,
            now,
            "a",
            Outcome::failure(FailureClass::Refused),
        );
        core.candidate(&"a".into()).unwrap().stats.success
    };
    assert_eq!(first_failure(c.clone()), Some(0.75));
    // The project default warms up: the prior counts as one sample, the failure as another.
    c.ema.warm_up = true;
    assert_eq!(first_failure(c), Some(0.5));
}

#[test]
fn a_recorded_decision_carries_the_fallback_the_roll_and_the_winner() {
    let mut c = livepeer_case_config();
    c.perf.region = Some("FRA".into());
    c.perf.min_score = Some(0.9);
    let (mut core, mut rng, now) = new_core(c);
    add_all(&mut core, &mut rng, now, livepeer_case());
    // Nothing is recorded unless asked for.
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(core.poll_record().is_none());
    core.set_record_rate(1.0);
    let r = core.ready(Request::any(), now, &mut rng).unwrap();
    let granted = std::iter::from_fn(|| core.poll_event())
        .find_map(|e| match e {
            Event::Granted(g) if g.request == r => Some(g),
            _ => None,
        })
        .expect("a grant");
    let record = core.poll_record().expect("a record");
    assert_eq!(record.request, r);
    assert_eq!(record.attempt, Some(granted.attempt));
    assert_eq!(record.winner.as_ref(), Some(&granted.candidate));
    assert!(record.roll.is_some_and(|u| (0.0..1.0).contains(&u)));
    assert_eq!(record.fallbacks[0].filter, "perf");
    assert_eq!(record.candidates.len(), 3);
    let winner = record
        .candidates
        .iter()
        .find(|c| c.id == granted.candidate)
        .unwrap();
    assert_close(
        record.winner_probability,
        winner.probability,
        1e-12,
        "winner p",
    );
    let json = serde_json::to_string(&record).unwrap();
    let back: DecisionRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, record);
}

/// A decision record lists the candidates as the draw saw them: the winner's load, score and
/// limit before its grant, the same as an explanation just before the draw.
#[test]
fn a_record_shows_the_winner_as_the_draw_saw_it() {
    let (mut core, mut rng, now) = new_core(Config::default());
    add_all(
        &mut core,
        &mut rng,
        now,
        vec![CandidateInfo::new("a"), CandidateInfo::new("b")],
    );
    core.set_record_rate(1.0);
    let before = core.explain(&Request::any(), now).unwrap();
    core.ready(Request::any(), now, &mut rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("expected a grant");
    };
    let record = core.poll_record().expect("every decision recorded");
    assert_eq!(record.winner.as_ref(), Some(&g.candidate));
    assert_eq!(record.candidates.len(), before.candidates.len());
    for (r, b) in record.candidates.iter().zip(&before.candidates) {
        assert_eq!(r.id, b.id);
        assert_eq!(r.components, b.components, "{}", r.id);
        assert_eq!(r.score, b.score, "{}", r.id);
        assert_eq!(r.weight, b.weight, "{}", r.id);
        assert_eq!(r.probability, b.probability, "{}", r.id);
        assert_eq!(r.limit, b.limit, "{}", r.id);
    }
}
