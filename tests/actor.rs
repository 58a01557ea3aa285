//! The coordinator actor in a real actix System: grants, permits, taken-back grants, stray
//! messages, state, run-time limits, records, and the async handle.
//!
//! Tests pause tokio's clock, which the coordinator reads: sleeps, timeouts and the
//! coordinator's timer advance virtual time as soon as the System is idle.

use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{
    AcquireError, Answer, Coordinator, CoordinatorHandle, Decision, Done, GetState, Permit, Ready,
    Report, SetConfig, SetLimits, SetShareIdentity, State, Stop, Subscribe, TakeUrgentDigest,
    WatchUrgentDigests,
};
use selection_coordinator::{
    AttemptId, CandidateInfo, Config, Error, FailureClass, Limits, Next, Outcome, Rejection,
    Request,
};
use tokio::sync::mpsc;

mod support;
use support::{next_answer, next_permit, now, probe, Probe, StopProbe};

fn coordinator(candidates: &[&str], limits: Limits) -> Addr<Coordinator> {
    let mut c = Coordinator::with_seed(Config::default(), limits, 11).unwrap();
    for id in candidates {
        c = c.with_candidate(CandidateInfo::new(*id)).unwrap();
    }
    c.start()
}

fn global(n: u32) -> Limits {
    Limits {
        global: n,
        ..Limits::default()
    }
}

/// Nothing arrives within a short while (what a waiting request looks like).
async fn assert_quiet(rx: &mut mpsc::UnboundedReceiver<Answer>) {
    let got = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await;
    assert!(got.is_err(), "expected no answer, got {:?}", got.unwrap());
}

async fn state(c: &Addr<Coordinator>) -> State {
    let s = c.send(GetState).await.unwrap();
    assert_eq!(
        s.tracked_requests, s.open_requests,
        "the actor's replies and the core's open requests disagree"
    );
    s
}

async fn ready(c: &Addr<Coordinator>, w: &Addr<Probe>, request: Request) {
    c.send(Ready::new(request, w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
}

#[actix::test]
async fn grant_outcome_done_flow() {
    tokio::time::pause();
    let c = coordinator(&["a", "b"], global(1));
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    ready(&c, &w, Request::any()).await;
    let mut first = next_permit(&mut rx).await;
    assert_quiet(&mut rx).await;
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.waiting), (1, 1));

    let chosen = first.candidate().clone();
    // The first byte, then the outcome at the end of the transfer: neither is a stray.
    first.first_byte();
    first.report(Outcome::success_with(10.0, 20.0, 1000, 30.0));
    first.done(Next::Finish);
    let second = next_permit(&mut rx).await;
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.waiting), (1, 0));
    let learned = s.candidate(chosen.as_str()).unwrap();
    assert_eq!(learned.stats.attempts, 1);
    assert_eq!(learned.stats.connect_ms, Some(10.0));
    assert_eq!(s.counters.decisions, 2);

    second.done(Next::Finish);
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.waiting, s.open_requests), (0, 0, 0));
    assert_eq!(s.shell.errors(), 0);
}

#[actix::test]
async fn dropping_a_permit_frees_the_slot_without_statistics() {
    tokio::time::pause();
    let c = coordinator(&["a"], global(1));
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    ready(&c, &w, Request::any()).await;
    let first = next_permit(&mut rx).await;
    assert_quiet(&mut rx).await;
    drop(first);
    let second = next_permit(&mut rx).await;
    let s = state(&c).await;
    assert_eq!(s.shell.permits_dropped, 1);
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 0);
    assert_eq!(s.in_flight, 1);
    drop(second);
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.shell.permits_dropped), (0, 2));
}

#[actix::test]
async fn grant_to_a_closed_mailbox_goes_to_the_next_worker() {
    tokio::time::pause();
    let c = coordinator(&["a", "b"], global(1));
    let (holder, mut holder_rx) = probe();
    let (gone, mut gone_rx) = probe();
    let (next, mut next_rx) = probe();
    ready(&c, &holder, Request::any()).await;
    let held = next_permit(&mut holder_rx).await;
    ready(&c, &gone, Request::any()).await;
    ready(&c, &next, Request::any()).await;

    // The worker that asked first stops while it waits.
    let gone_recipient = gone.clone().recipient::<Answer>();
    gone.send(StopProbe).await.unwrap();
    while gone_recipient.connected() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    held.done(Next::Finish);
    let granted = next_permit(&mut next_rx).await;
    let s = state(&c).await;
    assert_eq!(s.shell.taken_back, 1);
    assert_eq!(s.counters.decisions, 3, "holder, taken back, next");
    assert_eq!((s.in_flight, s.waiting), (1, 0));
    assert!(gone_rx.try_recv().is_err());
    drop(granted);
}

/// Sends `outcome` for `attempt` straight to the actor, as a worker that bypasses its permit
/// (or an older one) would, and waits until it is handled.
async fn report_straight(
    c: &Addr<Coordinator>,
    attempt: AttemptId,
    incarnation: u64,
    outcome: Outcome,
) {
    c.send(Report {
        attempt,
        incarnation,
        outcome,
    })
    .await
    .unwrap();
}

#[actix::test]
async fn stray_messages_are_counted_not_fatal() {
    tokio::time::pause();
    let c = coordinator(&["a"], global(1));
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let mut p = next_permit(&mut rx).await;
    let attempt = p.attempt();
    let incarnation = p.incarnation();
    p.report(Outcome::success());
    // A second report: the permit refuses it itself...
    let again = p.try_report(Outcome::success());
    assert!(
        matches!(again, Err(Error::DuplicateOutcome(_))),
        "{again:?}"
    );
    // ...and the actor, sent one straight, counts it and ignores it.
    report_straight(&c, attempt, incarnation, Outcome::success()).await;
    p.done(Next::Finish);
    // A second Done and a report after the attempt ended.
    c.send(Done {
        attempt,
        incarnation,
        next: Next::Finish,
    })
    .await
    .unwrap();
    report_straight(&c, attempt, incarnation, Outcome::success()).await;
    let s = state(&c).await;
    assert_eq!(s.shell.duplicate_outcome, 1);
    assert_eq!(s.shell.unknown_attempt, 2);
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 1);
    assert_eq!(s.in_flight, 0);

    // Malformed input gets a typed error and the coordinator keeps serving.
    let bad = c
        .send(Ready::new(Request::only(["nope"]), w.clone().recipient()))
        .await
        .unwrap();
    assert_eq!(bad, Err(Error::UnknownCandidate("nope".into())));
    ready(&c, &w, Request::any()).await;
    drop(next_permit(&mut rx).await);
    assert_eq!(state(&c).await.shell.invalid_input, 1);
}

#[actix::test]
async fn state_reflects_in_flight_per_candidate() {
    tokio::time::pause();
    let c = coordinator(&["a", "b", "c"], Limits::default());
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any().with_parallelism(3)).await;
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(next_permit(&mut rx).await);
    }
    let s = state(&c).await;
    assert_eq!(s.in_flight, 3);
    // Parallel attempts of one request go to different candidates.
    for cand in &s.candidates {
        assert_eq!(cand.in_flight, 1, "{}", cand.info.id);
    }
    assert_eq!(s.open_requests, 1);
    permits.pop();
    let s = state(&c).await;
    assert_eq!(s.in_flight, 2);
    permits.clear();
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.open_requests), (0, 0));
}

#[actix::test]
async fn raising_a_limit_grants_at_once() {
    tokio::time::pause();
    let c = coordinator(&["a", "b"], global(1));
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    ready(&c, &w, Request::any()).await;
    let held = next_permit(&mut rx).await;
    assert_quiet(&mut rx).await;
    c.send(SetLimits(global(2))).await.unwrap().unwrap();
    let second = next_permit(&mut rx).await;
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.waiting, s.limits.global), (2, 0, 2));
    // An invalid limit is refused and counted; the old one stays.
    let refused = c.send(SetLimits(global(0))).await.unwrap();
    assert!(matches!(refused, Err(Error::InvalidLimits(_))));
    let s = state(&c).await;
    assert_eq!((s.limits.global, s.shell.invalid_input), (2, 1));
    drop((held, second));
}

#[actix::test]
async fn retry_asks_again_excluding_the_tried_candidate() {
    tokio::time::pause();
    let c = coordinator(&["a", "b"], Limits::default());
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let mut first = next_permit(&mut rx).await;
    let tried = first.candidate().clone();
    let request = first.request();
    first.report(Outcome::failure(
        selection_coordinator::FailureClass::Transport,
    ));
    first.done(Next::Retry);
    let second = next_permit(&mut rx).await;
    assert_ne!(second.candidate(), &tried);
    assert_eq!(second.request(), request, "the same request asks again");
    second.done(Next::Retry);
    // Both tried: the retry is rejected.
    match next_answer(&mut rx).await {
        Answer::Rejected { reason, .. } => assert_eq!(reason, Rejection::NoEligibleCandidate),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.open_requests), (0, 0));
}

#[actix::test]
async fn hot_reload_keeps_statistics_and_refuses_bad_configs() {
    tokio::time::pause();
    let c = coordinator(&["a"], Limits::default());
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let mut p = next_permit(&mut rx).await;
    p.report(Outcome::success());
    p.done(Next::Finish);
    c.send(SetConfig(Config::lassie())).await.unwrap().unwrap();
    let s = state(&c).await;
    assert_eq!(s.config, Config::lassie());
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 1);
    let bad = Config {
        refresh_ms: 0,
        ..Config::default()
    };
    assert!(c.send(SetConfig(bad)).await.unwrap().is_err());
    assert_eq!(state(&c).await.config, Config::lassie());
}

#[actix::test]
async fn lease_reclaims_an_attempt_that_never_reports() {
    tokio::time::pause();
    let config = Config {
        refresh_ms: 5,
        ..Config::default()
    };
    let limits = Limits {
        global: 1,
        max_attempt_s: Some(0.02),
        ..Limits::default()
    };
    let c = Coordinator::with_seed(config, limits, 3)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start();
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    ready(&c, &w, Request::any()).await;
    let stuck = next_permit(&mut rx).await;
    // The lease ends the first request, and its worker hears so, rather than waiting for an
    // answer to a later `Retry` that could no longer come...
    match next_answer(&mut rx).await {
        Answer::Rejected { request, reason } => {
            assert_eq!(reason, Rejection::Reclaimed);
            assert_eq!(request, stuck.request());
        }
        other => panic!("expected the reclaimed request's end, got {other:?}"),
    }
    // ...and frees the slot for the waiter without the first permit's release.
    let second = next_permit(&mut rx).await;
    let s = state(&c).await;
    // At least the first attempt was reclaimed and counted as a timeout (the second may be
    // too, if this task is slow to get here).
    assert!(s.counters.reclaimed >= 1);
    let a = &s.candidate("a").unwrap().stats;
    assert!(a.attempts >= 1 && a.successes == 0, "{a:?}");
    drop(stuck); // its release is now a stray
    drop(second);
    let s = state(&c).await;
    assert_eq!(s.in_flight, 0);
    assert!(s.shell.unknown_attempt >= 1);
}

#[actix::test]
async fn deadline_timer_rejects_a_waiting_request() {
    tokio::time::pause();
    let c = coordinator(&["a"], global(1));
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let held = next_permit(&mut rx).await;
    // On the paused clock the timer's instant is exact: the rejection comes at the deadline
    // (the next refresh is 250 ms away), never before it.
    let deadline = now() + Duration::from_millis(30);
    ready(&c, &w, Request::any().with_deadline(deadline)).await;
    match next_answer(&mut rx).await {
        Answer::Rejected { reason, .. } => assert_eq!(reason, Rejection::DeadlinePassed),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let late = now().saturating_duration_since(deadline);
    assert!(
        now() >= deadline && late <= Duration::from_millis(2),
        "{late:?} late"
    );
    let s = state(&c).await;
    assert_eq!((s.waiting, s.in_flight), (0, 1));
    drop(held);
}

/// Collects decision records sent to an actor subscriber.
struct Listener(mpsc::UnboundedSender<Decision>);
impl Actor for Listener {
    type Context = Context<Self>;
}
impl Handler<Decision> for Listener {
    type Result = ();
    fn handle(&mut self, d: Decision, _: &mut Context<Self>) {
        let _ = self.0.send(d);
    }
}

#[actix::test]
async fn decision_records_reach_actor_and_channel_subscribers() {
    tokio::time::pause();
    let handle = Coordinator::with_seed(Config::default(), Limits::default(), 5)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .with_candidate(CandidateInfo::new("b"))
        .unwrap()
        .start_handle();
    let (tx, mut actor_rx) = mpsc::unbounded_channel();
    let listener = Listener(tx).start();
    handle
        .addr()
        .send(Subscribe {
            subscriber: listener.recipient(),
            rate: 1.0,
        })
        .await
        .unwrap();
    let mut half = handle.subscribe_channel(0.5, 64).await.unwrap();
    for _ in 0..10 {
        drop(handle.acquire(Request::any()).await.unwrap());
    }
    let s = handle.state().await.unwrap();
    assert_eq!(s.subscribers, 2);
    let mut actor_records = 0;
    while let Ok(Some(d)) = tokio::time::timeout(Duration::from_millis(50), actor_rx.recv()).await {
        assert_eq!(d.0.candidates.len(), 2);
        assert!(d.0.winner.is_some());
        actor_records += 1;
    }
    let mut channel_records = 0;
    while half.try_recv().is_ok() {
        channel_records += 1;
    }
    assert_eq!(actor_records, 10);
    assert_eq!(channel_records, 5);

    // A dropped receiver ends its subscription.
    drop(half);
    drop(handle.acquire(Request::any()).await.unwrap());
    assert_eq!(handle.state().await.unwrap().subscribers, 1);
}

/// A handle to a coordinator with one candidate, `a`, and one slot.
fn one_slot_handle() -> CoordinatorHandle {
    Coordinator::with_seed(Config::default(), global(1), 9)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle()
}

#[actix::test]
async fn handle_acquire_report_and_drop() {
    tokio::time::pause();
    let handle = one_slot_handle();
    let mut first = handle.acquire(Request::any()).await.unwrap();
    assert_eq!(first.candidate().as_str(), "a");

    // A second acquire from another tokio task waits for the slot.
    let h2 = handle.clone();
    let waiter = tokio::spawn(async move { h2.acquire(Request::any()).await });
    while handle.state().await.unwrap().waiting == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    first.report(Outcome::success());
    drop(first);
    let mut second = waiter.await.unwrap().unwrap();
    second.report(Outcome::failure(
        selection_coordinator::FailureClass::Overload,
    ));
    // `Retry` from an acquired permit has nowhere to deliver: it finishes the request.
    second.done(Next::Retry);
    let s = handle.state().await.unwrap();
    assert_eq!((s.in_flight, s.waiting, s.open_requests), (0, 0, 0));
    let a = s.candidate("a").unwrap();
    assert_eq!((a.stats.attempts, a.stats.successes), (2, 1));

    // Errors are typed.
    let invalid = handle.acquire(Request::only(["zzz"])).await.unwrap_err();
    assert_eq!(
        invalid,
        AcquireError::Invalid(Error::UnknownCandidate("zzz".into()))
    );
    assert!(matches!(
        handle.acquire(Request::any().with_parallelism(2)).await,
        Err(AcquireError::Invalid(Error::InvalidRequest(_)))
    ));
    let past = Request::any().with_deadline(now());
    assert_eq!(
        handle.acquire(past).await.unwrap_err(),
        AcquireError::Rejected(Rejection::DeadlinePassed)
    );
}

#[actix::test]
async fn abandoned_acquire_is_cancelled_and_its_slot_not_lost() {
    tokio::time::pause();
    let config = Config {
        refresh_ms: 5,
        ..Config::default()
    };
    let handle = Coordinator::with_seed(config, global(1), 9)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    let held = handle.acquire(Request::any()).await.unwrap();
    // The caller gives up while waiting.
    let gave_up = tokio::time::timeout(Duration::from_millis(20), handle.acquire(Request::any()));
    assert!(gave_up.await.is_err());
    // The next tick notices nobody is listening.
    let mut s = handle.state().await.unwrap();
    for _ in 0..500 {
        if s.waiting == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        s = handle.state().await.unwrap();
    }
    assert_eq!(
        (s.waiting, s.shell.abandoned, s.shell.taken_back),
        (0, 1, 0)
    );
    drop(held);
    let again = handle.acquire(Request::any()).await.unwrap();
    assert_eq!(handle.state().await.unwrap().in_flight, 1);
    drop(again);
}

#[actix::test]
async fn stopping_the_coordinator_answers_waiters_and_the_handle() {
    tokio::time::pause();
    let c = coordinator(&["a"], global(1));
    let handle = CoordinatorHandle::new(c.clone());
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let held = next_permit(&mut rx).await;
    ready(&c, &w, Request::any()).await;
    c.send(Stop).await.unwrap();
    match next_answer(&mut rx).await {
        Answer::Rejected { reason, .. } => assert_eq!(reason, Rejection::CoordinatorRestarted),
        other => panic!("expected a rejection, got {other:?}"),
    }
    drop(held); // inert: nobody to release to
    assert_eq!(
        handle.acquire(Request::any()).await.unwrap_err(),
        AcquireError::CoordinatorGone(selection_coordinator::actor::CoordinatorGone)
    );
}

/// The actor keeps a reply per open request; random sequences of every worker and operator
/// message must keep it in step with the core's open requests (checked by `state`).
#[actix::test]
async fn replies_follow_the_core_under_random_operations() {
    tokio::time::pause();
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use selection_coordinator::actor::{Cancel, Finish, Reask};

    let c = coordinator(&["a", "b", "c", "d"], global(3));
    let (w, mut rx) = probe();
    let mut rng = SmallRng::seed_from_u64(99);
    let mut permits: Vec<Permit> = Vec::new();
    let mut requests = Vec::new();
    let mut rejected = 0;
    for _ in 0..400 {
        while let Ok(answer) = rx.try_recv() {
            match answer {
                Answer::Granted(p) => permits.push(p),
                Answer::Rejected { .. } => rejected += 1,
            }
        }
        match rng.random_range(0..10) {
            0..=2 => {
                let r = Request::any().with_parallelism(rng.random_range(1..=3));
                let id = c
                    .send(Ready::new(r, w.clone().recipient()))
                    .await
                    .unwrap()
                    .unwrap();
                requests.push(id);
            }
            3..=5 if !permits.is_empty() => {
                let mut p = permits.swap_remove(rng.random_range(0..permits.len()));
                if rng.random_bool(0.5) {
                    p.report(Outcome::success());
                }
                match rng.random_range(0..4) {
                    0 => p.done(Next::Finish),
                    1 => p.done(Next::Retry),
                    2 => p.done(Next::Keep),
                    _ => drop(p),
                }
            }
            6 if !requests.is_empty() => {
                let request = requests[rng.random_range(0..requests.len())];
                let _ = c.send(Cancel { request }).await.unwrap();
            }
            7 if !requests.is_empty() => {
                let request = requests[rng.random_range(0..requests.len())];
                let _ = c.send(Reask { request }).await.unwrap();
            }
            8 if !requests.is_empty() => {
                let request = requests[rng.random_range(0..requests.len())];
                let _ = c.send(Finish { request }).await.unwrap();
            }
            _ => {
                let limits = global(rng.random_range(1..=4));
                c.send(SetLimits(limits)).await.unwrap().unwrap();
            }
        }
        state(&c).await;
    }
    // Wind everything down: the coordinator must end with nothing open.
    let mut s = state(&c).await;
    for _ in 0..200 {
        permits.clear();
        while let Ok(answer) = rx.try_recv() {
            drop(answer);
        }
        for &request in &requests {
            let _ = c.send(Cancel { request }).await.unwrap();
            let _ = c.send(Finish { request }).await.unwrap();
        }
        s = state(&c).await;
        if s.open_requests == 0 && s.in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        (s.open_requests, s.tracked_requests, s.in_flight),
        (0, 0, 0)
    );
    assert!(s.counters.decisions > 100, "{:?}", s.counters);
    assert!(rejected > 0);
}

/// Real time: the remote acquire runs on another thread, whose progress a paused clock on this
/// one cannot see (it would jump its timeouts forward while that thread still works), so the
/// polls below sleep for real (about a millisecond each).
#[actix::test]
async fn handle_works_from_another_arbiter_thread() {
    let handle = Coordinator::with_seed(Config::default(), global(1), 4)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    let held = handle.acquire(Request::any()).await.unwrap();
    let arbiter = Arbiter::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let remote = handle.clone();
    arbiter.spawn(async move {
        // Waits for the slot held on the main thread, then releases its own on this thread.
        let mut permit = remote.acquire(Request::any()).await.unwrap();
        permit.report(Outcome::success());
        let _ = tx.send(std::thread::current().id());
    });
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), async {
            while handle.state().await.unwrap().waiting == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await,
        Ok(())
    );
    drop(held);
    let remote_thread = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(remote_thread, std::thread::current().id());
    let mut s = handle.state().await.unwrap();
    while s.in_flight != 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        s = handle.state().await.unwrap();
    }
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 1);
    arbiter.stop();
    arbiter.join().unwrap();
}

#[actix::test]
async fn the_same_seed_draws_the_same_candidates() {
    tokio::time::pause();
    async fn sequence(seed: u64) -> Vec<String> {
        let mut c = Coordinator::with_seed(Config::default(), Limits::default(), seed).unwrap();
        for id in ["a", "b", "c", "d", "e"] {
            c = c.with_candidate(CandidateInfo::new(id)).unwrap();
        }
        let handle = c.start_handle();
        let mut out = Vec::new();
        for _ in 0..40 {
            let p = handle.acquire(Request::any()).await.unwrap();
            out.push(p.candidate().to_string());
        }
        out
    }
    let first = sequence(5).await;
    assert_eq!(first, sequence(5).await);
    assert_ne!(first, sequence(6).await);
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert!(distinct.len() > 1, "a draw, not a fixed choice: {first:?}");
}

/// A permit says how long a first byte is worth waiting for once its candidate has answered
/// (ten first bytes by default): here 10 x 20 ms.
#[actix::test]
async fn a_permit_carries_the_deadline_advice() {
    tokio::time::pause();
    let handle = one_slot_handle();
    let mut first = handle.acquire(Request::any()).await.unwrap();
    assert_eq!(first.deadline(), None, "no answer yet, nothing to go by");
    first.report(Outcome::success_with(1.0, 20.0, 1000, 21.0));
    drop(first);
    let second = handle.acquire(Request::any()).await.unwrap();
    let d = second
        .deadline()
        .expect("an answered candidate gets a deadline");
    assert!(
        (d.as_secs_f64() - 0.2).abs() < 1e-9,
        "10 x 20 ms, got {d:?}"
    );
    drop(second);
    let last = handle
        .acquire(Request::any().with_attempts(1))
        .await
        .unwrap();
    assert_eq!(last.deadline(), None, "none on a last attempt");
}

/// A permit dropped with no report once its advised deadline has passed (what
/// `tokio::time::timeout` around the whole call does) counts as a timeout for its candidate;
/// one dropped sooner leaves no trace.
#[actix::test]
async fn a_permit_dropped_past_its_advice_counts_as_a_timeout() {
    tokio::time::pause();
    let handle = one_slot_handle();
    let mut first = handle.acquire(Request::any()).await.unwrap();
    first.report(Outcome::success_with(1.0, 20.0, 1000, 21.0));
    drop(first);
    let dropped = |h: &CoordinatorHandle| {
        let h = h.clone();
        async move { h.state().await.unwrap().counters.dropped_past_advice }
    };
    let early = handle.acquire(Request::any()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(early);
    assert_eq!(
        dropped(&handle).await,
        0,
        "dropped before its 200 ms advice"
    );
    let late = handle.acquire(Request::any()).await.unwrap();
    let advice = late
        .deadline()
        .expect("an answered candidate gets a deadline");
    let waited = tokio::time::timeout(advice, std::future::pending::<()>()).await;
    assert!(waited.is_err(), "the caller's timeout fires");
    drop(late);
    assert_eq!(dropped(&handle).await, 1, "dropped at its advice");
}

/// A coordinator over `a` and `b` that shares what it learns under the name `me`, and a
/// handle to it.
async fn sharing_coordinator() -> (Addr<Coordinator>, CoordinatorHandle) {
    let addr = coordinator(&["a", "b"], Limits::default());
    addr.send(SetShareIdentity {
        name: "me".into(),
        seq_base: 0,
    })
    .await
    .unwrap();
    let handle = CoordinatorHandle::new(addr.clone());
    (addr, handle)
}

/// `n` attempts on `a`, each reporting `outcome`.
async fn attempts_on_a(handle: &CoordinatorHandle, n: usize, outcome: Outcome) {
    for _ in 0..n {
        let mut p = handle.acquire(Request::only(["a"])).await.unwrap();
        p.report(outcome);
        p.done(Next::Finish);
    }
}

/// What a fleet transport reads to publish at once: `WatchUrgentDigests` is notified after an
/// outcome that makes the core's digest urgent (a failure on a candidate that never failed),
/// and `TakeUrgentDigest` answers the digest once, `None` before and after.
#[actix::test]
async fn an_urgent_digest_wakes_its_watcher_and_is_taken_once() {
    tokio::time::pause();
    let (addr, handle) = sharing_coordinator().await;
    let notify = addr.send(WatchUrgentDigests).await.unwrap();
    attempts_on_a(&handle, 20, Outcome::success_with(1.0, 20.0, 1000, 21.0)).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(100), notify.notified())
            .await
            .is_err(),
        "successes are no news"
    );
    assert!(addr.send(TakeUrgentDigest).await.unwrap().is_none());

    attempts_on_a(&handle, 1, Outcome::failure(FailureClass::Timeout)).await;
    tokio::time::timeout(Duration::from_secs(1), notify.notified())
        .await
        .expect("a failure on a candidate that never failed is urgent");
    let digest = addr
        .send(TakeUrgentDigest)
        .await
        .unwrap()
        .expect("the urgent digest");
    assert_eq!(digest.sender, "me");
    assert!(digest.entries.iter().any(|e| e.id.as_str() == "a"));
    assert!(
        addr.send(TakeUrgentDigest).await.unwrap().is_none(),
        "taken: no longer urgent"
    );
}

/// A candidate removed while a permit holds it and added again under its id takes its slot
/// back: it is listed once, live, and counts the permit still running on it.
#[actix::test]
async fn the_state_lists_an_id_added_again_once_with_its_running_attempts() {
    let handle = Coordinator::with_seed(Config::default(), Limits::default(), 5)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    let old = handle.acquire(Request::only(["a"])).await.unwrap();
    handle.remove_candidate("a").await.unwrap();
    handle.add_candidate(CandidateInfo::new("a")).await.unwrap();
    let new = handle.acquire(Request::only(["a"])).await.unwrap();
    let s = handle.state().await.unwrap();
    assert_eq!(
        s.candidates
            .iter()
            .filter(|c| c.info.id.as_str() == "a")
            .count(),
        1
    );
    let a = s.candidate("a").unwrap();
    assert!(!a.removed);
    assert_eq!(a.in_flight, 2);
    drop((old, new));
}

/// A coordinator handle with two candidates, for the subscriber tests.
fn two_candidates() -> CoordinatorHandle {
    Coordinator::with_seed(Config::default(), Limits::default(), 5)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .with_candidate(CandidateInfo::new("b"))
        .unwrap()
        .start_handle()
}

async fn decide(handle: &CoordinatorHandle, n: usize) {
    for _ in 0..n {
        drop(handle.acquire(Request::any()).await.unwrap());
    }
}

fn drain(rx: &mut mpsc::Receiver<selection_coordinator::DecisionRecord>) -> usize {
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    n
}

/// When the subscriber with the highest rate goes away (found while a record is published),
/// the one that stays keeps its own rate: half of the decisions, not all of them.
#[actix::test]
async fn a_subscriber_that_stays_keeps_its_rate_when_a_faster_one_leaves() {
    tokio::time::pause();
    let handle = two_candidates();
    let mut half = handle.subscribe_channel(0.5, 64).await.unwrap();
    let all = handle.subscribe_channel(1.0, 64).await.unwrap();
    decide(&handle, 10).await;
    assert_eq!(drain(&mut half), 5);
    drop(all);
    // The first decision after the drop finds the subscriber gone.
    decide(&handle, 1).await;
    assert_eq!(handle.state().await.unwrap().subscribers, 1);
    drain(&mut half);
    decide(&handle, 10).await;
    assert_eq!(
        drain(&mut half),
        5,
        "the remaining subscriber keeps its rate"
    );
    assert!(
        !half.is_closed(),
        "the remaining subscriber is still subscribed"
    );
}

/// The same when housekeeping finds the subscriber gone before any record is published.
#[actix::test]
async fn a_subscriber_gone_at_housekeeping_leaves_the_others_their_rate() {
    tokio::time::pause();
    let handle = two_candidates();
    let mut half = handle.subscribe_channel(0.5, 64).await.unwrap();
    let all = handle.subscribe_channel(1.0, 64).await.unwrap();
    drop(all);
    let refresh = Config::default().refresh_ms;
    tokio::time::sleep(Duration::from_millis(refresh * 3)).await;
    assert_eq!(handle.state().await.unwrap().subscribers, 1);
    decide(&handle, 10).await;
    assert_eq!(
        drain(&mut half),
        5,
        "the remaining subscriber keeps its rate"
    );
}

/// A watcher that comes after an urgent change is woken at once: the change is still news.
#[actix::test]
async fn an_urgent_digest_from_before_the_watch_wakes_the_watcher() {
    tokio::time::pause();
    let (addr, handle) = sharing_coordinator().await;
    attempts_on_a(&handle, 20, Outcome::success_with(1.0, 20.0, 1000, 21.0)).await;
    attempts_on_a(&handle, 1, Outcome::failure(FailureClass::Timeout)).await;
    let notify = addr.send(WatchUrgentDigests).await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), notify.notified())
        .await
        .expect("a failure seen before the watch still wakes it");
    assert!(addr.send(TakeUrgentDigest).await.unwrap().is_some());
}

/// `ShellCounters::errors` sums every ignored input, malformed outcomes included.
#[actix::test]
async fn ignored_input_of_every_kind_counts_as_an_error() {
    tokio::time::pause();
    let c = coordinator(&["a"], Limits::default());
    let (w, mut rx) = probe();
    ready(&c, &w, Request::any()).await;
    let p = next_permit(&mut rx).await;
    // Sent straight to the actor: a permit would refuse it before sending (`try_report`).
    let nan = Outcome::success_with(f64::NAN, 1.0, 1, 1.0);
    report_straight(&c, p.attempt(), p.incarnation(), nan).await;
    p.done(Next::Finish);
    let s = state(&c).await;
    assert_eq!(s.shell.invalid_input, 1);
    assert_eq!(s.shell.errors(), 1);
}

/// A permit from `acquire` has nowhere to receive a second grant: its `done(Next::Retry)`
/// ends the request, with no second draw and nothing left waiting.
#[actix::test]
async fn an_acquire_permits_done_with_retry_ends_its_request() {
    tokio::time::pause();
    let handle = Coordinator::with_seed(Config::default(), global(1), 9)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .with_candidate(CandidateInfo::new("b"))
        .unwrap()
        .start_handle();
    let held = handle.acquire(Request::any()).await.unwrap();
    held.done(Next::Retry);
    let s = handle.state().await.unwrap();
    assert_eq!(s.counters.decisions, 1, "no second draw");
    assert_eq!(
        (s.in_flight, s.waiting, s.open_requests, s.shell.taken_back),
        (0, 0, 0, 0)
    );
}

/// A permit dropped after its lease ended released nothing: it counts as a stray, not as a
/// dropped permit.
#[actix::test]
async fn a_permit_dropped_after_its_lease_ended_is_not_counted_as_dropped() {
    tokio::time::pause();
    let limits = Limits {
        global: 1,
        max_attempt_s: Some(0.02),
        ..Limits::default()
    };
    let handle = Coordinator::with_seed(Config::default(), limits, 3)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    let stuck = handle.acquire(Request::any()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(handle.state().await.unwrap().counters.reclaimed, 1);
    drop(stuck);
    let s = handle.state().await.unwrap();
    assert_eq!((s.shell.permits_dropped, s.shell.unknown_attempt), (0, 1));
}

/// A subscriber at a tenth of the rate of the fastest one takes one record of every ten,
/// from the tenth on: the shares add up to whole records although tenths do not add up
/// exactly in floating point.
#[actix::test]
async fn a_subscriber_at_a_tenth_of_the_rate_takes_every_tenth_record() {
    tokio::time::pause();
    let handle = two_candidates();
    let _all = handle.subscribe_channel(1.0, 64).await.unwrap();
    let mut tenth = handle.subscribe_channel(0.1, 64).await.unwrap();
    decide(&handle, 10).await;
    assert_eq!(drain(&mut tenth), 1);
    decide(&handle, 20).await;
    assert_eq!(drain(&mut tenth), 2);
}

/// The time component of the candidate holding an attempt that has run 3 s, before and
/// after, with the attempt's first byte reported or not. Both candidates first learn from 40
/// quick successes (20 ms).
async fn time_component_around_a_long_attempt(first_byte: bool) -> (f64, f64) {
    let c = coordinator(&["a", "b"], global(1));
    let (w, mut rx) = probe();
    for _ in 0..40 {
        ready(&c, &w, Request::any()).await;
        let mut p = next_permit(&mut rx).await;
        p.first_byte();
        p.report(Outcome::success_with(5.0, 10.0, 1000, 20.0));
        p.done(Next::Finish);
    }
    ready(&c, &w, Request::any()).await;
    let long = next_permit(&mut rx).await;
    let id = long.candidate().clone();
    let time = |s: &State| s.candidate(id.as_str()).unwrap().components.time_to_success;
    let before = time(&state(&c).await);
    if first_byte {
        long.first_byte();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = time(&state(&c).await);
    drop(long);
    (before, after)
}

/// An attempt whose first byte came is an answer still transferring, not a hang: a long
/// transfer leaves its candidate's time component where it was, while the same attempt with
/// no first byte reported counts against it as a censored sample.
#[actix::test]
async fn a_first_byte_keeps_a_long_transfer_from_counting_as_a_hang() {
    tokio::time::pause();
    let (before, answered) = time_component_around_a_long_attempt(true).await;
    let (same, silent) = time_component_around_a_long_attempt(false).await;
    assert_eq!(
        before, same,
        "the two runs learn alike up to the long attempt"
    );
    assert!(
        answered >= 0.9 * before,
        "an answered attempt must not count as a hang: {before} -> {answered}"
    );
    assert!(
        silent < 0.5 * before,
        "a silent attempt of 3 s against 20 ms answers must: {before} -> {silent}"
    );
}
