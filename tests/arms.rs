//! Live A/B arms and shadow policies: assignment by share, sticky keys, each arm drawing with
//! its own weights over shared statistics, shadows agreeing exactly when they equal the live
//! config — through the core and through the actor.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::actor::{Answer, Coordinator, GetState, Ready, SetConfig};
use selection_coordinator::score::{Arm, Shadow};
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, FailureClass, Limits, Next, Outcome, Request,
};

fn two_arms(a: Config, b: Config) -> Config {
    Config {
        arms: vec![
            Arm {
                name: "a".into(),
                share: 1.0,
                config: a,
            },
            Arm {
                name: "b".into(),
                share: 1.0,
                config: b,
            },
        ],
        ..Config::default()
    }
}

fn core_with(config: Config) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut core = Core::new(config, now).unwrap();
    for i in 0..4 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    (core, rng, now)
}

fn grant(core: &mut Core) -> selection_coordinator::Grant {
    match core.poll_event() {
        Some(Event::Granted(g)) => g,
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn requests_split_by_share_and_keys_stick_to_their_arm() {
    let mut config = two_arms(Config::default(), Config::lassie());
    config.arms[1].share = 3.0;
    let (mut core, mut rng, now) = core_with(config);
    assert_eq!(core.arm_names(), vec!["a", "b"]);
    let mut counts = [0u32; 2];
    for _ in 0..10_000 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let g = grant(&mut core);
        counts[g.arm.unwrap()] += 1;
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    let share_b = counts[1] as f64 / 10_000.0;
    assert!((share_b - 0.75).abs() < 0.02, "arm b got {share_b}");
    // The same key always lands in the same arm.
    let mut arm_of: HashMap<String, usize> = HashMap::new();
    for round in 0..5 {
        for k in 0..200 {
            let key = format!("user-{k}");
            core.ready(Request::any().with_key(key.clone()), now, &mut rng)
                .unwrap();
            let g = grant(&mut core);
            let arm = g.arm.unwrap();
            if round > 0 {
                assert_eq!(arm_of[&key], arm, "{key} changed arm");
            }
            arm_of.insert(key, arm);
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
}

#[test]
fn each_arm_draws_with_its_own_config_over_shared_statistics() {
    // Arm a is deterministic (always the best), arm b is a uniform draw.
    let mut uniform = Config::default();
    uniform.weights = selection_coordinator::score::Weights {
        uniform: 1.0,
        ..selection_coordinator::score::Weights::ZERO
    };
    uniform.time_exponent = 0.0;
    let config = two_arms(Config::default().deterministic(), uniform);
    let (mut core, mut rng, mut now) = core_with(config);
    // Teach the shared statistics that c1..c3 fail: arm a then always picks c0.
    for id in ["c1", "c2", "c3"] {
        for _ in 0..20 {
            core.ready(Request::only([id]), now, &mut rng).unwrap();
            let g = grant(&mut core);
            core.outcome(g.attempt, Outcome::failure(FailureClass::Overload), now)
                .unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
    now += Duration::from_secs(2);
    core.tick(now, &mut rng);
    let mut by_arm: [HashMap<String, u32>; 2] = Default::default();
    for _ in 0..2_000 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let g = grant(&mut core);
        *by_arm[g.arm.unwrap()]
            .entry(g.candidate.to_string())
            .or_default() += 1;
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    assert_eq!(by_arm[0].len(), 1, "arm a: {:?}", by_arm[0]);
    assert!(by_arm[0].contains_key("c0"));
    assert_eq!(by_arm[1].len(), 4, "arm b draws uniformly: {:?}", by_arm[1]);
    for n in by_arm[1].values() {
        assert!(*n > 150, "arm b: {:?}", by_arm[1]);
    }
}

fn shadowed(shadow: Config) -> Config {
    Config {
        shadows: vec![Shadow {
            name: "s".into(),
            sample: 1.0,
            config: shadow,
        }],
        ..Config::default()
    }
}

fn run_shadowed(config: Config) -> selection_coordinator::core::ShadowStats {
    let (mut core, mut rng, mut now) = core_with(config);
    core.set_record_rate(1.0);
    for i in 0..500u32 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let g = grant(&mut core);
        let bad = g.candidate.as_str() == "c3" && i % 2 == 0;
        let outcome = if bad {
            Outcome::failure(FailureClass::Timeout)
        } else {
            Outcome::success_with(5.0, 10.0 + (i % 7) as f64, 1000, 20.0)
        };
        now += Duration::from_millis(20);
        core.outcome(g.attempt, outcome, now).unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        let record = core.poll_record().expect("every decision recorded");
        assert_eq!(record.shadows.len(), 1);
        assert_eq!(
            record.shadows[0].agreed,
            record.shadows[0].choice == record.winner
        );
    }
    core.shadow_stats().remove(0)
}

#[test]
fn a_shadow_equal_to_the_live_config_always_agrees() {
    let s = run_shadowed(shadowed(Config::default()));
    assert_eq!(s.sampled, 500);
    assert_eq!(s.agreement(), 1.0);
    let d = run_shadowed(shadowed(Config::livepeer()));
    assert_eq!(d.sampled, 500);
    assert!(
        d.agreement() < 1.0,
        "a different shadow agreed {}",
        d.agreement()
    );
    println!(
        "shadow agreement: identical config {:.3}, livepeer preset {:.3} (mean p(live winner) {:.3})",
        s.agreement(),
        d.agreement(),
        d.mean_winner_probability()
    );
}

/// What the top level alone decides (how statistics are learned, what acts on attempts and
/// candidates) is not an arm's or shadow's own: one whose config differs only there draws as
/// the live config does (docs/arms.md).
#[test]
fn a_shadow_differing_only_in_what_the_top_level_decides_always_agrees() {
    let mut own = Config::default();
    own.window.min_samples = 1_000;
    own.window.buckets = 3;
    own.ema.alpha = 0.5;
    own.ema.success_prior = 0.2;
    own.deadline.factor = 3.0;
    own.refresh_ms = 1_000;
    own.ejection.consecutive_failures = 1;
    let s = run_shadowed(shadowed(own));
    assert_eq!(s.sampled, 500);
    assert_eq!(s.agreement(), 1.0);
}

/// A worker that holds its permits until told, so attempts stay in flight across a reload.
struct Holder {
    held: Vec<selection_coordinator::actor::Permit>,
}

impl Actor for Holder {
    type Context = Context<Self>;
}

impl Handler<Answer> for Holder {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        if let Answer::Granted(p) = answer {
            self.held.push(p);
        }
    }
}

#[derive(Message)]
#[rtype(result = "usize")]
struct ReleaseAll;

impl Handler<ReleaseAll> for Holder {
    type Result = usize;
    fn handle(&mut self, _: ReleaseAll, _: &mut Context<Self>) -> usize {
        let n = self.held.len();
        for mut p in self.held.drain(..) {
            p.report(Outcome::success_with(3.0, 9.0, 100, 12.0));
            p.done(Next::Finish);
        }
        n
    }
}

#[actix::test]
async fn shadow_agreement_through_the_actor() {
    tokio::time::pause();
    for (shadow, expect_full) in [(Config::default(), true), (Config::lassie(), false)] {
        let limits = Limits {
            global: 1,
            ..Limits::default()
        };
        let mut coordinator = Coordinator::with_seed(shadowed(shadow), limits, 5).unwrap();
        for i in 0..5 {
            coordinator = coordinator
                .with_candidate(CandidateInfo::new(format!("c{i}")).with_tag(if i == 4 {
                    "verified"
                } else {
                    "plain"
                }))
                .unwrap();
        }
        let addr = coordinator.start();
        let holder = Holder { held: Vec::new() }.start();
        for _ in 0..300 {
            addr.send(Ready::new(Request::any(), holder.clone().recipient()))
                .await
                .unwrap()
                .unwrap();
            holder.send(ReleaseAll).await.unwrap();
        }
        let state = addr.send(GetState).await.unwrap();
        let s = &state.shadows[0];
        assert_eq!(s.sampled, 300);
        if expect_full {
            assert_eq!(s.agreement(), 1.0);
        } else {
            assert!(
                s.agreement() < 1.0,
                "lassie shadow agreed {}",
                s.agreement()
            );
        }
    }
}

#[actix::test]
async fn hot_reload_keeps_permits_waiting_requests_and_statistics() {
    tokio::time::pause();
    let limits = Limits {
        global: 2,
        ..Limits::default()
    };
    let mut coordinator = Coordinator::with_seed(Config::default(), limits, 9).unwrap();
    for i in 0..3 {
        coordinator = coordinator
            .with_candidate(CandidateInfo::new(format!("c{i}")))
            .unwrap();
    }
    let addr = coordinator.start();
    let holder = Holder { held: Vec::new() }.start();
    // Some history, then 2 attempts in flight and 3 requests waiting.
    for _ in 0..20 {
        addr.send(Ready::new(Request::any(), holder.clone().recipient()))
            .await
            .unwrap()
            .unwrap();
        holder.send(ReleaseAll).await.unwrap();
    }
    for _ in 0..5 {
        addr.send(Ready::new(Request::any(), holder.clone().recipient()))
            .await
            .unwrap()
            .unwrap();
    }
    let before = addr.send(GetState).await.unwrap();
    assert_eq!((before.in_flight, before.waiting), (2, 3));

    // A bad config is refused with the field named; nothing changes.
    let mut bad = Config::default();
    bad.ema.alpha = 3.0;
    let err = addr.send(SetConfig(bad)).await.unwrap().unwrap_err();
    assert!(err.to_string().contains("ema.alpha"), "{err}");
    let same = addr.send(GetState).await.unwrap();
    assert_eq!(same.config, Config::default());

    // A good one (with arms) takes over without losing anything.
    let new = two_arms(Config::default(), Config::lassie());
    addr.send(SetConfig(new.clone())).await.unwrap().unwrap();
    let after = addr.send(GetState).await.unwrap();
    assert_eq!(after.config, new);
    assert_eq!(after.arms, vec!["a".to_string(), "b".to_string()]);
    assert_eq!((after.in_flight, after.waiting), (2, 3));
    for (b, a) in before.candidates.iter().zip(&after.candidates) {
        assert_eq!(b.stats, a.stats, "statistics of {} changed", b.info.id);
    }
    // The held permits still release their slots, and the waiting requests are served.
    assert_eq!(holder.send(ReleaseAll).await.unwrap(), 2);
    assert_eq!(holder.send(ReleaseAll).await.unwrap(), 2);
    assert_eq!(holder.send(ReleaseAll).await.unwrap(), 1);
    let end = addr.send(GetState).await.unwrap();
    assert_eq!((end.in_flight, end.waiting), (0, 0));
    assert_eq!(end.counters.decisions, 25);
}

#[test]
fn a_reload_that_removes_arms_moves_waiting_requests_to_the_remaining_ones() {
    let mut three = two_arms(Config::default(), Config::lassie());
    three.arms.push(Arm {
        name: "c".into(),
        share: 1.0,
        config: Config::livepeer(),
    });
    let (mut core, mut rng, now) = core_with(three);
    core.set_record_rate(1.0);
    core.set_limits(
        Limits {
            global: 1,
            ..Limits::default()
        },
        now,
        &mut rng,
    )
    .unwrap();
    for _ in 0..30 {
        core.ready(Request::any(), now, &mut rng).unwrap();
    }
    let first = grant(&mut core);
    // The first grant's record carries whichever arm the draw gave it.
    assert!(core.poll_record().is_some(), "the first grant is recorded");
    // Keep only arm "b": every waiting request now belongs to it, whatever it had.
    let one = Config {
        arms: vec![Arm {
            name: "b".into(),
            share: 1.0,
            config: Config::lassie(),
        }],
        ..Config::default()
    };
    core.set_config(one, now, &mut rng).unwrap();
    core.done(first.attempt, Next::Finish, now, &mut rng)
        .unwrap();
    for _ in 0..29 {
        let g = grant(&mut core);
        assert_eq!(g.arm, Some(0));
        let record = core.poll_record().expect("recorded");
        assert_eq!(record.arm.as_deref(), Some("b"));
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    assert_eq!(core.waiting(), 0);
}

#[test]
fn an_outcome_after_a_reload_counts_under_the_arm_that_drew_its_attempt() {
    let (mut core, mut rng, now) = core_with(two_arms(Config::default(), Config::lassie()));
    let mut granted = Vec::new();
    for i in 0..40 {
        let key = format!("user-{i}");
        core.ready(Request::any().with_key(key), now, &mut rng)
            .unwrap();
        let g = grant(&mut core);
        granted.push((g.attempt, g.arm.expect("arms are configured")));
    }
    assert!(granted.iter().any(|g| g.1 == 0) && granted.iter().any(|g| g.1 == 1));
    // "a" goes, "b" moves to index 0 behind a new "c".
    let mut reloaded = two_arms(Config::lassie(), Config::default());
    reloaded.arms[0].name = "b".into();
    reloaded.arms[1].name = "c".into();
    core.set_config(reloaded, now, &mut rng).unwrap();
    for (attempt, arm) in granted {
        let reported = core
            .outcome(attempt, Outcome::Failure(FailureClass::Transport), now)
            .unwrap();
        let want = if arm == 1 { Some(0) } else { None };
        assert_eq!(reported.arm, want, "drawn by arm {arm} before the reload");
    }
}

#[test]
fn explain_draws_a_keyed_request_under_its_arm() {
    // Arm "a" draws uniformly, arm "b" deterministically by stake alone.
    use selection_coordinator::score::Weights;
    let uniform = Config {
        weights: Weights {
            uniform: 1.0,
            ..Weights::ZERO
        },
        ..Config::default()
    };
    let mut by_stake = Config::default().deterministic();
    by_stake.weights = Weights {
        stake: 1.0,
        ..Weights::ZERO
    };
    let (mut core, mut rng, now) = core_with(two_arms(uniform, by_stake));
    core.add_candidate(CandidateInfo::new("big").with_stake(100.0), now, &mut rng)
        .unwrap();
    let names = core
        .arm_names()
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    for i in 0..20 {
        let request = Request::any().with_key(format!("user-{i}"));
        let explained = core.explain(&request, now).unwrap();
        core.ready(request, now, &mut rng).unwrap();
        let g = grant(&mut core);
        let arm = &names[g.arm.unwrap()];
        assert_eq!(explained.arm.as_deref(), Some(arm.as_str()));
        if arm == "b" {
            assert_eq!(explained.winner.as_ref(), Some(&g.candidate));
            assert_eq!(g.candidate.as_str(), "big");
        } else {
            let p = explained.candidates[0].probability;
            assert!(explained
                .candidates
                .iter()
                .all(|c| (c.probability - p).abs() < 1e-12));
        }
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    // Without a key a request's arm is drawn at arrival: the top-level config is explained.
    assert_eq!(core.explain(&Request::any(), now).unwrap().arm, None);
}

/// With arms, the preference (and the `selcoord_candidate_probability` gauge that reads it) is
/// the arms' probabilities weighted by their shares: what the next request's draw does, whatever
/// its arm. Before, it showed the top-level config's, which no request draws with, and with
/// ejection on at the top level only, ejected candidates read 0 while the arms drew them.
#[test]
fn with_arms_the_preference_is_what_the_requests_draw() {
    let mut top = Config::default();
    top.ejection.enabled = true;
    top.ejection.max_share = 0.5;
    let mut config = two_arms(Config::default(), Config::lassie());
    config.ejection = top.ejection.clone();
    config.arms[1].share = 3.0;
    let (mut core, mut rng, mut now) = core_with(config);
    // Different first bytes, and c3 failing until the top level ejects it.
    for (i, ttfb) in [10.0, 20.0, 40.0, 80.0].into_iter().enumerate() {
        for _ in 0..30 {
            let id = format!("c{i}");
            core.ready(Request::only([id.as_str()]), now, &mut rng)
                .unwrap();
            let g = grant(&mut core);
            let outcome = if i == 3 {
                Outcome::failure(FailureClass::Timeout)
            } else {
                Outcome::success_with(2.0, ttfb, 10_000, ttfb * 2.0)
            };
            now += Duration::from_millis(1);
            core.outcome(g.attempt, outcome, now).unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
    now += Duration::from_millis(300);
    core.tick(now, &mut rng);
    let preference: HashMap<String, f64> = core
        .preference()
        .into_iter()
        .map(|(id, p)| (id.to_string(), p))
        .collect();
    let total: f64 = preference.values().sum();
    assert!((total - 1.0).abs() < 1e-9, "{preference:?}");
    let n = 40_000;
    let mut won: HashMap<String, u32> = HashMap::new();
    for _ in 0..n {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let g = grant(&mut core);
        *won.entry(g.candidate.to_string()).or_default() += 1;
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    for i in 0..4 {
        let id = format!("c{i}");
        let seen = f64::from(won.get(&id).copied().unwrap_or(0)) / f64::from(n);
        let p = preference.get(&id).copied().unwrap_or(0.0);
        assert!(
            (seen - p).abs() < 0.01,
            "{id}: drawn {seen:.4}, preference {p:.4} ({preference:?})"
        );
    }
}
