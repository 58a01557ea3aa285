//! A candidate's own queueing evidence (`load.own_queueing`): near saturation, a station that
//! queues without bound and fails with refusals, not overload errors, has its load counted only
//! at the fleet's mean evidence, while the stations that shed are held by their overload
//! evidence in full; the draw herds onto the unbounded queue. Counting the station's own
//! evidence where the fleet queues spreads the work (docs/tuning.md, "A candidate's own
//! queueing evidence"). Off by default: on the generated suite it costs `flap` some recovery.

use selection_coordinator::Config;

#[cfg(feature = "sim")]
#[path = "support/paired.rs"]
mod paired;

#[test]
fn own_queueing_is_validated_and_off_by_default() {
    assert_eq!(Config::default().load.own_queueing, 0.0);
    for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        let mut c = Config::default();
        c.load.own_queueing = bad;
        let err = c.validate().unwrap_err();
        assert!(
            err.to_string().contains("load.own_queueing"),
            "{bad}: {err}"
        );
    }
    for good in [0.0, 0.5, 1.0] {
        let mut c = Config::default();
        c.load.own_queueing = good;
        c.validate().unwrap();
    }
    let parsed: Config = toml::from_str("[load]\nown_queueing = 1.0\n").unwrap();
    assert_eq!(parsed.load.own_queueing, 1.0);
}

/// Six stations at about 85 % of their capacity (taken from a generated `drift` instance,
/// without its drift). Measured first over seeds 1-6: mean first byte 161-178 ms by default,
/// 130-145 ms with `own_queueing = 1` (0.79-0.82 of it); `least-loaded` reads 53 ms and the
/// oracle 53 ms. Since the load gate's evidence became an elasticity and the refresh period
/// 100 ms (docs/tuning.md), the default itself reads 120.3 ms over seeds 1-3 and the setting
/// 110.4 ms (0.92 of it): the default took most of what the setting gave, and the check is
/// that the setting still helps by at least 5 %. With the attempts in flight counted against
/// the fleet's mean and the time factor at 14: 81.5 ms and 74.5 ms (0.91).
#[cfg(feature = "sim")]
#[test]
fn a_saturated_fleet_spreads_better_with_own_queueing_evidence() {
    use selection_coordinator::sim::Scenario;
    let sc = Scenario::parse(SATURATED, "saturated-stations").unwrap();
    let mut own = Config::default();
    own.load.own_queueing = 1.0;
    let (default, own) = paired::mean_ttfb_default_and(&sc, own, &[1, 2, 3]);
    eprintln!("saturated stations: default {default:.1} ms, own_queueing 1 {own:.1} ms");
    assert!(own < 0.95 * default, "own {own:.1} ms against {default:.1}");
}

#[cfg(feature = "sim")]
const SATURATED: &str = r#"
name = "saturated-stations"

[workload]
loop = "open"
rate_per_s = 591.6
duration_s = 40.0
retries = 1
attempt_timeout_ms = 1454.0

[[candidates]]
id = "server-0"
success = 0.897
failure = "refused"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 0.935
ttfb_ms = 0.709
servers = 7
service_ms = { kind = "exp", mean = 39.861 }

[[candidates]]
id = "server-1"
success = 0.998
failure = "overload"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 0.348
ttfb_ms = 0.396
capacity = 1
overload_per_extra = 0.155
servers = 5
service_ms = { kind = "exp", mean = 57.403 }
queue_limit = 16

[[candidates]]
id = "server-2"
success = 0.995
failure = "overload"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 0.969
ttfb_ms = 0.374
capacity = 1
overload_per_extra = 0.189
servers = 5
service_ms = { kind = "exp", mean = 51.21 }

[[candidates]]
id = "server-3"
success = 0.989
failure = "timeout"
failure_ms = { kind = "uniform", min = 100.0, max = 500.0 }
connect_ms = 1.92
ttfb_ms = 0.663
servers = 5
service_ms = { kind = "lognormal", mean = 34.179, sd = 14.577 }
queue_limit = 37

[[candidates]]
id = "server-4"
success = 0.984
failure = "timeout"
failure_ms = { kind = "uniform", min = 100.0, max = 500.0 }
connect_ms = 0.819
ttfb_ms = 0.475
capacity = 1
overload_per_extra = 0.067
servers = 2
service_ms = { kind = "exp", mean = 42.199 }

[[candidates]]
id = "server-5"
success = 0.995
failure = "refused"
failure_ms = { kind = "uniform", min = 0.5, max = 5.0 }
connect_ms = 0.706
ttfb_ms = 0.26
capacity = 1
overload_per_extra = 0.118
servers = 7
service_ms = { kind = "lognormal", mean = 49.293, sd = 12.824 }
"#;
