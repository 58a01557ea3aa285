//! A payload from a fleet peer never panics: any bytes decode to a digest or a typed error,
//! and a digest that decodes applies to a sharing core (or is refused with a typed error),
//! which then keeps its invariants, draws probabilities that sum to 1 and still grants.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use selection_coordinator::fleet::wire;
use selection_coordinator::{CandidateId, CandidateInfo, Config, Core, Event, Request};

const IDS: [&str; 3] = ["a", "b", "c"];

fuzz_target!(|data: &[u8]| {
    let Ok(digest) = wire::decode(&wire::subject("fleet", "peer"), "fleet", data) else {
        return;
    };
    let t0 = Instant::now();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
    let mut core = Core::new(Config::default(), t0).unwrap();
    for id in IDS {
        core.add_candidate(CandidateInfo::new(id), t0, &mut rng)
            .unwrap();
    }
    core.set_share_identity("local", 0);
    let t = t0 + Duration::from_millis(10);
    let _ = core.apply_digest(t, &digest);
    core.tick(t, &mut rng);
    core.check_invariants().unwrap();
    let total: f64 = IDS
        .iter()
        .map(|id| core.tree_probability(&CandidateId::new(*id)))
        .sum();
    assert!((total - 1.0).abs() < 1e-9, "probabilities sum to {total}");
    core.ready(Request::any(), t, &mut rng).unwrap();
    assert!(
        matches!(core.poll_event(), Some(Event::Granted(_))),
        "no grant after a digest"
    );
});
