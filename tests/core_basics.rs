//! Basic behaviour of the pure core, driven by hand.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::score::AttemptTime;
use selection_coordinator::{
    CandidateId, CandidateInfo, Config, Core, Error, Event, FailureClass, Limits, Next, Outcome,
    Rejection, Request,
};

fn core_with(n: usize, limits: Limits) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut core = Core::new(Config::default(), now)
        .unwrap()
        .with_limits(limits)
        .unwrap();
    for i in 0..n {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    (core, rng, now)
}

fn events(core: &mut Core) -> Vec<Event> {
    std::iter::from_fn(|| core.poll_event()).collect()
}

/// A core with `config` and the candidates `ids`, its rng seeded with `seed`, and its start.
fn core_of(config: Config, ids: &[&str], seed: u64) -> (Core, SmallRng, Instant) {
    let start = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut core = Core::new(config, start).unwrap();
    for id in ids {
        core.add_candidate(CandidateInfo::new(*id), start, &mut rng)
            .unwrap();
    }
    (core, rng, start)
}

/// Asks for one attempt on `id` alone and returns the grant, which must come at once.
fn grant_on(
    core: &mut Core,
    id: &str,
    now: Instant,
    rng: &mut SmallRng,
) -> selection_coordinator::Grant {
    core.ready(Request::only([id]), now, rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("a grant on {id}")
    };
    g
}

/// The grants among `events`.
fn grants(events: &[Event]) -> impl Iterator<Item = &selection_coordinator::Grant> {
    events.iter().filter_map(|e| match e {
        Event::Granted(g) => Some(g),
        _ => None,
    })
}

fn attempts_granted(events: &[Event]) -> Vec<selection_coordinator::AttemptId> {
    grants(events).map(|g| g.attempt).collect()
}

#[test]
fn grants_then_queues_then_grants_on_done() {
    let limits = Limits {
        global: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(3, limits);
    let r1 = core.ready(Request::any(), now, &mut rng).unwrap();
    let r2 = core.ready(Request::any(), now, &mut rng).unwrap();
    let ev = events(&mut core);
    assert_eq!(ev.len(), 1);
    let Event::Granted(g) = &ev[0] else {
        panic!("expected a grant, got {ev:?}")
    };
    assert_eq!(g.request, r1);
    assert_eq!(core.waiting(), 1);
    core.outcome(g.attempt, Outcome::success(), now).unwrap();
    core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    let ev = events(&mut core);
    assert!(matches!(&ev[0], Event::Granted(g) if g.request == r2));
    assert_eq!(core.waiting(), 0);
    core.check_invariants().unwrap();
}

#[test]
fn retry_excludes_tried_and_rejects_when_exhausted() {
    let (mut core, mut rng, now) = core_with(2, Limits::default());
    let r = core.ready(Request::any(), now, &mut rng).unwrap();
    let mut tried = Vec::new();
    for _ in 0..2 {
        let ev = events(&mut core);
        let Event::Granted(g) = &ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(g.request, r);
        assert!(!tried.contains(&g.candidate));
        tried.push(g.candidate.clone());
        core.outcome(g.attempt, Outcome::failure(FailureClass::Timeout), now)
            .unwrap();
        core.done(g.attempt, Next::Retry, now, &mut rng).unwrap();
    }
    let ev = events(&mut core);
    assert_eq!(
        ev,
        vec![Event::Rejected {
            request: r,
            reason: Rejection::NoEligibleCandidate
        }]
    );
    core.check_invariants().unwrap();
}

#[test]
fn deadline_and_queue_full_rejections() {
    let limits = Limits {
        global: 1,
        max_waiting: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(1, limits);
    core.ready(Request::any(), now, &mut rng).unwrap();
    let waiting = core
        .ready(
            Request::any().with_deadline(now + Duration::from_secs(1)),
            now,
            &mut rng,
        )
        .unwrap();
    let full = core.ready(Request::any(), now, &mut rng).unwrap();
    core.tick(now + Duration::from_secs(2), &mut rng);
    let ev = events(&mut core);
    assert!(ev.contains(&Event::Rejected {
        request: full,
        reason: Rejection::QueueFull
    }));
    assert!(ev.contains(&Event::Rejected {
        request: waiting,
        reason: Rejection::DeadlinePassed
    }));
}

#[test]
fn removed_candidate_is_never_granted_again() {
    let (mut core, mut rng, now) = core_with(2, Limits::default());
    core.remove_candidate(&CandidateId::new("c0"), now, &mut rng)
        .unwrap();
    for _ in 0..50 {
        core.ready(Request::any(), now, &mut rng).unwrap();
    }
    for e in events(&mut core) {
        if let Event::Granted(g) = e {
            assert_eq!(g.candidate.as_str(), "c1");
        }
    }
    core.check_invariants().unwrap();
}

#[test]
fn bad_input_is_a_typed_error() {
    let (mut core, mut rng, now) = core_with(1, Limits::default());
    assert!(core
        .ready(Request::only(Vec::<String>::new()), now, &mut rng)
        .is_err());
    assert!(core.ready(Request::only(["nope"]), now, &mut rng).is_err());
    let bad = CandidateInfo::new("x").with_stake(f64::NAN);
    assert!(core.add_candidate(bad, now, &mut rng).is_err());
    core.ready(Request::any(), now, &mut rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!()
    };
    let nan = Outcome::Success(selection_coordinator::Success {
        connect_ms: Some(f64::NAN),
        ..Default::default()
    });
    assert!(core.outcome(g.attempt, nan, now).is_err());
    core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    assert!(core.done(g.attempt, Next::Finish, now, &mut rng).is_err());
}

/// More parallel attempts than the eligible list names distinct candidates can never all run:
/// refused up front (a repeated id counts once), checkable without a core.
#[test]
fn parallelism_above_the_distinct_eligible_candidates_is_refused() {
    let (mut core, mut rng, now) = core_with(2, Limits::default());
    let twice = Request::only(["c0", "c0"]).with_parallelism(2);
    match core.ready(twice, now, &mut rng) {
        Err(selection_coordinator::Error::InvalidRequest(m)) => {
            assert!(
                m.contains("parallelism 2") && m.contains("1 distinct"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(core.poll_event().is_none(), "nothing was granted");
    core.ready(
        Request::only(["c0", "c1"]).with_parallelism(2),
        now,
        &mut rng,
    )
    .unwrap();
    assert_eq!(events(&mut core).len(), 2, "both candidates granted");
    // What needs no coordinator is checked by `Request::validate` and `Limits::validate`.
    assert!(Request::any().with_parallelism(0).validate().is_err());
    assert!(Limits {
        global: 0,
        ..Limits::default()
    }
    .validate()
    .is_err());
}

/// Events serialize, for logging the event stream as JSON.
#[test]
fn events_serialize_to_json() {
    let (mut core, mut rng, now) = core_with(1, Limits::default());
    core.ready(Request::any(), now, &mut rng).unwrap();
    let e = core.poll_event().unwrap();
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["granted"]["candidate"], "c0", "{v}");
}

#[test]
fn slow_failures_cost_more_time_to_success_than_fast_ones() {
    // Both succeed half the time with a 100 ms first byte; `slow` times out after 3 s, `fast`
    // refuses in 10 ms. The time the core measures from grant to report charges `slow`.
    let mut config = Config::default();
    config.weights.time_to_success = 1.0;
    config.ema.half_life_s = None;
    // Fixed-weight averages, so both keep exactly the same success EMA (with the drift filter a
    // surprising 3 s time would also move the slow one's success).
    config.ema.drift = 0.0;
    let (mut core, mut rng, start) = core_of(config, &["slow", "fast"], 3);
    let mut now = start;
    for round in 0..40 {
        for id in ["slow", "fast"] {
            let g = grant_on(&mut core, id, now, &mut rng);
            let (took, outcome) = if round % 2 == 0 {
                (100, Outcome::success_with(20.0, 100.0, 1000, 150.0))
            } else if id == "slow" {
                (3000, Outcome::failure(FailureClass::Timeout))
            } else {
                (10, Outcome::failure(FailureClass::Refused))
            };
            now += Duration::from_millis(took);
            core.outcome(g.attempt, outcome, now).unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
    core.tick(now + Duration::from_secs(2), &mut rng);
    let slow = core.candidate(&"slow".into()).unwrap().components;
    let fast = core.candidate(&"fast".into()).unwrap().components;
    assert!((slow.success - fast.success).abs() < 1e-9, "same success");
    assert!(
        fast.time_to_success > 2.0 * slow.time_to_success,
        "fast {} vs slow {}",
        fast.time_to_success,
        slow.time_to_success
    );
}

#[test]
fn an_attempt_running_long_without_an_answer_counts_against_its_candidate() {
    // `a` and `b` share a history of 100 ms successes. An attempt on `a` then runs: younger
    // than a try usually takes it changes nothing; older, `a` is charged from the next refresh
    // as if a try took that long; once its first byte is reported it stops counting.
    let config = Config {
        refresh_ms: 20,
        ..Config::default()
    };
    let (mut core, mut rng, start) = core_of(config, &["a", "b"], 5);
    let mut now = start;
    for _ in 0..10 {
        for id in ["a", "b"] {
            let g = grant_on(&mut core, id, now, &mut rng);
            now += Duration::from_millis(100);
            core.outcome(
                g.attempt,
                Outcome::success_with(20.0, 100.0, 1000, 150.0),
                now,
            )
            .unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
    let time_of = |core: &Core, id: &str| {
        core.candidate(&id.into())
            .unwrap()
            .components
            .time_to_success
    };
    let g = grant_on(&mut core, "a", now, &mut rng);
    // Two ticks a refresh period apart: at least one refresh between them.
    let mut refreshed = |core: &mut Core, now: &mut Instant| {
        for _ in 0..2 {
            *now += Duration::from_millis(30);
            core.tick(*now, &mut rng);
        }
    };
    refreshed(&mut core, &mut now);
    assert_eq!(time_of(&core, "a"), time_of(&core, "b"), "a young attempt");
    now += Duration::from_secs(2);
    refreshed(&mut core, &mut now);
    let (a, b) = (time_of(&core, "a"), time_of(&core, "b"));
    assert!(a < 0.01 * b, "a {a} vs b {b} after 2 s without an answer");
    core.first_byte(g.attempt).unwrap();
    refreshed(&mut core, &mut now);
    assert_eq!(time_of(&core, "a"), time_of(&core, "b"), "answered");
    core.outcome(g.attempt, Outcome::success(), now).unwrap();
    core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    assert!(
        core.first_byte(g.attempt).is_err(),
        "a finished attempt is unknown"
    );
}

/// `a` and `b` answer in 20 ms; `a`'s transfers then take 1,000 ms and `b`'s 100 ms. Returns
/// the time components of `a` and `b` after 10 downloads each, and `b`'s before and after an
/// attempt of it that reported its first byte has run 3 s more.
fn downloads(attempt_time: AttemptTime) -> ((f64, f64), (f64, f64)) {
    let mut config = Config {
        refresh_ms: 20,
        ..Config::default()
    };
    config.ema.attempt_time = attempt_time;
    let (mut core, mut rng, start) = core_of(config, &["a", "b"], 9);
    let mut now = start;
    for _ in 0..10 {
        for (id, ms) in [("a", 1000.0), ("b", 100.0)] {
            let g = grant_on(&mut core, id, now, &mut rng);
            now += Duration::from_millis(ms as u64);
            let outcome = Outcome::success_with(5.0, 20.0, 1_000_000, ms);
            core.outcome(g.attempt, outcome, now).unwrap();
            core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        }
    }
    // Two ticks a refresh period apart: at least one refresh between them.
    let tick = |core: &mut Core, now: &mut Instant, rng: &mut SmallRng, by: Duration| {
        *now += by;
        core.tick(*now, rng);
        *now += Duration::from_millis(30);
        core.tick(*now, rng);
    };
    let time_of = |core: &Core, id: &str| {
        core.candidate(&id.into())
            .unwrap()
            .components
            .time_to_success
    };
    tick(&mut core, &mut now, &mut rng, Duration::ZERO);
    let learned = (time_of(&core, "a"), time_of(&core, "b"));
    let g = grant_on(&mut core, "b", now, &mut rng);
    now += Duration::from_millis(20);
    core.first_byte(g.attempt).unwrap();
    let before = time_of(&core, "b");
    tick(&mut core, &mut now, &mut rng, Duration::from_secs(3));
    (learned, (before, time_of(&core, "b")))
}

#[test]
fn counted_to_completion_a_download_is_timed_to_its_end() {
    // To the first byte (the default) both answer in 20 ms, and a transfer that has sent its
    // first byte is an answer, however long it runs.
    let ((a, b), (before, after)) = downloads(AttemptTime::FirstByte);
    assert_eq!(a, b, "first bytes alike");
    assert_eq!(before, after, "a transfer under way is no hang");
    // To completion `a`'s downloads take ten times `b`'s, and a download of `b` still running
    // 3 s on, thirty times what its downloads take, counts against it as a censored sample.
    let ((a, b), (before, after)) = downloads(AttemptTime::Completion);
    assert!(a < 0.5 * b, "a {a} vs b {b}");
    assert!(
        after < 0.1 * before,
        "b {before} -> {after} with a download running 3 s"
    );
}

#[test]
fn next_wakeup_is_the_first_deadline_then_the_lease_end_then_the_refresh() {
    let ms = Duration::from_millis;
    // A one-candidate fleet: the refresh period is `refresh_ms` itself. The waiter's deadline
    // comes at 40 % of it, the lease ends at 60 %.
    let refresh = ms(Config::default().refresh_ms);
    let deadline = refresh * 2 / 5;
    let limits = Limits {
        global: 1,
        max_attempt_s: Some(refresh.as_secs_f64() * 0.6),
        ..Limits::default()
    };
    let (mut core, mut rng, t0) = core_with(1, limits);
    core.ready(Request::any(), t0, &mut rng).unwrap();
    let waiter = core
        .ready(Request::any().with_deadline(t0 + deadline), t0, &mut rng)
        .unwrap();
    assert!(matches!(events(&mut core)[..], [Event::Granted(_)]));

    // The deadline comes before the refresh: the wake-up is at it, never before.
    let at = core.next_wakeup();
    assert!(
        at > t0 + deadline && at <= t0 + deadline + ms(1),
        "{:?}",
        at - t0
    );
    core.tick(at - Duration::from_micros(2), &mut rng);
    assert!(events(&mut core).is_empty(), "woken before the deadline");
    core.tick(at, &mut rng);
    assert!(matches!(
        events(&mut core)[..],
        [Event::Rejected { request, reason: Rejection::DeadlinePassed }] if request == waiter
    ));

    // Then the end of the attempt's lease, before the refresh: it is reclaimed then.
    let lease_end = t0 + refresh * 3 / 5;
    let at = core.next_wakeup();
    assert!(at >= lease_end && at <= lease_end + ms(1), "{:?}", at - t0);
    core.tick(at - Duration::from_micros(2), &mut rng);
    assert!(events(&mut core).is_empty(), "woken before the lease's end");
    core.tick(at, &mut rng);
    assert!(matches!(events(&mut core)[..], [Event::Reclaimed { .. }]));
    assert_eq!(core.in_flight(), 0);
    // And the refresh, one period after the start.
    let next = core.next_wakeup();
    assert!(next > t0 + refresh && next <= t0 + refresh + ms(1));
}

/// The coarse refresh runs every `refresh_ms` (100 ms by default) for a small fleet, and a
/// settled large fleet's every `refresh_per_candidate_us` per candidate (its cost is O(n)).
#[test]
fn the_refresh_period_stretches_with_the_fleet() {
    let c = Config::default();
    assert_eq!(c.refresh_period_s(1), 0.1);
    assert_eq!(c.refresh_period_s(500), 0.1);
    assert!((c.refresh_period_s(4_000) - 0.8).abs() < 1e-12);
    assert!((c.refresh_period_s(10_000) - 2.0).abs() < 1e-12);
    let mut off = c.clone();
    off.refresh_per_candidate_us = 0.0;
    assert_eq!(off.refresh_period_s(100_000), 0.1);
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let b = Config {
            refresh_per_candidate_us: bad,
            ..Config::default()
        };
        let err = b.validate().unwrap_err();
        assert!(
            err.to_string().contains("refresh_per_candidate_us"),
            "{err}"
        );
    }
}

/// One decision at `now`, answered at once.
fn decide_answered(core: &mut Core, rng: &mut SmallRng, now: Instant) {
    core.ready(Request::any(), now, rng).unwrap();
    for ev in events(core) {
        if let Event::Granted(g) = ev {
            core.outcome(g.attempt, Outcome::success_with(5.0, 10.0, 1000, 5.0), now)
                .unwrap();
            core.done(g.attempt, Next::Finish, now, rng).unwrap();
        }
    }
}

/// Decisions every millisecond from `start` to `end`: the periods between the coarse refreshes
/// they bring, in whole milliseconds (a refresh runs at the first decision past its due time,
/// so each period reads a millisecond long at most).
fn refresh_periods_ms(
    core: &mut Core,
    rng: &mut SmallRng,
    start: Instant,
    end: Instant,
) -> Vec<u128> {
    let mut periods = Vec::new();
    let mut due = core.next_refresh();
    let mut now = start;
    while now < end {
        now += Duration::from_millis(1);
        decide_answered(core, rng, now);
        let next = core.next_refresh();
        if next != due {
            periods.push((next - now).as_millis());
            due = next;
        }
    }
    periods
}

/// A large fleet is refreshed every `refresh_ms` while it is new, then less and less often,
/// each period twice the last, up to its settled period (`refresh_per_candidate_us` per
/// candidate: 1.2 s for 6,000); a tenth more candidates start it over.
#[test]
fn a_large_fleets_refresh_backs_off_as_it_settles_and_starts_over_when_it_grows() {
    let (mut core, mut rng, t0) = core_with(6_000, Limits::default());
    let periods = refresh_periods_ms(&mut core, &mut rng, t0, t0 + Duration::from_secs(6));
    assert_eq!(
        periods,
        [100, 200, 400, 800, 1200, 1200, 1200, 1200],
        "{periods:?}"
    );
    let mut now = t0 + Duration::from_secs(6);
    for i in 0..600 {
        core.add_candidate(CandidateInfo::new(format!("new{i}")), now, &mut rng)
            .unwrap();
    }
    assert!(core.next_refresh() - now <= Duration::from_millis(101));
    now += Duration::from_millis(1);
    let periods = refresh_periods_ms(&mut core, &mut rng, now, now + Duration::from_secs(3));
    assert_eq!(&periods[..4], [100, 200, 400, 800], "{periods:?}");
    // A small fleet's period is `refresh_ms` throughout.
    let (mut small, mut rng, t0) = core_with(50, Limits::default());
    let periods = refresh_periods_ms(&mut small, &mut rng, t0, t0 + Duration::from_secs(2));
    assert!(periods.iter().all(|&p| p == 100), "{periods:?}");
}

/// 2,000 candidates refreshed at most every 2 s once settled (`refresh_per_candidate_us` 1,000),
/// after 8 s of 1,000 decisions a second, each answered at once: the period has backed off to
/// 2 s. Returned just after a refresh, with the instant.
fn settled_large_fleet() -> (Core, SmallRng, Instant) {
    let config = Config {
        refresh_per_candidate_us: 1_000.0,
        ..Config::default()
    };
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut core = Core::new(config, t0).unwrap();
    for i in 0..2_000 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), t0, &mut rng)
            .unwrap();
    }
    let mut now = t0 + Duration::from_secs(8);
    let periods = refresh_periods_ms(&mut core, &mut rng, t0, now);
    assert_eq!(periods.last(), Some(&2000), "{periods:?}");
    let refresh = core.next_refresh();
    while now <= refresh {
        now += Duration::from_millis(1);
        decide_answered(&mut core, &mut rng, now);
    }
    (core, rng, now)
}

/// Between a settled large fleet's coarse refreshes (2 s apart here), an attempt that has
/// run far past what the candidate's tries take is charged within `refresh_ms`, by the scan
/// of the attempts still running, as on a small fleet.
#[test]
fn a_hang_in_a_large_fleet_is_charged_between_its_refreshes() {
    let (mut core, mut rng, now) = settled_large_fleet();
    // One attempt that never answers, granted just after a refresh.
    let hung = CandidateId::new("c7");
    core.ready(Request::only([hung.clone()]), now, &mut rng)
        .unwrap();
    assert!(matches!(events(&mut core)[..], [Event::Granted(_)]));
    let before = core.tree_probability(&hung);
    // 400 ms on (each try took 5 ms), well before the next refresh.
    let later = now + Duration::from_millis(400);
    assert!(core.next_refresh() > later + Duration::from_secs(1));
    core.tick(later, &mut rng);
    let after = core.tree_probability(&hung);
    assert!(
        after < before / 100.0,
        "a silent attempt charged at once: {before} -> {after}"
    );
}

/// A scan's charge belongs to one attempt: a later attempt of the same candidate that runs
/// long in the same attempt slot is charged as soon as it runs past the expected time, not
/// only once it is twice as old as the earlier attempt was when charged.
#[test]
fn a_hang_in_a_reused_attempt_slot_is_charged_afresh() {
    let (mut core, mut rng, now) = settled_large_fleet();
    let sick = CandidateId::new("c7");
    // The first attempt is charged 400 ms on, then answers (in 5 ms, as its tries take).
    let first = grant_on(&mut core, "c7", now, &mut rng).attempt;
    let charged = now + Duration::from_millis(400);
    core.tick(charged, &mut SmallRng::seed_from_u64(1));
    core.outcome(first, Outcome::success_with(5.0, 10.0, 1000, 5.0), charged)
        .unwrap();
    core.done(
        first,
        Next::Finish,
        charged,
        &mut SmallRng::seed_from_u64(2),
    )
    .unwrap();
    // The next one takes the slot the first freed (the core reuses the last freed) and
    // never answers.
    let second = grant_on(&mut core, "c7", charged, &mut rng).attempt;
    assert_ne!(second, first);
    let before = core.tree_probability(&sick);
    // 300 ms on: past the expected time many times over, short of twice the first one's 400.
    let later = charged + Duration::from_millis(300);
    assert!(core.next_refresh() > later + Duration::from_millis(500));
    core.tick(later, &mut SmallRng::seed_from_u64(3));
    let after = core.tree_probability(&sick);
    assert!(
        after < before / 100.0,
        "the second attempt charged on its own age: {before} -> {after}"
    );
}

/// A failing candidate that answers again is a sign the fleet may be coming back from an
/// outage: a settled large fleet's next coarse refresh, which judges every candidate's probes,
/// comes within `refresh_ms` instead of up to its settled period (2 s here) later.
#[test]
fn a_heal_in_a_settled_large_fleet_brings_the_next_refresh_forward() {
    let (mut core, mut rng, mut now) = settled_large_fleet();
    // One candidate fails 30 times in a row (failing), then answers, just after a refresh.
    let mut attempt = |core: &mut Core, outcome: Outcome, now: Instant| {
        let g = grant_on(core, "c7", now, &mut rng);
        core.outcome(g.attempt, outcome, now).unwrap();
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    };
    for _ in 0..30 {
        now += Duration::from_millis(1);
        attempt(&mut core, Outcome::failure(FailureClass::Transport), now);
    }
    assert!(core.next_refresh() - now > Duration::from_secs(1));
    now += Duration::from_millis(1);
    attempt(&mut core, Outcome::success_with(5.0, 10.0, 1000, 5.0), now);
    let next = core.next_refresh() - now;
    assert!(next <= Duration::from_millis(101), "{next:?}");
}

/// Runs `per_s` decisions a second for `secs` seconds of the core's clock, each answered at once.
fn run_at(core: &mut Core, rng: &mut SmallRng, start: Instant, per_s: u32, secs: u32) -> Instant {
    let step = Duration::from_secs(1) / per_s;
    let mut now = start;
    for _ in 0..per_s * secs {
        now += step;
        decide_answered(core, rng, now);
    }
    core.tick(now, rng);
    now
}

/// The floor is in force in full where it tries each candidate at least once per
/// `floor_period_s` (10 s), and scaled by the tries where it cannot: 8 candidates at 200
/// decisions a second get 0.25 tries a second each from a 1 % floor; 40 at 30 a second one per
/// 133 s, so the floor in force is 0.075 of it. It follows the rate back up.
#[test]
fn the_floor_in_force_follows_the_tries_it_gives_each_candidate() {
    let (mut busy, mut rng, now) = core_with(8, Limits::default());
    assert_eq!(
        busy.floor_in_force(),
        0.01,
        "the full floor before any rate"
    );
    run_at(&mut busy, &mut rng, now, 200, 5);
    assert_eq!(busy.floor_in_force(), 0.01);

    let (mut quiet, mut rng, now) = core_with(40, Limits::default());
    let later = run_at(&mut quiet, &mut rng, now, 30, 10);
    let f = quiet.floor_in_force();
    assert!((f - 0.01 * 0.075).abs() < 0.01 * 0.01, "{f}");
    run_at(&mut quiet, &mut rng, later, 500, 5);
    assert_eq!(
        quiet.floor_in_force(),
        0.01,
        "500 a second over 40: 1.25 tries per 10 s"
    );

    let as_set = Config {
        floor_period_s: 0.0,
        ..Config::default()
    };
    let mut rng = SmallRng::seed_from_u64(7);
    let mut off = Core::new(as_set, now).unwrap();
    for i in 0..40 {
        off.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    run_at(&mut off, &mut rng, now, 30, 10);
    assert_eq!(
        off.floor_in_force(),
        0.01,
        "floor_period_s = 0: the floor as set"
    );
}

#[test]
fn explain_names_the_winner_a_deterministic_draw_takes_after_slot_reuse() {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default().deterministic(), now).unwrap();
    for id in ["a", "b", "c"] {
        core.add_candidate(CandidateInfo::new(id), now, &mut rng)
            .unwrap();
    }
    core.remove_candidate(&"a".into(), now, &mut rng).unwrap();
    // "d" takes "a"'s slot, ahead of "b" and "c" by position but added last.
    core.add_candidate(CandidateInfo::new("d"), now, &mut rng)
        .unwrap();
    let explained = core.explain(&Request::any(), now).unwrap();
    core.ready(Request::any(), now, &mut rng).unwrap();
    let granted = events(&mut core)
        .into_iter()
        .find_map(|e| match e {
            Event::Granted(g) => Some(g.candidate),
            _ => None,
        })
        .unwrap();
    assert_eq!(granted.as_str(), "b", "ties go to the earliest added");
    assert_eq!(explained.winner, Some(granted));
}

#[test]
fn explain_says_why_nothing_could_be_drawn() {
    use selection_coordinator::decision::DecisionReason;
    let (mut core, mut rng, now) = core_with(
        2,
        Limits {
            per_candidate: 1,
            ..Limits::default()
        },
    );
    let filters = |core: &mut Core, request: Request| {
        let r = core.explain(&request, now).unwrap();
        assert_eq!(r.reason, DecisionReason::NoCandidate);
        assert_eq!(r.winner, None);
        r.filters
            .iter()
            .map(|f| format!("{}: {}", f.filter, f.removed.len()))
            .collect::<Vec<_>>()
    };
    let ids: Vec<_> = core.candidates().map(|c| c.info.id.clone()).collect();
    let all = ids
        .iter()
        .fold(Request::any(), |r, id| r.excluding(id.clone()));
    assert_eq!(filters(&mut core, all), ["exclude: 2"]);
    let caps = Request::any().requiring("gpu");
    assert_eq!(filters(&mut core, caps), ["capabilities: 2"]);
    core.ready(Request::any(), now, &mut rng).unwrap();
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert_eq!(filters(&mut core, Request::any()), ["limit: 2"]);
}

/// Parallel asks go to different candidates: once each candidate runs one, the asks left
/// are refused at once instead of waiting for good.
#[test]
fn parallel_asks_with_no_candidate_left_are_refused() {
    let (mut core, mut rng, now) = core_with(2, Limits::default());
    let id = core
        .ready(Request::any().with_parallelism(3), now, &mut rng)
        .unwrap();
    let evs = events(&mut core);
    let granted = attempts_granted(&evs);
    assert_eq!(granted.len(), 2);
    assert!(
        evs.iter().any(|e| matches!(e, Event::Rejected { request, reason: Rejection::NoEligibleCandidate } if *request == id)),
        "{evs:?}"
    );
    assert_eq!(core.waiting(), 0);
    for a in granted {
        core.done(a, Next::Finish, now, &mut rng).unwrap();
    }
    core.check_invariants().unwrap();
}

/// `max_waiting` bounds the queue, not the requests granted at once.
#[test]
fn a_request_granted_at_once_never_finds_the_queue_full() {
    let limits = Limits {
        per_candidate: 1,
        max_waiting: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(2, limits);
    let c0 = Request::only(["c0"]);
    core.ready(c0.clone(), now, &mut rng).unwrap();
    core.ready(c0.clone(), now, &mut rng).unwrap();
    assert_eq!(core.waiting(), 1);
    events(&mut core);
    // c1 is free: granted, though the queue is full.
    core.ready(Request::any(), now, &mut rng).unwrap();
    let evs = events(&mut core);
    assert!(
        matches!(&evs[..], [Event::Granted(g)] if g.candidate.as_str() == "c1"),
        "{evs:?}"
    );
    // Nothing free now: the queue is full.
    core.ready(Request::any(), now, &mut rng).unwrap();
    let evs = events(&mut core);
    assert!(
        matches!(
            &evs[..],
            [Event::Rejected {
                reason: Rejection::QueueFull,
                ..
            }]
        ),
        "{evs:?}"
    );
    let (mut core, mut rng, now) = core_with(
        1,
        Limits {
            max_waiting: 0,
            ..Limits::default()
        },
    );
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(matches!(&events(&mut core)[..], [Event::Granted(_)]));
}

/// A decision record reads as one line for a log.
#[test]
fn a_decision_record_displays_as_one_line() {
    let (mut core, _rng, now) = core_with(3, Limits::default());
    let record = core.explain(&Request::any(), now).unwrap();
    let line = record.to_string();
    assert!(!line.contains('\n'), "{line}");
    let winner = record.winner.clone().unwrap();
    assert!(line.contains(&format!("{winner} won")), "{line}");
    assert!(line.contains("of 3"), "{line}");
    assert!(line.contains("; next c"), "{line}");
}

fn granted(ev: &[Event]) -> Vec<(selection_coordinator::RequestId, CandidateId)> {
    grants(ev)
        .map(|g| (g.request, g.candidate.clone()))
        .collect()
}

/// Waiters no candidate can serve are parked: other requests' grants and releases do not
/// wake them, the release of a candidate they may use does, and they are served in arrival
/// order.
#[test]
fn waiters_nobody_can_serve_are_parked_until_their_candidate_frees() {
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(2, limits);
    core.add_candidate(
        CandidateInfo::new("c2").with_capability("gpu"),
        now,
        &mut rng,
    )
    .unwrap();
    let c0 = CandidateId::from("c0");
    let c2 = CandidateId::from("c2");
    // c0 and c2 are held.
    core.ready(Request::only([c0.clone()]), now, &mut rng)
        .unwrap();
    core.ready(Request::only([c2.clone()]), now, &mut rng)
        .unwrap();
    let held = attempts_granted(&events(&mut core));
    assert_eq!(held.len(), 2);
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            core.ready(Request::only([c0.clone()]), now, &mut rng)
                .unwrap()
        })
        .collect();
    let gpu = core
        .ready(Request::any().requiring("gpu"), now, &mut rng)
        .unwrap();
    assert!(events(&mut core).is_empty());
    assert_eq!((core.waiting(), core.parked()), (6, 6));
    // Plain traffic on c1 grants and releases without waking them.
    for _ in 0..10 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        let ev = events(&mut core);
        let Some(Event::Granted(g)) = ev.first() else {
            panic!("{ev:?}")
        };
        assert_eq!(g.candidate, CandidateId::from("c1"));
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
        assert_eq!(core.parked(), 6);
        core.check_invariants().unwrap();
    }
    // c0 frees: the oldest of its waiters gets it, the rest park again.
    core.done(held[0], Next::Finish, now, &mut rng).unwrap();
    assert_eq!(granted(&events(&mut core)), [(waiters[0], c0.clone())]);
    assert_eq!((core.waiting(), core.parked()), (5, 5));
    // c2 frees: the request needing its capability gets it.
    core.done(held[1], Next::Finish, now, &mut rng).unwrap();
    assert_eq!(granted(&events(&mut core)), [(gpu, c2.clone())]);
    assert_eq!((core.waiting(), core.parked()), (4, 4));
    // A parked request still has its deadline and its cancel.
    core.cancel(waiters[1], now).unwrap();
    assert_eq!((core.waiting(), core.parked()), (3, 3));
    core.check_invariants().unwrap();
    // A candidate added with the capability serves a parked request at once.
    core.ready(Request::any().requiring("gpu"), now, &mut rng)
        .unwrap();
    assert_eq!(core.parked(), 4);
    core.add_candidate(
        CandidateInfo::new("c3").with_capability("gpu"),
        now,
        &mut rng,
    )
    .unwrap();
    assert_eq!(
        granted(&events(&mut core))
            .into_iter()
            .map(|(_, c)| c)
            .collect::<Vec<_>>(),
        [CandidateId::from("c3")]
    );
    assert_eq!(core.parked(), 3);
    core.check_invariants().unwrap();
}

/// A candidate excluded twice is one candidate excluded: the request is served by the others
/// at once, and a retry still finds the candidates it has not tried.
#[test]
fn a_candidate_excluded_twice_counts_once() {
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(3, limits);
    core.ready(Request::only(["c0"]), now, &mut rng).unwrap();
    events(&mut core);
    let r = core
        .ready(
            Request::any().excluding("c2").excluding("c2"),
            now,
            &mut rng,
        )
        .unwrap();
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Granted(g)] if g.request == r && g.candidate == CandidateId::from("c1")),
        "{ev:?}"
    );
    assert_eq!(core.waiting(), 0);

    let (mut core, mut rng, now) = core_with(4, Limits::default());
    let r = core
        .ready(
            Request::any()
                .with_parallelism(2)
                .excluding("c3")
                .excluding("c3"),
            now,
            &mut rng,
        )
        .unwrap();
    let granted = attempts_granted(&events(&mut core));
    assert_eq!(granted.len(), 2);
    core.done(granted[0], Next::Retry, now, &mut rng).unwrap();
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Granted(g)] if g.request == r),
        "a retry with an untried candidate left is granted: {ev:?}"
    );
}

/// A driver that says it was paused: the attempts running skip the pause, in their lease and
/// in the time their outcome measures; without the call the pause is their latency.
#[test]
fn a_driver_pause_is_skipped_by_the_attempts_running() {
    let limits = Limits {
        max_attempt_s: Some(30.0),
        ..Limits::default()
    };
    let attempt_ms = |told: bool| {
        let (mut core, mut rng, start) = core_with(1, limits);
        let mut now = start;
        for _ in 0..20 {
            core.ready(Request::any(), now, &mut rng).unwrap();
            let g = attempts_granted(&events(&mut core))[0];
            now += Duration::from_millis(20);
            core.outcome(g, Outcome::success(), now).unwrap();
            core.done(g, Next::Finish, now, &mut rng).unwrap();
        }
        core.ready(Request::any(), now, &mut rng).unwrap();
        let g = attempts_granted(&events(&mut core))[0];
        let pause = Duration::from_secs(10 * 3600);
        now += Duration::from_millis(10) + pause;
        if told {
            // Past `now`: no grant time moves beyond it.
            core.driver_paused(pause * 2, now);
            assert_eq!(core.counters().pauses, 1);
        }
        core.tick(now, &mut rng);
        let reclaimed = core.counters().reclaimed;
        assert_eq!(reclaimed, u64::from(!told), "told {told}");
        if told {
            now += Duration::from_millis(10);
            core.outcome(g, Outcome::success(), now).unwrap();
            core.done(g, Next::Finish, now, &mut rng).unwrap();
        }
        core.candidate(&"c0".into())
            .unwrap()
            .stats
            .attempt_ms
            .unwrap()
    };
    let skipped = attempt_ms(true);
    assert!(skipped < 25.0, "attempt_ms {skipped}");
    let blamed = attempt_ms(false);
    assert!(blamed > 1000.0, "attempt_ms {blamed}");
}

/// A hot reload that widens the overload window's buckets keeps the window counting: each
/// bucket stays as far back as it was, and overload failures after the reload are counted
/// (the buckets were numbered by the old width, so new outcomes landed in buckets the window
/// took for the past and were dropped for as long as the run had lasted).
#[test]
fn widening_the_window_buckets_on_a_reload_keeps_the_window_counting() {
    let t0 = Instant::now();
    let mut rng = SmallRng::seed_from_u64(8);
    let mut core = Core::new(Config::default(), t0).unwrap();
    for id in ["a", "b"] {
        core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
            .unwrap();
    }
    let mut ms = 0u64;
    let mut run = |core: &mut Core, rng: &mut SmallRng, outcome: Outcome, n: usize| {
        for _ in 0..n {
            ms += 100;
            let now = t0 + Duration::from_millis(ms);
            core.ready(Request::only(["a"]), now, rng).unwrap();
            let g = grants(&events(core)).next().unwrap().attempt;
            core.outcome(g, outcome, now).unwrap();
            core.done(g, Next::Finish, now, rng).unwrap();
            events(core);
        }
        t0 + Duration::from_millis(ms)
    };
    // 200 s of successes, then buckets ten times as wide, then 30 s of overload failures.
    let ok = Outcome::success_with(1.0, 10.0, 1000, 10.0);
    let now = run(&mut core, &mut rng, ok, 2000);
    let overload = |core: &Core| core.candidate(&"a".into()).unwrap().components.overload;
    assert_eq!(overload(&core), 1.0);
    let mut wide = Config::default();
    wide.window.bucket_s = 10.0;
    core.set_config(wide, now, &mut rng).unwrap();
    let now = run(
        &mut core,
        &mut rng,
        Outcome::failure(FailureClass::Overload),
        300,
    );
    core.tick(now, &mut rng);
    let after = overload(&core);
    assert!(
        after < 0.5,
        "overload failures after the reload uncounted: {after}"
    );
    assert!(core.check_invariants().is_ok());
}

/// A slot freed at the very instant a waiter's deadline passes does not go to it: the waiter
/// is refused as `tick` and `ready` would refuse it, with no tick in between.
#[test]
fn a_slot_freed_at_a_waiters_deadline_rejects_it() {
    let (mut core, mut rng, t0) = core_with(
        1,
        Limits {
            global: 1,
            ..Limits::default()
        },
    );
    core.ready(Request::any(), t0, &mut rng).unwrap();
    let first = attempts_granted(&events(&mut core))[0];
    // Whole seconds: exact in the core's clock.
    let deadline = t0 + Duration::from_secs(1);
    let late = core
        .ready(Request::any().with_deadline(deadline), t0, &mut rng)
        .unwrap();
    assert!(events(&mut core).is_empty());
    core.done(first, Next::Finish, deadline, &mut rng).unwrap();
    let ev = events(&mut core);
    assert_eq!(grants(&ev).count(), 0, "{ev:?}");
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::Rejected { request, reason: Rejection::DeadlinePassed } if *request == late
        )),
        "{ev:?}"
    );
}

/// A second outcome for one attempt is refused with its own error and changes nothing.
#[test]
fn a_second_outcome_for_an_attempt_is_refused_and_not_counted() {
    let (mut core, mut rng, now) = core_with(1, Limits::default());
    core.ready(Request::any(), now, &mut rng).unwrap();
    let a = attempts_granted(&events(&mut core))[0];
    core.outcome(a, Outcome::success(), now).unwrap();
    assert_eq!(
        core.outcome(a, Outcome::failure(FailureClass::Timeout), now),
        Err(Error::DuplicateOutcome(a))
    );
    let stats = &core.candidate(&"c0".into()).unwrap().stats;
    assert_eq!((stats.attempts, stats.successes), (1, 1), "{stats:?}");
}

/// A candidate limited to 0 in flight is refused with the field to fix, not read as "no
/// limit of its own".
#[test]
fn a_candidate_limit_of_zero_is_refused() {
    let (mut core, mut rng, now) = core_with(0, Limits::default());
    let err = core
        .add_candidate(CandidateInfo::new("c").with_max_in_flight(0), now, &mut rng)
        .unwrap_err();
    assert!(err.to_string().contains("max_in_flight"), "{err}");
    assert!(core.candidate(&"c".into()).is_none());
}

/// A request waiting for a capability whose only candidate is full is granted at once when a
/// candidate with that capability is added.
#[test]
fn a_parked_waiter_is_granted_when_a_candidate_it_can_use_is_added() {
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(1, limits);
    core.add_candidate(
        CandidateInfo::new("g1").with_capability("gpu"),
        now,
        &mut rng,
    )
    .unwrap();
    core.ready(Request::any().requiring("gpu"), now, &mut rng)
        .unwrap();
    assert_eq!(attempts_granted(&events(&mut core)).len(), 1);
    let waiting = core
        .ready(Request::any().requiring("gpu"), now, &mut rng)
        .unwrap();
    // Plain requests take c0 and pump past the waiter (which parks).
    core.ready(Request::any(), now, &mut rng).unwrap();
    let ev = events(&mut core);
    assert_eq!(granted(&ev).len(), 1, "{ev:?}");
    assert!(granted(&ev).iter().all(|(r, _)| *r != waiting), "{ev:?}");
    assert_eq!(core.parked(), 1, "the gpu waiter is parked");
    core.add_candidate(
        CandidateInfo::new("g2").with_capability("gpu"),
        now,
        &mut rng,
    )
    .unwrap();
    let ev = events(&mut core);
    assert_eq!(
        granted(&ev),
        vec![(waiting, CandidateId::from("g2"))],
        "{ev:?}"
    );
}

#[test]
fn a_lease_of_zero_seconds_is_refused() {
    for s in [0.0, -0.0, -1.0, f64::INFINITY, f64::NAN] {
        let limits = Limits {
            max_attempt_s: Some(s),
            ..Limits::default()
        };
        assert!(
            matches!(limits.validate(), Err(Error::InvalidLimits(ref m)) if m.contains("max_attempt_s")),
            "max_attempt_s {s} accepted"
        );
        let core = Core::new(Config::default(), Instant::now()).unwrap();
        assert!(core.with_limits(limits).is_err(), "{s}");
    }
    let tiny = Limits {
        max_attempt_s: Some(1e-9),
        ..Limits::default()
    };
    assert!(tiny.validate().is_ok());
}
