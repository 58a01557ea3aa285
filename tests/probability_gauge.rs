//! `selcoord_candidate_probability` says what the policy prefers: each candidate's probability
//! in the next unrestricted draw if it had a free slot. It does not read 0 for everyone when
//! every candidate is at its limit or ejected.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::metrics::{names, CoordinatorMetrics};
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, FailureClass, Grant, Limits, Next, Outcome, Request,
};

/// Every candidate's probability gauge, from one snapshot (a snapshot takes the values out).
fn probabilities(snapshotter: &Snapshotter) -> HashMap<String, f64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            if key.name() != names::CANDIDATE_PROBABILITY {
                return None;
            }
            let candidate = key.labels().find(|l| l.key() == "candidate")?;
            match value {
                DebugValue::Gauge(v) => Some((candidate.value().to_string(), v.into_inner())),
                _ => None,
            }
        })
        .collect()
}

fn grants(core: &mut Core) -> Vec<Grant> {
    std::iter::from_fn(|| core.poll_event())
        .filter_map(|e| match e {
            Event::Granted(g) => Some(g),
            _ => None,
        })
        .collect()
}

/// Three candidates told apart by stake (weighed 1); the load component is not weighed, so
/// the attempts in flight do not move the scores.
fn core_with(mut config: Config, limits: Limits, t0: Instant, rng: &mut SmallRng) -> Core {
    config.weights.stake = 1.0;
    config.weights.load = 0.0;
    let mut core = Core::new(config, t0).unwrap().with_limits(limits).unwrap();
    for (id, stake) in [("big", 3.0), ("mid", 2.0), ("small", 1.0)] {
        core.add_candidate(CandidateInfo::new(id).with_stake(stake), t0, rng)
            .unwrap();
    }
    core
}

#[test]
fn candidates_at_their_limits_keep_their_probability() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(3);
        let limits = Limits {
            per_candidate: 1,
            ..Limits::default()
        };
        let mut core = core_with(Config::default(), limits, t0, &mut rng);
        let mut m = CoordinatorMetrics::new(10);
        let before = core.probabilities(&Request::any(), t0).unwrap();
        assert!(
            before[0].1 > before[1].1 && before[1].1 > before[2].1,
            "{before:?}"
        );
        // One slot each: three grants fill every candidate.
        for _ in 0..3 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
        }
        let granted = grants(&mut core);
        assert_eq!(granted.len(), 3);
        assert!(core.probabilities(&Request::any(), t0).unwrap().is_empty());
        m.on_gauges(&core);
        let gauges = probabilities(&snapshotter);
        let mut sum = 0.0;
        for (id, p) in &before {
            let shown = gauges[id.as_str()];
            assert!((shown - p).abs() < 1e-12, "{id}: {shown} vs {p}");
            sum += shown;
        }
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
        // One slot frees: the next draw goes to that candidate, but the preference is unchanged.
        let g = &granted[0];
        core.outcome(g.attempt, Outcome::success(), t0).unwrap();
        core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
        m.on_gauges(&core);
        let gauges = probabilities(&snapshotter);
        for (id, p) in &before {
            let shown = gauges[id.as_str()];
            assert!((shown - p).abs() < 1e-12, "{id}: {shown} vs {p}");
        }
    });
}

#[test]
fn all_ejected_shows_the_fallback_draw() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let t0 = Instant::now();
        let mut rng = SmallRng::seed_from_u64(4);
        let mut config = Config::default();
        config.ejection.enabled = true;
        config.ejection.consecutive_failures = 1;
        config.ejection.max_share = 1.0;
        let mut core = core_with(config, Limits::default(), t0, &mut rng);
        let mut m = CoordinatorMetrics::new(10);
        // Fail every grant until all three are ejected (each failure ejects its candidate).
        for _ in 0..3 {
            core.ready(Request::any(), t0, &mut rng).unwrap();
            for g in grants(&mut core) {
                core.outcome(g.attempt, Outcome::failure(FailureClass::Refused), t0)
                    .unwrap();
                core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
            }
        }
        assert_eq!(core.candidates().filter(|c| c.ejected).count(), 3);
        for c in core.candidates() {
            assert_eq!(core.tree_probability(&c.info.id), 0.0);
        }
        // The next draw ignores ejection, and the gauge says with what probabilities.
        let record = core.explain(&Request::any(), t0).unwrap();
        assert_eq!(record.fallbacks.len(), 1, "{:?}", record.fallbacks);
        m.on_gauges(&core);
        let gauges = probabilities(&snapshotter);
        let mut sum = 0.0;
        for c in &record.candidates {
            let shown = gauges[c.id.as_str()];
            assert!(
                (shown - c.probability).abs() < 1e-12,
                "{}: {shown} vs {}",
                c.id,
                c.probability
            );
            sum += shown;
        }
        assert_eq!(record.candidates.len(), 3);
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
    });
}

/// A sole candidate is drawn for certain, and every reading says so exactly, whatever its
/// statistics: `probabilities` (what `explain` and the records say) and `preference` (what the
/// gauge reads) give 1, not a rounding of it. `mass * value / total` with the value its own
/// total gave 0.9999999999999999 for some values (about one in seven) before the evaluation
/// said 1 for a set of one.
#[test]
fn a_sole_candidate_reads_exactly_one_whatever_its_statistics() {
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut core = Core::new(Config::default(), t0).unwrap();
    core.add_candidate(CandidateInfo::new("only"), t0, &mut rng)
        .unwrap();
    let mut now = t0;
    for k in 0..200u32 {
        now += Duration::from_millis(7);
        core.ready(Request::any(), now, &mut rng).unwrap();
        for g in grants(&mut core) {
            let outcome = if k % 3 == 0 {
                Outcome::failure(FailureClass::Refused)
            } else {
                Outcome::success_with(1.0, 10.0 + f64::from(k % 17), 1000, 40.0)
            };
            core.outcome(g.attempt, outcome, now).unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
        let explained = core.probabilities(&Request::any(), now).unwrap();
        assert_eq!(explained.len(), 1);
        assert_eq!(explained[0].1, 1.0, "outcome {k}: {explained:?}");
        let preferred = core.preference();
        assert_eq!(preferred.len(), 1);
        assert_eq!(preferred[0].1, 1.0, "outcome {k}: {preferred:?}");
    }
}
