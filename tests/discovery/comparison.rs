//! The `livepeer-discovery` comparison.

use super::*;

#[test]
fn livepeer_discovery_cached_beats_per_request_fanout() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/livepeer-discovery.toml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert!(DiscoveryScenario::is_discovery(&text));
    let mut scenario = DiscoveryScenario::from_toml_str(&text).unwrap();
    assert_eq!((scenario.candidates, scenario.streams), (1000, 100));
    scenario.seeds.truncate(1);
    let report = sim::run(&scenario).unwrap();
    let fanout = &report.policies[0];
    let cached = &report.policies[1];
    assert_eq!(fanout.policy, "per-request-fanout");
    assert_eq!(cached.policy, "cached");
    assert_eq!(fanout.discovery_fetches, 100_000);
    assert_eq!(fanout.peak_concurrent_fetches, 100_000);
    assert!(fanout.stream_start_wait_ms.mean >= 500.0, "{fanout:?}");
    assert!(cached.fetches_per_refresh <= 1000.0, "{cached:?}");
    assert_eq!(cached.discovery_fetches, 1000);
    assert!(cached.peak_concurrent_fetches <= 100, "{cached:?}");
    assert_eq!(cached.streams_started, 100);
    assert_eq!(
        cached.stream_start_wait_ms.max, 0.0,
        "warm cache: no network wait"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["scenario"], "livepeer-discovery");
    assert!(json["policies"][1]["peak_concurrent_fetches"].is_u64());
    println!("{}", sim::render_table(&report));
}

#[test]
fn selcoord_simulate_writes_the_discovery_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args(["simulate", "--scenario", "livepeer-discovery", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("per-request-fanout") && table.contains("cached"),
        "{table}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["scenario"], "livepeer-discovery");
    assert_eq!(report["seeds"], serde_json::json!([1]));
    let policies = report["policies"].as_array().unwrap();
    let by = |name: &str| {
        policies
            .iter()
            .find(|p| p["policy"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by("per-request-fanout")["discovery_fetches"], 100_000);
    assert_eq!(by("cached")["discovery_fetches"], 1000);
    assert_eq!(by("cached")["peak_concurrent_fetches"], 100);
    assert_eq!(by("cached")["stream_start_wait_ms"]["max"], 0.0);

    // Options that belong to policy scenarios are refused with a reason.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_selcoord"))
        .args([
            "simulate",
            "--scenario",
            "livepeer-discovery",
            "--policies",
            "random",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--policies"));
}

/// Times too long for the clock are refused by name, before anything adds them to an
/// `Instant` (which would panic).
#[test]
fn times_past_the_clock_are_refused() {
    for (field, config) in [
        (
            "expiry_s",
            DiscoveryConfig {
                expiry_s: 1e19,
                ..DiscoveryConfig::default()
            },
        ),
        (
            "interval_s",
            DiscoveryConfig {
                interval_s: 1e19,
                ..DiscoveryConfig::default()
            },
        ),
        (
            "idle_pause_s",
            DiscoveryConfig {
                idle_pause_s: Some(1e20),
                ..DiscoveryConfig::default()
            },
        ),
        (
            "cutoff_max_s",
            DiscoveryConfig {
                cutoff_max_s: 1e20,
                ..DiscoveryConfig::default()
            },
        ),
        (
            "threshold_backoff_s",
            DiscoveryConfig {
                threshold_backoff_s: 1e20,
                ..DiscoveryConfig::default()
            },
        ),
    ] {
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.contains(field) && err.contains("at most"),
            "{field}: {err}"
        );
        let catalogue = Catalogue::new(config, Instant::now(), SmallRng::seed_from_u64(1));
        assert!(catalogue.is_err(), "{field}");
    }
    let long = DiscoveryConfig {
        expiry_s: selection_coordinator::discovery::MAX_SECONDS,
        ..DiscoveryConfig::default()
    };
    assert!(long.validate().is_ok());

    for (field, text) in [
        ("warm_up_s", "kind = \"discovery\"\nwarm_up_s = 1e20\n"),
        (
            "latency.median_ms",
            "kind = \"discovery\"\n[latency]\nmedian_ms = 1e30\n",
        ),
    ] {
        let err = DiscoveryScenario::from_toml_str(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
}
