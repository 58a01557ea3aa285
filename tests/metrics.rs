//! The metrics a known sequence of decisions produces, read back from `metrics-util`'s
//! `DebuggingRecorder` (no exporter, no HTTP).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::core::Reported;
use selection_coordinator::metrics::{
    names, sanitize_label, CoordinatorMetrics, LABEL_RETIRE_TICKS, MAX_LABEL_LEN,
};
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Limits, Next, Outcome, Request,
};

/// Every recorded value, keyed by (name, sorted labels).
type Values = BTreeMap<(String, Vec<(String, String)>), DebugValue>;

fn values(snapshotter: &Snapshotter) -> Values {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            labels.sort();
            ((key.name().to_string(), labels), value)
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn counter(values: &Values, name: &str, pairs: &[(&str, &str)]) -> u64 {
    match values.get(&(name.to_string(), labels(pairs))) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name}{pairs:?}: expected a counter, got {other:?}"),
    }
}

fn gauge(values: &Values, name: &str, pairs: &[(&str, &str)]) -> f64 {
    match values.get(&(name.to_string(), labels(pairs))) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{name}{pairs:?}: expected a gauge, got {other:?}"),
    }
}

fn histogram(values: &Values, name: &str, pairs: &[(&str, &str)]) -> Vec<f64> {
    match values.get(&(name.to_string(), labels(pairs))) {
        Some(DebugValue::Histogram(v)) => v.iter().map(|x| x.into_inner()).collect(),
        other => panic!("{name}{pairs:?}: expected a histogram, got {other:?}"),
    }
}

/// Drains the core's events into the metrics and returns them.
fn drain(core: &mut Core, m: &mut CoordinatorMetrics) -> Vec<Event> {
    let events: Vec<Event> = std::iter::from_fn(|| core.poll_event()).collect();
    for e in &events {
        m.on_event(e);
    }
    events
}

/// An outcome's attribution without arms, on candidate `id`.
fn reported(id: &str) -> Reported {
    Reported {
        request: serde_json::from_value(0u64.into()).unwrap(),
        candidate: CandidateId::new(id),
        arm: None,
    }
}

fn granted(events: &[Event]) -> Vec<selection_coordinator::Grant> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Granted(g) => Some(g.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_known_sequence_produces_the_expected_counters() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        selection_coordinator::metrics::describe();
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(11);
        let mut config = Config::default();
        config.ejection.enabled = true;
        config.ejection.consecutive_failures = 2;
        config.ejection.max_share = 1.0;
        let limits = Limits {
            global: 2,
            per_candidate: 1,
            max_waiting: 1,
            ..Limits::default()
        };
        let mut core = Core::new(config, t0).unwrap().with_limits(limits).unwrap();
        for id in ["a", "b", "c"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(100);

        // 1. Only `a` is eligible: an only-choice decision.
        core.ready(Request::only(["a"]), t0, &mut rng).unwrap();
        let g1 = granted(&drain(&mut core, &mut m));
        assert_eq!(g1.len(), 1);
        assert_eq!(g1[0].candidate.as_str(), "a");
        // 2. Any of b, c (a is full): a two-way draw.
        core.ready(Request::any(), t0, &mut rng).unwrap();
        let g2 = granted(&drain(&mut core, &mut m));
        assert_eq!(g2.len(), 1);
        assert_ne!(g2[0].candidate.as_str(), "a");
        // 3. Global limit reached: this one waits; 4. the queue (max 1) is full: rejected.
        let waiting = core.ready(Request::any(), t0, &mut rng).unwrap();
        core.ready(Request::any(), t0, &mut rng).unwrap();
        assert!(granted(&drain(&mut core, &mut m)).is_empty());
        // 5. Half a second later `a` fails twice in a row (overload): the waiter gets a's slot
        //    after the first, and `a` is ejected after the second.
        let t1 = t0 + Duration::from_millis(500);
        let reported = core
            .outcome(g1[0].attempt, Outcome::failure(FailureClass::Overload), t1)
            .unwrap();
        assert_eq!(reported.candidate, g1[0].candidate);
        assert_eq!(reported.request, g1[0].request);
        m.on_outcome(&reported, &Outcome::failure(FailureClass::Overload));
        core.done(g1[0].attempt, Next::Finish, t1, &mut rng)
            .unwrap();
        let g3 = granted(&drain(&mut core, &mut m));
        assert_eq!(g3.len(), 1, "the waiter is served when a slot frees");
        assert_eq!(g3[0].request, waiting);
        assert!((g3[0].waited_s - 0.5).abs() < 1e-9);
        let reported = core.outcome(g2[0].attempt, Outcome::success(), t1).unwrap();
        m.on_outcome(&reported, &Outcome::success());
        core.ready(Request::only(["a"]), t1, &mut rng).unwrap();
        // Freeing b or c's slot may serve the request that only accepts `a`.
        core.done(g2[0].attempt, Next::Finish, t1, &mut rng)
            .unwrap();
        let more = granted(&drain(&mut core, &mut m));
        for g in &more {
            let reported = core
                .outcome(g.attempt, Outcome::failure(FailureClass::Timeout), t1)
                .unwrap();
            m.on_outcome(&reported, &Outcome::failure(FailureClass::Timeout));
        }
        m.on_decision_cost(2e-6);
        m.on_decision_cost(f64::NAN); // ignored
        m.on_gauges(&core);

        let v = values(&snapshotter);
        let by_reason = |reason: &str| -> u64 {
            v.iter()
                .filter(|((name, l), _)| {
                    name == names::DECISIONS && l.iter().any(|(k, x)| k == "reason" && x == reason)
                })
                .map(|(_, val)| match val {
                    DebugValue::Counter(n) => *n,
                    _ => 0,
                })
                .sum()
        };
        let grants = 3 + more.len() as u64;
        assert!(
            counter(
                &v,
                names::DECISIONS,
                &[
                    ("arm", "default"),
                    ("candidate", "a"),
                    ("reason", "only_choice")
                ]
            ) >= 1,
            "{v:#?}"
        );
        assert!(by_reason("draw") >= 1, "b or c was drawn: {v:#?}");
        assert_eq!(by_reason("draw") + by_reason("only_choice"), grants);
        assert_eq!(by_reason("fallback") + by_reason("deterministic"), 0);
        assert_eq!(
            counter(&v, names::REJECTIONS, &[("reason", "queue_full")]),
            1
        );
        assert_eq!(
            counter(&v, names::REJECTIONS, &[("reason", "deadline_passed")]),
            0,
            "primed at zero"
        );
        assert_eq!(
            counter(
                &v,
                names::OUTCOMES,
                &[
                    ("arm", "default"),
                    ("candidate", "a"),
                    ("outcome", "overload")
                ]
            ),
            1
        );
        assert_eq!(
            counter(
                &v,
                names::OUTCOMES,
                &[
                    ("arm", "default"),
                    ("candidate", g2[0].candidate.as_str()),
                    ("outcome", "success")
                ]
            ),
            1
        );
        let waits = histogram(&v, names::WAIT_SECONDS, &[("arm", "default")]);
        assert_eq!(waits.len() as u64, grants);
        assert!(waits.iter().any(|w| (w - 0.5).abs() < 1e-9));
        assert_eq!(histogram(&v, names::DECISION_COST, &[]), vec![2e-6]);
        let probs = histogram(
            &v,
            names::WINNER_PROBABILITY,
            &[("arm", "default"), ("reason", "only_choice")],
        );
        assert!(probs.iter().all(|p| (*p - 1.0).abs() < 1e-9), "{probs:?}");
        assert_eq!(
            gauge(&v, names::CANDIDATES, &[]),
            3.0,
            "three candidates known"
        );
        assert_eq!(
            gauge(&v, names::IN_FLIGHT, &[]),
            f64::from(core.in_flight())
        );
        assert_eq!(gauge(&v, names::IN_FLIGHT_LIMIT, &[]), 2.0);
        assert_eq!(gauge(&v, names::WAITING, &[]), core.waiting() as f64);
        assert_eq!(gauge(&v, names::WAITING_LIMIT, &[]), 1.0);
        assert_eq!(
            gauge(&v, names::DEADLINE_MULTIPLE, &[]),
            core.deadline_multiple()
                .expect("the default config advises deadlines")
        );
        let floor = gauge(&v, names::FLOOR_IN_FORCE, &[]);
        assert_eq!(floor, core.floor_in_force());
        assert!(floor > 0.0 && floor <= Config::default().floor, "{floor}");
        assert_eq!(
            gauge(&v, names::CANDIDATE_IN_FLIGHT_LIMIT, &[("candidate", "b")]),
            1.0
        );
        let success_a = gauge(
            &v,
            names::SCORE_COMPONENT,
            &[("candidate", "a"), ("component", "success")],
        );
        let view = core.candidate(&CandidateId::new("a")).unwrap();
        assert_eq!(success_a, view.components.success);
        assert!(success_a < 1.0, "a failed, its success EMA dropped");
        assert_eq!(counter(&v, names::FILTER_FALLBACKS, &[]), 0);
        assert_eq!(
            counter(&v, names::EJECTIONS, &[]),
            core.counters().ejections
        );
    });
}

#[test]
fn a_two_failure_streak_is_counted_as_one_ejection_and_counters_are_deltas() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut config = Config::default();
        config.ejection.enabled = true;
        config.ejection.consecutive_failures = 2;
        config.ejection.max_share = 1.0;
        let mut core = Core::new(config, t0).unwrap();
        core.add_candidate(CandidateInfo::new("x"), t0, &mut rng)
            .unwrap();
        core.add_candidate(CandidateInfo::new("y"), t0, &mut rng)
            .unwrap();
        let mut m = CoordinatorMetrics::new(10);
        for _ in 0..2 {
            core.ready(Request::only(["x"]), t0, &mut rng).unwrap();
            let g = granted(&drain(&mut core, &mut m)).remove(0);
            core.outcome(g.attempt, Outcome::failure(FailureClass::Refused), t0)
                .unwrap();
            core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
        }
        assert_eq!(core.counters().ejections, 1);
        m.on_gauges(&core);
        m.on_gauges(&core); // no new ejection: the counter must not move
        let v = values(&snapshotter);
        assert_eq!(counter(&v, names::EJECTIONS, &[]), 1);
        assert_eq!(gauge(&v, names::CANDIDATES_EJECTED, &[]), 1.0);
    });
}

#[test]
fn a_filter_that_passes_nobody_counts_a_fallback() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(3);
        let mut config = Config::default();
        config.perf.region = Some("FRA".into());
        config.perf.min_score = Some(0.9);
        let mut core = Core::new(config, t0).unwrap();
        for id in ["p", "q"] {
            core.add_candidate(
                CandidateInfo::new(id).with_perf_score("FRA", 0.1),
                t0,
                &mut rng,
            )
            .unwrap();
        }
        let mut m = CoordinatorMetrics::new(10);
        core.ready(Request::any(), t0, &mut rng).unwrap();
        let g = granted(&drain(&mut core, &mut m));
        assert_eq!(g.len(), 1);
        let v = values(&snapshotter);
        assert_eq!(counter(&v, names::FILTER_FALLBACKS, &[]), 1);
        assert_eq!(
            counter(
                &v,
                names::DECISIONS,
                &[
                    ("arm", "default"),
                    ("candidate", g[0].candidate.as_str()),
                    ("reason", "fallback")
                ]
            ),
            1
        );
    });
}

#[test]
fn deterministic_mode_is_labelled_deterministic() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut core = Core::new(Config::default().deterministic(), t0).unwrap();
        for id in ["d1", "d2"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(10);
        core.ready(Request::any(), t0, &mut rng).unwrap();
        drain(&mut core, &mut m);
        let v = values(&snapshotter);
        assert_eq!(
            counter(
                &v,
                names::DECISIONS,
                &[
                    ("arm", "default"),
                    ("candidate", "d1"),
                    ("reason", "deterministic")
                ]
            ),
            1,
            "ties go to the earliest added"
        );
    });
}

#[test]
fn candidate_labels_are_capped_and_the_rest_is_other() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let mut m = CoordinatorMetrics::new(3);
        for i in 0..10 {
            m.on_outcome(&reported(&format!("c{i}")), &Outcome::success());
        }
        m.on_outcome(&reported("c0"), &Outcome::success());
        assert_eq!(m.labelled_candidates(), 3);
        let v = values(&snapshotter);
        let seen: BTreeSet<String> = v
            .keys()
            .filter(|(name, _)| name == names::OUTCOMES)
            .flat_map(|(_, l)| l.iter().filter(|(k, _)| k == "candidate"))
            .map(|(_, x)| x.clone())
            .collect();
        let expected: BTreeSet<String> = ["c0", "c1", "c2", "other"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(seen, expected);
        let outcome = |c| {
            counter(
                &v,
                names::OUTCOMES,
                &[("arm", "default"), ("candidate", c), ("outcome", "success")],
            )
        };
        assert_eq!(outcome("c0"), 2);
        assert_eq!(outcome("other"), 7);
    });
}

/// A fleet that replaces its members keeps naming them: a departed candidate's label is freed
/// after a few gauge ticks, never while it is present, and comes back with its candidate.
#[test]
fn departed_candidates_free_their_labels_for_newcomers() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(41);
        let mut core = Core::new(Config::default(), t0).unwrap();
        let mut m = CoordinatorMetrics::new(3);
        let id = |s: &str| CandidateId::new(s);
        for name in ["stay", "a0", "a1"] {
            core.add_candidate(CandidateInfo::new(name), t0, &mut rng)
                .unwrap();
        }
        m.on_gauges(&core);
        // 300 generations of two members each replace the last two; `stay` stays.
        for generation in 1..=300 {
            for old in 0..2 {
                core.remove_candidate(
                    &id(&format!("a{}", (generation - 1) * 2 + old)),
                    t0,
                    &mut rng,
                )
                .unwrap();
            }
            for new in 0..2 {
                let name = format!("a{}", generation * 2 + new);
                core.add_candidate(CandidateInfo::new(name), t0, &mut rng)
                    .unwrap();
            }
            m.on_gauges(&core);
            // The departed hold their labels for a while: the newcomers are `other` meanwhile.
            assert_eq!(
                m.candidate_label(&id(&format!("a{}", generation * 2)))
                    .as_ref(),
                "other"
            );
            for _ in 1..LABEL_RETIRE_TICKS {
                m.on_gauges(&core);
            }
            assert!(m.labelled_candidates() <= 3);
            assert_eq!(m.candidate_label(&id("stay")).as_ref(), "stay");
            m.on_gauges(&core);
            for new in 0..2 {
                let name = format!("a{}", generation * 2 + new);
                assert_eq!(
                    m.candidate_label(&id(&name)).as_ref(),
                    name,
                    "generation {generation}"
                );
            }
        }
        // A member that comes back gets its own label again once one is free.
        core.remove_candidate(&id("a600"), t0, &mut rng).unwrap();
        core.add_candidate(CandidateInfo::new("a0"), t0, &mut rng)
            .unwrap();
        for _ in 0..=LABEL_RETIRE_TICKS {
            m.on_gauges(&core);
        }
        assert_eq!(m.candidate_label(&id("a0")).as_ref(), "a0");
        assert_eq!(m.labelled_candidates(), 3);
    });
}

/// Several coordinators in one process: named, each keeps its own series; unnamed, its
/// series carry no coordinator label.
#[test]
fn named_coordinators_keep_their_series_apart() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(43);
        let mut run = |name: Option<&str>, candidates: usize| {
            let mut core = Core::new(Config::default(), t0).unwrap();
            for i in 0..candidates {
                core.add_candidate(CandidateInfo::new(format!("c{i}")), t0, &mut rng)
                    .unwrap();
            }
            let mut m = CoordinatorMetrics::new(10);
            if let Some(name) = name {
                m = m.named(name);
            }
            assert_eq!(m.name(), name);
            core.ready(Request::any(), t0, &mut rng).unwrap();
            for g in granted(&drain(&mut core, &mut m)) {
                let reported = core.outcome(g.attempt, Outcome::success(), t0).unwrap();
                m.on_outcome(&reported, &Outcome::success());
            }
            m.on_gauges(&core);
        };
        run(Some("db"), 2);
        run(Some("cache"), 3);
        run(None, 1);
    });
    let v = values(&snapshotter);
    assert_eq!(gauge(&v, names::CANDIDATES, &[("coordinator", "db")]), 2.0);
    assert_eq!(
        gauge(&v, names::CANDIDATES, &[("coordinator", "cache")]),
        3.0
    );
    assert_eq!(gauge(&v, names::CANDIDATES, &[]), 1.0);
    let decisions = |coordinator: &str| -> u64 {
        v.iter()
            .filter(|((name, labels), _)| {
                name == names::DECISIONS
                    && labels.contains(&("coordinator".to_string(), coordinator.to_string()))
            })
            .map(|(_, value)| match value {
                DebugValue::Counter(n) => *n,
                other => panic!("{other:?}"),
            })
            .sum()
    };
    assert_eq!((decisions("db"), decisions("cache")), (1, 1));
    assert!(v.keys().all(|(_, labels)| labels
        .iter()
        .all(|(k, value)| k != "coordinator" || value == "db" || value == "cache")));
}

/// Snapshot saves add up over coordinators sharing a name, as every counter does, and a
/// coordinator replacing another under its name adds its own failures to the series (an
/// alert on the rate of failed saves sees them).
#[test]
fn snapshot_saves_add_up_over_coordinators_sharing_a_name() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let mut first = CoordinatorMetrics::new(10).named("svc");
        let mut second = CoordinatorMetrics::new(10).named("svc");
        first.on_snapshot_saves(100, 4, 0);
        second.on_snapshot_saves(30, 1, 0);
        second.on_snapshot_saves(31, 3, 2);
        // The first is replaced: its successor's counts start again from 0.
        let mut successor = CoordinatorMetrics::new(10).named("svc");
        successor.on_snapshot_saves(2, 1, 0);
    });
    let v = values(&snapshotter);
    let saves = |result: &str| {
        counter(
            &v,
            names::SNAPSHOT_SAVES,
            &[("coordinator", "svc"), ("result", result)],
        )
    };
    assert_eq!(
        (saves("written"), saves("failed"), saves("skipped")),
        (133, 8, 2)
    );
}

#[test]
fn label_values_are_sanitized_and_kept_distinct() {
    assert_eq!(sanitize_label("ok-id.1:9000"), "ok-id.1:9000");
    assert_eq!(sanitize_label("bad\nid\t"), "bad_id_");
    assert_eq!(sanitize_label(""), "_");
    assert_eq!(sanitize_label("other"), "other_");
    let long = "é".repeat(100);
    let cut = sanitize_label(&long);
    assert!(cut.len() <= MAX_LABEL_LEN && cut.chars().all(|c| c == 'é'));
    assert_eq!(cut.chars().count(), MAX_LABEL_LEN / 2);

    let mut m = CoordinatorMetrics::new(10);
    let a = m.candidate_label(&CandidateId::new("x\ny"));
    let b = m.candidate_label(&CandidateId::new("x\ry"));
    let c = m.candidate_label(&CandidateId::new("x_y"));
    assert_eq!(a.as_ref(), "x_y");
    assert_eq!(b.as_ref(), "x_y~2");
    assert_eq!(c.as_ref(), "x_y~3");
    assert_eq!(m.candidate_label(&CandidateId::new("x\ny")).as_ref(), "x_y");
}

/// Arms and shadows whose names sanitize alike (the same first 64 bytes; a newline against a
/// tab) keep series of their own, as candidates do: summed under one label, a comparison of
/// arms by `arm` would add the two together.
#[test]
fn arms_and_shadows_whose_names_sanitize_alike_keep_their_own_series() {
    use selection_coordinator::score::{Arm, Shadow};
    let long = "x".repeat(MAX_LABEL_LEN);
    let config = Config {
        arms: vec![
            Arm {
                name: format!("{long}-control"),
                share: 1.0,
                config: Config::default(),
            },
            Arm {
                name: format!("{long}-treatment"),
                share: 1.0,
                config: Config::default().deterministic(),
            },
        ],
        shadows: vec![
            Shadow {
                name: "s\n1".into(),
                sample: 1.0,
                config: Config::default().deterministic(),
            },
            Shadow {
                name: "s\t1".into(),
                sample: 1.0,
                config: Config::default().deterministic(),
            },
        ],
        ..Config::default()
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut core = Core::new(config, t0).unwrap();
        for i in 0..3 {
            core.add_candidate(CandidateInfo::new(format!("c{i}")), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(10);
        m.sync_arms(&core);
        for _ in 0..200 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
            for g in granted(&drain(&mut core, &mut m)) {
                core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
            }
        }
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let of = |name: &str, key: &str| -> BTreeSet<String> {
            v.keys()
                .filter(|(n, _)| n == name)
                .flat_map(|(_, l)| l.iter().filter(|(k, _)| k == key).map(|(_, x)| x.clone()))
                .collect()
        };
        let arms = of(names::DECISIONS, "arm");
        assert_eq!(arms.len(), 2, "{arms:?}");
        assert!(arms.iter().all(|a| a.len() <= MAX_LABEL_LEN), "{arms:?}");
        let shadows = of(names::SHADOW_DECISIONS, "shadow");
        assert_eq!(
            shadows,
            BTreeSet::from(["s_1".to_string(), "s_1~2".to_string()])
        );
        for s in &shadows {
            assert_eq!(counter(&v, names::SHADOW_DECISIONS, &[("shadow", s)]), 200);
        }
    });
}

#[test]
fn nothing_is_recorded_without_a_recorder_and_nothing_panics() {
    // The library only emits: with no recorder installed every call is a no-op.
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(2);
    let mut core = Core::new(Config::default(), t0).unwrap();
    core.add_candidate(CandidateInfo::new("n"), t0, &mut rng)
        .unwrap();
    let mut m = CoordinatorMetrics::default();
    core.ready(Request::any(), t0, &mut rng).unwrap();
    assert_eq!(drain(&mut core, &mut m).len(), 1);
    m.on_gauges(&core);
    assert_eq!(m.labelled_candidates(), 1);
}

/// With 10,000 candidates the exposition holds at most the cap's worth of candidate series.
#[cfg(feature = "prometheus")]
#[test]
fn ten_thousand_candidates_stay_within_the_label_cap() {
    const N: usize = 10_000;
    const CAP: usize = 100;
    let recorder = selection_coordinator::metrics::prometheus_builder()
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        selection_coordinator::metrics::describe();
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(10_000);
        let mut core = Core::new(Config::default(), t0).unwrap();
        for i in 0..N {
            core.add_candidate(CandidateInfo::new(format!("cand-{i}")), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(CAP);
        // Grants spread over the whole set, then an outcome per attempt on every candidate seen.
        for _ in 0..2_000 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
            for g in granted(&drain(&mut core, &mut m)) {
                let reported = core.outcome(g.attempt, Outcome::success(), t0).unwrap();
                m.on_outcome(&reported, &Outcome::success());
                core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
            }
        }
        m.on_gauges(&core);
    });
    let text = handle.render();
    let mut candidates = BTreeSet::new();
    let mut series = 0usize;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(start) = line.find("candidate=\"") {
            let rest = &line[start + "candidate=\"".len()..];
            let end = rest.find('"').unwrap();
            candidates.insert(rest[..end].to_string());
            series += 1;
        }
    }
    println!(
        "{N} candidates, cap {CAP}: {} distinct candidate label values, {series} candidate series, {} bytes of exposition",
        candidates.len(),
        text.len()
    );
    assert!(candidates.contains("other"));
    assert_eq!(
        candidates.len(),
        CAP + 1,
        "the cap's candidates plus `other`"
    );
}

/// Every metric the library emits has a panel in the dashboard, and the dashboard queries no
/// metric the library does not emit.
#[test]
fn the_dashboard_covers_every_metric_and_only_those() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/dashboards/selection-coordinator.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    let mut stack = vec![&dashboard["panels"]];
    while let Some(panels) = stack.pop() {
        for p in panels.as_array().into_iter().flatten() {
            stack.push(&p["panels"]);
            for t in p["targets"].as_array().into_iter().flatten() {
                exprs.push(t["expr"].as_str().unwrap().to_string());
            }
        }
    }
    let all = exprs.join("\n");
    // Importable anywhere: the data source is the dashboard's own variable, the coordinator,
    // the candidate and the arm the others, and panel ids are unique.
    let vars: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "coordinator", "candidate", "arm"]);
    assert_eq!(
        dashboard["templating"]["list"][3]["query"]["query"],
        "label_values(selcoord_decisions_total{coordinator=~\"$coordinator\"}, arm)"
    );
    // Every series a coordinator, its discovery or its fleet link records follows the
    // coordinator selector (several named coordinators in one process:
    // `CoordinatorMetrics::named`, `Discovery::with_metrics_name`, `FleetConfig::metrics_name`).
    let per_coordinator = |name: &str| {
        names::ALL.contains(&name)
            || names::FLEET.contains(&name)
            || (names::DISCOVERY.contains(&name)
                && ![names::PERF_SCORE_ERRORS, names::PERF_SCORE_UPDATES].contains(&name))
    };
    for (at, _) in all.match_indices("selcoord_") {
        let word: String = all[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| word.strip_suffix(s))
            .unwrap_or(&word);
        if per_coordinator(base) {
            assert!(
                all[at + word.len()..].starts_with("{coordinator=~\"$coordinator\""),
                "{word} without the coordinator selector"
            );
        }
    }
    // Every per-arm panel follows the arm selector.
    for metric in [
        names::DECISIONS,
        names::OUTCOMES,
        "selcoord_winner_probability_bucket",
        "selcoord_wait_seconds_bucket",
    ] {
        let filtered = format!("{metric}{{coordinator=~\"$coordinator\",arm=~\"$arm\"");
        assert!(
            all.contains(&filtered),
            "no panel filters {metric} by the arm selector"
        );
    }
    assert_eq!(dashboard["templating"]["list"][0]["type"], "datasource");
    assert_eq!(dashboard["templating"]["list"][0]["query"], "prometheus");
    let mut ids = BTreeSet::new();
    for p in dashboard["panels"].as_array().unwrap() {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "duplicate panel id");
        if p["type"] != "row" {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        }
    }
    // The perf-score counters move only where a perf-score document is polled (feature
    // `http`): no panel (dashboards/README.md says so).
    let perf_scores = [names::PERF_SCORE_ERRORS, names::PERF_SCORE_UPDATES];
    let drawn = names::DISCOVERY.iter().filter(|n| !perf_scores.contains(n));
    for name in names::ALL.iter().chain(&names::FLEET).chain(drawn).copied() {
        assert!(
            all.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == name
                    || w.strip_prefix(name)
                        .is_some_and(|s| ["_bucket", "_sum", "_count"].contains(&s))),
            "no panel queries {name}"
        );
    }
    for word in all.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("selcoord_") {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| word.strip_suffix(s))
                .unwrap_or(word);
            assert!(
                [&names::ALL[..], &names::FLEET[..], &names::DISCOVERY[..]]
                    .iter()
                    .any(|n| n.contains(&word) || n.contains(&base)),
                "the dashboard queries {word}, which the library does not emit"
            );
        }
    }
}

/// A default core with candidates `ids`, its seeded randomness and its start.
fn core_of(ids: &[&str]) -> (Core, SmallRng, Instant) {
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(9);
    let mut core = Core::new(Config::default(), t0).unwrap();
    for id in ids {
        core.add_candidate(CandidateInfo::new(*id), t0, &mut rng)
            .unwrap();
    }
    (core, rng, t0)
}

#[test]
fn a_removed_candidate_drops_to_zero_in_flight_and_probability() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (mut core, mut rng, t0) = core_of(&["stay", "go"]);
        let mut m = CoordinatorMetrics::new(10);
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let p = |v: &Values, c| gauge(v, names::CANDIDATE_PROBABILITY, &[("candidate", c)]);
        assert!(p(&v, "go") > 0.0);
        core.remove_candidate(&CandidateId::new("go"), t0, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(p(&v, "go"), 0.0);
        assert_eq!(p(&v, "stay"), 1.0);
        assert_eq!(
            gauge(&v, names::CANDIDATE_IN_FLIGHT, &[("candidate", "go")]),
            0.0
        );
    });
}

/// A candidate removed while attempts run on it and added again under the same id takes its
/// slot back: it is listed once, and its gauges show one candidate holding both sets of
/// attempts (the per-candidate gauges add up to the total).
#[test]
fn a_candidate_added_again_while_its_old_attempts_run_shows_them_all() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (mut core, mut rng, t0) = core_of(&["a", "b"]);
        let mut m = CoordinatorMetrics::new(10);
        let hold = |core: &mut Core, m: &mut CoordinatorMetrics, rng: &mut SmallRng, n| {
            for _ in 0..n {
                core.ready(Request::only(["a"]), t0, rng).unwrap();
            }
            granted(&drain(core, m)).len()
        };
        assert_eq!(hold(&mut core, &mut m, &mut rng, 3), 3);
        core.remove_candidate(&CandidateId::new("a"), t0, &mut rng)
            .unwrap();
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        assert_eq!(hold(&mut core, &mut m, &mut rng, 2), 2);
        assert_eq!(
            core.candidates()
                .filter(|v| v.info.id.as_str() == "a")
                .count(),
            1
        );
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(gauge(&v, names::IN_FLIGHT, &[]), 5.0);
        assert_eq!(
            gauge(&v, names::CANDIDATE_IN_FLIGHT, &[("candidate", "a")]),
            5.0
        );
        assert_eq!(
            gauge(&v, names::CANDIDATE_IN_FLIGHT, &[("candidate", "b")]),
            0.0
        );
        // Removed again: one removed candidate, still holding all five.
        core.remove_candidate(&CandidateId::new("a"), t0, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(
            gauge(&v, names::CANDIDATE_IN_FLIGHT, &[("candidate", "a")]),
            5.0
        );
    });
}

/// The gauges shown only while what they show exists (the global and per-candidate limits, the
/// no-load latency, the deadline multiple) read NaN, no value, once it is gone: a limit
/// removed, adaptive limits turned off, the advice turned off, a candidate removed.
#[test]
fn a_limit_that_is_gone_is_no_longer_shown() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let mut config = Config::default();
        config.adaptive.enabled = true;
        let limits = Limits {
            global: 10,
            per_candidate: 5,
            ..Limits::default()
        };
        let mut core = Core::new(config, t0).unwrap().with_limits(limits).unwrap();
        for id in ["a", "b"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        // One answer from `a`: its no-load latency is known.
        core.ready(Request::only(["a"]), t0, &mut rng).unwrap();
        let g = granted(&drain(&mut core, &mut CoordinatorMetrics::new(10)))[0].clone();
        let t = t0 + Duration::from_millis(20);
        core.outcome(g.attempt, Outcome::success_with(1.0, 20.0, 100, 20.0), t)
            .unwrap();
        core.done(g.attempt, Next::Finish, t, &mut rng).unwrap();
        let mut m = CoordinatorMetrics::new(10);
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let limit = |v: &Values, c| gauge(v, names::CANDIDATE_IN_FLIGHT_LIMIT, &[("candidate", c)]);
        let no_load = |v: &Values, c| gauge(v, names::CANDIDATE_NO_LOAD, &[("candidate", c)]);
        assert_eq!(limit(&v, "a"), 4.0, "the learned limit, under the static 5");
        assert_eq!(limit(&v, "b"), 4.0);
        assert!(no_load(&v, "a") > 0.0);
        let ms = core
            .candidates()
            .find(|c| c.info.id.as_str() == "a")
            .and_then(|c| c.no_load_ms())
            .unwrap();
        assert_eq!(no_load(&v, "a"), ms / 1000.0, "seconds, not milliseconds");
        assert_eq!(gauge(&v, names::IN_FLIGHT_LIMIT, &[]), 10.0);
        assert_eq!(gauge(&v, names::DEADLINE_MULTIPLE, &[]), 10.0);

        // `b` goes: its limit is gone.
        core.remove_candidate(&CandidateId::new("b"), t, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert!(limit(&v, "b").is_nan());
        assert_eq!(limit(&v, "a"), 4.0);

        // Adaptive limits, the static limits and the advice off: every one of them is gone.
        let mut off = Config::default();
        off.deadline.factor = 0.0;
        core.set_config(off, t, &mut rng).unwrap();
        core.set_limits(Limits::default(), t, &mut rng).unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert!(limit(&v, "a").is_nan());
        assert!(no_load(&v, "a").is_nan());
        assert!(gauge(&v, names::IN_FLIGHT_LIMIT, &[]).is_nan());
        assert!(gauge(&v, names::DEADLINE_MULTIPLE, &[]).is_nan());

        // And back: shown again.
        core.set_limits(limits, t, &mut rng).unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(limit(&v, "a"), 5.0);
        assert_eq!(gauge(&v, names::IN_FLIGHT_LIMIT, &[]), 10.0);
    });
}

/// Through the real actor: every decision it makes is counted once, every outcome its workers
/// report is counted, and its tick sets the gauges.
#[test]
fn the_actor_records_every_decision_and_outcome() {
    use selection_coordinator::actor::{Coordinator, CoordinatorHandle};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        actix::System::new().block_on(async {
            tokio::time::pause();
            let limits = Limits {
                global: 3,
                ..Limits::default()
            };
            let config = Config {
                refresh_ms: 20,
                ..Config::default()
            };
            let handle: CoordinatorHandle = Coordinator::with_seed(config, limits, 4)
                .unwrap()
                .with_candidate(CandidateInfo::new("a"))
                .unwrap()
                .with_candidate(CandidateInfo::new("b"))
                .unwrap()
                .with_metrics(CoordinatorMetrics::new(1))
                .start_handle();
            for i in 0..30 {
                let mut permit = handle.acquire(Request::any()).await.unwrap();
                permit.report(if i % 3 == 0 {
                    Outcome::failure(FailureClass::Timeout)
                } else {
                    Outcome::success()
                });
                permit.done(Next::Finish);
            }
            // Two ticks at least, so the gauges see the last attempts finished.
            actix::clock::sleep(Duration::from_millis(80)).await;
            let state = handle.state().await.unwrap();
            assert_eq!(state.counters.decisions, 30);
            assert_eq!(state.in_flight, 0);
        });
        let v = values(&snapshotter);
        let total = |name: &str| -> u64 {
            v.iter()
                .filter(|((n, _), _)| n == name)
                .map(|(_, val)| match val {
                    DebugValue::Counter(n) => *n,
                    _ => 0,
                })
                .sum()
        };
        assert_eq!(total(names::DECISIONS), 30);
        assert_eq!(total(names::OUTCOMES), 30);
        let failures: u64 = v
            .iter()
            .filter(|((n, l), _)| {
                n == names::OUTCOMES && l.iter().any(|(k, x)| k == "outcome" && x == "timeout")
            })
            .map(|(_, val)| match val {
                DebugValue::Counter(n) => *n,
                _ => 0,
            })
            .sum();
        assert_eq!(failures, 10);
        assert!(!histogram(&v, names::DECISION_COST, &[]).is_empty());
        assert_eq!(gauge(&v, names::IN_FLIGHT, &[]), 0.0);
        assert_eq!(gauge(&v, names::IN_FLIGHT_LIMIT, &[]), 3.0);
        assert_eq!(gauge(&v, names::CANDIDATES, &[]), 2.0);
        // A cap of one: the first candidate seen by name, the other as `other`.
        let labelled: BTreeSet<String> = v
            .keys()
            .flat_map(|(_, l)| l.iter().filter(|(k, _)| k == "candidate"))
            .map(|(_, x)| x.clone())
            .collect();
        assert_eq!(labelled.len(), 2, "{labelled:?}");
        assert!(labelled.contains("other"));
    });
}

/// Two live arms and a shadow: every decision, winner probability, wait and outcome carries
/// the arm that drew it, and the shadow's gauges and decision count match the core's figures.
#[test]
fn arms_label_decisions_and_outcomes_and_shadows_have_gauges() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(21);
        let config = Config::from_toml_str(
            r#"
            [[arms]]
            name = "tuned"
            share = 1.0
            config = { preset = "default" }
            [[arms]]
            name = "lassie"
            share = 1.0
            config = { preset = "lassie" }
            [[shadows]]
            name = "sharp"
            sample = 1.0
            config = { preset = "default", exponent = 8.0 }
            "#,
        )
        .unwrap();
        let mut core = Core::new(config, t0).unwrap();
        for id in ["a", "b", "c"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(10);
        m.sync_arms(&core);
        let mut per_arm: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for i in 0..40 {
            core.ready(Request::any().with_key(format!("user-{i}")), t0, &mut rng)
                .unwrap();
            let g = granted(&drain(&mut core, &mut m));
            assert_eq!(g.len(), 1);
            let arm = core.arm_name(g[0].arm.unwrap()).unwrap().to_string();
            // Arm `lassie`'s attempts fail, arm `tuned`'s succeed.
            let outcome = if arm == "lassie" {
                Outcome::failure(FailureClass::Overload)
            } else {
                Outcome::success()
            };
            let reported = core.outcome(g[0].attempt, outcome, t0).unwrap();
            assert_eq!(
                reported.arm, g[0].arm,
                "the outcome belongs to its grant's arm"
            );
            m.on_outcome(&reported, &outcome);
            core.done(g[0].attempt, Next::Finish, t0, &mut rng).unwrap();
            let e = per_arm.entry(arm).or_default();
            e.0 += 1;
            e.1 += u64::from(matches!(outcome, Outcome::Failure(_)));
        }
        assert_eq!(
            per_arm.keys().collect::<Vec<_>>(),
            ["lassie", "tuned"],
            "both arms drew"
        );
        m.on_gauges(&core);
        m.on_gauges(&core); // a second tick adds no shadow decisions
        let v = values(&snapshotter);
        let sum_with = |name: &str, key: &str, value: &str| -> u64 {
            v.iter()
                .filter(|((n, l), _)| n == name && l.iter().any(|(k, x)| k == key && x == value))
                .map(|(_, val)| match val {
                    DebugValue::Counter(n) => *n,
                    DebugValue::Histogram(h) => h.len() as u64,
                    _ => 0,
                })
                .sum()
        };
        for (arm, (grants, failures)) in &per_arm {
            assert_eq!(sum_with(names::DECISIONS, "arm", arm), *grants, "{arm}");
            assert_eq!(sum_with(names::WAIT_SECONDS, "arm", arm), *grants, "{arm}");
            assert_eq!(
                sum_with(names::WINNER_PROBABILITY, "arm", arm),
                *grants,
                "{arm}"
            );
            assert_eq!(sum_with(names::OUTCOMES, "arm", arm), *grants, "{arm}");
            let failed: u64 = v
                .iter()
                .filter(|((n, l), _)| {
                    n == names::OUTCOMES
                        && l.contains(&("arm".to_string(), arm.clone()))
                        && l.contains(&("outcome".to_string(), "overload".to_string()))
                })
                .map(|(_, val)| match val {
                    DebugValue::Counter(n) => *n,
                    _ => 0,
                })
                .sum();
            assert_eq!(failed, *failures, "{arm}");
        }
        assert_eq!(per_arm["tuned"].1, 0);
        assert_eq!(per_arm["lassie"].1, per_arm["lassie"].0);
        assert_eq!(sum_with(names::DECISIONS, "arm", "default"), 0);

        let stats = core.shadow_stats();
        assert_eq!(stats.len(), 1);
        assert!(stats[0].sampled > 0, "{stats:?}");
        let shadow = [("shadow", "sharp")];
        assert_eq!(
            counter(&v, names::SHADOW_DECISIONS, &shadow),
            stats[0].sampled
        );
        assert_eq!(
            gauge(&v, names::SHADOW_AGREEMENT, &shadow),
            stats[0].agreement()
        );
        assert_eq!(
            gauge(&v, names::SHADOW_WINNER_PROBABILITY, &shadow),
            stats[0].mean_winner_probability()
        );
        let agreement = gauge(&v, names::SHADOW_AGREEMENT, &shadow);
        assert!((0.0..=1.0).contains(&agreement));
    });
}

/// A config change renames the arms: grants after it carry the new names, and the shadow
/// decisions counted before the change are kept while the core restarts its counts.
#[test]
fn a_config_change_relabels_arms_and_keeps_shadow_counts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let config = |arm: &str| {
            Config::from_toml_str(&format!(
                r#"
                [[arms]]
                name = "{arm}"
                share = 1.0
                config = {{ preset = "default" }}
                [[shadows]]
                name = "s"
                sample = 1.0
                config = {{ preset = "default", exponent = 4.0 }}
                "#
            ))
            .unwrap()
        };
        let mut core = Core::new(config("first"), t0).unwrap();
        for id in ["a", "b"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(10);
        let run = |core: &mut Core, m: &mut CoordinatorMetrics, rng: &mut SmallRng, n| {
            for _ in 0..n {
                core.ready(Request::any(), t0, rng).unwrap();
                for g in granted(&drain(core, m)) {
                    core.done(g.attempt, Next::Finish, t0, rng).unwrap();
                }
            }
        };
        m.sync_arms(&core);
        run(&mut core, &mut m, &mut rng, 5);
        let before = core.shadow_stats()[0].sampled;
        m.on_shadows(&core);
        core.set_config(config("second"), t0, &mut rng).unwrap();
        m.on_config_set(&core);
        run(&mut core, &mut m, &mut rng, 3);
        let after = core.shadow_stats()[0].sampled;
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let decisions = |arm: &str| -> u64 {
            v.iter()
                .filter(|((n, l), _)| {
                    n == names::DECISIONS && l.contains(&("arm".to_string(), arm.to_string()))
                })
                .map(|(_, val)| match val {
                    DebugValue::Counter(n) => *n,
                    _ => 0,
                })
                .sum()
        };
        assert_eq!(decisions("first"), 5);
        assert_eq!(decisions("second"), 3);
        assert!(before > 0 && after > 0, "{before} {after}");
        assert_eq!(
            counter(&v, names::SHADOW_DECISIONS, &[("shadow", "s")]),
            before + after
        );
    });
}

/// Through the real actor with two arms: outcomes reported on permits are counted under the
/// arm of their grant, from the first grant on, and a config that renames an arm relabels the
/// grants after it.
#[test]
fn the_actor_labels_grants_and_outcomes_with_their_arm() {
    use selection_coordinator::actor::{Coordinator, CoordinatorHandle, SetConfig};

    let config = |second: &str| {
        Config::from_toml_str(&format!(
            r#"
            [[arms]]
            name = "first"
            share = 1.0
            config = {{ preset = "default" }}
            [[arms]]
            name = "{second}"
            share = 1.0
            config = {{ preset = "lassie" }}
            "#
        ))
        .unwrap()
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
    metrics::with_local_recorder(&recorder, || {
        actix::System::new().block_on(async {
            tokio::time::pause();
            let handle: CoordinatorHandle =
                Coordinator::with_seed(config("b"), Limits::default(), 3)
                    .unwrap()
                    .with_candidate(CandidateInfo::new("x"))
                    .unwrap()
                    .with_candidate(CandidateInfo::new("y"))
                    .unwrap()
                    .start_handle();
            let run = |names: [&'static str; 2], n| {
                let handle = handle.clone();
                let mut counts = Vec::new();
                async move {
                    for i in 0..n {
                        let mut permit = handle.acquire(Request::any()).await.unwrap();
                        let arm = names[permit.grant().arm.unwrap()];
                        let outcome = if i % 2 == 0 { "success" } else { "timeout" };
                        permit.report(if i % 2 == 0 {
                            Outcome::success()
                        } else {
                            Outcome::failure(FailureClass::Timeout)
                        });
                        permit.done(Next::Finish);
                        counts.push((arm.to_string(), outcome.to_string()));
                    }
                    counts
                }
            };
            let mut all = run(["first", "b"], 30).await;
            handle
                .addr()
                .send(SetConfig(config("c")))
                .await
                .unwrap()
                .unwrap();
            all.extend(run(["first", "c"], 30).await);
            // The mailbox is in order: once this is answered, every report was handled.
            handle.state().await.unwrap();
            for k in all {
                *expected.entry(k).or_default() += 1;
            }
        });
    });
    let v = values(&snapshotter);
    let outcomes = |arm: &str, outcome: &str| -> u64 {
        v.iter()
            .filter(|((n, l), _)| {
                n == names::OUTCOMES
                    && l.contains(&("arm".to_string(), arm.to_string()))
                    && l.contains(&("outcome".to_string(), outcome.to_string()))
            })
            .map(|(_, val)| match val {
                DebugValue::Counter(n) => *n,
                _ => 0,
            })
            .sum()
    };
    let arms: BTreeSet<&str> = expected.keys().map(|(a, _)| a.as_str()).collect();
    assert_eq!(arms, BTreeSet::from(["b", "c", "first"]), "{expected:?}");
    for ((arm, outcome), n) in &expected {
        assert_eq!(outcomes(arm, outcome), *n, "{arm} {outcome}");
    }
    assert_eq!(
        outcomes("default", "success") + outcomes("default", "timeout"),
        0
    );
}

/// The parked gauge counts the waiting requests every candidate they may use is full for.
#[test]
fn parked_waiters_are_shown_beside_the_waiting_ones() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let mut core = limited_core(1, &["a", "b"], t0, &mut rng);
        let mut m = CoordinatorMetrics::new(10);
        for _ in 0..4 {
            core.ready(Request::only(["a"]), t0, &mut rng).unwrap();
        }
        core.ready(Request::any(), t0, &mut rng).unwrap();
        core.ready(Request::any(), t0, &mut rng).unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        // a and b are busy: three wait for a (parked), one plain request for anyone.
        assert_eq!(gauge(&v, names::WAITING, &[]), 4.0);
        assert_eq!(gauge(&v, names::WAITING_PARKED, &[]), 3.0);
    });
}

/// The `candidate_in_flight` gauges by label, sorted.
fn in_flight_gauges(snap: &Snapshotter) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = snap
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            if key.name() != names::CANDIDATE_IN_FLIGHT {
                return None;
            }
            let label = key
                .labels()
                .find(|l| l.key() == "candidate")
                .map(|l| l.value().to_string())?;
            match value {
                DebugValue::Gauge(v) => Some((label, v.into_inner())),
                _ => None,
            }
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Once the last candidate counted as `other` takes a freed label, `other` holds nothing:
/// the in-flight gauges sum to what is in flight, not twice it.
#[test]
fn the_other_in_flight_gauge_follows_its_candidates_to_their_new_labels() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut core = Core::new(Config::default(), t0).unwrap();
        let mut m = CoordinatorMetrics::new(1);
        for id in ["a", "b"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        m.on_gauges(&core);
        assert_eq!(m.candidate_label(&CandidateId::new("b")).as_ref(), "other");
        // One attempt held on `b` (the ones drawn on `a` end at once).
        let mut held = None;
        for _ in 0..200 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
            while let Some(ev) = core.poll_event() {
                m.on_event(&ev);
                if let Event::Granted(g) = ev {
                    if g.candidate.as_str() == "b" && held.is_none() {
                        held = Some(g.attempt);
                    } else {
                        core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
                    }
                }
            }
            if held.is_some() {
                break;
            }
        }
        assert!(held.is_some());
        m.on_gauges(&core);
        assert_eq!(
            in_flight_gauges(&snap),
            vec![("a".to_string(), 0.0), ("other".to_string(), 1.0)]
        );
        // `a` leaves; after its label is freed `b` takes one of its own.
        core.remove_candidate(&CandidateId::new("a"), t0, &mut rng)
            .unwrap();
        for _ in 0..=LABEL_RETIRE_TICKS {
            m.on_gauges(&core);
        }
        assert_eq!(m.candidate_label(&CandidateId::new("b")).as_ref(), "b");
        let gauges = in_flight_gauges(&snap);
        let sum: f64 = gauges.iter().map(|g| g.1).sum();
        assert_eq!(
            sum,
            f64::from(core.in_flight()),
            "sum(candidate_in_flight) over the labels {gauges:?} vs {} in flight",
            core.in_flight()
        );
    });
}

/// A candidate long counted as `other` that takes a freed label: its adaptive `limited`
/// count of its whole life (never exported while it was `other`) lands on the new label's
/// counter in one tick, a spike `rate()` dates to the moment of the relabel.
#[test]
fn a_relabelled_candidate_does_not_dump_its_past_limited_count() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let config = Config {
            adaptive: selection_coordinator::limit::AdaptiveConfig {
                enabled: true,
                initial: 1,
                ..Default::default()
            },
            ..Config::default()
        };
        let mut core = Core::new(config, t0).unwrap();
        let mut m = CoordinatorMetrics::new(1);
        for id in ["a", "b"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        m.on_gauges(&core);
        for _ in 0..200 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
            while let Some(ev) = core.poll_event() {
                m.on_event(&ev);
                if let Event::Granted(g) = ev {
                    core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
                }
            }
            m.on_gauges(&core);
        }
        let limited_b = core.candidate(&CandidateId::new("b")).unwrap().limited;
        assert!(limited_b > 0);
        core.remove_candidate(&CandidateId::new("a"), t0, &mut rng)
            .unwrap();
        for _ in 0..=LABEL_RETIRE_TICKS {
            m.on_gauges(&core);
        }
        assert_eq!(m.candidate_label(&CandidateId::new("b")).as_ref(), "b");
        let counted = snap
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| {
                let (_, key) = key.into_parts();
                let is_b = key
                    .labels()
                    .any(|l| l.key() == "candidate" && l.value() == "b");
                (key.name() == names::ADAPTIVE_LIMITED && is_b).then_some(value)
            });
        assert!(
            matches!(counted, None | Some(DebugValue::Counter(0))),
            "{counted:?}: b's {limited_b} limited grants from before its label, counted at once"
        );
    });
}

/// Starts an attempt on `id` and returns its grant.
fn start_on(
    core: &mut Core,
    m: &mut CoordinatorMetrics,
    rng: &mut SmallRng,
    t: Instant,
    id: &str,
) -> selection_coordinator::Grant {
    core.ready(Request::only([id]), t, rng).unwrap();
    granted(&drain(core, m)).remove(0)
}

/// Read once, after both ticks (a read zeroes the gauges): the departed candidate's in-flight
/// and probability gauges are set to 0, not left at what the tick before it left showed.
#[test]
fn a_departed_candidates_gauges_are_zeroed_not_left_standing() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (mut core, mut rng, t0) = core_of(&["stay", "go"]);
        let mut m = CoordinatorMetrics::new(10);
        let g = start_on(&mut core, &mut m, &mut rng, t0, "go");
        m.on_gauges(&core);
        core.outcome(g.attempt, Outcome::success(), t0).unwrap();
        core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
        core.remove_candidate(&CandidateId::new("go"), t0, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let go = [("candidate", "go")];
        assert_eq!(gauge(&v, names::CANDIDATE_IN_FLIGHT, &go), 0.0);
        assert_eq!(gauge(&v, names::CANDIDATE_PROBABILITY, &go), 0.0);
        assert_eq!(
            gauge(&v, names::CANDIDATE_PROBABILITY, &[("candidate", "stay")]),
            1.0
        );
    });
}

/// A removed candidate whose attempt still runs is still shown (it holds that attempt), but it
/// cannot win a draw and is not counted among the candidates.
#[test]
fn a_removed_candidate_still_running_an_attempt_has_probability_zero() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (mut core, mut rng, t0) = core_of(&["stay", "go"]);
        let mut m = CoordinatorMetrics::new(10);
        start_on(&mut core, &mut m, &mut rng, t0, "go");
        core.remove_candidate(&CandidateId::new("go"), t0, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        let go = [("candidate", "go")];
        assert_eq!(gauge(&v, names::CANDIDATE_IN_FLIGHT, &go), 1.0);
        assert_eq!(gauge(&v, names::CANDIDATE_PROBABILITY, &go), 0.0);
        assert_eq!(gauge(&v, names::CANDIDATES, &[]), 1.0);
    });
}

/// Candidates counted as `other` are counted among the ejected ones too.
#[test]
fn an_ejected_candidate_without_a_label_of_its_own_is_counted_as_ejected() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut config = Config::default();
        config.ejection.enabled = true;
        config.ejection.consecutive_failures = 2;
        config.ejection.max_share = 1.0;
        let mut core = Core::new(config, t0).unwrap();
        for id in ["x", "y"] {
            core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                .unwrap();
        }
        let mut m = CoordinatorMetrics::new(0);
        for _ in 0..2 {
            let g = start_on(&mut core, &mut m, &mut rng, t0, "x");
            core.outcome(g.attempt, Outcome::failure(FailureClass::Refused), t0)
                .unwrap();
            core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
        }
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(m.labelled_candidates(), 0);
        assert_eq!(gauge(&v, names::CANDIDATES_EJECTED, &[]), 1.0);
    });
}

/// The `other` limit is the sum of its candidates' limits, and reads no value once the limits
/// are gone.
#[test]
fn the_other_limit_adds_up_its_candidates_and_goes_with_the_limits() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let mut core = limited_core(5, &["a", "b"], t0, &mut rng);
        let mut m = CoordinatorMetrics::new(0);
        let other = [("candidate", names::OTHER)];
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert_eq!(gauge(&v, names::CANDIDATE_IN_FLIGHT_LIMIT, &other), 10.0);
        core.set_limits(Limits::default(), t0, &mut rng).unwrap();
        m.on_gauges(&core);
        let v = values(&snapshotter);
        assert!(gauge(&v, names::CANDIDATE_IN_FLIGHT_LIMIT, &other).is_nan());
    });
}

/// A decision cost that is not a finite, non-negative number of seconds is not recorded.
#[test]
fn only_finite_non_negative_decision_costs_are_recorded() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let mut m = CoordinatorMetrics::new(10);
        for s in [f64::NAN, f64::INFINITY, -1.0, 0.25, 0.0] {
            m.on_decision_cost(s);
        }
        let v = values(&snapshotter);
        assert_eq!(histogram(&v, names::DECISION_COST, &[]), vec![0.25, 0.0]);
    });
}

/// A removed candidate keeps its label for exactly `LABEL_RETIRE_TICKS` ticks.
#[test]
fn a_label_is_freed_after_exactly_the_retire_ticks() {
    let (mut core, mut rng, t0) = core_of(&["a"]);
    let mut m = CoordinatorMetrics::new(1);
    m.on_gauges(&core);
    assert_eq!(m.labelled_candidates(), 1);
    core.remove_candidate(&CandidateId::new("a"), t0, &mut rng)
        .unwrap();
    for _ in 1..LABEL_RETIRE_TICKS {
        m.on_gauges(&core);
        assert_eq!(m.labelled_candidates(), 1);
    }
    m.on_gauges(&core);
    assert_eq!(m.labelled_candidates(), 0);
}

/// An attempt whose lease runs out is counted once as reclaimed.
#[test]
fn a_lease_that_runs_out_counts_one_reclaimed_attempt() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let limits = Limits {
            max_attempt_s: Some(0.02),
            ..Limits::default()
        };
        let mut core = Core::new(Config::default(), t0)
            .unwrap()
            .with_limits(limits)
            .unwrap();
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        let mut m = CoordinatorMetrics::new(10);
        start_on(&mut core, &mut m, &mut rng, t0, "a");
        core.tick(t0 + Duration::from_millis(50), &mut rng);
        let events = drain(&mut core, &mut m);
        assert!(events.iter().any(|e| matches!(e, Event::Reclaimed { .. })));
        let v = values(&snapshotter);
        assert_eq!(counter(&v, names::RECLAIMED, &[]), 1);
    });
}

/// An attempt released unreported past its advised deadline is counted among the outcomes as
/// a timeout of its candidate, as a reported timeout is.
#[test]
fn an_attempt_dropped_past_its_advice_counts_as_a_timeout_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let mut core = Core::new(Config::default(), t0).unwrap();
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        let mut m = CoordinatorMetrics::new(10);
        // One answer gives the candidate a first-byte average, so the next grant is advised.
        let g = start_on(&mut core, &mut m, &mut rng, t0, "a");
        let t1 = t0 + Duration::from_millis(20);
        core.outcome(g.attempt, Outcome::success_with(1.0, 20.0, 100, 21.0), t1)
            .unwrap();
        core.done(g.attempt, Next::Finish, t1, &mut rng).unwrap();
        let g = start_on(&mut core, &mut m, &mut rng, t1, "a");
        let advice = g.deadline_ms.expect("an answered candidate is advised");
        let late = t1 + Duration::from_secs_f64(advice / 1000.0 + 0.001);
        core.done(g.attempt, Next::Finish, late, &mut rng).unwrap();
        let events = drain(&mut core, &mut m);
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::TimedOut(r) if r.candidate.as_str() == "a")));
        let v = values(&snapshotter);
        let timeouts = [
            ("arm", "default"),
            ("candidate", "a"),
            ("outcome", "timeout"),
        ];
        assert_eq!(counter(&v, names::OUTCOMES, &timeouts), 1);
    });
}

/// Shadow counts lower than the last seen (a fresh core) are all new, even without
/// `on_config_set`.
#[test]
fn shadow_counts_that_restarted_are_counted_in_full() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let config = Config::from_toml_str(
            r#"
            [[shadows]]
            name = "s"
            sample = 1.0
            config = { preset = "default", exponent = 4.0 }
            "#,
        )
        .unwrap();
        let mut m = CoordinatorMetrics::new(10);
        let mut counts = Vec::new();
        for n in [5, 2] {
            let mut core = Core::new(config.clone(), t0).unwrap();
            for id in ["a", "b"] {
                core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
                    .unwrap();
            }
            for _ in 0..n {
                core.ready(Request::any(), t0, &mut rng).unwrap();
                for g in granted(&drain(&mut core, &mut m)) {
                    core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
                }
            }
            counts.push(core.shadow_stats()[0].sampled);
            m.on_shadows(&core);
        }
        assert!(counts[1] > 0 && counts[1] < counts[0], "{counts:?}");
        let v = values(&snapshotter);
        assert_eq!(
            counter(&v, names::SHADOW_DECISIONS, &[("shadow", "s")]),
            counts[0] + counts[1]
        );
    });
}

/// A candidate removed and added again while its label is kept has a `limited` count of its
/// own: the first tick that sees it takes that count as its base (as for any label new to the
/// count), never the departed copy's last count.
#[test]
fn a_candidate_added_again_takes_its_own_limited_count_as_the_base() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        let config = Config {
            adaptive: selection_coordinator::limit::AdaptiveConfig {
                enabled: true,
                initial: 1,
                ..Default::default()
            },
            ..Config::default()
        };
        let mut core = Core::new(config, t0).unwrap();
        let mut m = CoordinatorMetrics::new(10);
        let a = CandidateId::new("a");
        let run = |core: &mut Core, m: &mut CoordinatorMetrics, rng: &mut SmallRng, n, tick| {
            for _ in 0..n {
                core.ready(Request::only(["a"]), t0, rng).unwrap();
                for g in granted(&drain(core, m)) {
                    core.done(g.attempt, Next::Finish, t0, rng).unwrap();
                }
                if tick {
                    m.on_gauges(core);
                }
            }
            core.candidate(&CandidateId::new("a")).unwrap().limited
        };
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        m.on_gauges(&core);
        let first = run(&mut core, &mut m, &mut rng, 10, true);
        core.remove_candidate(&a, t0, &mut rng).unwrap();
        m.on_gauges(&core);
        core.add_candidate(CandidateInfo::new("a"), t0, &mut rng)
            .unwrap();
        let base = run(&mut core, &mut m, &mut rng, 30, false);
        m.on_gauges(&core);
        assert_eq!(m.candidate_label(&a).as_ref(), "a", "the label is kept");
        let last = run(&mut core, &mut m, &mut rng, 5, true);
        assert!(
            first > 0 && base > first && last > base,
            "{first} {base} {last}"
        );
        let v = values(&snapshotter);
        assert_eq!(
            counter(&v, names::ADAPTIVE_LIMITED, &[("candidate", "a")]),
            first + (last - base)
        );
    });
}

/// A core with the default config over `ids`, each limited to `per_candidate` attempts.
fn limited_core(per_candidate: u32, ids: &[&str], t0: Instant, rng: &mut SmallRng) -> Core {
    let limits = Limits {
        per_candidate,
        ..Limits::default()
    };
    let mut core = Core::new(Config::default(), t0)
        .unwrap()
        .with_limits(limits)
        .unwrap();
    for id in ids {
        core.add_candidate(CandidateInfo::new(*id), t0, rng)
            .unwrap();
    }
    core
}
