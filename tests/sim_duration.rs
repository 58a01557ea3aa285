//! How long a run lasts (`virtual_s`) and the windows that close at its end (`limit_mean`, the
//! `limit` series): the workload's time, from 0 to the end of its last request. What is left
//! in the event queue after it (the caller deadlines of requests already answered, attempts
//! whose callers gave up, timeline events after the work) does not stretch it. Before, the run
//! ended at its last event: 10.9 s, 20 s and 6 s in the three scenarios below, and the limit's
//! mean took in the idle time at its last value.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Scenario};

/// One worker, ten requests of 100 ms back to back on one candidate of capacity 4, which a
/// degrade at 0.5 s halves; the caller's timeout is 10 s, far after every answer. `extra` is
/// appended (more timeline events).
fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "duration"
[workload]
loop = "closed"
workers = 1
operations = 10
timeout_ms = 10000

[[candidates]]
id = "a"
success = 1.0
duration_ms = 100
capacity = 4

[[timeline]]
at_s = 0.5
action = "degrade"
candidate = "a"
capacity = 2
{extra}"#
    );
    Scenario::parse(&text, "duration").unwrap()
}

fn run(sc: &Scenario, policy: &str) -> PolicyReport {
    let specs = [PolicySpec::parse(policy).unwrap()];
    let mut r = simulate(sc, &specs, &[1], 1, None).unwrap();
    r.policies.remove(0)
}

fn close(what: &str, got: f64, want: f64) {
    assert!((got - want).abs() < 1e-9, "{what}: {got}, want {want}");
}

/// The ten requests end at 0.1, 0.2, ..., 1.0 s; the last one's caller deadline, at
/// 0.9 + 10 = 10.9 s, finds it answered. The run lasted 1 s: `oracle-limits` held the limit at
/// 4 over [0, 0.5) and at 2 over [0.5, 1], a mean of (4 x 0.5 + 2 x 0.5) / 1 = 3 (it read
/// (4 x 0.5 + 2 x 10.4) / 10.9 = 2.09 with the run stretched to the deadline).
#[test]
fn deadlines_of_answered_requests_do_not_stretch_the_run() {
    let p = run(&scenario(""), "oracle-limits");
    assert_eq!((p.requests, p.errors), (10.0, 0.0));
    close("virtual_s", p.virtual_s, 1.0);
    close("limit_mean", p.limit_mean["a"].unwrap(), 3.0);
    // Ten successes in the 1 s to the last request's end, as before.
    close("goodput_per_s", p.goodput_per_s, 10.0);
    // The limit series: 0.5 s at 4 and 0.5 s at 2 in the first second; the second one, where
    // the last request ended at its very start, had no time of the run in it.
    let limit = &p.series.limit["a"];
    assert_eq!(limit.len(), 2, "{limit:?}");
    close("limit in [0, 1)", limit[0].unwrap(), 3.0);
    assert_eq!(limit[1], None);
}

/// A heal at 20 s, long after the work: it happens (the policy hears it), but the run still
/// lasted 1 s, and the limit's mean is still 3 (it read 20 s and (4 x 0.5 + 2 x 19.5) / 20 =
/// 2.05).
#[test]
fn a_timeline_event_after_the_work_does_not_stretch_the_run() {
    let heal = "\n[[timeline]]\nat_s = 20.0\naction = \"heal\"\ncandidate = \"a\"\n";
    let p = run(&scenario(heal), "oracle-limits");
    assert_eq!((p.requests, p.errors), (10.0, 0.0));
    close("virtual_s", p.virtual_s, 1.0);
    close("limit_mean", p.limit_mean["a"].unwrap(), 3.0);
}

/// A caller that gives up on a pending request ends it: the run lasts until then, not until
/// the abandoned attempt would have ended. Two requests on a candidate that takes 5 s, a 1 s
/// timeout: the first fails at 1 s (its attempt would end at 5 s), the second, started then,
/// at 2 s (its attempt at 6 s). The run lasted 2 s (it read 6 s). With the capacity halved at
/// 1 s, `oracle-limits` held 4 over [0, 1) and 2 over [1, 2]: a mean of 3 (it read (4 + 2 x 5)
/// / 6 = 2.33).
#[test]
fn a_timed_out_request_ends_the_run_at_its_timeout_not_at_its_abandoned_attempt() {
    let text = r#"
name = "hangs"
[workload]
loop = "closed"
workers = 1
operations = 2
timeout_ms = 1000

[[candidates]]
id = "a"
success = 1.0
duration_ms = 5000
capacity = 4

[[timeline]]
at_s = 1.0
action = "degrade"
candidate = "a"
capacity = 2
"#;
    let sc = Scenario::parse(text, "hangs").unwrap();
    let p = run(&sc, "oracle-limits");
    assert_eq!((p.requests, p.errors), (2.0, 2.0));
    close("virtual_s", p.virtual_s, 2.0);
    close("limit_mean", p.limit_mean["a"].unwrap(), 3.0);
    // A policy without limits: the same end.
    let p = run(&sc, "random");
    close("virtual_s", p.virtual_s, 2.0);
}
