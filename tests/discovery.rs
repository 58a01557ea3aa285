//! Discovery: the catalogue in virtual time, the actor with a fake fetcher under tokio's
//! paused clock, the `livepeer-discovery` comparison, and random operation sequences.

#[path = "support/props.rs"]
mod proptest_seed;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::discovery::sim::{self, DiscoveryScenario};
use selection_coordinator::discovery::{
    Action, CandidateChange, Catalogue, Demand, Discovery, DiscoveryConfig, FetchError, Fetcher,
    Pool, PoolLow, RefreshNow, RefreshReason, SetCandidates, SetPerfScores, Snapshot,
};
use selection_coordinator::{CandidateId, CandidateInfo};

fn ids(n: usize) -> Vec<CandidateId> {
    (0..n)
        .map(|i| CandidateId::new(format!("c{i:04}")))
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn drain(cat: &mut Catalogue) -> Vec<Action> {
    std::iter::from_fn(|| cat.poll_action()).collect()
}

fn fetches(actions: &[Action]) -> Vec<CandidateId> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Fetch(id) => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn added(actions: &[Action]) -> Vec<CandidateId> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(info) => Some(info.id.clone()),
            _ => None,
        })
        .collect()
}

fn catalogue(config: DiscoveryConfig, seed: u64, t0: Instant) -> Catalogue {
    Catalogue::new(config, t0, SmallRng::seed_from_u64(seed)).unwrap()
}

/// Answers every running fetch of `batch` at `at`, all successfully.
fn answer_all(cat: &mut Catalogue, batch: &[CandidateId], at: Instant) -> Vec<Action> {
    for id in batch {
        assert!(cat.fetched(id, Ok(CandidateInfo::new(id.clone())), at));
    }
    drain(cat)
}

#[path = "discovery/actor.rs"]
mod actor;
#[path = "discovery/catalogue.rs"]
mod catalogue;
#[path = "discovery/comparison.rs"]
mod comparison;
#[cfg(feature = "http")]
#[path = "discovery/ipv6.rs"]
mod ipv6;
#[path = "discovery/props.rs"]
mod props;
