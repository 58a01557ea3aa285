//! The core owns a request's lifecycle: it says when a request ends and why
//! (`Event::Closed`), and what a reported outcome belonged to (`Core::outcome`).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::{
    CandidateInfo, CloseReason, Config, Core, Event, Grant, Limits, Next, Outcome, Rejection,
    Request, RequestId,
};

fn core_with(n: usize, limits: Limits) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default(), now)
        .unwrap()
        .with_limits(limits)
        .unwrap();
    core.set_close_events(true);
    for i in 0..n {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    (core, rng, now)
}

fn events(core: &mut Core) -> Vec<Event> {
    std::iter::from_fn(|| core.poll_event()).collect()
}

fn grant(events: &[Event]) -> Grant {
    match events {
        [Event::Granted(g)] => g.clone(),
        other => panic!("expected one grant, got {other:?}"),
    }
}

fn closed(request: RequestId, reason: CloseReason) -> Event {
    Event::Closed { request, reason }
}

#[test]
fn off_by_default() {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default(), now).unwrap();
    core.add_candidate(CandidateInfo::new("a"), now, &mut rng)
        .unwrap();
    core.ready(Request::any(), now, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    assert_eq!(core.open_requests(), 0);
    assert!(events(&mut core).is_empty(), "no Closed unless asked for");
}

#[test]
fn a_finished_request_closes_after_its_last_attempt() {
    let (mut core, mut rng, now) = core_with(3, Limits::default());
    let r = core
        .ready(Request::any().with_parallelism(2), now, &mut rng)
        .unwrap();
    let ev = events(&mut core);
    assert_eq!(ev.len(), 2, "{ev:?}");
    let (a, b) = match &ev[..] {
        [Event::Granted(a), Event::Granted(b)] => (a.clone(), b.clone()),
        other => panic!("{other:?}"),
    };
    // The outcome says what it belonged to.
    let reported = core.outcome(a.attempt, Outcome::success(), now).unwrap();
    assert_eq!(reported.request, r);
    assert_eq!(reported.candidate, a.candidate);
    assert_eq!(reported.arm, None);
    core.done(a.attempt, Next::Finish, now, &mut rng).unwrap();
    assert!(events(&mut core).is_empty(), "an attempt still runs");
    core.done(b.attempt, Next::Finish, now, &mut rng).unwrap();
    assert_eq!(events(&mut core), [closed(r, CloseReason::Finished)]);
    assert_eq!(core.waiting_asks(r), None);
    assert_eq!(core.open_requests(), 0);
}

#[test]
fn kept_open_until_finish() {
    let (mut core, mut rng, now) = core_with(2, Limits::default());
    let r = core.ready(Request::any(), now, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    assert_eq!(core.attempt_request(g.attempt), Some(r));
    core.done(g.attempt, Next::Keep, now, &mut rng).unwrap();
    assert_eq!(core.attempt_request(g.attempt), None);
    assert!(events(&mut core).is_empty(), "kept open");
    assert_eq!(core.waiting_asks(r), Some(0));
    core.finish(r).unwrap();
    assert_eq!(events(&mut core), [closed(r, CloseReason::Finished)]);
}

#[test]
fn cancelled_while_waiting_and_while_running() {
    let limits = Limits {
        global: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(2, limits);
    let running = core.ready(Request::any(), now, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    let waiting = core.ready(Request::any(), now, &mut rng).unwrap();
    assert_eq!(core.waiting_asks(waiting), Some(1));
    assert!(events(&mut core).is_empty());

    // Waiting: its ask is rejected, and it ends at once.
    core.cancel(waiting, now).unwrap();
    assert_eq!(
        events(&mut core),
        [
            Event::Rejected {
                request: waiting,
                reason: Rejection::Cancelled
            },
            closed(waiting, CloseReason::Cancelled),
        ]
    );

    // Running: it ends when its attempt does, and a `Retry` no longer asks again.
    core.cancel(running, now).unwrap();
    assert!(events(&mut core).is_empty(), "its attempt still runs");
    core.done(g.attempt, Next::Retry, now, &mut rng).unwrap();
    assert_eq!(events(&mut core), [closed(running, CloseReason::Cancelled)]);
    assert_eq!(core.open_requests(), 0);
}

#[test]
fn rejected_requests_close_with_the_reason() {
    let limits = Limits {
        global: 1,
        max_waiting: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, t0) = core_with(1, limits);
    core.ready(Request::any(), t0, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    let late = core
        .ready(
            Request::any().with_deadline(t0 + Duration::from_millis(10)),
            t0,
            &mut rng,
        )
        .unwrap();
    let full = core.ready(Request::any(), t0, &mut rng).unwrap();
    assert_eq!(
        events(&mut core),
        [
            Event::Rejected {
                request: full,
                reason: Rejection::QueueFull
            },
            closed(full, CloseReason::Rejected(Rejection::QueueFull)),
        ]
    );
    core.tick(t0 + Duration::from_millis(20), &mut rng);
    assert_eq!(
        events(&mut core),
        [
            Event::Rejected {
                request: late,
                reason: Rejection::DeadlinePassed
            },
            closed(late, CloseReason::Rejected(Rejection::DeadlinePassed)),
        ]
    );
    core.done(g.attempt, Next::Finish, t0, &mut rng).unwrap();
    assert_eq!(events(&mut core).len(), 1);
    assert_eq!(core.open_requests(), 0);
}

#[test]
fn a_reclaimed_last_attempt_closes_its_request() {
    let limits = Limits {
        max_attempt_s: Some(0.1),
        ..Limits::default()
    };
    let (mut core, mut rng, t0) = core_with(1, limits);
    let r = core.ready(Request::any(), t0, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    core.tick(core.next_wakeup(), &mut rng);
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Reclaimed { attempt, .. }, Event::Closed { request, reason: CloseReason::Reclaimed }]
            if *attempt == g.attempt && *request == r),
        "{ev:?}"
    );
    // A report after the reclaim belongs to nothing.
    assert!(core.outcome(g.attempt, Outcome::success(), t0).is_err());
}

#[test]
fn outcomes_name_the_arm_that_drew_them() {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(9);
    let config = Config::from_toml_str(
        r#"
        [[arms]]
        name = "one"
        share = 1.0
        config = { preset = "default" }
        [[arms]]
        name = "two"
        share = 1.0
        config = { preset = "default" }
        "#,
    )
    .unwrap();
    let mut core = Core::new(config, now).unwrap();
    for id in ["a", "b"] {
        core.add_candidate(CandidateInfo::new(id), now, &mut rng)
            .unwrap();
    }
    let mut arms = [0; 2];
    for i in 0..20 {
        core.ready(Request::any().with_key(format!("k{i}")), now, &mut rng)
            .unwrap();
        let g = grant(&events(&mut core));
        let reported = core.outcome(g.attempt, Outcome::success(), now).unwrap();
        assert_eq!(reported.arm, g.arm);
        arms[reported.arm.expect("arms configured")] += 1;
        core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
    }
    assert!(arms[0] > 0 && arms[1] > 0, "both arms drew: {arms:?}");
}

#[test]
fn a_carried_attempt_holds_its_slot_until_done_and_its_outcome_is_learned() {
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    let (mut core, mut rng, now) = core_with(1, limits);
    let c0 = selection_coordinator::CandidateId::from("c0");
    let carried = core.carry(&c0, false, now).unwrap();
    assert_eq!(core.in_flight(), 1);
    assert_eq!(core.counters().carried, 1);
    assert!(events(&mut core).is_empty(), "no grant is told");
    // Past its candidate's limit nothing more is granted until it is done.
    let r = core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(events(&mut core).is_empty());
    assert_eq!(core.waiting(), 1);
    core.check_invariants().unwrap();
    let reported = core.outcome(carried, Outcome::success(), now).unwrap();
    assert_eq!(reported.candidate, c0);
    assert_eq!(core.candidate(&c0).unwrap().stats.attempts, 1);
    let carried_request = reported.request;
    // A `Retry` asks for nothing more: its request ends, and the waiting one is granted.
    core.done(carried, Next::Retry, now, &mut rng).unwrap();
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Closed { request, reason: CloseReason::Finished }, Event::Granted(g)]
            if *request == carried_request && g.request == r),
        "{ev:?}"
    );
    core.check_invariants().unwrap();
    // A candidate the core does not have: an error, nothing booked.
    let unknown = selection_coordinator::CandidateId::from("gone");
    assert!(core.carry(&unknown, false, now).is_err());
    assert_eq!(core.in_flight(), 1);
}

#[test]
fn a_carried_attempt_already_reported_is_reclaimed_without_a_timeout() {
    let limits = Limits {
        max_attempt_s: Some(0.1),
        ..Limits::default()
    };
    let (mut core, mut rng, t0) = core_with(2, limits);
    let c0 = selection_coordinator::CandidateId::from("c0");
    let c1 = selection_coordinator::CandidateId::from("c1");
    core.carry(&c0, true, t0).unwrap();
    core.carry(&c1, false, t0).unwrap();
    core.tick(t0 + Duration::from_secs(1), &mut rng);
    assert_eq!(core.counters().reclaimed, 2);
    assert_eq!(core.in_flight(), 0);
    assert_eq!(
        core.candidate(&c0).unwrap().stats.attempts,
        0,
        "reported before"
    );
    assert_eq!(core.candidate(&c1).unwrap().stats.attempts, 1, "a timeout");
    core.check_invariants().unwrap();
}

#[test]
fn the_oldest_attempts_lease_end_is_the_next_wakeup_whatever_the_refresh_period() {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let config = Config {
        refresh_ms: 60_000,
        ..Config::default()
    };
    let limits = Limits {
        max_attempt_s: Some(0.1),
        ..Limits::default()
    };
    let mut core = Core::new(config, now).unwrap().with_limits(limits).unwrap();
    for i in 0..3 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    let t1 = now + Duration::from_millis(10);
    let t2 = now + Duration::from_millis(30);
    core.ready(Request::any(), t1, &mut rng).unwrap();
    let first = grant(&events(&mut core));
    core.ready(Request::any(), t2, &mut rng).unwrap();
    let second = grant(&events(&mut core));
    let lease = Duration::from_millis(100);
    let wake = core.next_wakeup();
    assert!(
        wake >= t1 + lease && wake <= t1 + lease + Duration::from_millis(1),
        "{:?}",
        wake - now
    );
    // Ticking then reclaims the first only; the next wake-up is the second's lease end.
    core.tick(wake, &mut rng);
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Reclaimed { attempt, .. }] if *attempt == first.attempt),
        "{ev:?}"
    );
    let wake = core.next_wakeup();
    assert!(wake >= t2 + lease && wake <= t2 + lease + Duration::from_millis(1));
    // Released before its lease: nothing left to reclaim, the refresh is next.
    core.done(second.attempt, Next::Finish, t2, &mut rng)
        .unwrap();
    core.tick(core.next_wakeup(), &mut rng);
    assert_eq!(core.counters().reclaimed, 1);
    assert!(core.next_wakeup() > now + Duration::from_secs(59));
    // A lease set later covers the attempts already running.
    let mut core2 = Core::new(
        Config {
            refresh_ms: 60_000,
            ..Config::default()
        },
        now,
    )
    .unwrap();
    core2
        .add_candidate(CandidateInfo::new("a"), now, &mut rng)
        .unwrap();
    core2.ready(Request::any(), t1, &mut rng).unwrap();
    grant(&events(&mut core2));
    core2.set_limits(limits, t2, &mut rng).unwrap();
    let wake = core2.next_wakeup();
    assert!(wake >= t1 + lease && wake <= t1 + lease + Duration::from_millis(1));
}

#[test]
fn an_attempt_is_reclaimed_at_exactly_its_lease_end() {
    // 0.25 s is exact in binary: granted at 0.0, the cutoff at 0.25 s is exactly 0.0.
    let limits = Limits {
        max_attempt_s: Some(0.25),
        ..Limits::default()
    };
    let (mut core, mut rng, t0) = core_with(1, limits);
    core.ready(Request::any(), t0, &mut rng).unwrap();
    let g = grant(&events(&mut core));
    core.tick(t0 + Duration::from_millis(249), &mut rng);
    assert!(events(&mut core).is_empty(), "not before its lease ends");
    core.tick(t0 + Duration::from_millis(250), &mut rng);
    let ev = events(&mut core);
    assert!(
        matches!(&ev[..], [Event::Reclaimed { attempt, .. }, ..] if *attempt == g.attempt),
        "reclaimed at its lease end, not a tick later: {ev:?}"
    );
}
