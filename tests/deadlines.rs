//! Each grant advises how long a first byte is worth waiting for (`Grant::deadline_ms`,
//! `[deadline]` in the config, docs/scoring.md): ten times the candidate's first-byte average,
//! on a request's first attempt only, none on its last attempt or before the candidate has
//! answered. The simulator's
//! workers follow it, so a hung server costs a request that long instead of the whole timeout.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::score::DeadlineConfig;
use selection_coordinator::sim::{simulate, PolicySpec, Scenario};
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, FailureClass, Grant, Next, Outcome, Request,
};

/// A core with two candidates, `answers` answers of `ttfb_ms` first byte each already seen
/// from each.
fn core_with(config: Config, answers: usize, ttfb_ms: f64) -> (Core, Instant, SmallRng) {
    let mut now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut core = Core::new(config, now).unwrap();
    for id in ["a", "b"] {
        core.add_candidate(CandidateInfo::new(id), now, &mut rng)
            .unwrap();
    }
    for k in 0..2 * answers {
        let only = Request::only([["a", "b"][k % 2]]);
        let g = grant(&mut core, only, now, &mut rng);
        now += Duration::from_millis(ttfb_ms as u64);
        let ok = Outcome::success_with(1.0, ttfb_ms, 1000, ttfb_ms + 1.0);
        core.outcome(g.attempt, ok, now).unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    (core, now, rng)
}

fn grant(core: &mut Core, request: Request, now: Instant, rng: &mut SmallRng) -> Grant {
    core.ready(request, now, rng).unwrap();
    match core.poll_event() {
        Some(Event::Granted(g)) => g,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// Reports `g` timed out 200 ms after `now`, asks for a retry, and returns its grant.
fn time_out_and_retry(core: &mut Core, g: &Grant, now: Instant, rng: &mut SmallRng) -> Grant {
    let later = now + Duration::from_millis(200);
    core.outcome(g.attempt, Outcome::failure(FailureClass::Timeout), later)
        .unwrap();
    core.done(g.attempt, Next::Retry, later, rng).unwrap();
    match core.poll_event() {
        Some(Event::Granted(g)) => g,
        other => panic!("the retry is granted at once, got {other:?}"),
    }
}

#[test]
fn a_grant_advises_ten_first_bytes_once_the_candidate_has_answered() {
    let (mut core, now, mut rng) = core_with(Config::default(), 0, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    assert_eq!(g.deadline_ms, None, "no answer yet, nothing to go by");

    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    let d = g
        .deadline_ms
        .expect("an answered candidate gets a deadline");
    assert!((d - 200.0).abs() < 1e-6, "10 x 20 ms, got {d}");
}

#[test]
fn the_last_attempt_waits_for_the_callers_own_timeout() {
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let g = grant(&mut core, Request::any().with_attempts(1), now, &mut rng);
    assert_eq!(
        g.deadline_ms, None,
        "giving up on a last attempt fails the request"
    );

    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let g = grant(&mut core, Request::any().with_attempts(2), now, &mut rng);
    assert!(g.deadline_ms.is_some(), "a try is left after this one");
    let second = time_out_and_retry(&mut core, &g, now, &mut rng);
    assert_eq!(second.deadline_ms, None, "the second of two is the last");
}

/// At most one attempt per request is cut short: a retry waits for the caller's own timeout,
/// so a fleet that slows down all at once (past ten first bytes) still answers, and its
/// averages learn the new pace. With advice on every attempt, a request that does not say how
/// many it makes would have every attempt cut, and no answer would ever teach the averages.
#[test]
fn a_retry_waits_for_its_answer() {
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    assert!(g.deadline_ms.is_some(), "a first attempt is advised");
    let retry = time_out_and_retry(&mut core, &g, now, &mut rng);
    assert_eq!(retry.deadline_ms, None, "the retry waits for its answer");

    // Parallel attempts of one request: the first is advised, the second not.
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    core.ready(Request::any().with_parallelism(2), now, &mut rng)
        .unwrap();
    let deadlines: Vec<Option<f64>> = std::iter::from_fn(|| match core.poll_event() {
        Some(Event::Granted(g)) => Some(g.deadline_ms),
        _ => None,
    })
    .collect();
    assert_eq!(deadlines.len(), 2);
    assert!(
        deadlines[0].is_some() && deadlines[1].is_none(),
        "{deadlines:?}"
    );
}

#[test]
fn the_factor_and_the_minimum_are_the_users() {
    let off = Config {
        deadline: DeadlineConfig::OFF,
        ..Config::default()
    };
    let (mut core, now, mut rng) = core_with(off, 5, 20.0);
    assert_eq!(
        grant(&mut core, Request::any(), now, &mut rng).deadline_ms,
        None
    );

    let floor = Config {
        deadline: DeadlineConfig {
            factor: 3.0,
            min_ms: 500.0,
        },
        ..Config::default()
    };
    let (mut core, now, mut rng) = core_with(floor, 5, 20.0);
    let d = grant(&mut core, Request::any(), now, &mut rng).deadline_ms;
    assert_eq!(d, Some(500.0), "3 x 20 ms is under the 500 ms minimum");

    let (mut core, now, mut rng) = core_with(Config::lassie(), 5, 20.0);
    assert_eq!(
        grant(&mut core, Request::any(), now, &mut rng).deadline_ms,
        None,
        "the lassie preset reproduces lassie, which waits for its own timeout"
    );
}

#[test]
fn bad_values_are_refused_with_their_field() {
    for (factor, min_ms, field) in [
        (-1.0, 0.0, "deadline.factor"),
        (f64::NAN, 0.0, "deadline.factor"),
        (10.0, f64::INFINITY, "deadline.min_ms"),
        (10.0, -5.0, "deadline.min_ms"),
    ] {
        let c = Config {
            deadline: DeadlineConfig { factor, min_ms },
            ..Config::default()
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(field), "{factor} / {min_ms}: {err}");
    }
}

/// Six servers at 20-30 ms; half of them hang (their attempts end at the 2 s timeout) from
/// 10 s to 30 s.
fn half_hang() -> String {
    let mut text = String::from(
        r#"
name = "half-hang"
description = "three of six servers hang for 20 s, then heal"

[workload]
loop = "open"
rate_per_s = 200.0
duration_s = 40.0
retries = 3
attempt_timeout_ms = 2000.0

[[candidates]]
id = "s"
count = 6
success = 0.999
failure = "transport"
failure_ms = { kind = "uniform", min = 1.0, max = 5.0 }
ttfb_ms = { kind = "uniform", min = 20.0, max = 30.0 }
"#,
    );
    for id in ["s-0", "s-2", "s-4"] {
        text.push_str(&format!(
            r#"
[[timeline]]
at_s = 10.0
action = "degrade"
candidate = "{id}"
success = 0.0
failure = "timeout"
failure_ms = {{ kind = "uniform", min = 2000.0, max = 2000.0 }}

[[timeline]]
at_s = 30.0
action = "heal"
candidate = "{id}"
"#
        ));
    }
    text
}

/// Measured on seeds 1-4: a mean first byte of 27.2 ms with the advice, 35.3 ms without, no
/// errors either way. With the simulator's workers ignoring the advice both read 35.3 ms and
/// the test fails.
#[test]
fn workers_that_follow_the_advice_pay_less_for_a_hang() {
    let sc = Scenario::parse(&half_hang(), "half-hang").unwrap();
    let off = Config {
        deadline: DeadlineConfig::OFF,
        ..Config::default()
    };
    let policies = vec![
        PolicySpec::parse("coordinator").unwrap(),
        PolicySpec::Coordinator {
            label: "no-advice".into(),
            config: Some(Box::new(off)),
        },
    ];
    let r = simulate(&sc, &policies, &[1, 2, 3, 4], 1, None).unwrap();
    let ttfb = |name: &str| {
        let p = r.policies.iter().find(|p| p.policy == name).unwrap();
        (p.ttfb_ms.mean, p.error_rate)
    };
    let (advised, advised_errors) = ttfb("coordinator");
    let (waiting, waiting_errors) = ttfb("no-advice");
    assert!(
        advised < 0.9 * waiting,
        "mean first byte {advised:.1} ms with the advice, {waiting:.1} ms without"
    );
    assert!(
        advised_errors <= waiting_errors + 0.001,
        "errors {advised_errors} with the advice, {waiting_errors} without"
    );
}
