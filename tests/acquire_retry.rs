//! `Permit::retry`: a caller of `acquire` retries within its request, as a worker actor does
//! with `done(Next::Retry)` and as the simulator runs a scenario's `retries`: candidates the
//! request tried are excluded, and dropping the wait cancels the request.

use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{
    AcquireError, Answer, Coordinator, CoordinatorHandle, Crash, Permit, Ready,
};
use selection_coordinator::{
    CandidateInfo, Config, FailureClass, Limits, Next, Outcome, Rejection, Request,
};

fn handle(ids: &[&str], limits: Limits, seed: u64) -> CoordinatorHandle {
    let mut c = Coordinator::with_seed(Config::default(), limits, seed).unwrap();
    for id in ids {
        c = c.with_candidate(CandidateInfo::new(*id)).unwrap();
    }
    c.start_handle()
}

fn failed(permit: &mut Permit) {
    permit.report(Outcome::failure(FailureClass::Transport));
}

/// Each retry goes to a candidate the request has not tried; with none left it is refused.
/// The attempts report nothing (as attempts cut short by the caller), so the statistics do not
/// steer the draws away from a tried candidate: only the exclusion does. A fresh `acquire`
/// after such an attempt may draw the same candidate again, and over these seeds it does.
#[actix::test]
async fn a_retry_never_draws_a_candidate_the_request_tried() {
    tokio::time::pause();
    let ids = ["a", "b", "c"];
    for seed in 0..20 {
        let h = handle(&ids, Limits::default(), seed);
        let first = h.acquire(Request::any()).await.unwrap();
        let request = first.request();
        let mut tried = vec![first.candidate().clone()];
        let second = first.retry().await.unwrap();
        assert_eq!(second.request(), request, "the same request goes on");
        assert!(
            !tried.contains(second.candidate()),
            "seed {seed}: {tried:?}"
        );
        tried.push(second.candidate().clone());
        let mut third = second.retry().await.unwrap();
        assert!(!tried.contains(third.candidate()), "seed {seed}: {tried:?}");
        failed(&mut third);
        assert_eq!(
            third.retry().await.unwrap_err(),
            AcquireError::Rejected(Rejection::NoEligibleCandidate)
        );
        let s = h.state().await.unwrap();
        assert_eq!((s.in_flight, s.waiting, s.open_requests), (0, 0, 0));
        h.stop().await;
    }
    // The same attempt followed by a fresh acquire: nothing excludes its candidate.
    let mut again = 0;
    for seed in 0..20 {
        let h = handle(&ids, Limits::default(), seed);
        let first = h.acquire(Request::any()).await.unwrap();
        let failed_on = first.candidate().clone();
        drop(first);
        let next = h.acquire(Request::any()).await.unwrap();
        again += usize::from(*next.candidate() == failed_on);
        drop(next);
        h.stop().await;
    }
    assert!(
        again > 0,
        "a fresh acquire never drew the failed candidate again"
    );
}

/// Two candidates with room for one attempt each: a failed attempt on one, and the other held
/// by another request, so the failed one's retry (which excludes its candidate) must wait.
async fn a_failed_attempt_whose_retry_must_wait() -> (CoordinatorHandle, Permit, Permit) {
    let limits = Limits {
        per_candidate: 1,
        ..Limits::default()
    };
    let h = handle(&["a", "b"], limits, 3);
    let mut first = h.acquire(Request::any()).await.unwrap();
    let held = h
        .acquire(Request::any().excluding(first.candidate().clone()))
        .await
        .unwrap();
    failed(&mut first);
    (h, first, held)
}

/// A retry waiting for a slot holds the request's place; dropping it cancels the request,
/// as dropping `acquire` does.
#[actix::test]
async fn dropping_a_waiting_retry_cancels_its_request() {
    tokio::time::pause();
    let (h, first, held) = a_failed_attempt_whose_retry_must_wait().await;
    let waited = tokio::time::timeout(Duration::from_millis(50), first.retry()).await;
    assert!(waited.is_err(), "no slot was free: {waited:?}");
    let s = h.state().await.unwrap();
    assert_eq!(
        (s.waiting, s.open_requests, s.in_flight),
        (0, 1, 1),
        "{s:?}"
    );
    drop(held);
    h.stop().await;
}

struct Worker(tokio::sync::mpsc::UnboundedSender<Answer>);

impl Actor for Worker {
    type Context = Context<Self>;
}

impl Handler<Answer> for Worker {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        let _ = self.0.send(answer);
    }
}

/// A worker actor's permit: `retry` says it is not for it, and the next grant still reaches
/// the worker, as `done(Next::Retry)` would send it.
#[actix::test]
async fn a_worker_permit_retries_to_its_worker() {
    tokio::time::pause();
    let h = handle(&["a", "b"], Limits::default(), 5);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker(tx).start();
    h.addr()
        .send(Ready::new(Request::any(), worker.recipient()))
        .await
        .unwrap()
        .unwrap();
    let Some(Answer::Granted(mut first)) = rx.recv().await else {
        panic!("no grant");
    };
    let tried = first.candidate().clone();
    failed(&mut first);
    assert_eq!(
        first.retry().await.unwrap_err(),
        AcquireError::NotFromAcquire
    );
    let Some(Answer::Granted(second)) = rx.recv().await else {
        panic!("the worker got no second grant");
    };
    assert_ne!(*second.candidate(), tried);
    second.done(Next::Finish);
    h.stop().await;
}

/// A request cancelled, or carried over a restart, while its attempt ran: `retry` says so
/// (not that the coordinator is gone), and nothing is left behind.
#[actix::test]
async fn a_retry_after_a_cancel_or_a_restart_says_which() {
    tokio::time::pause();
    let h = handle(&["a", "b", "c"], Limits::default(), 1);
    let mut p = h.acquire(Request::any()).await.unwrap();
    h.cancel(p.request()).await.unwrap();
    failed(&mut p);
    assert_eq!(
        p.retry().await.unwrap_err(),
        AcquireError::Rejected(Rejection::Cancelled)
    );
    let s = h.state().await.unwrap();
    assert_eq!((s.in_flight, s.waiting, s.open_requests), (0, 0, 0));
    h.stop().await;

    retry_after_a_crash_says_the_coordinator_restarted(&["a", "b", "c"], false).await;
}

/// A retry dropped after the coordinator took it in, before its answer: the waiting request
/// is cancelled at once, the attempt it released is not released twice, and no grant goes to
/// nobody when a slot frees.
#[actix::test]
async fn a_retry_dropped_after_the_coordinator_took_it_cancels_its_request() {
    use std::future::Future;
    use std::task::{Context as TaskContext, Waker};
    tokio::time::pause();
    let (h, first, held) = a_failed_attempt_whose_retry_must_wait().await;
    {
        let mut retry = std::pin::pin!(first.retry());
        let mut cx = TaskContext::from_waker(Waker::noop());
        assert!(retry.as_mut().poll(&mut cx).is_pending());
        // A round trip behind the retry in the mailbox: the coordinator has handled it.
        assert_eq!(h.state().await.unwrap().waiting, 1);
    }
    tokio::task::yield_now().await;
    let s = h.state().await.unwrap();
    assert_eq!(
        (s.waiting, s.open_requests, s.in_flight),
        (0, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.shell.unknown_attempt, 0, "{:?}", s.shell);
    let decisions = s.counters.decisions;
    drop(held);
    tokio::task::yield_now().await;
    let s = h.state().await.unwrap();
    assert_eq!(s.counters.decisions, decisions, "a grant to nobody");
    assert_eq!((s.open_requests, s.in_flight), (0, 0));
    h.stop().await;
}

/// A permit whose attempt did not outlive a restart (its candidate was removed before it)
/// is told the coordinator restarted when it retries, not that its lease ran out.
#[actix::test]
async fn a_retry_of_an_attempt_lost_in_a_restart_says_the_coordinator_restarted() {
    tokio::time::pause();
    retry_after_a_crash_says_the_coordinator_restarted(&["a", "b"], true).await;
}

/// A supervised coordinator over `ids` grants an attempt, (if `remove`, loses the attempt's
/// candidate,) crashes and restarts; the attempt then fails and its retry is told the
/// coordinator restarted, with nothing left behind.
async fn retry_after_a_crash_says_the_coordinator_restarted(ids: &[&str], remove: bool) {
    let mut c = Coordinator::with_seed(Config::default(), Limits::default(), 1).unwrap();
    for id in ids {
        c = c.with_candidate(CandidateInfo::new(*id)).unwrap();
    }
    let h = c.start_supervised_handle();
    let mut p = h.acquire(Request::any()).await.unwrap();
    if remove {
        h.remove_candidate(p.candidate().clone()).await.unwrap();
    }
    h.addr().do_send(Crash);
    while h.state().await.unwrap().incarnation == 0 {
        tokio::task::yield_now().await;
    }
    failed(&mut p);
    assert_eq!(
        p.retry().await.unwrap_err(),
        AcquireError::Rejected(Rejection::CoordinatorRestarted)
    );
    let s = h.state().await.unwrap();
    assert_eq!((s.in_flight, s.waiting, s.open_requests), (0, 0, 0));
    h.stop().await;
}
