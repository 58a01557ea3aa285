//! Real nginx servers: adaptive limits against a sweep of static limits and tower's p2c.
//!
//! Runs `examples/http_fleet.rs` small: three instances with caps 2 / 4 / 8 and 20 ms of
//! service, 1,200 requests per arm from 16 workers, more than the fleet's 14 slots; then the
//! adaptive arm alone over the same kind of fleet with a fourth, dead candidate (`--dead 1`:
//! every connection refused at once); then the adaptive arm alone over the three, the last
//! (cap 8) killed mid-run (`--crash 800`: a server that answered, then refuses every
//! connection). Without nginx or its echo module each test says SKIPPED
//! on stderr and passes, except under `CI=true`, where it fails. The tests take turns (each
//! holds [`FLEET`]): two fleets at once on a small machine would measure each other.

#[path = "../examples/http_fleet.rs"]
#[allow(dead_code)]
mod http_fleet;

use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

use http_fleet::{nginx, Options};

/// Held by each test while its fleet runs.
static FLEET: Mutex<()> = Mutex::new(());

/// Whether nginx is here to run the fleet (see the module's doc for `CI=true`), with the
/// fleet's turn when it is.
fn nginx_turn(test: &str) -> Option<MutexGuard<'static, ()>> {
    if let Err(missing) = nginx::available() {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true but {missing}: .ci/run must install them"
        );
        // Written to the stderr handle, not with eprintln!, so the test harness does not
        // capture it: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n\n*** SKIPPED {test}: {missing}. ***\n\n"
        );
        return None;
    }
    // A test that failed holding the turn leaves nothing behind to protect.
    Some(
        FLEET
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

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
    let Some(_turn) = nginx_turn("http_fleet") else {
        return;
    };
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

/// One nginx fleet like [`options`]'s plus a candidate that refuses every connection at once,
/// 24 workers (ten more than the live slots, so that the dead one is often the only free
/// candidate), the adaptive arm alone.
fn options_with_a_dead_backend() -> Options {
    Options {
        workers: 24,
        arms: vec!["adaptive".into()],
        dead: 1,
        ..options()
    }
}

/// The most GETs per request the dead candidate may take (see the measurements below).
const MAX_REFUSED_PER_REQUEST: f64 = 0.25;

#[test]
fn adaptive_limits_with_a_dead_backend() {
    let Some(_turn) = nginx_turn("http_fleet (dead backend)") else {
        return;
    };
    let options = options_with_a_dead_backend();
    let comparison = http_fleet::run(&options).expect("the fleet runs");
    eprint!("{}", comparison.table());

    let adaptive = comparison.adaptive.as_ref().expect("the adaptive arm ran");
    assert_eq!(adaptive.requests, 1200);
    let dead = options.caps.len();
    assert_eq!(comparison.instances.len(), dead + 1);
    assert!(comparison.instances[dead].starts_with("dead-1"));
    // The dead candidate refuses everything, and only it refuses: every failed GET on it is a
    // refused connection (reported as `FailureClass::Refused`), and nginx refuses none.
    assert_eq!(
        adaptive.ok_per_instance[dead], 0,
        "the dead candidate served"
    );
    assert!(adaptive.refused > 0, "the dead candidate was never tried");
    assert_eq!(
        adaptive.refused, adaptive.failed_per_instance[dead],
        "refused GETs that were not the dead candidate's, or its failures not refusals"
    );
    // Measured in this test's build (debug) on a 2-core machine: 54-58 refused GETs, 0.05 per
    // request, over six runs (error rate 0.061-0.066, every request served), the floor's
    // probes and the twenty refusals that make the dead candidate hopeless; with the core
    // that judged it hopeless only before the fleet's first reference time (83ddea5),
    // 6,758-9,878, 5.6-8.2 per request, over twenty-two runs (error rate 0.85-0.89); before
    // waiting for a candidate worth it (664495a), 13.8-15.3 per request. The bound leaves
    // five times the measured figure and is twenty times below the earlier cores'.
    let per_request = adaptive.refused as f64 / adaptive.requests as f64;
    assert!(
        per_request <= MAX_REFUSED_PER_REQUEST,
        "{} refused GETs, {per_request:.1} per request (error rate {:.4}), above \
         {MAX_REFUSED_PER_REQUEST}: the dead candidate takes the requests that wait for a \
         busy one",
        adaptive.refused,
        adaptive.error_rate()
    );
}

/// [`options`]'s fleet, the adaptive arm alone, with the last instance (cap 8) killed 800 ms
/// into the run (`--crash 800`): from then on its port refuses every connection, and the
/// requests it served wait on the two others' 6 slots, about 300 a second. Of the 2,000
/// requests about 500 are done by then; the run ends some 5.5 s after the crash.
fn options_with_a_crash() -> Options {
    Options {
        requests: 2000,
        arms: vec!["adaptive".into()],
        crash_after_ms: Some(800),
        ..options()
    }
}

/// The most GETs per request the crashed instance may refuse (see the measurements below).
const MAX_REFUSED_PER_REQUEST_AFTER_A_CRASH: f64 = 0.25;

#[test]
fn adaptive_limits_with_a_backend_that_crashes() {
    let Some(_turn) = nginx_turn("http_fleet (a backend crashes)") else {
        return;
    };
    let options = options_with_a_crash();
    let comparison = http_fleet::run(&options).expect("the fleet runs");
    eprint!("{}", comparison.table());

    let adaptive = comparison.adaptive.as_ref().expect("the adaptive arm ran");
    assert_eq!(adaptive.requests, 2000);
    let crashed = options.caps.len() - 1;
    assert_eq!(comparison.instances.len(), options.caps.len());
    // It served before the crash, and only it refuses: every refused GET is its (reported as
    // `FailureClass::Refused`); its other failed GETs are the requests in service when it was
    // killed.
    assert!(
        adaptive.ok_per_instance[crashed] > 0,
        "the crashed instance never served: the crash came before the run started"
    );
    assert!(
        adaptive.refused > 0,
        "no connection refused after the crash"
    );
    assert!(
        adaptive.refused <= adaptive.failed_per_instance[crashed],
        "refused GETs that were not the crashed instance's"
    );
    // Measured in this test's build (debug) on a 2-core machine: 59-69 refused GETs, 0.03 per
    // request, over nine runs (three beside two busy loops), every request served, the arm
    // 6.3-7.0 s long (the crash 11-13 % into it), nginx-2 72-80 failed GETs (the others
    // requests in service when it was killed); with the core before a roll that picks a
    // candidate failing past hope waits for a busy one (0ecbae1, on 9fc823d), 16,998-23,113,
    // 8.5-11.6 per request, over five runs (error rate 0.89-0.92, 1,995-2,000 requests
    // served). The bound leaves some eight times the measured figure and is thirty times
    // below the earlier core's.
    assert!(
        adaptive.ok + 10 >= adaptive.requests,
        "{} of {} requests served: the crash lost requests",
        adaptive.ok,
        adaptive.requests
    );
    let per_request = adaptive.refused as f64 / adaptive.requests as f64;
    assert!(
        per_request <= MAX_REFUSED_PER_REQUEST_AFTER_A_CRASH,
        "{} refused GETs, {per_request:.2} per request (error rate {:.4}), above \
         {MAX_REFUSED_PER_REQUEST_AFTER_A_CRASH}: the crashed instance takes the requests that \
         wait for a busy one",
        adaptive.refused,
        adaptive.error_rate()
    );
}
