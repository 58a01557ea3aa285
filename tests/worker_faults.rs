//! Workers that die mid-attempt without `Done` must not leak slots: their permits are dropped
//! with them, the slots are freed and reused by the workers still alive.

use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{Answer, Coordinator, GetState, Permit, Ready, State};
use selection_coordinator::{CandidateInfo, Config, Limits, Next, Outcome, Request};
use tokio::sync::mpsc;

const HOLDERS: usize = 4;
const HEALTHY: usize = 4;
const ASKS_PER_HEALTHY: usize = 3;

/// Takes grants and keeps them: it never reports and never says `Done`.
struct Holder {
    permits: Vec<Permit>,
    granted: mpsc::UnboundedSender<()>,
}

impl Actor for Holder {
    type Context = Context<Self>;
}

impl Handler<Answer> for Holder {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        if let Answer::Granted(p) = answer {
            self.permits.push(p);
            let _ = self.granted.send(());
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
enum Fault {
    Stop,
    Panic,
}

impl Handler<Fault> for Holder {
    type Result = ();
    fn handle(&mut self, fault: Fault, ctx: &mut Context<Self>) {
        match fault {
            Fault::Stop => ctx.stop(),
            Fault::Panic => panic!("worker crashed mid-attempt (expected by this test)"),
        }
    }
}

/// Runs each grant to completion at once.
struct Healthy {
    served: mpsc::UnboundedSender<()>,
}

impl Actor for Healthy {
    type Context = Context<Self>;
}

impl Handler<Answer> for Healthy {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        if let Answer::Granted(mut p) = answer {
            p.report(Outcome::success());
            p.done(Next::Finish);
            let _ = self.served.send(());
        }
    }
}

fn coordinator() -> Addr<Coordinator> {
    let limits = Limits {
        global: HOLDERS as u32,
        ..Limits::default()
    };
    Coordinator::with_seed(Config::default(), limits, 17)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .with_candidate(CandidateInfo::new("b"))
        .unwrap()
        .start()
}

async fn recv_n(rx: &mut mpsc::UnboundedReceiver<()>, n: usize, what: &str) {
    for i in 0..n {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: only {i} of {n} within 5 s"))
            .expect("sender alive");
    }
}

/// Fills every slot with holders and queues healthy workers behind them; returns the state
/// while the holders hold their slots and the healthy workers' channel.
async fn fill(
    c: &Addr<Coordinator>,
    holders: &[Addr<Holder>],
    granted: &mut mpsc::UnboundedReceiver<()>,
) -> (State, mpsc::UnboundedReceiver<()>) {
    for h in holders {
        c.send(Ready::new(Request::any(), h.clone().recipient()))
            .await
            .unwrap()
            .unwrap();
    }
    recv_n(granted, holders.len(), "holders granted").await;
    let (tx, served) = mpsc::unbounded_channel();
    for _ in 0..HEALTHY {
        let w = Healthy { served: tx.clone() }.start();
        for _ in 0..ASKS_PER_HEALTHY {
            c.send(Ready::new(Request::any(), w.clone().recipient()))
                .await
                .unwrap()
                .unwrap();
        }
    }
    let before = c.send(GetState).await.unwrap();
    assert_eq!(before.in_flight as usize, HOLDERS);
    assert_eq!(before.waiting, HEALTHY * ASKS_PER_HEALTHY);
    (before, served)
}

async fn check_after(c: &Addr<Coordinator>, served: &mut mpsc::UnboundedReceiver<()>) -> State {
    recv_n(served, HEALTHY * ASKS_PER_HEALTHY, "healthy workers served").await;
    // A worker on another thread drops its permits concurrently with the healthy workers'
    // progress: wait (bounded) until every dead worker's release has arrived.
    let mut after = c.send(GetState).await.unwrap();
    for _ in 0..500 {
        if after.shell.permits_dropped as usize == HOLDERS && after.in_flight == 0 {
            break;
        }
        // Virtual time in the one-thread test; real time in the two with workers on other
        // arbiters, whose progress a paused clock here could not see.
        tokio::time::sleep(Duration::from_millis(10)).await;
        after = c.send(GetState).await.unwrap();
    }
    assert_eq!(after.in_flight, 0);
    assert_eq!((after.waiting, after.open_requests), (0, 0));
    assert_eq!(after.shell.permits_dropped as usize, HOLDERS);
    assert_eq!(
        after.counters.decisions as usize,
        HOLDERS + HEALTHY * ASKS_PER_HEALTHY
    );
    // The dead workers' attempts left no statistics; the healthy ones' did.
    let attempts: u64 = after.candidates.iter().map(|c| c.stats.attempts).sum();
    assert_eq!(attempts as usize, HEALTHY * ASKS_PER_HEALTHY);
    after
}

#[actix::test]
async fn worker_stopped_while_holding_a_permit() {
    tokio::time::pause();
    let c = coordinator();
    let (tx, mut granted) = mpsc::unbounded_channel();
    let holders: Vec<_> = (0..HOLDERS)
        .map(|_| {
            Holder {
                permits: Vec::new(),
                granted: tx.clone(),
            }
            .start()
        })
        .collect();
    let (before, mut served) = fill(&c, &holders, &mut granted).await;
    for h in &holders {
        h.do_send(Fault::Stop);
    }
    let after = check_after(&c, &mut served).await;
    println!(
        "worker faults (ctx.stop): in flight {} -> {}, waiting {} -> {}, slots reused by {} attempts",
        before.in_flight,
        after.in_flight,
        before.waiting,
        after.waiting,
        HEALTHY * ASKS_PER_HEALTHY
    );
}

/// Real time: the workers run on other arbiter threads (see `check_after`).
#[actix::test]
async fn worker_arbiter_stopped_while_holding_a_permit() {
    let c = coordinator();
    let (tx, mut granted) = mpsc::unbounded_channel();
    let arbiter = Arbiter::new();
    let holders: Vec<_> = (0..HOLDERS)
        .map(|_| {
            let granted = tx.clone();
            Holder::start_in_arbiter(&arbiter.handle(), move |_| Holder {
                permits: Vec::new(),
                granted,
            })
        })
        .collect();
    let (before, mut served) = fill(&c, &holders, &mut granted).await;
    arbiter.stop();
    let after = check_after(&c, &mut served).await;
    arbiter.join().unwrap();
    println!(
        "worker faults (arbiter stopped): in flight {} -> {}, waiting {} -> {}",
        before.in_flight, after.in_flight, before.waiting, after.waiting
    );
}

/// A panic in a handler kills the worker's task (tokio contains it), dropping its permits.
/// Real time: the workers run on other arbiter threads (see `check_after`).
#[actix::test]
async fn worker_panicking_on_its_own_arbiter() {
    let c = coordinator();
    let (tx, mut granted) = mpsc::unbounded_channel();
    let arbiters: Vec<Arbiter> = (0..HOLDERS).map(|_| Arbiter::new()).collect();
    let holders: Vec<_> = arbiters
        .iter()
        .map(|arbiter| {
            let granted = tx.clone();
            Holder::start_in_arbiter(&arbiter.handle(), move |_| Holder {
                permits: Vec::new(),
                granted,
            })
        })
        .collect();
    let (before, mut served) = fill(&c, &holders, &mut granted).await;
    for h in &holders {
        h.do_send(Fault::Panic);
    }
    let after = check_after(&c, &mut served).await;
    // The runtime contains the panic to the worker's task; its arbiter lives on.
    for arbiter in arbiters {
        arbiter.stop();
        arbiter.join().unwrap();
    }
    println!(
        "worker faults (panic): in flight {} -> {}, waiting {} -> {}",
        before.in_flight, after.in_flight, before.waiting, after.waiting
    );
}

/// Keeps its request open (`Next::Keep`) after each attempt, then stops: nobody is left to
/// ask again or finish.
struct Keeper {
    kept: mpsc::UnboundedSender<()>,
}

impl Actor for Keeper {
    type Context = Context<Self>;
}

impl Handler<Answer> for Keeper {
    type Result = ();
    fn handle(&mut self, answer: Answer, ctx: &mut Context<Self>) {
        if let Answer::Granted(mut p) = answer {
            p.report(Outcome::success());
            p.done(Next::Keep);
            let _ = self.kept.send(());
            ctx.stop();
        }
    }
}

/// A request kept open by a worker that is gone is finished at the next housekeeping pass,
/// as a waiting one is cancelled: it does not stay open for good.
#[actix::test]
async fn a_request_kept_open_by_a_worker_that_is_gone_is_finished() {
    tokio::time::pause();
    let c = coordinator();
    let (tx, mut kept) = mpsc::unbounded_channel();
    for _ in 0..3 {
        let k = Keeper { kept: tx.clone() }.start();
        c.send(Ready::new(Request::any(), k.recipient()))
            .await
            .unwrap()
            .unwrap();
    }
    recv_n(&mut kept, 3, "keepers granted").await;
    let mut s = c.send(GetState).await.unwrap();
    for _ in 0..100 {
        if s.open_requests == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        s = c.send(GetState).await.unwrap();
    }
    assert_eq!((s.open_requests, s.in_flight, s.waiting), (0, 0, 0));
    assert_eq!(s.shell.abandoned, 3);
}

/// Hands its grants over to the test (which runs them on its behalf) and stops when told to.
struct Waiter(mpsc::UnboundedSender<Permit>);

impl Actor for Waiter {
    type Context = Context<Self>;
}

impl Handler<Answer> for Waiter {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        if let Answer::Granted(p) = answer {
            let _ = self.0.send(p);
        }
    }
}

impl Handler<Fault> for Waiter {
    type Result = ();
    fn handle(&mut self, _: Fault, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// A worker actor that stops while its request waits for a slot gives its place up at the
/// next housekeeping pass, even while an attempt of that request still runs: the waiting ask
/// is cancelled, and a slot that frees goes to nobody gone.
#[actix::test]
async fn a_request_waiting_for_a_worker_that_is_gone_is_cancelled() {
    tokio::time::pause();
    let c = coordinator();
    let (tx, mut granted) = mpsc::unbounded_channel();
    let holder = Holder {
        permits: Vec::new(),
        granted: tx,
    }
    .start();
    for _ in 0..HOLDERS - 1 {
        c.send(Ready::new(Request::any(), holder.clone().recipient()))
            .await
            .unwrap()
            .unwrap();
    }
    recv_n(&mut granted, HOLDERS - 1, "all slots but one held").await;
    let (tx, mut handed) = mpsc::unbounded_channel();
    let waiter = Waiter(tx).start();
    let mut two = Request::any();
    two.parallelism = 2;
    c.send(Ready::new(two, waiter.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    // One attempt runs (its permit outlives the worker), the other waits.
    let running = tokio::time::timeout(Duration::from_secs(5), handed.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.send(GetState).await.unwrap().waiting, 1);
    waiter.send(Fault::Stop).await.unwrap();
    let refresh = Config::default().refresh_ms;
    tokio::time::sleep(Duration::from_millis(refresh * 3)).await;
    let s = c.send(GetState).await.unwrap();
    assert_eq!((s.waiting, s.shell.abandoned), (0, 1));
    drop(running);
    tokio::time::sleep(Duration::from_millis(refresh)).await;
    let s = c.send(GetState).await.unwrap();
    assert_eq!((s.in_flight as usize, s.shell.taken_back), (HOLDERS - 1, 0));
}
