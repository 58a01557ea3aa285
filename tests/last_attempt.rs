//! A request that says how many attempts its caller makes has its last one drawn by its odds of
//! success as well as its time (`last_attempt.failure_cost`, docs/scoring.md).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::{CandidateInfo, Config, Core, Error, Event, Next, Outcome, Request};

/// A fast candidate that fails half of its attempts (fast refusals) and a slower one that
/// nearly always answers: by time per success the fast one wins (about 10 / 0.5 against
/// 40 / 0.995 ms), by the odds of one try the slow one. (With two candidates, pooling asks
/// for a clear gap before it counts one at all: at 0.7 against 0.995 it counts about half.)
fn trained(failure_cost: f64, seed: u64) -> (Core, Instant, SmallRng, SmallRng) {
    let mut config = Config::default();
    config.last_attempt.failure_cost = failure_cost;
    let mut now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut world = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut core = Core::new(config, now).unwrap();
    for id in ["fast-flaky", "fast-flaky-b", "slow-sure"] {
        core.add_candidate(CandidateInfo::new(id), now, &mut rng)
            .unwrap();
    }
    // All are sampled: each request names one in turn.
    for k in 0..1500 {
        let id = ["fast-flaky", "fast-flaky-b", "slow-sure"][k % 3];
        let (c, w) = serve(&mut core, Request::only([id]), now, &mut rng, &mut world);
        assert_eq!(c, id);
        now += Duration::from_millis(w);
    }
    (core, now, rng, world)
}

/// Grants `request`, answers as the candidate would, and returns the candidate and how long
/// the attempt took (ms).
fn serve(
    core: &mut Core,
    request: Request,
    now: Instant,
    rng: &mut SmallRng,
    world: &mut SmallRng,
) -> (String, u64) {
    core.ready(request, now, rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("no grant")
    };
    let (success, ms) = match g.candidate.as_str() {
        "fast-flaky" | "fast-flaky-b" => (world.random_range(0.0..1.0) < 0.5, 10.0),
        _ => (world.random_range(0.0..1.0) < 0.995, 40.0),
    };
    let at = now + Duration::from_millis(ms as u64);
    let outcome = if success {
        Outcome::success_with(1.0, ms, 1000, ms + 1.0)
    } else {
        Outcome::failure(selection_coordinator::FailureClass::Refused)
    };
    core.outcome(g.attempt, outcome, at).unwrap();
    core.done(g.attempt, Next::Finish, at, rng).unwrap();
    (g.candidate.to_string(), ms as u64)
}

fn probability(core: &mut Core, request: &Request, now: Instant, id: &str) -> f64 {
    core.probabilities(request, now)
        .unwrap()
        .into_iter()
        .find(|(c, _)| c.as_str() == id)
        .map(|(_, p)| p)
        .unwrap()
}

/// The sure candidate's probability for a request without a budget and for a last attempt.
fn any_and_last(core: &mut Core, now: Instant) -> (f64, f64) {
    let any = probability(core, &Request::any(), now, "slow-sure");
    let last = probability(core, &Request::any().with_attempts(1), now, "slow-sure");
    (any, last)
}

#[test]
fn a_last_attempt_goes_to_the_candidate_most_likely_to_answer() {
    let (mut core, now, _, _) = trained(10.0, 1);
    let (any, last) = any_and_last(&mut core, now);
    // Not the last of two: drawn as any other.
    let first_of_two = probability(
        &mut core,
        &Request::any().with_attempts(2),
        now,
        "slow-sure",
    );
    eprintln!("slow-sure: any {any:.3}, last {last:.3}, first of two {first_of_two:.3}");
    assert!(any < 0.2, "by time per success the fast one wins: {any}");
    assert!(last > 0.8, "a last attempt goes to the sure one: {last}");
    assert!((first_of_two - any).abs() < 1e-12);
}

#[test]
fn grants_count_down_the_attempts_and_the_last_one_weighs_the_odds() {
    let (mut core, mut now, mut rng, mut world) = trained(10.0, 2);
    let (mut single, mut unbudgeted) = (0, 0);
    for _ in 0..400 {
        let (c, w) = serve(
            &mut core,
            Request::any().with_attempts(1),
            now,
            &mut rng,
            &mut world,
        );
        single += usize::from(c == "slow-sure");
        now += Duration::from_millis(w);
        let (c, w) = serve(&mut core, Request::any(), now, &mut rng, &mut world);
        unbudgeted += usize::from(c == "slow-sure");
        now += Duration::from_millis(w);
    }
    eprintln!("slow-sure granted {single} of 400 last attempts, {unbudgeted} of 400 others");
    assert!(single > 300, "{single}");
    assert!(unbudgeted < 100, "{unbudgeted}");
    // Requests of two attempts: the first is drawn as any other, the retry after a failure
    // (the tried candidate excluded) is the last.
    let (mut firsts, mut first_sure, mut retries, mut retry_sure) = (0, 0, 0, 0);
    for _ in 0..200 {
        core.ready(Request::any().with_attempts(2), now, &mut rng)
            .unwrap();
        let mut tries = 0;
        while let Some(Event::Granted(g)) = core.poll_event() {
            tries += 1;
            let sure = g.candidate.as_str() == "slow-sure";
            if tries == 1 {
                firsts += 1;
                first_sure += usize::from(sure);
            } else {
                retries += 1;
                retry_sure += usize::from(sure);
            }
            let p = if sure { 0.995 } else { 0.5 };
            let ms = if sure { 40 } else { 10 };
            now += Duration::from_millis(ms);
            let ok = world.random_range(0.0..1.0) < p;
            let outcome = if ok {
                Outcome::success_with(1.0, ms as f64, 1000, ms as f64 + 1.0)
            } else {
                Outcome::failure(selection_coordinator::FailureClass::Refused)
            };
            core.outcome(g.attempt, outcome, now).unwrap();
            let next = if ok || tries == 2 {
                Next::Finish
            } else {
                Next::Retry
            };
            core.done(g.attempt, next, now, &mut rng).unwrap();
        }
    }
    eprintln!(
        "slow-sure: {first_sure} of {firsts} first attempts, {retry_sure} of {retries} retries"
    );
    assert!(retries > 50, "{retries}");
    assert!(first_sure * 5 < firsts, "{first_sure} of {firsts}");
    assert!(retry_sure * 10 >= retries * 9, "{retry_sure} of {retries}");
}

#[test]
fn without_a_cost_the_last_attempt_is_drawn_like_any_other() {
    let (mut core, now, _, _) = trained(0.0, 3);
    let (any, last) = any_and_last(&mut core, now);
    assert!((any - last).abs() < 1e-12, "{any} {last}");
}

#[test]
fn zero_attempts_is_refused() {
    let mut rng = SmallRng::seed_from_u64(4);
    let now = Instant::now();
    let mut core = Core::new(Config::default(), now).unwrap();
    core.add_candidate(CandidateInfo::new("a"), now, &mut rng)
        .unwrap();
    let e = core
        .ready(Request::any().with_attempts(0), now, &mut rng)
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidRequest(ref m) if m.contains("attempts")),
        "{e}"
    );
}
