//! The scoring model against its anchors (Livepeer's published case, lassie's score), its
//! filters and fallbacks, failure classes, decay, ejection, draw frequencies, properties, and
//! config errors. One test binary; each concern is a module under `tests/scoring/`.

#[path = "support/props.rs"]
mod proptest_seed;

#[path = "scoring/anchors.rs"]
mod anchors;
#[path = "scoring/config_files.rs"]
mod config_files;
#[path = "scoring/frequencies.rs"]
mod frequencies;
#[path = "scoring/properties.rs"]
mod properties;
#[path = "scoring/statistics.rs"]
mod statistics;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use selection_coordinator::decision::DecisionRecord;
use selection_coordinator::score::{Overall, Stats, Weights, MAX_ARMS, MAX_SHADOWS};
use selection_coordinator::snapshot::{
    CandidateSnapshot, Snapshot, StatsSnapshot, SNAPSHOT_VERSION,
};
use selection_coordinator::{
    CandidateInfo, Config, Core, Error, Event, FailureClass, Mode, Next, Outcome, Rejection,
    Request,
};

fn new_core(config: Config) -> (Core, SmallRng, Instant) {
    let now = Instant::now();
    let core = Core::new(config, now).expect("valid config");
    (core, SmallRng::seed_from_u64(11), now)
}

fn add_all(core: &mut Core, rng: &mut SmallRng, now: Instant, infos: Vec<CandidateInfo>) {
    for info in infos {
        core.add_candidate(info, now, rng).unwrap();
    }
}

fn probs(core: &mut Core, request: &Request, now: Instant) -> HashMap<String, f64> {
    core.probabilities(request, now)
        .unwrap()
        .into_iter()
        .map(|(id, p)| (id.to_string(), p))
        .collect()
}

fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} (tolerance {tol})"
    );
}

/// Runs one attempt on `id` and reports `outcome`.
fn attempt_on(
    core: &mut Core,
    rng: &mut SmallRng,
    now: Instant,
    id: &str,
    outcome: Outcome,
) -> String {
    core.ready(Request::only([id]), now, rng).unwrap();
    let Some(Event::Granted(g)) = core.poll_event() else {
        panic!("expected a grant on {id}");
    };
    core.outcome(g.attempt, outcome, now).unwrap();
    core.done(g.attempt, Next::Finish, now, rng).unwrap();
    g.candidate.to_string()
}
