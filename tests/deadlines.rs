//! Grants advise how long a first byte is worth waiting for (`Grant::deadline_ms`,
//! `[deadline]` in the config, docs/scoring.md): a multiple of the candidate's first-byte
//! average (the fleet's before it has answered) that follows how far the fleet's answers stray
//! from their averages, from 2 to `factor` (10). A request's attempt is advised while it is
//! the only one in flight and none of the request's attempts timed out, and not when it is the
//! last. The simulator's workers follow it, so a hung server costs a request that long instead
//! of the whole timeout.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::score::DeadlineConfig;
use selection_coordinator::sim::{simulate, PolicySpec, Scenario};
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, FailureClass, Grant, Next, Outcome, Request,
};

/// The default advice with the spread rule off: `factor` times the average.
fn fixed_factor() -> Config {
    Config {
        deadline: DeadlineConfig {
            sigmas: 0.0,
            ..DeadlineConfig::DEFAULT
        },
        ..Config::default()
    }
}

/// A core with two candidates, `answers` answers from each already seen, the `k`-th answer
/// (counting both) with a first byte of `ttfb_ms(k)`.
fn core_answering(
    config: Config,
    answers: usize,
    ttfb_ms: impl Fn(usize) -> f64,
) -> (Core, Instant, SmallRng) {
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
        let t = ttfb_ms(k);
        now += Duration::from_secs_f64(t / 1000.0);
        let ok = Outcome::success_with(1.0, t, 1000, t + 1.0);
        core.outcome(g.attempt, ok, now).unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    (core, now, rng)
}

/// [`core_answering`] with every first byte `ttfb_ms`.
fn core_with(config: Config, answers: usize, ttfb_ms: f64) -> (Core, Instant, SmallRng) {
    core_answering(config, answers, |_| ttfb_ms)
}

fn grant(core: &mut Core, request: Request, now: Instant, rng: &mut SmallRng) -> Grant {
    core.ready(request, now, rng).unwrap();
    match core.poll_event() {
        Some(Event::Granted(g)) => g,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// Reports `g` failed with `class` 200 ms after `now`, asks for a retry, and returns its grant.
fn fail_and_retry(
    core: &mut Core,
    g: &Grant,
    class: FailureClass,
    now: Instant,
    rng: &mut SmallRng,
) -> Grant {
    let later = now + Duration::from_millis(200);
    core.outcome(g.attempt, Outcome::failure(class), later)
        .unwrap();
    core.done(g.attempt, Next::Retry, later, rng).unwrap();
    match core.poll_event() {
        Some(Event::Granted(g)) => g,
        other => panic!("the retry is granted at once, got {other:?}"),
    }
}

#[test]
fn a_grant_advises_the_factor_times_the_first_byte_average() {
    let (mut core, now, mut rng) = core_with(fixed_factor(), 0, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    assert_eq!(g.deadline_ms, None, "nobody has answered, nothing to go by");

    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    let d = g
        .deadline_ms
        .expect("an answered candidate gets a deadline");
    assert!((d - 200.0).abs() < 1e-6, "10 x 20 ms, got {d}");
}

/// A fleet whose answers come at their averages is advised twice the average; one whose
/// answers stray far keeps the factor; before the spread is learned the factor holds.
#[test]
fn the_multiple_follows_the_fleets_spread() {
    let advised = |answers: usize, ttfb: fn(usize) -> f64| {
        let (mut core, now, mut rng) = core_answering(Config::default(), answers, ttfb);
        let avg = core.candidate(&"a".into()).unwrap().stats.ttfb_ms.unwrap();
        let d = grant(&mut core, Request::only(["a"]), now, &mut rng).deadline_ms;
        d.expect("an answered candidate gets a deadline") / avg
    };
    let steady = advised(400, |_| 20.0);
    assert!((steady - 2.0).abs() < 1e-9, "steady answers: {steady} x");
    // First bytes of 5 and 80 ms in turn for each candidate: each strays by a factor of
    // about 2 to 4 from its average.
    let scattered = advised(400, |k| if (k / 2) % 2 == 0 { 5.0 } else { 80.0 });
    assert!(
        (scattered - 10.0).abs() < 1e-9,
        "scattered answers: {scattered} x"
    );
    // One answer each: the spread has no sample yet.
    let fresh = advised(1, |_| 20.0);
    assert!((fresh - 10.0).abs() < 1e-9, "no spread yet: {fresh} x");
}

/// A snapshot written before the spread was saved restores no spread and no count of its
/// answers: its spread is learned as a fresh core's, its first answers averaged evenly, and
/// does not read as warmed up (its newest answer weighing 1 % from the start).
#[test]
fn a_snapshot_without_a_spread_learns_it_as_a_fresh_core() {
    let (old, now, mut rng) = core_with(Config::default(), 3, 100.0);
    let mut saved = serde_json::to_value(old.snapshot()).unwrap();
    let overall = saved["overall"].as_object_mut().unwrap();
    overall.remove("ttfb_spread");
    overall.remove("ttfb_spread_answers");
    let saved: selection_coordinator::snapshot::Snapshot = serde_json::from_value(saved).unwrap();
    assert_eq!(saved.overall.ttfb_spread, None);
    let mut core = Core::new(Config::default(), now).unwrap();
    core.restore(&saved, now, &mut rng).unwrap();
    assert_eq!(core.overall().ttfb_spread_answers, 0);
    // Answers straying by a tenth of their average either way: a handful brings the
    // multiple near its floor, as for a fresh core.
    let mut now = now;
    for k in 0..12 {
        let only = Request::only([["a", "b"][k % 2]]);
        let g = grant(&mut core, only, now, &mut rng);
        let t = if (k / 2) % 2 == 0 { 90.0 } else { 110.0 };
        now += Duration::from_secs_f64(t / 1000.0);
        core.outcome(g.attempt, Outcome::success_with(1.0, t, 1000, t + 1.0), now)
            .unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    let m = core.deadline_multiple().unwrap();
    assert!(m < 3.0, "a dozen steady answers after the restore: {m} x");
}

/// The spread's first answers are averaged evenly with its starting value, so a fleet is
/// advised by its own answers after a handful of them: ten answers at their averages bring the
/// multiple to about 2 (with the newest weighing 1 % from the start it would be about 9).
#[test]
fn the_spread_is_the_fleets_own_after_a_few_answers() {
    // Six answers each: the first of each has no average to stray from, ten are learned.
    let (core, _, _) = core_with(Config::default(), 6, 20.0);
    assert_eq!(core.overall().ttfb_spread_answers, 10);
    // The multiple is the one of the last refresh, a few answers back.
    let m = core.deadline_multiple().unwrap();
    assert!(m < 2.5, "ten steady answers: {m} x");
    // Answers that stray keep the factor however few they are.
    let (core, _, _) = core_answering(Config::default(), 6, |k| {
        if (k / 2) % 2 == 0 {
            5.0
        } else {
            80.0
        }
    });
    let m = core.deadline_multiple().unwrap();
    assert!((m - 10.0).abs() < 1e-9, "ten scattered answers: {m} x");
}

/// The multiple in force is readable (metrics export it): the factor before the spread is
/// learned, none with the advice off.
#[test]
fn the_core_tells_the_multiple_in_force() {
    let (core, _, _) = core_with(Config::default(), 400, 20.0);
    assert_eq!(core.deadline_multiple(), Some(2.0), "steady answers");
    let (core, _, _) = core_with(Config::default(), 0, 20.0);
    assert_eq!(core.deadline_multiple(), Some(10.0), "nothing learned yet");
    let off = Config {
        deadline: DeadlineConfig::OFF,
        ..Config::default()
    };
    let (core, _, _) = core_with(off, 5, 20.0);
    assert_eq!(core.deadline_multiple(), None);
}

#[test]
fn a_new_candidate_is_advised_from_the_fleets_average() {
    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    core.add_candidate(CandidateInfo::new("new"), now, &mut rng)
        .unwrap();
    let overall = core.overall().ttfb_ms.unwrap();
    let d = grant(&mut core, Request::only(["new"]), now, &mut rng).deadline_ms;
    assert_eq!(d, Some(10.0 * overall), "the fleet answers in {overall} ms");
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
    let second = fail_and_retry(&mut core, &g, FailureClass::Refused, now, &mut rng);
    assert_eq!(second.deadline_ms, None, "the second of two is the last");
}

/// At most one attempt per request is cut short: after a timeout the request's attempts wait
/// for the caller's own timeout, so a fleet that slows down all at once (past the advice)
/// still answers, and its averages learn the new pace. With advice on every attempt, a
/// request that does not say how many it makes would have every attempt cut, and no answer
/// would ever teach the averages.
#[test]
fn after_a_timeout_the_request_waits_for_its_answers() {
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    core.add_candidate(CandidateInfo::new("c"), now, &mut rng)
        .unwrap();
    let g = grant(&mut core, Request::any(), now, &mut rng);
    assert!(g.deadline_ms.is_some(), "a first attempt is advised");
    let retry = fail_and_retry(&mut core, &g, FailureClass::Timeout, now, &mut rng);
    assert_eq!(retry.deadline_ms, None, "the retry waits for its answer");
    let third = fail_and_retry(&mut core, &retry, FailureClass::Refused, now, &mut rng);
    assert_eq!(third.deadline_ms, None, "and so do the ones after it");

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

/// A request that tries one server after another until one answers is advised again after a
/// failure that was not a timeout: each hang it meets is cut until its first.
#[test]
fn a_retry_after_a_fast_failure_is_advised_again() {
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let g = grant(&mut core, Request::any(), now, &mut rng);
    let retry = fail_and_retry(&mut core, &g, FailureClass::Refused, now, &mut rng);
    assert!(retry.deadline_ms.is_some(), "a refusal is no timeout");
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
            sigmas: 0.0,
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
    for (factor, sigmas, min_ms, field) in [
        (-1.0, 5.0, 0.0, "deadline.factor"),
        (f64::NAN, 5.0, 0.0, "deadline.factor"),
        (10.0, 5.0, f64::INFINITY, "deadline.min_ms"),
        (10.0, 5.0, -5.0, "deadline.min_ms"),
        (10.0, -1.0, 0.0, "deadline.sigmas"),
        (10.0, f64::NAN, 0.0, "deadline.sigmas"),
    ] {
        let c = Config {
            deadline: DeadlineConfig {
                factor,
                sigmas,
                min_ms,
            },
            ..Config::default()
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(field), "{factor} / {sigmas} / {min_ms}: {err}");
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

/// Measured on seeds 1-4: a mean first byte of 26.0 ms with the advice (27.2 ms with ten first
/// bytes whatever the spread), 35.3 ms without, no errors either way. With the simulator's
/// workers ignoring the advice both read 35.3 ms and the test fails.
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

/// An attempt reclaimed at its lease end counts as a timeout for its request too: the
/// request's next attempt gets no deadline advice, as after a reported timeout.
#[test]
fn an_attempt_reclaimed_at_its_lease_end_ends_the_requests_advice() {
    let (mut core, now, mut rng) = core_with(Config::default(), 5, 20.0);
    let limits = selection_coordinator::Limits {
        global: 1,
        max_attempt_s: Some(1.0),
        ..selection_coordinator::Limits::default()
    };
    core.set_limits(limits, now, &mut rng).unwrap();
    let first = grant(&mut core, Request::any().with_parallelism(2), now, &mut rng);
    assert!(first.deadline_ms.is_some(), "the first attempt is advised");
    core.tick(now + Duration::from_secs(2), &mut rng);
    let events: Vec<Event> = std::iter::from_fn(|| core.poll_event()).collect();
    assert!(
        matches!(events.first(), Some(Event::Reclaimed { attempt, .. }) if *attempt == first.attempt),
        "{events:?}"
    );
    let next = events
        .iter()
        .find_map(|e| match e {
            Event::Granted(g) if g.request == first.request => Some(g),
            _ => None,
        })
        .expect("the request's next attempt is granted");
    assert_eq!(next.deadline_ms, None);
}

/// A first byte that comes at the very instant of the caller's deadline is the caller's
/// answer: the request succeeds and its transfer runs to its end.
#[test]
fn a_first_byte_at_the_callers_deadline_answers_it() {
    first_byte_at_the_timeout_is_in_time("timeout_ms");
}

/// A first byte that comes exactly at the attempt timeout (`attempt_timeout_ms`) is in time.
#[test]
fn a_first_byte_at_the_attempt_timeout_is_in_time() {
    first_byte_at_the_timeout_is_in_time("attempt_timeout_ms");
}

/// One server whose first byte comes at 100 ms, exactly the timeout the workload field `timeout`
/// sets, and its transfer 50 ms later: every one of 20 requests succeeds, in 150 ms.
fn first_byte_at_the_timeout_is_in_time(timeout: &str) {
    let toml = format!(
        r#"
name = "edge"
[workload]
loop = "closed"
workers = 1
operations = 20
{timeout} = 100.0

[[candidates]]
id = "s"
success = 1.0
ttfb_ms = 100.0
duration_ms = 50.0
"#
    );
    let sc = Scenario::parse(&toml, "edge").unwrap();
    let random = PolicySpec::parse("random").unwrap();
    let report = simulate(&sc, &[random], &[1], 1, None).unwrap();
    let p = &report.policies[0];
    assert_eq!(p.error_rate, 0.0, "{timeout}");
    assert!(
        (p.latency_ms.mean - 150.0).abs() < 1e-6,
        "{timeout}: {:?}",
        p.latency_ms
    );
}

/// A permit dropped with no report and no first byte once its advised deadline has passed
/// (what a timeout around the whole call does) counts as the timeout it was; dropped sooner,
/// or without advice (a last attempt), it leaves no trace.
#[test]
fn an_attempt_released_unreported_past_its_advice_counts_as_a_timeout() {
    let failures = |core: &Core| {
        let s = core.candidate(&"a".into()).unwrap().stats;
        s.attempts - s.successes
    };
    // Advised 200 ms; released unreported after 250 ms.
    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    let before = failures(&core);
    let g = grant(&mut core, Request::only(["a"]), now, &mut rng);
    assert_eq!(g.deadline_ms, Some(200.0));
    let late = now + Duration::from_millis(250);
    core.done(g.attempt, Next::Finish, late, &mut rng).unwrap();
    assert_eq!(failures(&core), before + 1);
    assert_eq!(core.counters().dropped_past_advice, 1);
    assert_eq!(
        core.candidate(&"a".into())
            .unwrap()
            .stats
            .consecutive_failures,
        1
    );

    // Released unreported after 150 ms, before the advice: nothing learned.
    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    let before = failures(&core);
    let g = grant(&mut core, Request::only(["a"]), now, &mut rng);
    let early = now + Duration::from_millis(150);
    core.done(g.attempt, Next::Finish, early, &mut rng).unwrap();
    assert_eq!(failures(&core), before);
    assert_eq!(core.counters().dropped_past_advice, 0);

    // A last attempt is not advised: released late, nothing learned either.
    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    let before = failures(&core);
    let g = grant(
        &mut core,
        Request::only(["a"]).with_attempts(1),
        now,
        &mut rng,
    );
    assert_eq!(g.deadline_ms, None);
    core.done(g.attempt, Next::Finish, late, &mut rng).unwrap();
    assert_eq!(failures(&core), before);

    // Nor one whose first byte came: its transfer may run as long as it likes.
    let (mut core, now, mut rng) = core_with(fixed_factor(), 5, 20.0);
    let before = failures(&core);
    let g = grant(&mut core, Request::only(["a"]), now, &mut rng);
    core.first_byte(g.attempt).unwrap();
    core.done(g.attempt, Next::Finish, late, &mut rng).unwrap();
    assert_eq!(failures(&core), before);
}
