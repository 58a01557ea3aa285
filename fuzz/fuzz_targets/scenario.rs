//! Scenario parsing never panics: any bytes give a scenario or an error naming the field. A
//! scenario that parses keeps the promises the simulator relies on: replica ids are unique and
//! every candidate's info is valid for the core. Text that declares `kind = "discovery"` is
//! read as a discovery scenario, as `selcoord simulate` does, and must not panic either.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use selection_coordinator::discovery::sim::DiscoveryScenario;
use selection_coordinator::sim::Scenario;

/// Replicas expanded beyond this are not built (memory, not correctness).
const MAX_EXPANDED: u64 = 100_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if DiscoveryScenario::is_discovery(text) {
        let _ = DiscoveryScenario::parse(text, "fuzz");
        return;
    }
    let Ok(scenario) = Scenario::parse(text, "fuzz") else {
        return;
    };
    let replicas: u64 = scenario.candidates.iter().map(|c| c.count as u64).sum();
    if replicas > MAX_EXPANDED {
        return;
    }
    let mut seen = HashSet::new();
    for (id, spec) in scenario.expanded() {
        let info = scenario.candidates[spec].info(&id);
        assert!(info.validate().is_ok(), "accepted scenario with invalid info {info:?}");
        assert!(seen.insert(id.clone()), "accepted scenario with duplicate id {id}");
    }
});
