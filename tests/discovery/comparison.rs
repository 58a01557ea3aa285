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
