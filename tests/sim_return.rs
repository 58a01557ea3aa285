//! A server that slows down and fails, then heals, gets its traffic back within seconds of the
//! oracle: the coordinator's evidence ages (docs/tuning.md). The fast server (10 ms first byte)
//! among five at 30–50 ms slows to 300 ms with half its attempts failing from 30 s to 50 s.

use selection_coordinator::sim::{simulate, PolicySpec, Scenario};

const SCENARIO: &str = r#"
name = "slow-then-heal"
description = "the fast server slows and fails for 20 s, then heals"

[workload]
loop = "open"
rate_per_s = 200.0
duration_s = 70.0
retries = 1
attempt_timeout_ms = 2000.0

[[candidates]]
id = "fast"
success = 0.999
failure = "transport"
failure_ms = { kind = "uniform", min = 1.0, max = 5.0 }
ttfb_ms = { kind = "lognormal", mean = 10.0, sd = 3.0 }
duration_ms = { kind = "lognormal", mean = 12.0, sd = 3.0 }

[[candidates]]
id = "s"
count = 5
success = 0.999
failure = "transport"
failure_ms = { kind = "uniform", min = 1.0, max = 5.0 }
ttfb_ms = { kind = "uniform", min = 30.0, max = 50.0 }
duration_ms = { kind = "lognormal", mean = 42.0, sd = 8.0 }

[[timeline]]
at_s = 30.0
action = "degrade"
candidate = "fast"
success = 0.5
ttfb_ms = { kind = "lognormal", mean = 300.0, sd = 60.0 }

[[timeline]]
at_s = 50.0
action = "heal"
candidate = "fast"
"#;

/// Every seed of 1–6, and their mean, as the simulator reports them. Measured: 1.2, 1.0, 1.3,
/// 1.4, 1.7 and 1.5 s against the oracle's 1.0 s each (mean 1.35 s; without the deadline advice
/// 1.3, 1.2, 1.3, 1.7, 2.1 and 1.6 s; at an earlier default 1.2, 1.7, 5.6, 1.4, 4.1 and 1.8 s,
/// and 3.2, 1.7, 13.5, 4.3, 5.5 and 2.2 s while a healed server's first fast answer was not yet
/// taken as a change).
#[test]
fn a_healed_server_returns_within_five_seconds_of_the_oracle() {
    let sc = Scenario::parse(SCENARIO, "slow-then-heal").unwrap();
    let policies: Vec<PolicySpec> = ["coordinator", "oracle"]
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect();
    let (mut ours, mut oracle) = (0.0, 0.0);
    let seeds = 1..=6u64;
    let n = seeds.clone().count() as f64;
    for seed in seeds {
        let r = simulate(&sc, &policies, &[seed], 1, None).unwrap();
        let recovery = |policy: &str| {
            let p = r.policies.iter().find(|p| p.policy == policy).unwrap();
            let d = p.degraded.iter().find(|d| d.candidate == "fast").unwrap();
            d.recovery_s
                .unwrap_or_else(|| panic!("seed {seed}: {policy} never returned"))
        };
        let (c, o) = (recovery("coordinator"), recovery("oracle"));
        eprintln!("seed {seed}: coordinator {c:.1} s, oracle {o:.1} s");
        assert!(
            c <= o + 5.0,
            "seed {seed}: {c:.2} s vs the oracle's {o:.2} s"
        );
        ours += c / n;
        oracle += o / n;
    }
    assert!(
        ours <= oracle + 5.0,
        "{ours:.2} s vs the oracle's {oracle:.2} s"
    );
}

/// A server whose latency drifts up twelvefold in 1.4 s steps and back down returns once it is
/// back: suite seed 17's `drift-87` (9 servers; the 6.6 ms favourite drifts to 84 ms and
/// back), run with seeds 1-8. While shunned it is probed about once a second, each probe's
/// answer a little under the estimate and none a surprise, so without the lag test
/// (docs/scoring.md, "Evidence that ages") each moved the estimate by the filter's small gain:
/// the coordinator came back 15.6, 25.0, 8.0, 10.5, 3.9, 15.8, 14.8 and 17.4 s after the last
/// step (median 15.2, mean 13.9), the oracle 1.1 s on every seed. With it: 1.1, 2.0, 10.4,
/// 22.3, 1.9, 1.1, 2.0 and 2.0 s (median 2.0, mean 5.4).
///
/// Eight seeds were too few for a median: over seeds 1-40 the excess over the oracle read a
/// median of 2.75 s and a mean of 4.52 s before the load gate's evidence became an elasticity
/// (docs/tuning.md, "The load gate's evidence as an elasticity"), 3.10 s and 4.07 s after
/// (seeds 1-8 alone: 2.05 / 4.61 s before, 4.10 / 5.56 s after; seeds 9-40, never looked at
/// before: 3.10 / 4.50 s before, 2.90 / 3.69 s after). Checked over the forty seeds: a median
/// within 3.5 s and a mean within 5 s of the oracle's return.
#[test]
fn a_server_drifting_back_mostly_returns_within_seconds_of_the_oracle() {
    use selection_coordinator::sim::suite::{generate, Family};
    let names = ["coordinator".to_string(), "oracle".to_string()];
    let g = generate(Family::Drift, 17, 87, &names).unwrap();
    let policies: Vec<PolicySpec> = names
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect();
    let mut excess = Vec::new();
    for seed in 1..=40u64 {
        let r = simulate(&g.scenario, &policies, &[seed], 1, None).unwrap();
        let recovery = |policy: &str| {
            let p = r.policies.iter().find(|p| p.policy == policy).unwrap();
            assert_eq!(p.degraded.len(), 1);
            p.degraded[0]
                .recovery_s
                .unwrap_or_else(|| panic!("seed {seed}: {policy} never returned"))
        };
        excess.push(recovery("coordinator") - recovery("oracle"));
    }
    excess.sort_by(f64::total_cmp);
    let median = (excess[19] + excess[20]) / 2.0;
    let mean = excess.iter().sum::<f64>() / excess.len() as f64;
    assert!(median <= 3.5, "median excess {median:.2} s: {excess:?}");
    assert!(mean <= 5.0, "mean excess {mean:.2} s: {excess:?}");
}
