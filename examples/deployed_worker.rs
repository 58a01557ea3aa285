//! A caller written so that the simulator's figures hold for it (docs/deploying.md): each
//! request carries the caller's deadline, the worker says when the first byte came, a timeout
//! of its own is reported as one (not just dropped), and a failed attempt is retried within
//! its request with `Permit::retry`, so a candidate that just failed it is not drawn again.
//!
//! The backends are simulated with sleeps: `slow` hangs on most attempts.
//!
//! Run with `cargo run --example deployed_worker`.

use std::time::{Duration, Instant};

use selection_coordinator::actor::{AcquireError, Coordinator, CoordinatorHandle, Permit};
use selection_coordinator::{CandidateInfo, Config, FailureClass, Limits, Outcome, Request};

/// The caller's own budget for one unit of work, retries included.
const TIMEOUT: Duration = Duration::from_millis(500);
/// Attempts per unit of work, the first included (a scenario's `retries + 1`).
const ATTEMPTS: u32 = 3;

/// A stand-in for a backend call: the time to the first byte, then the transfer.
async fn call(candidate: &str, n: u64) -> Result<(), ()> {
    let first_byte = match candidate {
        "slow" if !n.is_multiple_of(4) => Duration::from_secs(5), // hangs
        "slow" => Duration::from_millis(40),
        _ => Duration::from_millis(15),
    };
    tokio::time::sleep(first_byte).await;
    Ok(())
}

/// One attempt on the permit's candidate, bounded by the coordinator's first-byte advice and
/// by what is left of the caller's budget; every ending is reported.
async fn attempt(permit: &mut Permit, n: u64, until: Instant) -> bool {
    let left = until.saturating_duration_since(Instant::now());
    let limit = permit.deadline().map_or(left, |advice| advice.min(left));
    let started = Instant::now();
    match tokio::time::timeout(limit, call(permit.candidate().as_str(), n)).await {
        Ok(Ok(())) => {
            permit.first_byte();
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            permit.report(Outcome::success_with(ms / 2.0, ms, 4096, ms));
            true
        }
        Ok(Err(())) => {
            permit.report(Outcome::failure(FailureClass::Transport));
            false
        }
        // Our own timeout: reported, so the candidate is charged for it. A permit dropped
        // without a report past its advised deadline counts as a timeout too, but one dropped
        // sooner (a caller's timeout shorter than the advice) leaves no trace.
        Err(_) => {
            permit.report(Outcome::failure(FailureClass::Timeout));
            false
        }
    }
}

/// One unit of work: the first attempt, then retries within the same request.
async fn unit(handle: &CoordinatorHandle, n: u64) -> Result<String, String> {
    let until = Instant::now() + TIMEOUT;
    let request = Request::any().with_deadline(until).with_attempts(ATTEMPTS);
    let mut permit = handle.acquire(request).await.map_err(|e| e.to_string())?;
    let mut tries = 1;
    loop {
        if attempt(&mut permit, n, until).await {
            return Ok(permit.candidate().to_string());
        }
        if tries == ATTEMPTS || Instant::now() >= until {
            return Err(format!("gave up after {tries} attempt(s)"));
        }
        permit = match permit.retry().await {
            Ok(next) => next,
            Err(AcquireError::Rejected(reason)) => return Err(format!("no retry: {reason}")),
            Err(e) => return Err(e.to_string()),
        };
        tries += 1;
    }
}

#[actix::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limits = Limits {
        global: 8,
        ..Limits::default()
    };
    let handle = Coordinator::new(Config::default(), limits)?
        .with_candidate(CandidateInfo::new("fast-1"))?
        .with_candidate(CandidateInfo::new("fast-2"))?
        .with_candidate(CandidateInfo::new("slow"))?
        .start_handle();
    let (mut ok, mut failed, mut on_slow) = (0, 0, 0);
    for n in 0..200u64 {
        match unit(&handle, n).await {
            Ok(candidate) => {
                ok += 1;
                on_slow += usize::from(candidate == "slow");
            }
            Err(e) => {
                failed += 1;
                eprintln!("unit {n}: {e}");
            }
        }
    }
    let state = handle.state().await?;
    println!(
        "{ok} units done, {failed} failed, {on_slow} served by `slow`; {} attempts granted",
        state.counters.decisions
    );
    handle.stop().await;
    Ok(())
}
