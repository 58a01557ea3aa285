//! The scoring model against its anchors (Livepeer's published case, lassie's score), its
//! filters and fallbacks, failure classes, decay, ejection, draw frequencies, properties, and
//! config errors.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::decision::DecisionRecord;
use selection_coordinator::score::{Overall, Stats, Weights};
use selection_coordinator::snapshot::{
    CandidateSnapshot, Snapshot, StatsSnapshot, SNAPSHOT_VERSION,
};
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, FailureClass, Mode, Next, Outcome, Rejection, Request,
};

fn new_core(config: Config) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let core = Core::new(config, now).expect("valid config");
    (core, SmallRng::seed_from_u64(11), now)
}

fn add_all(core: &mut Core, rng: &mut SmallRng, now: Instant, infos: Vec<CandidateInfo>) {
    for info in infos {
        core.add_candidate(info, now, rng).unwrap();
    }
}

fn probs(core: &mut Core, request: &Request, now: Instant) -> HashMap<String, f64> {
    core.probabilities(request, now)
        .unwrap()
        .into_iter()
        .map(|(id, p)| (id.to_string(), p))
        .collect()
}

fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} (tolerance {tol})"
    );
}

/// Runs one attempt on `id` and reports `outcome`.
fn attempt_on(
    core: &mut Core,
    rng: &mut SmallRng,
    now: Instant,
    id: &str,
    outcome: Outcome,
) -> String {
    core.ready(Request::only([id]), now, rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("expected a grant on {id}");
    };
    core.outcome(g.attempt, outcome, now).unwrap();
    core.done(g.attempt, Next::Finish, now, rng).unwrap();
    g.candidate.to_string()
}

// ----- Livepeer --------------------------------------------------------------------------

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
    // The project default instead counts the optimistic prior as the previous value.
    let mut c = Config::default();
    c.ema.alpha = 0.25;
    c.ema.success_prior = 1.0;
    c.ema.first_sample_replaces_prior = false;
    c.ejection.enabled = false;
    let (mut core, mut rng, now) = new_core(c);
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
        Some(0.75)
    );
}

// ----- failure classes, decay, ejection ---------------------------------------------------

fn window_config() -> Config {
    let mut c = Config::default();
    c.weights = Weights {
        success: 1.0,
        overload: 1.0,
        ..Weights::ZERO
    };
    c.ema.alpha = 0.5;
    c.ema.success_prior = 1.0;
    c.ema.first_sample_replaces_prior = false;
    c.ema.half_life_s = None;
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

// ----- frequencies -------------------------------------------------------------------------

/// Draws `n` times through `ready`/`done` and returns each candidate's share.
fn draw_shares(
    core: &mut Core,
    rng: &mut SmallRng,
    now: Instant,
    request: &Request,
    n: usize,
) -> HashMap<String, f64> {
    let mut counts: HashMap<String, f64> = HashMap::new();
    for _ in 0..n {
        core.ready(request.clone(), now, rng).unwrap();
        let Some(Event::Granted(g)) = core.poll_event() else {
            panic!("expected a grant");
        };
        *counts.entry(g.candidate.to_string()).or_default() += 1.0;
        core.done(g.attempt, Next::Finish, now, rng).unwrap();
    }
    counts.values_mut().for_each(|c| *c /= n as f64);
    counts
}

fn assert_shares_match(core: &mut Core, rng: &mut SmallRng, now: Instant, request: &Request) {
    let want = probs(core, request, now);
    assert!(want.len() >= 3);
    let got = draw_shares(core, rng, now, request, 10_000);
    let mut worst = 0.0f64;
    for (id, p) in &want {
        let share = got.get(id).copied().unwrap_or(0.0);
        worst = worst.max((share - p).abs());
        assert!(
            (share - p).abs() <= 0.03,
            "{id}: share {share}, probability {p}"
        );
    }
    for id in got.keys() {
        assert!(
            want.contains_key(id),
            "{id} was drawn but has no probability"
        );
    }
    eprintln!("largest |share - probability| over 10,000 draws: {worst:.4}");
}

fn sum_mode_core() -> (Core, SmallRng, Instant) {
    let mut c = Config::default();
    c.mode = Mode::Sum;
    c.weights = Weights {
        success: 1.0,
        uniform: 0.2,
        ..Weights::ZERO
    };
    c.tag_weights = [("verified".to_string(), 2.0)].into_iter().collect();
    c.exponent = 2.0;
    c.floor = 0.05;
    c.ema.half_life_s = None;
    let (mut core, mut rng, now) = new_core(c);
    for (id, success, verified) in [
        ("a", Some(1.0), true),
        ("b", Some(0.6), false),
        ("c", Some(0.2), true),
        ("d", Some(0.0), false),
        ("e", None, false),
    ] {
        let mut info = CandidateInfo::new(id);
        if verified {
            info = info.with_tag("verified");
        }
        let stats = Stats {
            success,
            ..Stats::default()
        };
        core.add_with_stats(info, stats, now, &mut rng).unwrap();
    }
    (core, rng, now)
}

#[test]
fn frequencies_match_probabilities_in_sum_mode() {
    let (mut core, mut rng, now) = sum_mode_core();
    assert_shares_match(&mut core, &mut rng, now, &Request::any());
}

#[test]
fn frequencies_match_probabilities_for_an_explicit_subset() {
    let (mut core, mut rng, now) = sum_mode_core();
    assert_shares_match(
        &mut core,
        &mut rng,
        now,
        &Request::only(["b", "c", "d", "e"]),
    );
}

#[test]
fn frequencies_match_probabilities_in_mixture_mode() {
    let mut c = Config::livepeer();
    c.weights.stake = 0.5;
    c.weights.price = 0.3;
    c.weights.uniform = 0.2;
    c.floor = 0.05;
    let (mut core, mut rng, now) = new_core(c);
    let infos = [
        (10.0, 50.0),
        (40.0, 120.0),
        (5.0, 10.0),
        (0.0, 300.0),
        (45.0, 80.0),
    ]
    .iter()
    .enumerate()
    .map(|(i, (s, p))| {
        CandidateInfo::new(format!("o{i}"))
            .with_stake(*s)
            .with_price(*p)
    })
    .collect();
    add_all(&mut core, &mut rng, now, infos);
    assert_shares_match(&mut core, &mut rng, now, &Request::any());
    assert_shares_match(&mut core, &mut rng, now, &Request::only(["o1", "o2", "o3"]));
}

// ----- properties --------------------------------------------------------------------------

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
                let mut c = Config::default();
                c.mode = mode;
                c.weights = Weights {
                    success: w[0],
                    connect: w[1],
                    ttfb: w[2],
                    bandwidth: w[3],
                    overload: w[4],
                    load: w[5],
                    stake: w[6],
                    price: w[7],
                    uniform: w[8],
                };
                c.tag_weights = [("verified".to_string(), w[9])].into_iter().collect();
                c.exponent = exponent;
                c.floor = floor;
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
    /// Added with raw statistics (unchecked) instead of through a validated snapshot.
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
                last_sample_age_s: Some(self.age_s),
                window: self.window.iter().map(|&(e, n)| (e.min(n), n)).collect(),
                consecutive_failures: 0,
                ejections: 0,
                ejected_for_s: None,
                attempts: 0,
                successes: 0,
            },
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
    #![proptest_config(ProptestConfig::with_cases(200))]

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
            overall: Overall { connect_ms: overall.0, ttfb_ms: overall.1, bandwidth_bps: overall.2 },
            candidates: cands
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.hostile)
                .map(|(i, c)| c.snapshot(i))
                .collect(),
        };
        core.restore(&snapshot, now, &mut rng).unwrap();
        for (i, c) in cands.iter().enumerate().filter(|(_, c)| c.hostile) {
            core.add_with_stats(c.info(i), c.raw_stats(), now, &mut rng).unwrap();
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
        let bound = floor / n as f64;
        prop_assert!(p["c0"] >= bound - 1e-12, "p = {} < floor / n = {bound}", p["c0"]);
        prop_assert!(core.tree_probability(&"c0".into()) >= bound - 1e-12);
    }
}

// ----- config files and errors --------------------------------------------------------------

#[test]
fn bad_toml_config_names_every_bad_field() {
    let text = r#"
        bogus = 1
        mode = "average"
        floor = nan
        exponent = -2
        [weights]
        success = -1
        connect = "high"
        [ema]
        alpha = 1.5
        overall_alpha = 0
        [window]
        buckets = 0
        [tag_weights]
        verified = "yes"
    "#;
    let err = Config::from_toml_str(text).unwrap_err();
    let paths = err.paths();
    for want in [
        "bogus",
        "mode",
        "floor",
        "exponent",
        "weights.success",
        "weights.connect",
        "ema.alpha",
        "ema.overall_alpha",
        "window.buckets",
        "tag_weights.verified",
    ] {
        assert!(paths.contains(&want), "missing {want} in {err}");
    }
    let shown = err.to_string();
    assert!(shown.contains("ema.alpha: must be in (0, 1]"), "{shown}");
    assert!(shown.contains("floor: is NaN"), "{shown}");
}

#[test]
fn bad_json_config_names_every_bad_field() {
    let text = r#"{
        "preset": "livepeer",
        "weights": {"stake": -0.7, "price": "cheap", "colour": 1},
        "price": {"exp_factor": 0, "max": -5},
        "ejection": {"max_share": 1.5, "consecutive_failures": 2.5},
        "refresh_ms": -1
    }"#;
    let err = Config::from_json_str(text).unwrap_err();
    let paths = err.paths();
    for want in [
        "weights.stake",
        "weights.price",
        "weights.colour",
        "price.exp_factor",
        "price.max",
        "ejection.max_share",
        "ejection.consecutive_failures",
        "refresh_ms",
    ] {
        assert!(paths.contains(&want), "missing {want} in {err}");
    }
}

#[test]
fn all_zero_weights_are_refused() {
    let err = Config::from_toml_str(
        "[weights]\nsuccess = 0\nconnect = 0\nttfb = 0\nbandwidth = 0\noverload = 0\nload = 0\n\
         stake = 0\nprice = 0\nuniform = 0\n[tag_weights]\n",
    )
    .unwrap_err();
    assert_eq!(err.paths(), ["weights"], "{err}");
    let mut c = Config::livepeer();
    c.weights = Weights::ZERO;
    assert!(Core::new(c, Instant::now()).is_err());
}

#[test]
fn unknown_preset_is_an_error_naming_the_field() {
    let err = Config::preset("envoy").unwrap_err();
    assert_eq!(err.paths(), ["preset"]);
    assert!(
        err.to_string().contains("default, lassie, livepeer"),
        "{err}"
    );
    let err = Config::from_toml_str("preset = \"envoy\"\nfloor = 2\n").unwrap_err();
    assert_eq!(err.paths(), ["preset", "floor"], "{err}");
    let err = Config::from_json_str(r#"{"preset": 3}"#).unwrap_err();
    assert_eq!(err.paths(), ["preset"]);
}

#[test]
fn a_file_overrides_its_preset_field_by_field() {
    let c = Config::from_toml_str("preset = \"lassie\"\n[weights]\nbandwidth = 2\n").unwrap();
    let mut want = Config::lassie();
    want.weights.bandwidth = 2.0;
    assert_eq!(c, want);
    let c = Config::from_json_str(r#"{"preset": "livepeer", "price": {"max": 900}}"#).unwrap();
    assert_eq!(c.price.max, Some(900.0));
    assert_eq!(c.weights, Config::livepeer().weights);
    // Round trip: a serialised config loads back as itself.
    for c in [
        Config::default(),
        Config::lassie(),
        Config::livepeer().deterministic(),
    ] {
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::from_toml_str(&text).unwrap(), c, "{text}");
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(Config::from_json_str(&text).unwrap(), c);
    }
}

fn repo_file(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn documented_config_loads_and_lists_every_field() {
    let path = repo_file("docs/config.toml");
    let loaded = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded,
        Config::default(),
        "docs/config.toml should state the defaults"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    // Every field (optional ones included, possibly commented out) appears under its table.
    let mut shape = serde_json::to_value(Config::default()).unwrap();
    shape["tag_weights"] = serde_json::json!({});
    let mut section = String::new();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let l = line.trim_start_matches('#').trim();
        if l.starts_with('[') && l.ends_with(']') {
            section = l.trim_matches(['[', ']']).to_string();
            seen.insert(section.clone());
        } else if let Some((k, _)) = l.split_once('=') {
            let k = k.trim();
            seen.insert(if section.is_empty() {
                k.to_string()
            } else {
                format!("{section}.{k}")
            });
        }
    }
    let serde_json::Value::Object(top) = shape else {
        unreachable!()
    };
    for (k, v) in top {
        match v {
            serde_json::Value::Object(inner) if k != "tag_weights" => {
                for f in inner.keys() {
                    assert!(
                        seen.contains(&format!("{k}.{f}")),
                        "docs/config.toml lacks {k}.{f}"
                    );
                }
            }
            _ => assert!(seen.contains(&k), "docs/config.toml lacks {k}"),
        }
    }
}

#[test]
fn example_configs_load() {
    for rel in [
        "examples/configs/livepeer-case.toml",
        "examples/configs/lassie.toml",
    ] {
        Config::load(&repo_file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
}
