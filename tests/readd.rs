//! Candidates that leave and come back under the same id (discovery dropping one for a
//! moment), and ids excluded before any candidate has them: an exclusion names a backend by
//! its id, and a backend's limits count every attempt still running on it.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Event, FailureClass, Grant, Limits, Next, Outcome,
    Request,
};

fn core_of(config: Config, limits: Limits, infos: Vec<CandidateInfo>) -> (Core, SmallRng, Instant) {
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut core = Core::new(config, t0).unwrap().with_limits(limits).unwrap();
    for info in infos {
        core.add_candidate(info, t0, &mut rng).unwrap();
    }
    (core, rng, t0)
}

fn ms(t0: Instant, n: u64) -> Instant {
    t0 + Duration::from_millis(n)
}

fn grants(core: &mut Core) -> Vec<Grant> {
    std::iter::from_fn(|| core.poll_event())
        .filter_map(|e| match e {
            Event::Granted(g) => Some(g),
            _ => None,
        })
        .collect()
}

fn id(s: &str) -> CandidateId {
    CandidateId::new(s)
}

/// `b` holds one attempt and takes no more, so a request that may not use `a` waits.
fn with_b_full() -> (Core, SmallRng, Instant) {
    let (mut core, mut rng, t0) = core_of(
        Config::default(),
        Limits::default(),
        vec![
            CandidateInfo::new("a"),
            CandidateInfo::new("b").with_max_in_flight(1),
        ],
    );
    core.ready(Request::only(["b"]), t0, &mut rng).unwrap();
    assert_eq!(grants(&mut core).len(), 1);
    (core, rng, t0)
}

#[test]
fn an_id_excluded_before_its_candidate_is_added_stays_excluded() {
    let (mut core, mut rng, t0) = with_b_full();
    core.ready(Request::any().excluding("a").excluding("z"), t0, &mut rng)
        .unwrap();
    assert_eq!(core.waiting(), 1);
    core.add_candidate(CandidateInfo::new("z"), ms(t0, 1), &mut rng)
        .unwrap();
    assert!(grants(&mut core).is_empty(), "z is excluded by id");
    assert_eq!(core.waiting(), 1);
    core.check_invariants().unwrap();
    // A candidate it does not exclude serves it.
    core.add_candidate(CandidateInfo::new("c"), ms(t0, 2), &mut rng)
        .unwrap();
    let g = grants(&mut core);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].candidate, id("c"));
    core.check_invariants().unwrap();
}

#[test]
fn an_excluded_candidate_removed_and_added_again_stays_excluded() {
    let (mut core, mut rng, t0) = with_b_full();
    core.ready(Request::any().excluding("a"), t0, &mut rng)
        .unwrap();
    core.remove_candidate(&id("a"), ms(t0, 1), &mut rng)
        .unwrap();
    core.add_candidate(CandidateInfo::new("a"), ms(t0, 2), &mut rng)
        .unwrap();
    assert!(grants(&mut core).is_empty(), "a is excluded by id");
    assert_eq!(core.waiting(), 1);
    core.check_invariants().unwrap();
}

#[test]
fn a_retry_never_goes_back_to_a_candidate_that_left_and_came_back() {
    // Both orders: the candidate leaves and comes back while the failed attempt is still
    // held (its slot drains), or after the request moved on to its retry.
    for back_before_done in [true, false] {
        let (mut core, mut rng, t0) = core_of(
            Config {
                deterministic: true,
                ..Config::default()
            },
            Limits::default(),
            vec![
                CandidateInfo::new("x"),
                CandidateInfo::new("y").with_max_in_flight(1),
            ],
        );
        core.ready(Request::only(["y"]), t0, &mut rng).unwrap();
        let _hold = grants(&mut core);
        core.ready(Request::any(), t0, &mut rng).unwrap();
        let g = grants(&mut core).pop().unwrap();
        assert_eq!(g.candidate, id("x"));
        core.outcome(
            g.attempt,
            Outcome::failure(FailureClass::Transport),
            ms(t0, 1),
        )
        .unwrap();
        if back_before_done {
            core.remove_candidate(&id("x"), ms(t0, 2), &mut rng)
                .unwrap();
            core.add_candidate(CandidateInfo::new("x"), ms(t0, 3), &mut rng)
                .unwrap();
            core.done(g.attempt, Next::Retry, ms(t0, 4), &mut rng)
                .unwrap();
        } else {
            core.done(g.attempt, Next::Retry, ms(t0, 2), &mut rng)
                .unwrap();
            core.remove_candidate(&id("x"), ms(t0, 3), &mut rng)
                .unwrap();
            core.add_candidate(CandidateInfo::new("x"), ms(t0, 4), &mut rng)
                .unwrap();
        }
        assert!(
            grants(&mut core).is_empty(),
            "the retry may not go to x again (back before done: {back_before_done})"
        );
        assert_eq!(core.waiting(), 1);
        core.check_invariants().unwrap();
    }
}

/// One candidate `a`, one attempt at a time each, removed at 1 ms while its attempt runs.
fn a_removed_with_an_attempt_running() -> (Core, SmallRng, Instant, Grant) {
    let (mut core, mut rng, t0) = core_of(
        Config::default(),
        Limits {
            per_candidate: 1,
            ..Limits::default()
        },
        vec![CandidateInfo::new("a")],
    );
    core.ready(Request::any(), t0, &mut rng).unwrap();
    let first = grants(&mut core).pop().unwrap();
    core.remove_candidate(&id("a"), ms(t0, 1), &mut rng)
        .unwrap();
    (core, rng, t0, first)
}

#[test]
fn a_candidate_back_while_its_attempts_run_counts_them_against_its_limit() {
    let (mut core, mut rng, t0, first) = a_removed_with_an_attempt_running();
    core.add_candidate(CandidateInfo::new("a"), ms(t0, 2), &mut rng)
        .unwrap();
    assert_eq!(core.candidate(&id("a")).unwrap().in_flight, 1);
    core.ready(Request::any(), ms(t0, 3), &mut rng).unwrap();
    assert!(
        grants(&mut core).is_empty(),
        "the backend already runs its one attempt"
    );
    core.check_invariants().unwrap();
    // The earlier attempt's outcome is the candidate's own, and its end frees the slot.
    core.outcome(first.attempt, Outcome::success(), ms(t0, 10))
        .unwrap();
    core.done(first.attempt, Next::Finish, ms(t0, 10), &mut rng)
        .unwrap();
    assert_eq!(core.candidate(&id("a")).unwrap().stats.attempts, 1);
    let g = grants(&mut core);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].candidate, id("a"));
    core.check_invariants().unwrap();
}

#[test]
fn a_candidate_back_after_its_attempts_ended_starts_afresh() {
    let (mut core, mut rng, t0, first) = a_removed_with_an_attempt_running();
    core.outcome(first.attempt, Outcome::success(), ms(t0, 5))
        .unwrap();
    core.done(first.attempt, Next::Finish, ms(t0, 5), &mut rng)
        .unwrap();
    core.check_invariants().unwrap();
    core.add_candidate(CandidateInfo::new("a"), ms(t0, 6), &mut rng)
        .unwrap();
    let a = core.candidate(&id("a")).unwrap();
    assert_eq!((a.in_flight, a.stats.attempts), (0, 0));
    core.ready(Request::any(), ms(t0, 7), &mut rng).unwrap();
    assert_eq!(grants(&mut core).len(), 1);
    core.check_invariants().unwrap();
}

#[test]
fn a_request_without_a_deadline_is_served_past_the_clocks_nanosecond_range() {
    let (mut core, mut rng, t0) = core_of(
        Config::default(),
        Limits::default(),
        vec![CandidateInfo::new("a")],
    );
    for years in [584u64, 585, 600] {
        let t = t0 + Duration::from_secs(years * 365 * 86_400);
        core.ready(Request::any(), t, &mut rng).unwrap();
        let g = grants(&mut core);
        assert_eq!(g.len(), 1, "{years} years after the epoch");
        core.done(g[0].attempt, Next::Finish, t, &mut rng).unwrap();
    }
}
