//! Real nginx servers: adaptive limits against a sweep of static limits and tower's p2c.
//!
//! Runs `examples/http_fleet.rs` small: three instances with caps 2 / 4 / 8 and 20 ms of
//! service, 1,200 requests per arm from 16 workers, more than the fleet's 14 slots. Without
//! nginx or its echo module the test says SKIPPED on stderr and passes, except under
//! `CI=true`, where it fails.

#[path = "../examples/http_fleet.rs"]
#[allow(dead_code)]
mod http_fleet;

use std::io::Write as _;

use http_fleet::{nginx, Options};

fn options() -> Options {
    Options {
        caps: vec![2, 4, 8],
        sleep_ms: 20,
        requests: 1200,
        workers: 16,
        statics: vec![2, 4, 8],
        ..Options::default()
    }
}

#[test]
fn adaptive_limits_on_real_servers() {
    if let Err(missing) = nginx::available() {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true but {missing}: .ci/run must install them"
        );
        // Written to the stderr handle, not with eprintln!, so the test harness does not
        // capture it: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n\n*** SKIPPED http_fleet: {missing}. ***\n\n"
        );
        return;
    }
    let comparison = http_fleet::run(&options()).expect("the fleet runs");
    eprint!("{}", comparison.table());

    let adaptive = comparison.adaptive.as_ref().expect("the adaptive arm ran");
    let best = comparison.best_static().expect("the static arms ran");
    let tower = comparison.tower.as_ref().expect("the tower arm ran");
    assert_eq!(adaptive.requests, 1200);
    // Measured over four runs of this size at a load average of 4.6-5.8 on a 2-core machine:
    // adaptive 8-13 failed GETs (error rate 0.0066-0.0107) at 609-665 requests/s (0.94-0.99 x
    // the best static limit, static 8: 644-675/s with 23,756-29,243 failed GETs); tower p2c
    // error rates 0.969-0.975. Earlier, at a load average of 13-19 and with the estimator
    // before one-attempt probes and checked latency cuts: 13-20 failed GETs and as low as
    // 0.50 x. What holds with margin on a loaded CI machine: an error rate within 0.025, a
    // twentieth of the failed GETs of tower p2c, and at least
    // half the best static throughput (the goal, 0.9 x, is for the full-size run; see
    // docs/limits.md for it under a loaded client). Which static limit is fastest moves with
    // the machine's load (under heavy load `static 2`, which never exceeds a cap and fails
    // nothing), so the error bound is absolute rather than relative to that arm.
    let rate = adaptive.errors() as f64 / adaptive.attempts.max(1) as f64;
    assert!(rate <= 0.025, "adaptive error rate {rate:.4} above 0.025");
    assert!(
        adaptive.throughput() >= 0.5 * best.throughput(),
        "adaptive {:.1}/s < 0.5 x {} {:.1}/s",
        adaptive.throughput(),
        best.name,
        best.throughput()
    );
    assert!(
        adaptive.errors() * 20 < tower.errors(),
        "adaptive errors {} not below a twentieth of tower p2c's {}",
        adaptive.errors(),
        tower.errors()
    );
}
