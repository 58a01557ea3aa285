//! The default coordinator against one other config on a scenario, for the tests of opt-in
//! settings.

use selection_coordinator::sim::{simulate, PolicySpec, Scenario};
use selection_coordinator::Config;

/// Mean first byte (ms) of the default coordinator and of `other` on `scenario` over `seeds`.
pub fn mean_ttfb_default_and(scenario: &Scenario, other: Config, seeds: &[u64]) -> (f64, f64) {
    let policies = [
        PolicySpec::Coordinator {
            label: "default".into(),
            config: None,
        },
        PolicySpec::Coordinator {
            label: "other".into(),
            config: Some(Box::new(other)),
        },
    ];
    let r = simulate(scenario, &policies, seeds, 2, None).unwrap();
    let ttfb = |label: &str| {
        r.policies
            .iter()
            .find(|p| p.policy == label)
            .unwrap()
            .ttfb_ms
            .mean
    };
    (ttfb("default"), ttfb("other"))
}
