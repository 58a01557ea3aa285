//! The default coordinator against the oracle on a scenario, for the tests of the default's
//! behaviour in one situation.

use selection_coordinator::sim::{simulate, PolicySpec, Scenario};

/// Mean first byte (ms) of the default coordinator and of the oracle on the scenario in
/// `toml` (named `name` in errors) over `seeds`.
pub fn mean_ttfb_coordinator_and_oracle(toml: &str, name: &str, seeds: &[u64]) -> (f64, f64) {
    let sc = Scenario::parse(toml, name).unwrap();
    let policies = [
        PolicySpec::parse("coordinator").unwrap(),
        PolicySpec::parse("oracle").unwrap(),
    ];
    let r = simulate(&sc, &policies, seeds, 2, None).unwrap();
    let ttfb = |policy: &str| {
        r.policies
            .iter()
            .find(|p| p.policy == policy)
            .unwrap()
            .ttfb_ms
            .mean
    };
    (ttfb("coordinator"), ttfb("oracle"))
}
