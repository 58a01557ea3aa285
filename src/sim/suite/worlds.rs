//! A family's figures split by the kind of world each scenario is: whether its servers queue
//! (their latency includes a wait behind the work they hold) or answer in a time of their own,
//! and whether requests retry a failed attempt. The family's median mixes these worlds, which
//! rank policies differently: without retries a failure is a failed request, where a retry loop
//! pays time per success; a queueing fleet rewards following its load. A deployment reads the
//! world it lives in (`selcoord simulate --suite ... --by-world`, `docs/scenarios.md`).

use serde::Serialize;

use super::paired::PairedSummary;
use super::report::{paired_against_first, summarize, Instance, PolicySummary};

/// The kind of world a generated scenario is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct World {
    /// At least one candidate is a queue in front of servers (`service_ms` in the scenario):
    /// its latency includes the wait behind the attempts it holds.
    pub queueing: bool,
    /// Requests retry a failed attempt on another candidate (`retries` above 0).
    pub retries: bool,
}

impl World {
    /// Every world, in the order reports list them.
    pub const ALL: [World; 4] = [
        World::new(false, true),
        World::new(false, false),
        World::new(true, true),
        World::new(true, false),
    ];

    /// The world of a fleet that queues or not, whose requests retry or not.
    pub const fn new(queueing: bool, retries: bool) -> Self {
        World { queueing, retries }
    }

    /// Its name in tables and JSON: `own latency` or `queueing`, then `retries` or
    /// `no retries`.
    pub fn label(self) -> &'static str {
        match (self.queueing, self.retries) {
            (false, true) => "own latency, retries",
            (false, false) => "own latency, no retries",
            (true, true) => "queueing, retries",
            (true, false) => "queueing, no retries",
        }
    }
}

/// One world's part of a family: each policy against the oracle over its scenarios alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorldReport {
    /// The world's name ([`World::label`]).
    pub world: &'static str,
    /// Whether its fleets queue.
    pub queueing: bool,
    /// Whether its requests retry.
    pub retries: bool,
    /// The family's scenarios of this world.
    pub scenarios: usize,
    /// One entry per policy but the oracle, in the order asked, as the family's own.
    pub policies: Vec<PolicySummary>,
    /// Each policy after the first (but the oracle) against the first over this world's
    /// scenarios, as the family's own; empty with fewer than two.
    pub paired: Vec<PairedSummary>,
}

/// The family's scenarios (`mine`) split by world, each summarized for `policies`; worlds with
/// no scenario are left out.
pub(super) fn split(policies: &[&str], mine: &[&Instance]) -> Vec<WorldReport> {
    World::ALL
        .iter()
        .filter_map(|&w| {
            let of: Vec<&Instance> = mine.iter().copied().filter(|i| i.world == w).collect();
            (!of.is_empty()).then(|| WorldReport {
                world: w.label(),
                queueing: w.queueing,
                retries: w.retries,
                scenarios: of.len(),
                policies: policies.iter().map(|p| summarize(p, &of)).collect(),
                paired: paired_against_first(policies, &of),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::suite::{Detail, InstanceFigures, SuiteReport};

    fn figures(policy: &str, ttfb_ms: f64, error_rate: f64) -> InstanceFigures {
        InstanceFigures {
            policy: policy.into(),
            detection_s: None,
            recovery_s: None,
            detection_fair_s: None,
            recovery_fair_s: None,
            error_rate,
            ttfb_mean_ms: ttfb_ms,
            virtual_s: 60.0,
        }
    }

    /// A scenario of `world` where the policy `p` is `ratio` times the oracle's first byte, and
    /// `q` as fast as `p` where the fleet has its own latency, twice as slow where it queues.
    fn instance(world: World, ratio: f64) -> Instance {
        let q = if world.queueing { 2.0 } else { 1.0 };
        Instance {
            family: "f".into(),
            scenario: "f-0".into(),
            description: String::new(),
            seed: 1,
            degrade_at_s: None,
            heal_at_s: None,
            world,
            policies: vec![
                figures("p", 10.0 * ratio, 0.0),
                figures("q", 10.0 * ratio * q, 0.0),
                figures("oracle", 10.0, 0.0),
            ],
        }
    }

    #[test]
    fn each_world_is_summarized_over_its_own_scenarios() {
        let queueing = World::new(true, true);
        let plain = World::new(false, true);
        let bare = World::new(false, false);
        let insts = [
            instance(queueing, 2.0),
            instance(plain, 1.0),
            instance(queueing, 3.0),
            instance(bare, 0.5),
        ];
        let r = SuiteReport::new(1, &insts);
        let worlds = &r.families[0].worlds;
        // In the fixed order, the world without scenarios left out.
        let labels: Vec<&str> = worlds.iter().map(|w| w.world).collect();
        assert_eq!(
            labels,
            [
                "own latency, retries",
                "own latency, no retries",
                "queueing, retries"
            ]
        );
        let counts: Vec<usize> = worlds.iter().map(|w| w.scenarios).collect();
        assert_eq!(counts, [1, 1, 2]);
        let ratio = |w: &WorldReport| w.policies[0].ttfb_ratio;
        assert_eq!(ratio(&worlds[0]).p50, Some(1.0));
        assert_eq!(ratio(&worlds[1]).p50, Some(0.5));
        // Two scenarios: nearest rank puts the median on the larger.
        assert_eq!(
            (ratio(&worlds[2]).p50, ratio(&worlds[2]).p95),
            (Some(3.0), Some(3.0))
        );
        assert!(worlds[2].queueing && worlds[2].retries);
        assert_eq!(worlds[2].policies[0].policy, "p");
        // The family's own figures stay over all four.
        assert_eq!(r.families[0].policies[0].ttfb_ratio.p95, Some(3.0));
        // `q` against `p`: as fast without queues, twice as slow in the queueing world, and
        // 2^(2/4) over the family's four scenarios (geometric mean).
        let paired = |p: &[crate::sim::suite::PairedSummary]| {
            assert_eq!((p[0].policy.as_str(), p[0].against.as_str()), ("q", "p"));
            p[0].ttfb_ratio.mean.unwrap()
        };
        assert!((paired(&worlds[0].paired) - 1.0).abs() < 1e-12);
        assert!((paired(&worlds[1].paired) - 1.0).abs() < 1e-12);
        assert!((paired(&worlds[2].paired) - 2.0).abs() < 1e-12);
        assert!((paired(&r.families[0].paired) - 2f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn the_table_shows_the_worlds_when_asked() {
        let insts = [
            instance(World::new(true, false), 2.0),
            instance(World::new(false, true), 1.0),
        ];
        let r = SuiteReport::new(1, &insts);
        let plain = r.table_with(Detail::Families);
        assert_eq!(plain, r.table());
        assert!(!plain.contains("queueing, no retries"), "{plain}");
        let split = r.table_with(Detail::Worlds);
        assert!(
            split.contains("  queueing, no retries: 1 scenario\n"),
            "{split}"
        );
        assert!(
            split.contains("  own latency, retries: 1 scenario\n"),
            "{split}"
        );
        // Each world's rows are indented under it, its paired comparison too.
        assert!(split.contains("\n    p "), "{split}");
        assert!(split.contains("\n    paired against p:"), "{split}");
        assert!(split.contains("\n      q "), "{split}");
    }
}
