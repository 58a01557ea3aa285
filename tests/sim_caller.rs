//! The scenario's `[caller]` section: each switch makes the coordinator's simulated callers
//! skip one thing docs/deploying.md says callers do, and each changes what the coordinator
//! learns or does in the way that page describes. Every run is seeded; every scenario is
//! small enough for a debug build.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Scenario};

/// `base` with `caller` (the body of a `[caller]` table, empty: no table) run by `policy` on
/// seed 1.
fn run_with(base: &str, caller: &str, policy: &str) -> PolicyReport {
    let text = if caller.is_empty() {
        base.to_string()
    } else {
        format!("{base}\n[caller]\n{caller}\n")
    };
    let sc = Scenario::parse(&text, "test").unwrap();
    let policies = [PolicySpec::parse(policy).unwrap()];
    simulate(&sc, &policies, &[1], 1, None)
        .unwrap()
        .policies
        .remove(0)
}

fn run(base: &str, caller: &str) -> PolicyReport {
    run_with(base, caller, "coordinator")
}

/// Five equal candidates, one hanging on 70 % of its attempts (a minute), a 1 s caller
/// timeout and one retry: `scenarios/hanging-candidate.toml`, with fewer requests.
const HANGING: &str = r#"
name = "hanging"
[workload]
loop = "closed"
workers = 16
operations = 150
retries = 1
timeout_ms = 1000.0

[[candidates]]
id = "ok"
count = 4
success = 0.99
failure = "transport"
failure_ms = { kind = "lognormal", mean = 5.0, sd = 2.0 }
ttfb_ms = { kind = "lognormal", mean = 20.0, sd = 5.0 }

[[candidates]]
id = "hangs"
success = 0.3
failure = "timeout"
failure_ms = 60000.0
ttfb_ms = { kind = "lognormal", mean = 20.0, sd = 5.0 }
"#;

/// A caller that drops its permit at its own timeouts, with no report, gives up past the
/// deadline its grant advised (the advice itself, or its 1 s timeout when it ignores the
/// advice): the core counts each such release as the timeout it was, so the hanging candidate
/// gets no more attempts than with reports. (Before the core read such releases, dropping
/// them gave it about seven times the share.)
#[test]
fn timeouts_dropped_past_the_advice_count_as_reported() {
    let reported = run(HANGING, "").share["hangs"];
    assert!(reported < 0.03, "reported: {reported}");
    for caller in [
        r#"on_timeout = "drop""#,
        "on_timeout = \"drop\"\ndeadline_advice = false",
    ] {
        let dropped = run(HANGING, caller).share["hangs"];
        assert!(
            dropped < 1.5 * reported.max(0.01),
            "{caller}: reported {reported}, dropped {dropped}"
        );
    }
}

/// Without the advice a hang costs the caller's whole timeout: the request fails at 1 s
/// instead of being cut short and retried elsewhere.
#[test]
fn ignoring_the_deadline_advice_waits_out_every_hang() {
    let advised = run(HANGING, "");
    let ignored = run(HANGING, "deadline_advice = false");
    assert!(
        ignored.errors >= 3.0 * advised.errors.max(1.0),
        "advised {advised:?}\nignored {ignored:?}"
    );
    assert!(
        ignored.latency_ms.mean > advised.latency_ms.mean,
        "advised {:?}\nignored {:?}",
        advised.latency_ms,
        ignored.latency_ms
    );
}

/// One candidate that always fails at once and one that always answers, one retry. Retried
/// within the request the retry never goes back to the candidate that failed, so every
/// request succeeds; as a new request it may, and the requests that draw it twice fail.
#[test]
fn a_fresh_request_per_retry_can_draw_the_failed_candidate_again() {
    let base = r#"
name = "fresh"
[workload]
loop = "closed"
workers = 4
operations = 200
retries = 1

[[candidates]]
id = "fails"
success = 0.0
failure = "transport"
failure_ms = 1.0

[[candidates]]
id = "answers"
success = 1.0
ttfb_ms = 10.0
"#;
    let within = run(base, "");
    let fresh = run(base, r#"retry = "fresh""#);
    assert_eq!(within.errors, 0.0, "{within:?}");
    assert!(fresh.errors > 0.0, "{fresh:?}");
}

/// Two candidates under the default config, which ranks by the time to the first byte: `fast`
/// has its first byte after 50 ms and then transfers 4 MB at 16 Mbit/s (2 s), `slow` has its
/// first byte after 400 ms and transfers at 800 Mbit/s. Told the first byte, the coordinator
/// ranks by it and prefers `fast`; not told, an attempt still transferring counts as one
/// waiting for its answer, the ranking follows the whole transfer and prefers `slow`.
#[test]
fn without_first_byte_reports_the_ranking_follows_the_transfer() {
    let base = r#"
name = "first-byte"
[workload]
loop = "open"
rate_per_s = 10.0
duration_s = 60.0
bytes = 4000000

[[candidates]]
id = "fast"
success = 1.0
ttfb_ms = { kind = "lognormal", mean = 50.0, sd = 10.0 }
bandwidth_mbps = 16.0

[[candidates]]
id = "slow"
success = 1.0
ttfb_ms = { kind = "lognormal", mean = 400.0, sd = 40.0 }
bandwidth_mbps = 800.0
"#;
    let told = run(base, "");
    let untold = run(base, "first_byte = false");
    let (a, b) = (told.share["fast"], untold.share["fast"]);
    assert!(a > 0.8, "told: {a}");
    assert!(b < 0.4, "told {a}, untold {b}");
    assert!(untold.ttfb_ms.mean > told.ttfb_ms.mean, "{untold:?}");
}

/// Two candidates of 4 servers of 100 ms with one waiting place each, offered twice what they
/// serve, the coordinator's adaptive limits on, a 300 ms caller timeout. With deadlines the
/// core refuses grants that would come too late; without, it grants them, they time out and
/// the callers get far fewer answers in time.
#[test]
fn without_deadlines_late_grants_time_out() {
    let base = r#"
name = "deadline"
coordinator = { adaptive = { enabled = true } }
[workload]
loop = "open"
rate_per_s = 160.0
duration_s = 30.0
timeout_ms = 300.0

[[candidates]]
id = "cap"
count = 2
success = 1.0
servers = 4
service_ms = 100.0
queue_limit = 1
failure_ms = 1.0
"#;
    let with = run(base, "");
    let without = run(base, "deadline = false");
    assert!(
        without.success_within_timeout < with.success_within_timeout - 0.2,
        "with {with:?}\nwithout {without:?}"
    );
}

/// The baselines keep their own callers: `[caller]` changes nothing of theirs.
#[test]
fn baselines_ignore_the_section() {
    let a = run_with(HANGING, "", "random");
    let b = run_with(
        HANGING,
        "on_timeout = \"drop\"\ndeadline_advice = false\nfirst_byte = false",
        "random",
    );
    assert_eq!(a.share, b.share);
    assert_eq!(a.latency_ms.mean, b.latency_ms.mean);
}

/// A switch with nothing to act on is refused, naming the field and what to do.
#[test]
fn switches_with_nothing_to_act_on_are_refused() {
    let no_timeout = r#"
name = "x"
[workload]
loop = "closed"
workers = 1
operations = 1

[[candidates]]
id = "a"
success = 1.0
"#;
    for (caller, field, hint) in [
        ("deadline = false", "caller.deadline", "workload.timeout_ms"),
        ("retry = \"fresh\"", "caller.retry", "workload.retries"),
        (
            "on_timeout = \"drop\"\ndeadline_advice = false",
            "caller.on_timeout",
            "no `workload.timeout_ms`",
        ),
    ] {
        let text = format!("{no_timeout}\n[caller]\n{caller}\n");
        let e = Scenario::parse(&text, "test").unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(hint), "{e}");
    }
    let e = Scenario::parse(
        &format!("{no_timeout}\n[caller]\nretry = \"again\"\n"),
        "test",
    )
    .unwrap_err();
    assert!(e.field.starts_with("caller"), "{e}");
    let e =
        Scenario::parse(&format!("{no_timeout}\n[caller]\nreport = true\n"), "test").unwrap_err();
    assert!(e.message.contains("unknown field"), "{e}");
}

/// A fresh retry excludes nothing, so `retries` alone ends a failing request's loop: a
/// scenario whose requests x (retries + 1) passes 10^8 attempts is refused at `retries`, the
/// bound named (before, 4e9 retries ran for hours). Without `retry = "fresh"` retries end
/// once every candidate was tried, and the same count is accepted.
#[test]
fn fresh_retries_past_the_attempt_bound_are_refused() {
    let base = r#"
name = "x"
[workload]
loop = "closed"
workers = 2
operations = 5
retries = 4000000000

[[candidates]]
id = "a"
success = 0.0
failure_ms = 1.0
"#;
    let e = Scenario::parse(&format!("{base}\n[caller]\nretry = \"fresh\"\n"), "test").unwrap_err();
    assert_eq!(e.field, "workload.retries", "{e}");
    assert!(e.message.contains("1e8"), "{e}");
    assert_eq!(e.line, Some(7), "{e}");
    Scenario::parse(base, "test").unwrap();
    // At the bound: 10 requests x 10^7 attempts.
    let at = base.replace("4000000000", "9999999");
    Scenario::parse(&format!("{at}\n[caller]\nretry = \"fresh\"\n"), "test").unwrap();
}
