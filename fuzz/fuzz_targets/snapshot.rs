//! Snapshot parsing never panics, and a snapshot that parses loads into a core.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use selection_coordinator::snapshot::Snapshot;
use selection_coordinator::{Config, Core};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(snap) = Snapshot::from_json(text) {
            let now = std::time::Instant::now();
            let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
            let mut core = Core::new(Config::default(), now).unwrap();
            let _ = core.restore(&snap, now, &mut rng);
            core.check_invariants().unwrap();
        }
    }
});
