//! Several worker actors share four candidates through one coordinator.
//!
//! Each worker loops Ready -> work (a short sleep, a random outcome drawn from the candidate's
//! hidden behaviour) -> report -> done. One candidate is fast, one steady, one slow, and one
//! overloaded: it fails half its attempts fast, the "black hole" that looks least loaded. The
//! summary shows where the grants went.
//!
//! Run with `cargo run --example workers`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::actor::{Answer, Coordinator, GetState, Ready};
use selection_coordinator::{CandidateInfo, Config, FailureClass, Limits, Next, Outcome, Request};
use tokio::sync::mpsc;

const WORKERS: usize = 8;
const ATTEMPTS_PER_WORKER: usize = 150;

/// A candidate's hidden behaviour: how long an attempt takes and how often it fails.
#[derive(Clone, Copy)]
struct Truth {
    ms: u64,
    overload_rate: f64,
}

fn truth(candidate: &str) -> Truth {
    match candidate {
        "fast" => Truth {
            ms: 2,
            overload_rate: 0.01,
        },
        "steady" => Truth {
            ms: 4,
            overload_rate: 0.02,
        },
        "slow" => Truth {
            ms: 12,
            overload_rate: 0.02,
        },
        _ => Truth {
            ms: 1,
            overload_rate: 0.5,
        },
    }
}

struct Worker {
    coordinator: Addr<Coordinator>,
    left: usize,
    rng: SmallRng,
    finished: mpsc::UnboundedSender<()>,
}

impl Worker {
    fn ask(&self, ctx: &mut Context<Self>) {
        self.coordinator
            .do_send(Ready::new(Request::any(), ctx.address().recipient()));
    }
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.ask(ctx);
    }
}

impl Handler<Answer> for Worker {
    type Result = ();

    fn handle(&mut self, answer: Answer, ctx: &mut Context<Self>) {
        let mut permit = match answer {
            Answer::Granted(permit) => permit,
            Answer::Rejected { reason, .. } => {
                eprintln!("rejected: {reason}");
                return self.ask(ctx);
            }
        };
        let t = truth(permit.candidate().as_str());
        let ms = t.ms + self.rng.random_range(0..=t.ms / 2);
        let outcome = if self.rng.random_bool(t.overload_rate) {
            Outcome::failure(FailureClass::Overload)
        } else {
            let connect = ms as f64 * 0.2;
            Outcome::success_with(connect, ms as f64 * 0.5, 64 * 1024, ms as f64)
        };
        // The permit travels with the simulated work; the slot is busy until `done`.
        ctx.run_later(Duration::from_millis(ms), move |act, ctx| {
            permit.report(outcome);
            permit.done(Next::Finish);
            act.left -= 1;
            if act.left > 0 {
                act.ask(ctx);
            } else {
                let _ = act.finished.send(());
                ctx.stop();
            }
        });
    }
}

#[actix::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limits = Limits {
        global: 6,
        per_candidate: 3,
        ..Limits::default()
    };
    let mut coordinator = Coordinator::with_seed(Config::default(), limits, 42)?;
    for id in ["fast", "steady", "slow", "overloaded"] {
        coordinator = coordinator.with_candidate(CandidateInfo::new(id))?;
    }
    let coordinator = coordinator.start();

    let started = Instant::now();
    let (tx, mut finished) = mpsc::unbounded_channel();
    for w in 0..WORKERS {
        let worker = Worker {
            coordinator: coordinator.clone(),
            left: ATTEMPTS_PER_WORKER,
            rng: SmallRng::seed_from_u64(w as u64),
            finished: tx.clone(),
        };
        worker.start();
    }
    for _ in 0..WORKERS {
        finished.recv().await;
    }
    let elapsed = started.elapsed();

    let state = coordinator.send(GetState).await?;
    let total: u64 = state.candidates.iter().map(|c| c.stats.attempts).sum();
    println!(
        "{WORKERS} workers x {ATTEMPTS_PER_WORKER} attempts in {:.2} s ({} decisions)",
        elapsed.as_secs_f64(),
        state.counters.decisions
    );
    println!(
        "{:<11} {:>7} {:>7} {:>9} {:>9}",
        "candidate", "grants", "share", "success", "ejections"
    );
    let mut by_candidate = BTreeMap::new();
    for c in &state.candidates {
        by_candidate.insert(c.info.id.to_string(), c);
    }
    for id in ["fast", "steady", "slow", "overloaded"] {
        let c = by_candidate[id];
        let grants = c.stats.attempts;
        println!(
            "{:<11} {:>7} {:>6.1}% {:>8.1}% {:>9}",
            id,
            grants,
            100.0 * grants as f64 / total.max(1) as f64,
            100.0 * c.stats.successes as f64 / grants.max(1) as f64,
            c.stats.ejections,
        );
    }
    println!(
        "in flight {}, waiting {}, ignored messages {}",
        state.in_flight,
        state.waiting,
        state.shell.errors()
    );
    System::current().stop();
    Ok(())
}
