//! The smallest useful embedding: a coordinator in an actix app, one worker actor, and plain
//! async code borrowing slots through the handle.
//!
//! Run with `cargo run --example embed`.

use actix::prelude::*;
use selection_coordinator::actor::{Answer, Coordinator, CoordinatorHandle, Ready};
use selection_coordinator::{CandidateInfo, Config, Limits, Next, Outcome, Request};

/// A worker actor: runs one attempt per grant.
struct Worker;

impl Actor for Worker {
    type Context = Context<Self>;
}

impl Handler<Answer> for Worker {
    type Result = ();

    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        match answer {
            Answer::Granted(mut permit) => {
                println!("worker: attempt on {}", permit.candidate());
                // ... do the work, then say what happened and free the slot ...
                permit.report(Outcome::success_with(8.0, 20.0, 4096, 35.0));
                permit.done(Next::Finish);
            }
            Answer::Rejected { reason, .. } => println!("worker: rejected ({reason})"),
        }
    }
}

#[actix::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limits = Limits {
        global: 8,
        ..Limits::default()
    };
    let coordinator = Coordinator::new(Config::lassie(), limits)?
        .with_candidate(CandidateInfo::new("provider-1").with_tag("verified"))?
        .with_candidate(CandidateInfo::new("provider-2"))?
        .start();

    // Actors ask with `Ready` and get their answer as a message.
    let worker = Worker.start();
    coordinator
        .send(Ready::new(Request::any(), worker.recipient()))
        .await??;

    // Code without actors awaits a permit; dropping it frees the slot.
    let handle = CoordinatorHandle::new(coordinator);
    let mut permit = handle.acquire(Request::any()).await?;
    println!("task: attempt on {}", permit.candidate());
    permit.report(Outcome::success());
    drop(permit);

    let state = handle.state().await?;
    println!(
        "decisions {}, in flight {}",
        state.counters.decisions, state.in_flight
    );
    Ok(())
}
