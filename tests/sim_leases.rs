//! The simulator's timed decisions, as the actor makes them: a lease (`limits.max_attempt_s`)
//! ends at its instant, not at the engine's next whole-second tick; a reclaimed attempt ends
//! for its worker, which asks again; a caller that gives up on a waiting request cancels it
//! in the core at once, freeing its `max_waiting` place. Every run is seeded and every figure
//! follows from the scenario by hand.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Scenario};

fn run(toml: &str) -> PolicyReport {
    let sc = Scenario::parse(toml, "test").unwrap();
    let policies = [PolicySpec::parse("coordinator").unwrap()];
    simulate(&sc, &policies, &[1], 1, None)
        .unwrap()
        .policies
        .remove(0)
}

fn near(x: f64, want: f64, tol: f64) -> bool {
    (x - want).abs() <= tol
}

/// One slot; the first attempt hangs 2 s under a 0.3 s lease, the candidate answers in
/// 100 ms from 0.2 s on. The lease ends at 0.3 s: the first request fails then (no retries),
/// and the second, waiting since 0 for the slot, is granted at once and answers at 0.4 s.
/// Ticked only once a second, the core reclaimed at 1.0 s and the second request answered at
/// 1.1 s.
#[test]
fn a_lease_ends_at_its_instant_and_the_next_request_is_granted_then() {
    let r = run(r#"
name = "lease-end"
[limits]
per_candidate = 1
max_attempt_s = 0.3

[workload]
loop = "closed"
workers = 2
operations = 1

[[candidates]]
id = "a"
success = 1.0
ttfb_ms = 2000.0

[[timeline]]
at_s = 0.2
action = "degrade"
candidate = "a"
ttfb_ms = 100.0
"#);
    assert_eq!(r.requests, 2.0);
    assert_eq!(r.errors, 1.0, "the reclaimed request fails: {r:?}");
    // The successful request waited 0.3 s for the slot and took 100 ms.
    assert!(near(r.ttfb_ms.mean, 400.0, 1.0), "{:?}", r.ttfb_ms);
    // 300 ms (the reclaimed one) and 400 ms.
    assert!(near(r.latency_ms.mean, 350.0, 1.0), "{:?}", r.latency_ms);
}

/// Two of four slots on a candidate that hangs 2 s four times in five, a 0.3 s lease, one
/// retry, a 5 s caller timeout. A reclaimed attempt's worker asks again at the lease end and
/// its retry goes to the other candidate, so no request comes near the caller's timeout
/// while the other candidate has free slots: the slowest take the lease plus one answer.
/// Before, the engine ran the reclaimed attempt to its end and its `Retry` was refused, so
/// such requests waited for the caller's 5 s timeout.
#[test]
fn a_reclaimed_attempt_asks_again_instead_of_waiting_for_the_caller() {
    let r = run(r#"
name = "lease-retry"
[limits]
per_candidate = 2
max_attempt_s = 0.3

[workload]
loop = "closed"
workers = 4
operations = 100
retries = 1
timeout_ms = 5000.0

[[candidates]]
id = "hangs"
success = 0.2
failure = "timeout"
failure_ms = { kind = "normal", mean = 2000.0, sd = 100.0 }
ttfb_ms = { kind = "lognormal", mean = 20.0, sd = 5.0 }

[[candidates]]
id = "ok"
success = 0.99
ttfb_ms = { kind = "lognormal", mean = 20.0, sd = 5.0 }
"#);
    assert_eq!(r.requests, 400.0);
    // Some requests were reclaimed and retried (more than one attempt each on average)...
    assert!(r.attempts_per_request > 1.1, "{r:?}");
    // ... and the slowest of them took the 0.3 s lease and one answer, far from 5 s.
    assert!(r.latency_ms.p999 > 300.0, "{:?}", r.latency_ms);
    assert!(r.latency_ms.p999 < 500.0, "{:?}", r.latency_ms);
    // Only the other candidate's own failures (1 in 100) end requests.
    assert!(r.error_rate < 0.03, "{r:?}");
    assert!(r.success_within_timeout > 0.97, "{r:?}");
}

/// One slot, held from 0 to 0.81 s by an attempt whose first byte came at 10 ms; one waiting
/// place; a 0.7 s caller timeout and 0.7 s between a worker's requests (off the engine's
/// whole-second ticks, where the core would reject the request by its own deadline anyway).
/// At 0 worker 1 waits in the one place and worker 2 is turned away (queue full). At 0.7 s
/// worker 1's caller gives up, and worker 2 asks again at that instant: its request takes
/// the place worker 1's cancel freed, is granted at 0.81 s and has its first byte 120 ms after
/// it came. Worker 1 asks again at 1.4 s, waits for the slot until 1.62 s (first byte after
/// 230 ms); worker 0's second request, at 1.51 s, finds the place taken and is turned away.
/// Cancelled only by the core's own deadline a microsecond later, worker 1 still held the
/// place at 0.7 s and worker 2 was turned away again.
#[test]
fn a_caller_deadline_frees_the_waiting_place_at_once() {
    let r = run(r#"
name = "waiting-place"
[limits]
per_candidate = 1
max_waiting = 1

[workload]
loop = "closed"
workers = 3
operations = 2
think_ms = 700.0
timeout_ms = 700.0

[[candidates]]
id = "a"
success = 1.0
ttfb_ms = 10.0
duration_ms = 800.0
"#);
    assert_eq!(r.requests, 6.0);
    // Worker 1's first (cancelled), worker 2's first and worker 0's second (queue full).
    assert_eq!(r.errors, 3.0, "{r:?}");
    // First bytes after 10, 120 and 230 ms.
    assert!(near(r.ttfb_ms.mean, 120.0, 0.5), "{:?}", r.ttfb_ms);
    assert!(near(r.ttfb_ms.p99, 230.0, 0.5), "{:?}", r.ttfb_ms);
}

/// A request whose caller gives up while its retry waits for a slot ends on the caller's
/// timeout, not as an overload, even if the attempt before was refused with one: the
/// overload rate counts requests whose last attempt was refused. Two workers, one slot on
/// each of two candidates: `busy` holds its slot 2 s, `full` refuses every attempt at once
/// (overload). The request refused by `full` retries on `busy`, waits for its slot and is
/// given up at the caller's 0.5 s timeout, as is the one on `busy`.
#[test]
fn a_request_given_up_while_its_retry_waits_is_not_an_overload() {
    let r = run(r#"
name = "overload-then-wait"
[limits]
per_candidate = 1

[workload]
loop = "closed"
workers = 2
operations = 1
retries = 1
timeout_ms = 500.0

[[candidates]]
id = "busy"
success = 1.0
ttfb_ms = 2000.0

[[candidates]]
id = "full"
success = 0.0
failure = "overload"
failure_ms = 10.0
"#);
    assert_eq!(r.requests, 2.0);
    assert_eq!(r.errors, 2.0, "both callers give up: {r:?}");
    // Two attempts, one on each candidate: the retry never had one.
    assert_eq!(r.share["busy"], 0.5, "{r:?}");
    assert_eq!(r.share["full"], 0.5, "{r:?}");
    assert_eq!(r.overload_rate, 0.0, "{r:?}");
}

/// Every policy's report of `toml`, by policy.
fn run_all(toml: &str, policies: &[&str]) -> Vec<PolicyReport> {
    let sc = Scenario::parse(toml, "test").unwrap();
    let specs: Vec<PolicySpec> = policies
        .iter()
        .map(|p| PolicySpec::parse(p).unwrap())
        .collect();
    simulate(&sc, &specs, &[1], 1, None).unwrap().policies
}

/// The policies whose limits the scenario's `[limits]` sets: the coordinator and baselines
/// of each kind (the shared queue, an oracle, a limit algorithm, lassie's pairwise queue).
const EVERY_KIND: [&str; 6] = [
    "coordinator",
    "random",
    "round-robin",
    "oracle",
    "aimd",
    "lassie-pairwise",
];

/// `[limits] max_attempt_s` holds for the baselines as for the coordinator: one candidate
/// answering in 1 s under a 0.1 s lease fails every request at 100 ms, whatever the policy.
/// Before, only the coordinator reclaimed: the baselines ran every attempt to its 1 s end.
#[test]
fn every_policy_reclaims_an_attempt_at_its_lease_end() {
    let reports = run_all(
        r#"
name = "lease-all"
[limits]
max_attempt_s = 0.1

[workload]
loop = "closed"
workers = 2
operations = 5

[[candidates]]
id = "a"
success = 1.0
duration_ms = 1000.0
"#,
        &EVERY_KIND,
    );
    for r in &reports {
        assert_eq!(r.requests, 10.0, "{}", r.policy);
        assert_eq!(r.errors, 10.0, "{}: {r:?}", r.policy);
        assert!(
            near(r.latency_ms.p999, 100.0, 0.01),
            "{}: {:?}",
            r.policy,
            r.latency_ms
        );
    }
}

/// `[limits] max_waiting` holds for the baselines as for the coordinator: one slot held
/// 100 ms and one waiting place; of three workers asking at 0, one is granted, one waits and
/// one is refused at once.
#[test]
fn every_policy_refuses_a_request_when_the_waiting_places_are_taken() {
    let reports = run_all(
        r#"
name = "waiting-all"
[limits]
global = 1
max_waiting = 1

[workload]
loop = "closed"
workers = 3
operations = 1

[[candidates]]
id = "a"
success = 1.0
duration_ms = 100.0
"#,
        &EVERY_KIND,
    );
    for r in &reports {
        assert_eq!(r.requests, 3.0, "{}", r.policy);
        assert_eq!(r.errors, 1.0, "{}: {r:?}", r.policy);
    }
}

/// A lease under a retry: the reclaimed attempt's worker asks again and its retry goes to
/// the candidate it has not tried, for the baselines as for the coordinator. (lassie's
/// pairwise rounds may stall, for `stall_ms` = 1 ms each.)
#[test]
fn a_baseline_retries_a_reclaimed_request_on_another_candidate() {
    let reports = run_all(
        r#"
name = "lease-retry-all"
[limits]
max_attempt_s = 0.1

[workload]
loop = "closed"
workers = 1
operations = 20
retries = 1
stall_ms = 1.0

[[candidates]]
id = "hangs"
success = 1.0
duration_ms = 1000.0

[[candidates]]
id = "ok"
success = 1.0
duration_ms = 10.0
"#,
        &EVERY_KIND,
    );
    for r in &reports {
        assert_eq!(r.errors, 0.0, "{}: {r:?}", r.policy);
        assert!(
            r.latency_ms.p999 <= 120.0,
            "{}: {:?}",
            r.policy,
            r.latency_ms
        );
    }
}
