//! Fleet mode of the simulator: several coordinators over one shared set of candidates, with
//! and without digests. Small runs (a few clients, seconds of virtual time) so they stay quick.

use selection_coordinator::sim::{simulate_fleet, FleetShare, FleetSpec, Scenario};

const SMALL: &str = r#"
name = "fleet-small"
series_bucket_s = 0.1

[fleet]
clients = 8
period_s = 1.0
delay_ms = 50.0

[workload]
loop = "open"
rate_per_s = 8.0
duration_s = 40.0
retries = 3

[[candidates]]
id = "best"
success = 0.99
failure = "transport"
failure_ms = 20.0
ttfb_ms = { kind = "lognormal", mean = 40.0, sd = 10.0 }

[[candidates]]
id = "other"
count = 3
success = 0.97
failure = "transport"
failure_ms = 20.0
ttfb_ms = { kind = "lognormal", mean = 90.0, sd = 20.0 }

[[timeline]]
at_s = 15.0
action = "degrade"
candidate = "best"
success = 0.05

[[timeline]]
at_s = 30.0
action = "heal"
candidate = "best"
"#;

fn small() -> Scenario {
    Scenario::parse(SMALL, "fleet-small").unwrap()
}

fn spec(share: FleetShare) -> FleetSpec {
    FleetSpec {
        share,
        ..small().fleet.unwrap()
    }
}

#[test]
fn a_fleet_run_is_a_function_of_its_seed() {
    let sc = small();
    let a = simulate_fleet(&sc, &spec(FleetShare::Digest), &[3, 4], 1).unwrap();
    let b = simulate_fleet(&sc, &spec(FleetShare::Digest), &[3, 4], 2).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.fleet.clients, 8);
    assert!(a.ttfb_ms > 0.0 && a.oracle_ttfb_ms > 0.0);
}

#[test]
fn digests_flow_only_when_shared_and_the_loss_model_drops_copies() {
    let sc = small();
    let none = simulate_fleet(&sc, &spec(FleetShare::None), &[1], 1).unwrap();
    assert_eq!(none.digests, 0.0);
    assert_eq!(none.entries_applied, 0.0);
    let shared = simulate_fleet(&sc, &spec(FleetShare::Digest), &[1], 1).unwrap();
    // One digest per client per period while requests remain.
    assert!(shared.digests >= 8.0 * 30.0, "{}", shared.digests);
    assert!(shared.entries_applied > 0.0);
    assert_eq!(shared.copies_lost, 0.0);
    let lossy = FleetSpec {
        loss: 0.5,
        ..spec(FleetShare::Digest)
    };
    let lossy = simulate_fleet(&sc, &lossy, &[1], 1).unwrap();
    let copies = lossy.digests * 7.0;
    let lost = lossy.copies_lost / copies;
    assert!((0.4..0.6).contains(&lost), "lost {lost}");
}

/// Every client is measured, including those that did not send to the degraded candidate;
/// with digests they learn of it sooner than alone.
#[test]
fn digests_spread_a_degrade_to_clients_that_never_hit_it() {
    let sc = small();
    let seeds = [1, 2, 3];
    let none = simulate_fleet(&sc, &spec(FleetShare::None), &seeds, 2).unwrap();
    let shared = simulate_fleet(&sc, &spec(FleetShare::Digest), &seeds, 2).unwrap();
    let (n, s) = (none.degrade.unwrap(), shared.degrade.unwrap());
    assert!(n.clients >= 6.0 && s.clients >= 6.0, "{n:?} {s:?}");
    assert!(s.quiet_clients > 0.0, "{s:?}");
    // Every client detects with digests; alone, slower or never.
    let shared_s = s.detection_s.expect("every client detects with digests");
    assert!(
        n.detection_s.is_none_or(|alone| shared_s < alone),
        "digest {:?} vs none {:?}",
        s.detection_s,
        n.detection_s
    );
}

/// A client whose own outcomes change sharply publishes at once: more digests than one per
/// period, and the others stop drawing the degraded candidate sooner.
#[test]
fn urgent_digests_go_out_on_a_sharp_change() {
    let sc = small();
    let seeds = [1, 2, 3];
    let periodic = simulate_fleet(&sc, &spec(FleetShare::Digest), &seeds, 2).unwrap();
    let urgent = FleetSpec {
        urgent: true,
        ..spec(FleetShare::Digest)
    };
    let urgent = simulate_fleet(&sc, &urgent, &seeds, 2).unwrap();
    assert!(
        urgent.digests > periodic.digests,
        "{} vs {}",
        urgent.digests,
        periodic.digests
    );
    assert_eq!(urgent.copies_rejected, 0.0, "every urgent digest is taken");
    let (p, u) = (periodic.degrade.unwrap(), urgent.degrade.unwrap());
    let (p, u) = (p.detection_s.unwrap(), u.detection_s.unwrap());
    assert!(u < p, "urgent {u} vs periodic {p}");
}

#[test]
fn bad_fleet_settings_are_named() {
    let sc = small();
    for (bad, field) in [
        (
            FleetSpec {
                clients: 0,
                ..spec(FleetShare::Digest)
            },
            "fleet.clients",
        ),
        (
            FleetSpec {
                clients: 101,
                ..spec(FleetShare::Digest)
            },
            "fleet.clients",
        ),
        (
            FleetSpec {
                loss: 1.5,
                ..spec(FleetShare::Digest)
            },
            "fleet.loss",
        ),
        (
            FleetSpec {
                period_s: 0.0,
                ..spec(FleetShare::Digest)
            },
            "fleet.period_s",
        ),
    ] {
        let err = simulate_fleet(&sc, &bad, &[1], 1).unwrap_err();
        assert!(err.contains(field), "{err}");
    }
    assert!(Scenario::parse(&SMALL.replace("clients = 8", "clients = 8\nbogus = 1"), "x").is_err());
}
