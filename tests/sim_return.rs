//! A server that slows down and fails, then heals, gets its traffic back within seconds of the
//! oracle: the coordinator's evidence ages (docs/tuning.md). The fast server (10 ms first byte)
//! among five at 30–50 ms slows to 300 ms with half its attempts failing from 30 s to 50 s,
//! with each class of failure; and six of ten servers that hang for 20 s all come back.

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

/// Every seed of 1–6, and their mean, as the simulator reports them. Measured: 1.2, 1.1, 1.2,
/// 1.2, 1.6 and 1.4 s against the oracle's 1.0 s each (mean 1.28 s; with the time factor at
/// 12, 1.2, 1.3, 1.1, 1.4, 2.7 and 1.5 s, and 1.2, 1.1, 1.1, 1.4, 1.8 and 1.5 s when read
/// before that; without the deadline advice
/// 1.3, 1.2, 1.3, 1.7, 2.1 and 1.6 s; at an earlier default 1.2, 1.7, 5.6, 1.4, 4.1 and 1.8 s,
/// and 3.2, 1.7, 13.5, 4.3, 5.5 and 2.2 s while a healed server's first fast answer was not yet
/// taken as a change).
#[test]
fn a_healed_server_returns_within_five_seconds_of_the_oracle() {
    let sc = Scenario::parse(SCENARIO, "slow-then-heal").unwrap();
    let (mut ours, mut oracle) = (0.0, 0.0);
    let seeds = 1..=6u64;
    let n = seeds.clone().count() as f64;
    for seed in seeds {
        let (c, o) = within_five_seconds_of_the_oracle(&sc, seed, "", only_return);
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
    let mut excess: Vec<f64> = (1..=40u64)
        .map(|seed| {
            only_return(&g.scenario, "coordinator", seed) - only_return(&g.scenario, "oracle", seed)
        })
        .collect();
    excess.sort_by(f64::total_cmp);
    let median = (excess[19] + excess[20]) / 2.0;
    let mean = excess.iter().sum::<f64>() / excess.len() as f64;
    assert!(median <= 3.5, "median excess {median:.2} s: {excess:?}");
    assert!(mean <= 5.0, "mean excess {mean:.2} s: {excess:?}");
}

/// Each degraded candidate's return (`recovery_s`) under `policy`, run alone with `seed`.
fn returns(sc: &Scenario, policy: &str, seed: u64) -> Vec<(String, f64)> {
    let policies = [PolicySpec::parse(policy).unwrap()];
    let r = simulate(sc, &policies, &[seed], 1, None).unwrap();
    r.policies[0]
        .degraded
        .iter()
        .map(|d| {
            let back = d.recovery_s.unwrap_or_else(|| {
                panic!("seed {seed}: {policy} never returned to {}", d.candidate)
            });
            (d.candidate.clone(), back)
        })
        .collect()
}

/// The coordinator's and the oracle's return on `seed`, as `read` takes it from a run; asserts
/// the coordinator's is within 5 s of the oracle's. `label` starts the messages.
fn within_five_seconds_of_the_oracle(
    sc: &Scenario,
    seed: u64,
    label: &str,
    read: impl Fn(&Scenario, &str, u64) -> f64,
) -> (f64, f64) {
    let (c, o) = (read(sc, "coordinator", seed), read(sc, "oracle", seed));
    eprintln!("{label}seed {seed}: coordinator {c:.1} s, oracle {o:.1} s");
    assert!(
        c <= o + 5.0,
        "{label}seed {seed}: {c:.2} s vs the oracle's {o:.2} s"
    );
    (c, o)
}

/// The return of the one degraded candidate under `policy`, run alone with `seed`.
fn only_return(sc: &Scenario, policy: &str, seed: u64) -> f64 {
    let back = returns(sc, policy, seed);
    assert_eq!(back.len(), 1, "seed {seed}: {policy}: {back:?}");
    back[0].1
}

/// The slow-then-heal server of the first test, its failures while degraded of one class.
fn slow_then_heal_failing_by(class: &str, failure_ms: &str) -> Scenario {
    let degrade = "success = 0.5\n";
    let with_class = format!("success = 0.5\nfailure = \"{class}\"\nfailure_ms = {failure_ms}\n");
    assert!(SCENARIO.contains(degrade));
    Scenario::parse(
        &SCENARIO.replacen(degrade, &with_class, 1),
        "slow-then-heal",
    )
    .unwrap()
}

/// The same return whatever the degraded server's failures are: fast refusals, fast overload
/// errors, or timeouts at the attempt's 2 s limit. Measured on seeds 1–6, coordinator against
/// the oracle's 1.0 s each:
/// - refused: 1.2, 1.1, 1.1, 1.4, 1.8 and 1.4 s, about as with the first test's transport
///   failures;
/// - overload: 3.7, 3.8, 2.2, 3.2, 2.9 and 2.0 s (3.2, 3.8, 2.5, 3.2, 3.7 and 2.5 s with the
///   time factor at 12; 3.2, 3.9, 3.1, 3.2, 4.2 and 3.8 s at an earlier default). The load
///   gate holds a server that answered
///   "overloaded" to fewer attempts in flight for a while (docs/tuning.md, "Returns held back
///   by the load gate and by the success average");
/// - timeout: 1.0, 1.1, 1.0, 1.3, 1.6 and 1.3 s.
///
/// Seeds 201–220, run once when this test was written: a mean excess of 0.6, 2.1 and 0.5 s
/// over the oracle, at most 1.9, 4.9 and 0.9 s.
#[test]
fn a_healed_server_returns_whatever_its_failures_were() {
    for (class, failure_ms) in [
        ("refused", "{ kind = \"uniform\", min = 0.5, max = 3.0 }"),
        ("overload", "{ kind = \"uniform\", min = 0.5, max = 3.0 }"),
        ("timeout", "2000.0"),
    ] {
        let sc = slow_then_heal_failing_by(class, failure_ms);
        for seed in 1..=6u64 {
            within_five_seconds_of_the_oracle(&sc, seed, &format!("{class}, "), only_return);
        }
    }
}

/// Ten equal servers (20 ms first byte), 300 requests a second, two retries; six of them hang
/// (every attempt times out at 1 s) from 30 s to 50 s. Every one of the six gets its share back
/// within 5 s of the oracle. Measured on seeds 1–6, the slowest of the six: 3.1, 2.0, 2.3, 1.2,
/// 1.5 and 1.3 s against the oracle's 1.5, 1.9, 1.0, 1.6, 1.2 and 1.8 s (3.1, 1.4, 3.9, 2.1,
/// 1.7 and 1.4 s with the time factor at 12); on seeds 201–210, run
/// once when this test was written, 1.4 to 1.9 s against 1.0 to 1.5 s, with no errors.
#[test]
fn six_of_ten_servers_that_hung_all_come_back() {
    let mut text = String::from(
        r#"
name = "hang-then-heal"
description = "6 of 10 servers hang for 20 s, then heal"

[workload]
loop = "open"
rate_per_s = 300.0
duration_s = 90.0
retries = 2
attempt_timeout_ms = 1000.0

[[candidates]]
id = "s"
count = 10
success = 0.999
failure = "transport"
failure_ms = { kind = "uniform", min = 1.0, max = 5.0 }
ttfb_ms = { kind = "lognormal", mean = 20.0, sd = 6.0 }
"#,
    );
    for i in 0..6 {
        text += &format!(
            "\n[[timeline]]\nat_s = 30.0\naction = \"degrade\"\ncandidate = \"s-{i}\"\n\
             success = 0.0\nfailure = \"timeout\"\nfailure_ms = 1000.0\n\
             \n[[timeline]]\nat_s = 50.0\naction = \"heal\"\ncandidate = \"s-{i}\"\n"
        );
    }
    let sc = Scenario::parse(&text, "hang-then-heal").unwrap();
    let slowest_of_six = |sc: &Scenario, policy: &str, seed: u64| {
        let back = returns(sc, policy, seed);
        assert_eq!(back.len(), 6, "seed {seed}: {policy}: {back:?}");
        back.iter().map(|(_, s)| *s).fold(0.0, f64::max)
    };
    for seed in 1..=6u64 {
        within_five_seconds_of_the_oracle(&sc, seed, "the slowest return, ", slowest_of_six);
    }
}
