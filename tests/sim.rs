//! The simulator: determinism, scenario errors, the JSON contract, and the acceptance figures
//! (calibration of the baselines against the published MongoDB numbers, and the default
//! config beating them). Seeds and tolerances are the ones in `docs/tuning.md`.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Report, Scenario, BUILTIN};

fn policies(names: &[&str]) -> Vec<PolicySpec> {
    names
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect()
}

fn run(scenario: &str, names: &[&str], seeds: u64) -> Report {
    let sc = Scenario::load(scenario).unwrap();
    let seeds: Vec<u64> = (1..=seeds).collect();
    simulate(&sc, &policies(names), &seeds, 2, None).unwrap()
}

fn get<'a>(r: &'a Report, policy: &str) -> &'a PolicyReport {
    r.policies.iter().find(|p| p.policy == policy).unwrap()
}

/// The report as JSON without `decisions_per_s`, the only field measured on the wall clock.
fn deterministic_json(r: &Report) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    for p in v["policies"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("decisions_per_s");
    }
    v
}

#[test]
fn every_builtin_scenario_parses() {
    for (name, _) in BUILTIN {
        let sc = Scenario::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(sc.name, name);
        for p in &sc.policies {
            PolicySpec::parse(p).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn same_seed_same_json_whatever_the_thread_count() {
    let sc = Scenario::load("pairwise-deadlock").unwrap();
    let all = policies(&[
        "coordinator",
        "lassie-pairwise",
        "lassie",
        "random",
        "round-robin",
        "p2c-opcount",
        "mongo-error-bias",
        "p2c-peak-ewma",
        "oracle",
    ]);
    let a = simulate(&sc, &all, &[7, 8], 1, None).unwrap();
    let b = simulate(&sc, &all, &[7, 8], 4, None).unwrap();
    assert_eq!(deterministic_json(&a), deterministic_json(&b));
    let c = simulate(&sc, &all, &[9, 10], 1, None).unwrap();
    assert_ne!(
        deterministic_json(&a),
        deterministic_json(&c),
        "seeds must matter"
    );
}

const GOOD: &str = r#"
name = "t"
[workload]
loop = "closed"
workers = 2
operations = 10

[[candidates]]
id = "a"
success = 0.5

[[candidates]]
id = "b"
success = 0.9
"#;

#[test]
fn a_small_file_runs() {
    let sc = Scenario::parse(GOOD, "test.toml").unwrap();
    let r = simulate(&sc, &policies(&["coordinator", "random"]), &[1], 1, None).unwrap();
    assert_eq!(r.policies[0].requests, 20.0);
    assert_eq!(r.policies[1].requests, 20.0);
}

#[test]
fn bad_scenarios_name_the_field_and_the_line() {
    let cases = [
        // (replace, with, field, line)
        (
            "success = 0.9",
            "success = 1.5",
            "candidates[1].success",
            14,
        ),
        (
            "success = 0.9",
            "success = 0.9\nspeed = 3",
            "candidates[1].speed",
            15,
        ),
        ("workers = 2", "workers = \"two\"", "workload.workers", 5),
        // A typo that asks for far more requests than can be kept: refused, not run.
        ("workers = 2", "workers = 100000000", "workload.workers", 5),
        (
            "success = 0.9",
            "success = 0.9\nduration_ms = { kind = \"normal\", mean = 3 }",
            "candidates[1].duration_ms",
            15,
        ),
        // What the coordinator would refuse is refused here, not dropped at run time.
        ("id = \"b\"", "id = \"\"", "candidates[1].id", 13),
        (
            "success = 0.9",
            "success = 0.9\nperf_scores = { us = nan }",
            "candidates[1].perf_scores",
            15,
        ),
        (
            "success = 0.9",
            "success = 0.9\nperf_scores = { us = -1 }",
            "candidates[1].perf_scores",
            15,
        ),
    ];
    for (from, to, field, line) in cases {
        let text = GOOD.replace(from, to);
        let e = Scenario::parse(&text, "bad.toml").unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert_eq!(e.line, Some(line), "{e}");
        let shown = e.to_string();
        assert!(
            shown.contains("bad.toml") && shown.contains(&format!("line {line}")),
            "{shown}"
        );
    }
    let unknown_field = Scenario::parse(
        &GOOD.replace("success = 0.9", "success = 0.9\nspeed = 3"),
        "bad.toml",
    )
    .unwrap_err();
    assert!(unknown_field.message.contains("speed"), "{unknown_field}");

    let timeline =
        format!("{GOOD}\n[[timeline]]\nat_s = 1.0\naction = \"degrade\"\ncandidate = \"zz\"\n");
    let e = Scenario::parse(&timeline, "bad.toml").unwrap_err();
    assert_eq!(e.field, "timeline[0].candidate");
    assert_eq!(e.line, Some(19));
    assert!(e.message.contains("zz"));

    let closed = GOOD.replace("workers = 2", "workers = 0");
    let e = Scenario::parse(&closed, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.workers");
    assert_eq!(e.line, Some(5));

    // A duplicate id is shown where the second entry names it, not at the first.
    let twice = GOOD.replace("id = \"b\"", "id = \"a\"");
    let e = Scenario::parse(&twice, "bad.toml").unwrap_err();
    assert_eq!(e.field, "candidates[1].id");
    assert_eq!(e.line, Some(13), "{e}");
}

#[test]
fn a_mistyped_kind_is_an_unknown_kind_not_an_unknown_field() {
    let text = format!("kind = \"discovry\"\n{GOOD}");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field, "kind", "{e}");
    assert_eq!(e.line, Some(1), "{e}");
    assert!(!e.message.contains("unknown field"), "{e}");
    assert!(
        e.message.contains("unknown scenario kind `discovry`")
            && e.message.contains("did you mean `discovery`?")
            && e.message.contains("without `kind` is a selection scenario"),
        "{e}"
    );
    // Not a string either: still the kind that is wrong, with the kinds listed.
    let e = Scenario::parse(&format!("kind = 3\n{GOOD}"), "bad.toml").unwrap_err();
    assert_eq!(e.field, "kind", "{e}");
    assert!(e.message.contains("unknown scenario kind 3"), "{e}");
}

#[test]
fn a_subset_larger_than_the_fleet_is_refused() {
    let text = GOOD.replace("operations = 10", "operations = 10\nsubset = 10");
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.subset", "{e}");
    assert_eq!(e.line, Some(7), "{e}");
    assert!(
        e.message.contains("subset of 10") && e.message.contains("2 in all"),
        "{e}"
    );
    // Replicas and candidates that join later count: 1 + 3 of them, so 4 is the whole fleet.
    let grown = format!(
        "{GOOD}\n[[candidates]]\nid = \"r\"\nsuccess = 0.9\ncount = 3\npresent = false\n\n[[timeline]]\n\
         at_s = 1.0\naction = \"join\"\ncandidate = \"r-0\"\n"
    );
    let at = |k: u32| grown.replace("operations = 10", &format!("operations = 10\nsubset = {k}"));
    assert!(Scenario::parse(&at(5), "ok.toml").is_ok());
    let e = Scenario::parse(&at(6), "bad.toml").unwrap_err();
    assert!(e.message.contains("5 in all"), "{e}");
}

const RARE: &str = r#"
name = "rare"
[workload]
loop = "open"
rate_per_s = 1
duration_s = 1

[[candidates]]
id = "a"
success = 0.9
duration_ms = 5

[[candidates]]
id = "b"
success = 0.9
duration_ms = 5
"#;

#[test]
fn an_open_loop_that_expects_no_request_is_refused() {
    let e = Scenario::parse(
        &RARE.replace("rate_per_s = 1", "rate_per_s = 1e-9"),
        "bad.toml",
    )
    .unwrap_err();
    assert_eq!(e.field, "workload.rate_per_s", "{e}");
    assert_eq!(e.line, Some(5), "{e}");
    assert!(
        e.message.contains("rate_per_s x duration_s") && e.message.contains("at least 1"),
        "{e}"
    );
}

#[test]
fn figures_over_no_request_are_null_not_zero() {
    let sc = Scenario::parse(RARE, "rare.toml").unwrap();
    // Seed 1 draws no arrival in the second (Poisson, 1 expected); seed 2 draws one.
    let none = simulate(&sc, &policies(&["coordinator", "random"]), &[1], 1, None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&none.to_json()).unwrap();
    for p in v["policies"].as_array().unwrap() {
        assert_eq!(p["requests"], 0.0, "{p}");
        for key in [
            "error_rate",
            "success_rate",
            "attempts_per_request",
            "success_within_timeout",
            "overload_rate",
        ] {
            assert!(p[key].is_null(), "{key}: {p}");
        }
        for key in ["latency_ms", "ttfb_ms"] {
            for q in ["mean", "p50", "p99", "p999"] {
                assert!(p[key][q].is_null(), "{key}.{q}: {p}");
            }
        }
        assert!(
            p["share"]["a"].is_null() && p["share"]["b"].is_null(),
            "{p}"
        );
        assert_eq!(p["goodput_per_s"], 0.0, "{p}");
    }
    let table = none.table();
    assert!(!table.contains("NaN"), "{table}");
    // A seed without a request takes no part in the means of the others.
    let one = simulate(&sc, &policies(&["coordinator"]), &[2], 1, None).unwrap();
    let both = simulate(&sc, &policies(&["coordinator"]), &[1, 2], 1, None).unwrap();
    assert!(one.policies[0].requests >= 1.0);
    let (a, b) = (&one.policies[0], &both.policies[0]);
    assert_eq!(a.success_rate, b.success_rate);
    assert_eq!(a.latency_ms, b.latency_ms);
    assert_eq!(a.share, b.share);
    assert_eq!(b.requests, a.requests / 2.0);
}

#[test]
fn json_contract_has_every_field() {
    let r = run("recovery", &["coordinator", "round-robin"], 1);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["scenario"], "recovery");
    assert_eq!(v["seeds"], serde_json::json!([1]));
    let list = v["policies"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    for p in list {
        for key in [
            "policy",
            "requests",
            "errors",
            "error_rate",
            "success_rate",
            "stalls",
            "decisions",
            "share",
            "latency_ms",
            "ttfb_ms",
            "attempts_per_request",
            "detection_s",
            "recovery_s",
            "decisions_per_s",
        ] {
            assert!(p.get(key).is_some(), "missing {key} in {p}");
        }
        for key in ["mean", "p50", "p99"] {
            assert!(p["latency_ms"][key].is_number());
            assert!(p["ttfb_ms"][key].is_number());
        }
        let share: f64 = p["share"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_f64().unwrap())
            .sum();
        assert!((share - 1.0).abs() < 1e-9);
        assert!(p["share"].get("server-3").is_some());
    }
    // The coordinator detects the degrade; round robin never does (its share stays fair).
    assert!(list[0]["detection_s"].is_number());
    assert!(list[1]["detection_s"].is_null());
}

/// The published DRIVERS-3217 figures, 20 seeds, +- 0.05.
#[test]
fn baselines_reproduce_the_mongodb_figures_and_the_coordinator_beats_them() {
    let r = run(
        "mongo-overload",
        &["coordinator", "p2c-opcount", "mongo-error-bias"],
        20,
    );
    let near = |x: f64, target: f64| (x - target).abs() <= 0.05;
    let p2c = get(&r, "p2c-opcount");
    assert!(
        near(p2c.share["mongos-a"], 0.78),
        "{}",
        p2c.share["mongos-a"]
    );
    assert!(near(p2c.error_rate, 0.586), "{}", p2c.error_rate);
    let bias = get(&r, "mongo-error-bias");
    assert!(
        near(bias.share["mongos-a"], 0.24),
        "{}",
        bias.share["mongos-a"]
    );
    assert!(near(bias.error_rate, 0.183), "{}", bias.error_rate);
    let ours = get(&r, "coordinator");
    assert!(ours.error_rate <= 0.02, "{}", ours.error_rate);
    assert!(
        ours.share["mongos-a"] >= 0.005,
        "{}",
        ours.share["mongos-a"]
    );
}

/// 4 seeds: detection takes 1 s in every seed; recovery varies more, as the healed server
/// wins its traffic back through the floor's probes (20-seed means: 1.0 s and 6.4 s; per seed
/// 2 to 16 s over seeds 1-20 and 101-120; seeds 1-4 average 6.4 s), inside the 10 s limit.
#[test]
fn coordinator_detects_and_recovers_quickly() {
    let r = run("recovery", &["coordinator"], 4);
    let p = &r.policies[0];
    let detection = p.detection_s.expect("detected in every seed");
    let recovery = p.recovery_s.expect("recovered in every seed");
    assert!(detection <= 5.0, "{detection}");
    assert!(recovery <= 10.0, "{recovery}");
}

/// Linkerd's failure accrual takes the black hole out (five overload answers in a row) and
/// brings it back on a probe; the rule alone keeps sending it half the traffic. A caller's
/// timeout is no failure the balancer sees, so on `linkerd-spike` (only timeouts) the two read
/// the same. Seeds 1-2.
#[test]
fn failure_accrual_ejects_a_failing_endpoint_and_ignores_caller_timeouts() {
    let names = ["least-loaded", "least-loaded-accrual"];
    let r = run("mongo-overload", &names, 2);
    let (plain, accrual) = (get(&r, names[0]), get(&r, names[1]));
    assert!(plain.error_rate > 0.5, "{}", plain.error_rate);
    assert!(accrual.error_rate < 0.02, "{}", accrual.error_rate);
    let r = run("recovery", &names, 2);
    let (plain, accrual) = (get(&r, names[0]), get(&r, names[1]));
    assert_eq!(plain.detection_s, None, "the rule alone never moves away");
    assert!(accrual.detection_s.is_some_and(|d| d <= 5.0), "{accrual:?}");
    assert!(accrual.recovery_s.is_some_and(|d| d <= 15.0), "{accrual:?}");
    let r = run("linkerd-spike", &names, 1);
    assert_eq!(get(&r, names[0]).error_rate, get(&r, names[1]).error_rate);
}

/// 4 seeds: per-seed mean ttfb varies by a few percent (20-seed means: coordinator 420 ms,
/// lassie 1116 ms, ratio 0.38), so the 0.85 bound has a wide margin.
#[test]
fn coordinator_beats_lassie_on_retrieval() {
    let r = run("lassie-retrieval", &["coordinator", "lassie"], 4);
    let ours = get(&r, "coordinator").ttfb_ms.mean;
    let lassie = get(&r, "lassie").ttfb_ms.mean;
    assert!(ours <= 0.85 * lassie, "{ours} vs {lassie}");
}

/// The Step 3 target: within 1.10 x the oracle on seeds 1-10. Measured 400.8 against 368.2 ms
/// (1.089 x; 403.5 ms, 1.096 x, with the time factor at 12). The coordinator learns each
/// provider's odds while the oracle reads them; most of what is left is the learning and the
/// scheduled probes. The floor is spent only as far as it
/// tries each provider once per `floor_period_s` (10 s): here, 30 decisions a second over 40
/// providers, the full 1 % floor would try each once per 133 s, bringing none back in time,
/// and cost 1.5 % of the first bytes (1.111 x with it, docs/tuning.md, "The floor where it can
/// bring a candidate back").
#[test]
fn coordinator_is_near_the_oracle_on_retrieval() {
    let r = run("lassie-retrieval", &["coordinator", "oracle"], 10);
    let ours = get(&r, "coordinator").ttfb_ms.mean;
    let oracle = get(&r, "oracle").ttfb_ms.mean;
    assert!(ours <= 1.10 * oracle, "{ours} vs {oracle}");
}

#[test]
fn pairwise_comparison_stalls_and_the_draw_does_not() {
    let r = run("pairwise-deadlock", &["coordinator", "lassie-pairwise"], 2);
    assert!(get(&r, "lassie-pairwise").stalls > 0.0);
    assert_eq!(get(&r, "coordinator").stalls, 0.0);
    // Stalls are counted, not hung: every request still ends.
    assert_eq!(get(&r, "lassie-pairwise").requests, 400.0);
}

#[test]
fn policy_names_are_checked() {
    assert!(PolicySpec::parse("nope")
        .unwrap_err()
        .contains("unknown policy"));
    assert!(PolicySpec::parse("coordinator:lassie").is_ok());
    assert!(PolicySpec::parse("coordinator:/no/such/file.toml").is_err());
}

#[test]
fn a_policy_name_in_a_scenario_file_is_checked_when_it_is_read() {
    let text = GOOD.replacen(
        "[workload]",
        "policies = [\"coordinator\", \"nope\"]\n[workload]",
        1,
    );
    let e = Scenario::parse(&text, "bad.toml").unwrap_err();
    assert_eq!(e.field, "policies[1]", "{e}");
    let shown = e.to_string();
    assert!(
        shown.contains("bad.toml") && shown.contains("unknown policy `nope`"),
        "{shown}"
    );
    let fine = GOOD.replacen(
        "[workload]",
        "policies = [\"coordinator\", \"random\"]\n[workload]",
        1,
    );
    assert!(Scenario::parse(&fine, "good.toml").is_ok());
}

/// The time series keep a row per bucket from the start: a bucket far too narrow is refused
/// before anything is allocated.
#[test]
fn time_series_buckets_too_narrow_are_refused() {
    let open = |bucket: &str| {
        format!(
            "name = \"b\"\nseries_bucket_s = {bucket}\n[workload]\nloop = \"open\"\n\
             rate_per_s = 10.0\nduration_s = 60.0\n[[candidates]]\nid = \"a\"\nsuccess = 1.0\n"
        )
    };
    for bucket in ["1e-300", "1e-7", "0.0005", "0.00005"] {
        let e = Scenario::parse(&open(bucket), "b.toml").unwrap_err();
        assert_eq!(e.field, "series_bucket_s", "{e}");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("too narrow"), "{e}");
    }
    assert!(Scenario::parse(&open("0.001"), "b.toml").is_ok());
    // Detection and recovery read 1 s windows of whole buckets: a bucket must divide 1 s.
    for bucket in ["0.3", "0.4", "0.7", "2.0", "11.0"] {
        let e = Scenario::parse(&open(bucket), "b.toml").unwrap_err();
        assert_eq!(e.field, "series_bucket_s", "{e}");
        assert!(e.message.contains("does not divide one second"), "{e}");
    }
    for bucket in ["1.0", "0.5", "0.25", "0.2", "0.1", "0.05", "0.002"] {
        assert!(Scenario::parse(&open(bucket), "b.toml").is_ok(), "{bucket}");
    }
    // An open loop of a million seconds at 1 ms buckets would hold 10^9 rows.
    let long = open("0.001").replace("duration_s = 60.0", "duration_s = 1000000.0");
    let long = long.replace("rate_per_s = 10.0", "rate_per_s = 0.01");
    assert_eq!(
        Scenario::parse(&long, "b.toml").unwrap_err().field,
        "series_bucket_s"
    );
}

/// A config file named by a scenario file is read beside the scenario, wherever the command
/// runs from.
#[test]
fn a_config_path_in_a_scenario_file_is_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sc");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("mine.toml"), "[weights]\nload = 3.0\n").unwrap();
    let text = GOOD.replacen("[workload]", "coordinator = \"mine.toml\"\n[workload]", 1);
    let path = sub.join("s.toml");
    std::fs::write(&path, &text).unwrap();
    let sc = Scenario::load(path.to_str().unwrap()).unwrap();
    let config = &sc.coordinator.as_ref().unwrap().0;
    assert_eq!(config.weights.load, 3.0);
    // Parsed as text, there is no file to be beside: the working directory's `mine.toml`
    // does not exist.
    let e = Scenario::parse(&text, "s.toml").unwrap_err();
    assert!(e.to_string().contains("mine.toml"), "{e}");
    // A preset name stays a preset even with a file of that name beside the scenario.
    std::fs::write(sub.join("lassie"), "not a config").unwrap();
    let preset = GOOD.replacen("[workload]", "coordinator = \"lassie\"\n[workload]", 1);
    std::fs::write(&path, preset).unwrap();
    assert!(Scenario::load(path.to_str().unwrap()).is_ok());
}

/// A `coordinator:<file>` entry of a scenario file's `policies` is read beside the scenario,
/// as its `coordinator = "<file>"` is, wherever the command runs from (before, it was read
/// from the working directory and the scenario was refused).
#[test]
fn a_config_path_in_a_scenario_policies_list_is_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sc");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("mine.toml"), "[weights]\nload = 3.0\n").unwrap();
    let text = GOOD.replacen(
        "[workload]",
        "policies = [\"coordinator:mine.toml\", \"random\"]\n[workload]",
        1,
    );
    let path = sub.join("s.toml");
    std::fs::write(&path, &text).unwrap();
    let sc = Scenario::load(path.to_str().unwrap()).unwrap();
    assert_eq!(sc.source_dir(), Some(sub.as_path()));
    let specs = sc.policy_specs().unwrap();
    assert_eq!(specs[0].label(), "coordinator:mine.toml");
    let PolicySpec::Coordinator { config, .. } = &specs[0] else {
        panic!("{specs:?}")
    };
    assert_eq!(config.as_ref().unwrap().weights.load, 3.0);
    // Parsed as text, there is no file to be beside.
    let e = Scenario::parse(&text, "s.toml").unwrap_err();
    assert!(e.to_string().contains("mine.toml"), "{e}");
    // `--policies` names are the command line's: from the working directory.
    assert!(PolicySpec::parse("coordinator:mine.toml").is_err());
}

#[test]
fn a_scenario_cannot_ask_for_more_than_a_million_candidates() {
    let text = r#"
name = "huge"
[workload]
loop = "closed"
workers = 1
operations = 1
[[candidates]]
id = "n"
count = 4000000000
success = 1.0
"#;
    let err = selection_coordinator::sim::Scenario::parse(text, "huge.toml").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("candidates[0].count") && msg.contains("at most"),
        "{msg}"
    );
}

/// A served attempt whose first byte would come after the attempt timeout times out, so the
/// oracle counts it as a failure: it leaves a sure server whose first byte has slowed past
/// the timeout for a slightly less sure one that answers in time (before, it kept sending
/// there and timed out on most attempts).
#[test]
fn the_oracle_counts_first_bytes_past_the_timeout_as_failures() {
    const FILE: &str = r#"
name = "slow-past-timeout"
[workload]
loop = "open"
rate_per_s = 20.0
duration_s = 20.0
retries = 0
attempt_timeout_ms = 500.0

[[candidates]]
id = "sure-but-slow"
success = 0.999
ttfb_ms = { kind = "lognormal", mean = 1000.0, sd = 300.0 }

[[candidates]]
id = "in-time"
success = 0.99
ttfb_ms = { kind = "lognormal", mean = 50.0, sd = 10.0 }
"#;
    let sc = Scenario::parse(FILE, "test.toml").unwrap();
    let r = simulate(&sc, &policies(&["oracle"]), &[1, 2], 1, None).unwrap();
    let oracle = get(&r, "oracle");
    let in_time = oracle.share["in-time"];
    assert!(
        in_time > 0.99,
        "share to the server answering in time: {in_time}"
    );
    assert!(oracle.error_rate < 0.03, "error rate {}", oracle.error_rate);
}

/// Times past what a run can reach are refused by name (a run reaches every time it is given,
/// and a timeout of 1e300 ms used to overflow the clock); the largest accepted ones run.
#[test]
fn times_past_what_a_run_can_reach_are_refused() {
    let cases = [
        (
            "workers = 2",
            "workers = 2\ntimeout_ms = 1e300",
            "workload.timeout_ms",
        ),
        (
            "workers = 2",
            "workers = 2\nattempt_timeout_ms = 1e22",
            "workload.attempt_timeout_ms",
        ),
        (
            "workers = 2",
            "workers = 2\nthink_ms = 1e12",
            "workload.think_ms",
        ),
        (
            "workers = 2",
            "workers = 2\nstall_ms = 1e10",
            "workload.stall_ms",
        ),
        (
            "success = 0.9",
            "success = 0.9\nttfb_ms = 1e300",
            "candidates[1].ttfb_ms",
        ),
        (
            "success = 0.9",
            "success = 0.9\nduration_ms = { kind = \"exp\", mean = 1e10 }",
            // The parameter, not only the distribution.
            "candidates[1].duration_ms.mean",
        ),
    ];
    for (from, to, field) in cases {
        let e = Scenario::parse(&GOOD.replace(from, to), "bad.toml").unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains("at most"), "{e}");
    }
    let slow = GOOD
        .replace("workers = 2", "workers = 2\nbytes = 1000000")
        .replace("success = 0.9", "success = 0.9\nbandwidth_mbps = 1e-300");
    let e = Scenario::parse(&slow, "bad.toml").unwrap_err();
    assert_eq!(e.field, "candidates[1].bandwidth_mbps", "{e}");
    let timeline = format!(
        "{GOOD}\n[[timeline]]\nat_s = 1e15\naction = \"degrade\"\ncandidate = \"a\"\nsuccess = 0.1\n"
    );
    assert_eq!(
        Scenario::parse(&timeline, "bad.toml").unwrap_err().field,
        "timeline[0].at_s"
    );
    let fleet = format!("{GOOD}\n[fleet]\nclients = 2\nperiod_s = 1e-300\n");
    let e = Scenario::parse(&fleet, "bad.toml").unwrap_err();
    assert!(e.to_string().contains("period_s"), "{e}");

    // The longest timeout accepted runs: the core's deadlines saturate instead of overflowing.
    let long = GOOD.replace(
        "workers = 2",
        "workers = 2\ntimeout_ms = 1e9\nattempt_timeout_ms = 1e9",
    );
    let sc = Scenario::parse(&long, "long.toml").unwrap();
    let r = simulate(&sc, &policies(&["coordinator", "oracle"]), &[1], 1, None).unwrap();
    assert_eq!(r.policies[0].requests, 20.0);
}

/// A file that is not text says so, without the list of built-in scenarios a missing name
/// gets.
#[test]
fn a_scenario_file_that_is_not_text_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("binary.toml");
    std::fs::write(&path, [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let e = Scenario::load(path.to_str().unwrap()).unwrap_err();
    assert!(e.message.contains("UTF-8"), "{e}");
    assert!(!e.message.contains("built-in"), "{e}");
    let missing = dir.path().join("missing.toml");
    let e = Scenario::load(missing.to_str().unwrap()).unwrap_err();
    assert!(e.message.contains("built-in scenarios"), "{e}");
}

/// The top-level `recovery_s` follows the first degraded candidate's own heal: another
/// candidate's heal in between is not its return.
#[test]
fn recovery_follows_the_heal_of_the_first_degraded_candidate() {
    let text = r#"
name = "two-heals"
[workload]
loop = "open"
rate_per_s = 500.0
duration_s = 40.0
[[candidates]]
id = "a"
success = 1.0
duration_ms = 10.0
[[candidates]]
id = "b"
success = 1.0
duration_ms = 30.0
[[candidates]]
id = "c"
success = 1.0
duration_ms = 20.0
[[timeline]]
at_s = 10.0
action = "degrade"
candidate = "a"
success = 0.0
[[timeline]]
at_s = 15.0
action = "degrade"
candidate = "b"
success = 0.0
[[timeline]]
at_s = 20.0
action = "heal"
candidate = "b"
[[timeline]]
at_s = 30.0
action = "heal"
candidate = "a"
"#;
    let sc = Scenario::parse(text, "two-heals.toml").unwrap();
    let r = simulate(&sc, &policies(&["oracle"]), &[1], 1, None).unwrap();
    let oracle = &r.policies[0];
    let a = oracle.degraded.iter().find(|d| d.candidate == "a").unwrap();
    let rec = oracle.recovery_s.expect("a returns after its own heal");
    assert_eq!(Some(rec), a.recovery_s, "the top level is a's return");
}

/// A run far longer than its series can hold (a closed loop of attempts at the longest time
/// a scenario may give) keeps its totals and stops its series instead of exhausting memory.
#[test]
fn a_run_longer_than_its_series_keeps_its_totals() {
    let text = r#"
name = "long"
[workload]
loop = "closed"
workers = 1
operations = 30
[[candidates]]
id = "a"
success = 1.0
duration_ms = 1e9
"#;
    let sc = Scenario::parse(text, "long.toml").unwrap();
    let r = simulate(&sc, &policies(&["random"]), &[1], 1, None).unwrap();
    assert_eq!(r.policies[0].requests, 30.0);
    assert_eq!(r.policies[0].errors, 0.0);
}

/// First bytes are means over the seeds that had a success: a seed without one has no first
/// byte, not one of 0 ms.
#[test]
fn first_bytes_average_only_the_seeds_with_a_success() {
    let text = r#"
name = "rare"
[workload]
loop = "closed"
workers = 1
operations = 10
[[candidates]]
id = "a"
success = 0.1
failure_ms = 1.0
duration_ms = 100.0
"#;
    let sc = Scenario::parse(text, "rare.toml").unwrap();
    let seeds: Vec<u64> = (1..=8).collect();
    let per_seed: Vec<f64> = seeds
        .iter()
        .map(|&s| {
            simulate(&sc, &policies(&["random"]), &[s], 1, None)
                .unwrap()
                .policies[0]
                .errors
        })
        .collect();
    assert!(
        per_seed.contains(&10.0) && per_seed.iter().any(|e| *e < 10.0),
        "some seeds without a success, some with: {per_seed:?}"
    );
    let r = simulate(&sc, &policies(&["random"]), &seeds, 1, None).unwrap();
    let ttfb = r.policies[0].ttfb_ms;
    assert!((ttfb.mean - 100.0).abs() < 1e-9, "{ttfb:?}");
    assert!((ttfb.p50 - 100.0).abs() < 1e-9, "{ttfb:?}");
}

/// Fields of the other kind of loop are refused, not ignored; a timeline event naming a group
/// of replicas says how its replicas are named.
#[test]
fn fields_of_the_other_loop_and_replica_groups_are_named() {
    let closed = GOOD.replace("operations = 10", "operations = 10\nrate_per_s = 50.0");
    let e = Scenario::parse(&closed, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.rate_per_s", "{e}");
    assert!(e.message.contains("open loop"), "{e}");
    let open = "name = \"o\"\n[workload]\nloop = \"open\"\nrate_per_s = 10.0\nduration_s = 5.0\n\
                workers = 4\n[[candidates]]\nid = \"a\"\nsuccess = 1.0\n";
    let e = Scenario::parse(open, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.workers", "{e}");
    assert!(Scenario::parse(&open.replace("workers = 4\n", ""), "ok.toml").is_ok());

    let replicas = GOOD.replace("id = \"b\"", "id = \"b\"\ncount = 3")
        + "\n[[timeline]]\nat_s = 1.0\naction = \"degrade\"\ncandidate = \"b\"\nsuccess = 0.0\n";
    let e = Scenario::parse(&replicas, "bad.toml").unwrap_err();
    assert_eq!(e.field, "timeline[0].candidate", "{e}");
    assert!(e.message.contains("`b-0` to `b-2`"), "{e}");
}

/// A slow period whose service passes the longest time a run can reach is refused by field
/// (it used to hang the run); the slowest accepted one finishes, the server's leftover work
/// after the callers gave up costing no tick per second of it.
#[test]
fn a_slowdown_past_what_a_run_can_reach_is_refused_and_the_largest_finishes() {
    let text = |factor: &str| {
        format!(
            "name = \"x\"\n[workload]\nloop = \"open\"\nrate_per_s = 100\nduration_s = 2\n\
             timeout_ms = 100\n[[candidates]]\nid = \"a\"\nsuccess = 1.0\nservice_ms = 10\n\
             slowdown = {{ period_ms = 1, factor = {factor}, probability = 1.0 }}\n\
             [[candidates]]\nid = \"b\"\nsuccess = 1.0\nduration_ms = 5\n"
        )
    };
    let e = Scenario::parse(&text("1e9"), "s.toml").unwrap_err();
    assert_eq!(e.field, "candidates[0].slowdown.factor", "{e}");
    assert!(e.message.contains("at most 1.000e8"), "{e}");
    let degrade = format!(
        "{}\n[[timeline]]\nat_s = 1\naction = \"degrade\"\ncandidate = \"a\"\n\
         slowdown = {{ period_ms = 1, factor = 1e12 }}\n",
        text("2")
    );
    let e = Scenario::parse(&degrade, "s.toml").unwrap_err();
    assert_eq!(e.field, "timeline[0].slowdown.factor", "{e}");

    let sc = Scenario::parse(&text("1e8"), "s.toml").unwrap();
    let started = std::time::Instant::now();
    let r = simulate(&sc, &policies(&["random"]), &[1], 1, None).unwrap();
    assert!(r.policies[0].requests > 100.0);
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
}

/// The caps on workers and requests are ones a run can hold in memory: a hundred million
/// workers (a start event each) or requests (kept for the percentiles) are refused by field,
/// with the limit.
#[test]
fn workers_and_requests_are_capped_at_what_fits_in_memory() {
    let many_workers = GOOD.replace(
        "workers = 2\noperations = 10",
        "workers = 100000000\noperations = 1",
    );
    let e = Scenario::parse(&many_workers, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.workers", "{e}");
    assert!(e.message.contains("at most 1000000"), "{e}");
    let many_ops = GOOD.replace(
        "workers = 2\noperations = 10",
        "workers = 1\noperations = 100000000",
    );
    let e = Scenario::parse(&many_ops, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.workers", "{e}");
    assert!(e.message.contains("at most 1e7"), "{e}");
    let open = "name = \"o\"\n[workload]\nloop = \"open\"\nrate_per_s = 1e5\nduration_s = 101\n\
                [[candidates]]\nid = \"a\"\nsuccess = 1.0\n";
    let e = Scenario::parse(open, "bad.toml").unwrap_err();
    assert_eq!(e.field, "workload.rate_per_s", "{e}");
    let at_cap = GOOD.replace(
        "workers = 2\noperations = 10",
        "workers = 1000000\noperations = 10",
    );
    Scenario::parse(&at_cap, "ok.toml").unwrap();
}

/// A mistyped policy gets the closest name suggested, as a mistyped scenario does; a scenario
/// file listing a policy twice is refused by field.
#[test]
fn a_mistyped_policy_gets_a_suggestion_and_a_repeat_is_refused() {
    let e = PolicySpec::parse("coordinatr").unwrap_err();
    assert!(e.contains("did you mean `coordinator`?"), "{e}");
    let e = PolicySpec::parse("p2c-peak-ewmaa").unwrap_err();
    assert!(e.contains("did you mean `p2c-peak-ewma`?"), "{e}");
    let e = PolicySpec::parse("zzzzzzzz").unwrap_err();
    assert!(!e.contains("did you mean"), "{e}");
    let twice = GOOD.replacen(
        "[workload]",
        "policies = [\"oracle\", \"random\", \"oracle\"]\n[workload]",
        1,
    );
    let e = Scenario::parse(&twice, "bad.toml").unwrap_err();
    assert_eq!(e.field, "policies[2]", "{e}");
    assert!(e.message.contains("listed twice"), "{e}");
}

/// NaN or infinity in an inline `[coordinator]` table is refused by its path with the config
/// file's words ("is NaN", "is infinite"), not as "must not be null" after a JSON conversion.
#[test]
fn a_non_finite_number_in_an_inline_coordinator_table_is_named() {
    for (value, path, what) in [
        ("exponent = nan", "coordinator.exponent", "is NaN"),
        ("exponent = -inf", "coordinator.exponent", "is infinite"),
        (
            "[coordinator.ema]\nalpha = inf",
            "coordinator.ema.alpha",
            "is infinite",
        ),
    ] {
        let text = format!("{GOOD}\n[coordinator]\npreset = \"lassie\"\n{value}\n");
        let e = Scenario::parse(&text, "bad.toml").unwrap_err();
        assert_eq!(e.field, "coordinator", "{e}");
        assert!(e.message.contains(&format!("{path}: {what}")), "{e}");
        assert!(!e.message.contains("null"), "{e}");
    }
}

/// A timeline entry is checked as the candidate it leaves: a degrade whose candidate
/// `[[candidates]]` would refuse is refused at the entry's field and line, saying what to fix;
/// an entry whose action ignores its overrides, and a degrade with none, are refused. Before,
/// each was accepted (and the overrides of a leave silently did nothing).
#[test]
fn timeline_overrides_pass_the_candidate_checks() {
    let base = "name = \"x\"\n[workload]\nloop = \"closed\"\nworkers = 1\noperations = 5\n\
                bytes = 1000000000\n\
                [[candidates]]\nid = \"a\"\nsuccess = 1.0\nduration_ms = 5\n\
                [[candidates]]\nid = \"q\"\nsuccess = 1.0\nservice_ms = 5\n\
                [[candidates]]\nid = \"k\"\nsuccess = 1.0\nduration_ms = 5\n\
                knee = { start = 2, exp = 2 }\n";
    let entry = |candidate: &str, action: &str, fields: &str| {
        format!(
            "{base}\n[[timeline]]\nat_s = 1\naction = \"{action}\"\ncandidate = \"{candidate}\"\n\
             {fields}\n"
        )
    };
    // The entry starts on line 18; its fields from line 21.
    for (text, field, hint) in [
        (
            entry("a", "degrade", "bandwidth_mbps = 1e-6"),
            "timeline[0].bandwidth_mbps",
            "raise the bandwidth",
        ),
        (
            entry("q", "degrade", "knee = { start = 2, exp = 2 }"),
            "timeline[0].knee",
            "drop `knee` or `service_ms`",
        ),
        (
            entry("k", "degrade", "service_ms = 5"),
            "timeline[0].service_ms",
            "drop `knee` or `service_ms`",
        ),
        (
            entry("a", "degrade", "knee = { exp = 1 }"),
            "timeline[0].knee",
            "changes no latency",
        ),
        (
            entry("a", "degrade", "servers = 4"),
            "timeline[0].servers",
            "give the candidate a `service_ms`",
        ),
        (
            entry("a", "degrade", "queue_limit = 4"),
            "timeline[0].queue_limit",
            "give the candidate a `service_ms`",
        ),
        (
            entry("a", "leave", "success = 0.5"),
            "timeline[0].success",
            "make the entry a degrade",
        ),
        (
            entry("a", "heal", "ttfb_ms = 5"),
            "timeline[0].ttfb_ms",
            "make the entry a degrade",
        ),
        (
            entry("a", "degrade", ""),
            "timeline[0].action",
            "give it at least one of",
        ),
    ] {
        let e = Scenario::parse(&text, "s.toml").unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(hint), "{e}");
        assert!(e.line.is_some_and(|l| l >= 18), "{e}");
    }
    // Degrades add up until a heal: a queue's `servers` after a degrade that gave `service_ms`
    // is fine, and a heal takes the candidate back to its entry.
    let ok = format!(
        "{}\n[[timeline]]\nat_s = 2\naction = \"degrade\"\ncandidate = \"a\"\nservers = 2\n",
        entry("a", "degrade", "service_ms = 5")
    );
    Scenario::parse(&ok, "s.toml").unwrap();
    let healed = format!(
        "{}\n[[timeline]]\nat_s = 1.5\naction = \"heal\"\ncandidate = \"a\"\n",
        ok
    );
    let e = Scenario::parse(&healed, "s.toml").unwrap_err();
    assert_eq!(e.field, "timeline[1].servers", "{e}");
}

/// A distribution table's keys its kind does not use are refused, named (before,
/// `{ kind = "exp", mean = 10, sd = 50 }` ran as an exponential, its `sd` silently dropped).
#[test]
fn a_distribution_key_its_kind_does_not_use_is_refused() {
    for (dist, unused) in [
        ("{ kind = \"exp\", mean = 10, sd = 50 }", "`sd`"),
        ("{ kind = \"const\", value = 1, sd = 3 }", "`sd`"),
        (
            "{ kind = \"normal\", mean = 10, sd = 2, min = 1, max = 3 }",
            "`min`, `max`",
        ),
        (
            "{ kind = \"uniform\", min = 1, max = 3, value = 2 }",
            "`value`",
        ),
    ] {
        let text = GOOD.replacen(
            "success = 0.5",
            &format!("success = 0.5\nttfb_ms = {dist}"),
            1,
        );
        let e = Scenario::parse(&text, "s.toml").unwrap_err();
        assert_eq!(e.field, "candidates[0].ttfb_ms", "{e}");
        assert!(e.message.contains(&format!("does not use {unused}")), "{e}");
        assert_eq!(e.line, Some(11), "{e}");
    }
    let ok = GOOD.replacen(
        "success = 0.5",
        "success = 0.5\nttfb_ms = { kind = \"lognormal\", mean = 10, sd = 5 }",
        1,
    );
    Scenario::parse(&ok, "s.toml").unwrap();
}
