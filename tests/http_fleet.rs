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
    // The goal is an error rate of 0.01; measured here 0.06-0.08 (and 0.07-0.32 at 2,000
    // requests over caps 2/4/8/16: each probe past a cap costs fast 503s before the one cut
    // per no-load latency lands). What holds: far fewer failed GETs than the best static
    // limit's and than tower p2c's, at nearly the best static throughput.
    assert!(
        adaptive.errors() * 4 < best.errors().max(1),
        "adaptive errors {} not below a quarter of {}'s {}",
        adaptive.errors(),
        best.name,
        best.errors()
    );
    assert!(
        adaptive.throughput() >= 0.9 * best.throughput(),
        "adaptive {:.1}/s < 0.9 x {} {:.1}/s",
        adaptive.throughput(),
        best.name,
        best.throughput()
    );
    assert!(
        adaptive.errors() * 4 < tower.errors(),
        "adaptive errors {} not below a quarter of tower p2c's {}",
        adaptive.errors(),
        tower.errors()
    );
}
