//! Overload failures that do not follow the load do not hold a server to one attempt in
//! flight (`load.background_overload`, docs/scoring.md "The load gate"), while those of a
//! server past its capacity still spread its load.
//!
//! The fastest of four servers (10 ms first byte against 30 ms) answers 2 % of its attempts
//! with overload errors: at any load in the first scenario, and in the second also 30 % more
//! per attempt in flight past 2. At 200 requests a second the fast server holds about two.
//! In the third it answers 0.3 %: a few failures in memory at any time.

use selection_coordinator::score::{Config, LoadConfig};
use selection_coordinator::sim::{simulate, PolicySpec, Report, Scenario};

const STEADY: &str = r#"
name = "steady-shed"
description = "the fastest server sheds a steady 2 % with overload errors at any load"

[workload]
loop = "open"
rate_per_s = 200.0
duration_s = 40.0
retries = 1
attempt_timeout_ms = 2000.0

[[candidates]]
id = "fast"
success = 0.98
failure = "overload"
failure_ms = { kind = "uniform", min = 0.5, max = 2.0 }
ttfb_ms = { kind = "lognormal", mean = 10.0, sd = 3.0 }
CAPACITY

[[candidates]]
id = "s"
count = 3
success = 0.999
failure = "transport"
failure_ms = { kind = "uniform", min = 0.5, max = 2.0 }
ttfb_ms = { kind = "lognormal", mean = 30.0, sd = 6.0 }
"#;

const SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

fn run(capacity: &str, base: Config) -> Report {
    run_with(STEADY.replace("CAPACITY", capacity), base)
}

/// `base` as `coordinator`, the same with the earlier rule where every overload failure
/// counts alike as `earlier`, and the oracle.
fn run_with(text: String, base: Config) -> Report {
    let sc = Scenario::parse(&text, "shed").unwrap();
    let mut earlier = base.clone();
    earlier.load = LoadConfig {
        background_overload: 0.0,
        ..earlier.load
    };
    let policies = vec![
        PolicySpec::Coordinator {
            label: "coordinator".into(),
            config: Some(Box::new(base)),
        },
        PolicySpec::Coordinator {
            label: "earlier".into(),
            config: Some(Box::new(earlier)),
        },
        PolicySpec::parse("oracle").unwrap(),
    ];
    simulate(&sc, &policies, &SEEDS, 1, None).unwrap()
}

/// (share of attempts to `fast`, mean first byte ms, attempts per request) of a policy.
fn figures(r: &Report, policy: &str) -> (f64, f64, f64) {
    let p = r.policies.iter().find(|p| p.policy == policy).unwrap();
    (p.share["fast"], p.ttfb_ms.mean, p.attempts_per_request)
}

/// Measured over seeds 1-6: the default sends 95.7 % to the fast server at a mean first
/// byte of 10.9 ms (the oracle 98.0 %, 10.4 ms); the earlier rule, 93.9 % and 11.3 ms. With
/// the time factor at 12 (the default before `time_exponent = 14`) the earlier rule held it to
/// about one attempt in flight: 87.6 %, 12.5 ms against the rule's 95.4 %, 10.9 ms; the
/// sharper factor pulls the earlier rule toward the fast server too, so the gap is smaller.
/// (94.4 %, 11.1 ms at 12 while a few failures in memory were presumed to follow the load,
/// below.)
#[test]
fn a_steady_share_of_overload_errors_does_not_hold_the_fastest_server_back() {
    let r = run("", Config::default());
    let (share, ttfb, _) = figures(&r, "coordinator");
    let (earlier_share, earlier_ttfb, _) = figures(&r, "earlier");
    let (_, oracle_ttfb, _) = figures(&r, "oracle");
    eprintln!(
        "default {share:.3} / {ttfb:.1} ms, earlier {earlier_share:.3} / {earlier_ttfb:.1} ms, \
         oracle {oracle_ttfb:.1} ms"
    );
    assert!(share >= 0.9, "{share}");
    assert!(ttfb <= 1.15 * oracle_ttfb, "{ttfb} vs {oracle_ttfb}");
    assert!(share > earlier_share + 0.01, "{share} vs {earlier_share}");
    assert!(ttfb < earlier_ttfb, "{ttfb} vs {earlier_ttfb}");
}

/// Run with the time factor at 12, where the load term sets this fleet's spread. Measured
/// over seeds 1-6: 61.2 % to the fast server and 1.058 attempts per request, as under the
/// earlier rule (61.1 %, 1.056); a build whose fit never saw the failures follow the load
/// read 1.066 and failed here. At the default 14 the time factor sets it instead (a failure
/// shed in a millisecond costs little time to a success): 69.1 % and 1.114 attempts, the
/// earlier rule 1.112 and every overload failure taken as background
/// (`background_overload = 1`) 1.12, closer to the oracle's 80.9 % and 1.23 attempts, so
/// the rule cannot be told from its absence there.
#[test]
fn overload_errors_past_a_capacity_still_spread_the_load() {
    let at_12 = Config {
        time_exponent: 12.0,
        ..Config::default()
    };
    let r = run("capacity = 2\noverload_per_extra = 0.3", at_12);
    let (share, _, attempts) = figures(&r, "coordinator");
    let (earlier_share, _, earlier_attempts) = figures(&r, "earlier");
    eprintln!(
        "default {share:.3} / {attempts:.3} attempts, earlier {earlier_share:.3} / \
         {earlier_attempts:.3}"
    );
    assert!(share <= 0.65, "{share}");
    assert!(attempts <= 1.07, "{attempts}");
    assert!(
        attempts <= earlier_attempts + 0.01,
        "{attempts} vs {earlier_attempts}"
    );
}

/// A trickle too thin for the failures' concurrency to be known: 0.3 % of the fast server's
/// attempts, about three failures in the averages' memory at any time. They come at the
/// concurrency its attempts come at, so they are read as a trickle from the first. Measured
/// over seeds 1-6: 98.0 % to the fast server at a mean first byte of 10.40 ms (the oracle
/// 99.7 %, 10.07 ms). While fewer than five failures in memory were presumed to follow the
/// load, each held it to about one attempt in flight: 96.0 %, 10.81 ms.
#[test]
fn a_few_overload_errors_at_the_usual_concurrency_do_not_hold_the_fastest_server_back() {
    let thin = STEADY
        .replace("CAPACITY", "")
        .replacen("success = 0.98\n", "success = 0.997\n", 1);
    assert!(thin.contains("success = 0.997"));
    let r = run_with(thin, Config::default());
    let (share, ttfb, _) = figures(&r, "coordinator");
    let (_, oracle_ttfb, _) = figures(&r, "oracle");
    eprintln!("default {share:.3} / {ttfb:.2} ms, oracle {oracle_ttfb:.2} ms");
    assert!(share >= 0.975, "{share}");
    assert!(ttfb <= 1.05 * oracle_ttfb, "{ttfb} vs {oracle_ttfb}");
}
