//! Two coordinators sharing what they learn through a NATS server (feature `fleet`): `east`
//! sees a candidate start failing, and `west`, which never sends it anything, stops drawing it
//! from `east`'s digests alone.
//!
//! Run a server and the example:
//!
//! ```sh
//! nats-server -a 127.0.0.1 -p 4222 &
//! cargo run --example fleet_share --features fleet -- nats://127.0.0.1:4222
//! ```
//!
//! Without a reachable server both coordinators run alone (no error), and `west` never learns.

use std::time::Duration;

use selection_coordinator::actor::{Coordinator, CoordinatorHandle};
use selection_coordinator::fleet::{Fleet, FleetConfig};
use selection_coordinator::{CandidateInfo, Config, FailureClass, Limits, Next, Outcome, Request};

const CANDIDATES: [&str; 4] = ["c0", "c1", "c2", "c3"];

/// A coordinator over [`CANDIDATES`] and its share of the fleet `demo`.
async fn member(url: &str, name: &str, seed: u64) -> Result<(CoordinatorHandle, Fleet), String> {
    let mut coordinator = Coordinator::with_seed(Config::default(), Limits::default(), seed)
        .map_err(|e| e.to_string())?;
    for id in CANDIDATES {
        coordinator = coordinator
            .with_candidate(CandidateInfo::new(id))
            .map_err(|e| e.to_string())?;
    }
    let handle = coordinator.start_handle();
    // A digest every second, and at once (0.6 s after the previous one at the soonest) when
    // this coordinator's own outcomes change sharply: `FleetConfig`'s defaults.
    let share = FleetConfig::new(url, "demo", name);
    let fleet = Fleet::start(share, handle.addr().clone())
        .await
        .map_err(|e| e.to_string())?;
    Ok((handle, fleet))
}

/// One attempt on `candidate` with `outcome`.
async fn attempt(h: &CoordinatorHandle, candidate: &str, outcome: Outcome) -> Result<(), String> {
    let mut permit = h
        .acquire(Request::only([candidate]))
        .await
        .map_err(|e| e.to_string())?;
    permit.report(outcome);
    permit.done(Next::Finish);
    Ok(())
}

/// The probability that `h` draws `candidate` for a request open to every candidate.
async fn probability(h: &CoordinatorHandle, candidate: &str) -> Result<f64, String> {
    let record = h.explain(Request::any()).await.map_err(|e| e.to_string())?;
    Ok(record
        .candidates
        .iter()
        .find(|c| c.id.as_str() == candidate)
        .map_or(0.0, |c| c.probability))
}

#[actix::main]
async fn main() -> Result<(), String> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let (east, east_fleet) = member(&url, "east", 1).await?;
    let (west, west_fleet) = member(&url, "west", 2).await?;
    println!(
        "connected: east {}, west {}",
        east_fleet.connected(),
        west_fleet.connected()
    );
    if !east_fleet.connected() || !west_fleet.connected() {
        eprintln!(
            "no NATS server answered at {url}: each coordinator runs alone (start one with \
             `nats-server -a 127.0.0.1 -p 4222`, or pass its URL)"
        );
    }

    // Both learn that every candidate answers in about 20 ms.
    let ok = Outcome::success_with(2.0, 20.0, 4096, 25.0);
    for _ in 0..20 {
        for id in CANDIDATES {
            attempt(&east, id, ok).await?;
            attempt(&west, id, ok).await?;
        }
    }
    // Past a new sender's blackout (1 s by default).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    println!(
        "west draws c2 with probability {:.3}",
        probability(&west, "c2").await?
    );

    // c2 starts timing out at east: east publishes an urgent digest at once.
    for _ in 0..5 {
        attempt(&east, "c2", Outcome::failure(FailureClass::Timeout)).await?;
    }
    for step in 1..=6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        println!(
            "{:>4} ms after: west draws c2 with probability {:.3}",
            step * 250,
            probability(&west, "c2").await?
        );
    }
    println!("east's share: {}", east_fleet.counts());
    println!("west's share: {}", west_fleet.counts());
    Ok(())
}
