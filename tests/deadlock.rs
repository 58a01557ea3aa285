//! The failure the coordinator exists to prevent, driven through the real actor.
//!
//! With random pairwise comparison among N equal waiters, a round stalls with probability
//! (1 - 0.5^(N-1))^N (0.98 at N = 10). Here N equal-score waiters contend for one global slot,
//! arriving in a random order each round: every one of them must be granted, in arrival order,
//! and nothing may be rejected or left waiting.

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use selection_coordinator::actor::{Answer, Coordinator, GetState, Ready};
use selection_coordinator::{CandidateInfo, Config, Limits, Next, Request};
use tokio::sync::mpsc;

const ROUNDS: usize = 1000;

/// Releases every grant at once and tells the driver who was served.
struct Worker {
    id: usize,
    served: mpsc::UnboundedSender<Result<usize, usize>>,
}

impl Actor for Worker {
    type Context = Context<Self>;
}

impl Handler<Answer> for Worker {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        let report = match answer {
            Answer::Granted(permit) => {
                permit.done(Next::Finish);
                Ok(self.id)
            }
            Answer::Rejected { .. } => Err(self.id),
        };
        let _ = self.served.send(report);
    }
}

/// Runs `ROUNDS` rounds of `n` waiters; returns the number of grants.
async fn contend(n: usize, rng: &mut SmallRng) -> usize {
    let limits = Limits {
        global: 1,
        ..Limits::default()
    };
    let mut coordinator = Coordinator::with_seed(Config::default(), limits, n as u64).unwrap();
    for c in ["a", "b", "c"] {
        coordinator = coordinator.with_candidate(CandidateInfo::new(c)).unwrap();
    }
    let coordinator = coordinator.start();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let workers: Vec<Recipient<Answer>> = (0..n)
        .map(|id| {
            Worker {
                id,
                served: tx.clone(),
            }
            .start()
            .recipient()
        })
        .collect();

    let mut order: Vec<usize> = (0..n).collect();
    let mut grants = 0;
    for round in 0..ROUNDS {
        order.shuffle(rng);
        for &w in &order {
            coordinator.do_send(Ready::new(Request::any(), workers[w].clone()));
        }
        let mut served = Vec::with_capacity(n);
        while served.len() < n {
            match rx.recv().await.expect("workers alive") {
                Ok(w) => served.push(w),
                Err(w) => panic!("N={n} round {round}: worker {w} was rejected"),
            }
        }
        // One grant each, oldest first: nobody waited on anybody but the slot.
        assert_eq!(served, order, "N={n} round {round}: grant order");
        grants += served.len();
    }
    let state = coordinator.send(GetState).await.unwrap();
    assert_eq!(state.counters.decisions as usize, n * ROUNDS);
    assert_eq!(state.counters.rejections.iter().sum::<u64>(), 0);
    assert_eq!(
        (state.waiting, state.in_flight, state.open_requests),
        (0, 0, 0)
    );
    assert_eq!(state.shell.errors(), 0);
    grants
}

#[actix::test]
async fn equal_waiters_never_deadlock() {
    let mut rng = SmallRng::seed_from_u64(2024);
    let mut total = 0;
    for n in 2..=32 {
        let grants = contend(n, &mut rng).await;
        assert_eq!(grants, n * ROUNDS, "N={n}");
        total += grants;
    }
    let expected: usize = (2..=32).map(|n| n * ROUNDS).sum();
    assert_eq!(total, expected);
    println!(
        "deadlock test: {total} requests over N=2..32 x {ROUNDS} rounds, all granted, none rejected"
    );
}
