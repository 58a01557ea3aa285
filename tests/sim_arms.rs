//! Per-arm results in the simulator: a config with live A/B arms reports each arm's requests
//! and figures, and each arm behaves like its config run alone.

use selection_coordinator::sim::{simulate, PolicyReport, PolicySpec, Report, Scenario};

fn config(file: &str) -> String {
    format!(
        "coordinator:{}/examples/configs/{file}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn run(names: &[String], seeds: u64) -> Report {
    let sc = Scenario::load("mongo-overload").unwrap();
    let policies: Vec<PolicySpec> = names
        .iter()
        .map(|n| PolicySpec::parse(n).unwrap())
        .collect();
    let seeds: Vec<u64> = (1..=seeds).collect();
    simulate(&sc, &policies, &seeds, 2, None).unwrap()
}

fn get<'a>(r: &'a Report, policy: &str) -> &'a PolicyReport {
    r.policies.iter().find(|p| p.policy == policy).unwrap()
}

/// The 20 seeds (under a second in a debug build). The difference of two 20-seed means
/// has a standard deviation of at most 0.003 here (per-seed spread in docs/arms.md), so the
/// 0.02 tolerance is over 6 standard deviations: it fails on a misattributed arm, not on noise.
const SEEDS: u64 = 20;

#[test]
fn each_arm_matches_its_config_alone() {
    let (arms, tuned, lassie) = (
        config("arms-mongo.toml"),
        config("arm-tuned.toml"),
        config("arm-lassie.toml"),
    );
    let r = run(&[arms.clone(), tuned.clone(), lassie.clone()], SEEDS);
    let ab = get(&r, &arms);
    let names: Vec<&str> = ab.arms.iter().map(|a| a.arm.as_str()).collect();
    assert_eq!(names, ["tuned", "lassie"]);
    // Every request is in exactly one arm.
    let sum: f64 = ab.arms.iter().map(|a| a.requests).sum();
    assert!((sum - ab.requests).abs() < 1e-9, "{sum} vs {}", ab.requests);
    let errors: f64 = ab.arms.iter().map(|a| a.errors).sum();
    assert!(
        (errors - ab.errors).abs() < 1e-9,
        "{errors} vs {}",
        ab.errors
    );
    for a in &ab.arms {
        // Half each, give or take the binomial spread of 4000 draws.
        let half = a.requests / ab.requests;
        assert!((half - 0.5).abs() < 0.03, "arm {} took {half}", a.arm);
        let shares: f64 = a.share.values().sum();
        assert!((shares - 1.0).abs() < 1e-9, "arm {} shares {shares}", a.arm);
        assert!((a.success_rate + a.error_rate - 1.0).abs() < 1e-12);
    }
    for (arm, alone) in [
        (&ab.arms[0], get(&r, &tuned)),
        (&ab.arms[1], get(&r, &lassie)),
    ] {
        println!(
            "arm {}: error rate {:.4} in the A/B, {:.4} alone",
            arm.arm, arm.error_rate, alone.error_rate
        );
        assert!(
            (arm.error_rate - alone.error_rate).abs() <= 0.02,
            "arm {}: {:.4} in the A/B, {:.4} alone",
            arm.arm,
            arm.error_rate,
            alone.error_rate
        );
        assert!(alone.arms.is_empty());
    }
}

#[test]
fn arms_show_in_the_table_and_the_json_only_when_configured() {
    let arms = config("arms-mongo.toml");
    let r = run(&[arms, "coordinator".to_string()], 1);
    let table = r.table();
    assert!(table.contains("  [arm tuned]"), "{table}");
    assert!(table.contains("  [arm lassie]"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let with = &json["policies"][0]["arms"];
    assert_eq!(with.as_array().map(Vec::len), Some(2), "{with}");
    for field in [
        "arm",
        "requests",
        "errors",
        "error_rate",
        "success_rate",
        "share",
        "latency_ms",
        "ttfb_ms",
        "attempts_per_request",
    ] {
        assert!(with[0].get(field).is_some(), "arms[0] lacks {field}");
    }
    assert!(json["policies"][1].get("arms").is_none());
    assert!(r.policies[1].arms.is_empty());
}
