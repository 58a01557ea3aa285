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

#[test]
fn fleet_bounds_take_their_ends_and_refuse_negatives() {
    let base = spec(FleetShare::Digest);
    for ok in [
        FleetSpec {
            clients: 1,
            ..base.clone()
        },
        FleetSpec {
            clients: 100,
            loss: 1.0,
            ..base.clone()
        },
        FleetSpec {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss: 0.0,
            period_s: 0.001,
            ..base.clone()
        },
        FleetSpec {
            period_s: 1e6,
            ..base.clone()
        },
    ] {
        assert_eq!(ok.check(), Ok(()), "{ok:?}");
    }
    for (bad, field) in [
        (
            FleetSpec {
                delay_ms: -1.0,
                ..base.clone()
            },
            "fleet.delay_ms",
        ),
        (
            FleetSpec {
                jitter_ms: -1.0,
                ..base.clone()
            },
            "fleet.jitter_ms",
        ),
        (
            FleetSpec {
                loss: -0.1,
                ..base.clone()
            },
            "fleet.loss",
        ),
        (
            FleetSpec {
                period_s: 0.0009,
                ..base.clone()
            },
            "fleet.period_s",
        ),
        (
            FleetSpec {
                period_s: 1.1e6,
                ..base.clone()
            },
            "fleet.period_s",
        ),
    ] {
        let err = bad.check().unwrap_err();
        assert!(err.contains(field), "{err}");
    }
}

/// A `[fleet]` table naming only its clients shares digests every second, at once and
/// without loss, and publishes on the period only.
#[test]
fn a_bare_fleet_table_takes_the_defaults() {
    let text = SMALL.replace(
        "clients = 8\nperiod_s = 1.0\ndelay_ms = 50.0",
        "clients = 2",
    );
    let fleet = Scenario::parse(&text, "bare").unwrap().fleet.unwrap();
    let want = FleetSpec {
        clients: 2,
        share: FleetShare::Digest,
        period_s: 1.0,
        delay_ms: 0.0,
        jitter_ms: 0.0,
        loss: 0.0,
        urgent: false,
    };
    assert_eq!(fleet, want);
}

#[test]
fn fleet_share_names_parse_back() {
    for share in [FleetShare::None, FleetShare::Digest] {
        assert_eq!(FleetShare::parse(share.name()), Ok(share));
    }
    assert_eq!(FleetShare::parse("none"), Ok(FleetShare::None));
    assert!(FleetShare::parse("gossip").unwrap_err().contains("gossip"));
}

/// Open loop: each arrival goes to a client drawn uniformly, so every client serves some
/// requests and the worst client's mean is above the fleet's.
#[test]
fn open_loop_arrivals_are_spread_over_the_clients() {
    let r = simulate_fleet(&small(), &spec(FleetShare::None), &[1], 1).unwrap();
    assert!(
        r.worst_client_ttfb_vs_oracle > r.ttfb_vs_oracle * 1.01,
        "worst {} vs fleet {}",
        r.worst_client_ttfb_vs_oracle,
        r.ttfb_vs_oracle
    );
}

/// Loss and jitter are drawn from the run's seed: two seeds lose different copies, and a
/// jitter moves the arrivals (and so what the clients learn, and when).
#[test]
fn loss_and_jitter_are_drawn_per_seed() {
    let sc = small();
    let lossy = FleetSpec {
        loss: 0.3,
        ..spec(FleetShare::Digest)
    };
    let a = simulate_fleet(&sc, &lossy, &[1], 1).unwrap();
    let b = simulate_fleet(&sc, &lossy, &[2], 1).unwrap();
    assert_eq!(a.digests, b.digests, "one digest per client per period");
    assert_ne!(a.copies_lost, b.copies_lost);
    let still = simulate_fleet(&sc, &spec(FleetShare::Digest), &[1], 1).unwrap();
    let jittery = FleetSpec {
        jitter_ms: 300.0,
        ..spec(FleetShare::Digest)
    };
    let jittery = simulate_fleet(&sc, &jittery, &[1], 1).unwrap();
    assert_eq!(jittery.digests, still.digests);
    let (s, j) = (still.degrade.unwrap(), jittery.degrade.unwrap());
    assert_ne!(s.detection_s, j.detection_s);
    // A jitter of under a period still brings every copy within the run.
    assert!(j.detection_s.is_some(), "{j:?}");
}

/// An urgent digest waits 1.2 x the receivers' `min_interval_s` plus the jitter after the
/// previous one, so however the copies are jittered the receivers' flood control takes it.
#[test]
fn urgent_digests_keep_clear_of_flood_control_under_jitter() {
    let sc = small();
    let urgent = FleetSpec {
        urgent: true,
        jitter_ms: 300.0,
        ..spec(FleetShare::Digest)
    };
    let r = simulate_fleet(&sc, &urgent, &[1, 2], 2).unwrap();
    assert_eq!(r.copies_rejected, 0.0);
    assert!(r.entries_applied > 0.0);
}

/// The report's detection share agrees with its slowest client: all within 2 periods
/// exactly when the slowest detected within 2 periods.
#[test]
fn the_share_within_two_periods_agrees_with_the_slowest_client() {
    let sc = small();
    for (share, urgent) in [
        (FleetShare::Digest, true),
        (FleetShare::Digest, false),
        (FleetShare::None, false),
    ] {
        let s = FleetSpec {
            urgent,
            ..spec(share)
        };
        for seed in 1..=3 {
            let r = simulate_fleet(&sc, &s, &[seed], 1).unwrap();
            let d = r.degrade.unwrap();
            let all_within = d.within_2_periods == 1.0;
            let slowest_within = d
                .detection_s_max
                .is_some_and(|m| m <= 2.0 * s.period_s + 1e-9);
            let ctx = format!("{share:?} urgent {urgent} seed {seed}: {d:?}");
            assert_eq!(all_within, slowest_within, "{ctx}");
            assert!(d.quiet_clients <= d.clients, "{ctx}");
            assert!((0.0..=1.0).contains(&d.quiet_within_2_periods), "{ctx}");
        }
    }
}

fn edit(from: &str, to: &str) -> Scenario {
    assert!(SMALL.contains(from), "{from}");
    Scenario::parse(&SMALL.replace(from, to), "fleet-edited").unwrap()
}

/// The heal read is the degraded candidate's own, after its degrade: a heal of another
/// candidate, or one before the degrade, is not it.
#[test]
fn the_heal_is_the_degraded_candidates_own_and_after_it() {
    let sc = edit(
        "[[timeline]]\nat_s = 15.0",
        "[[timeline]]\nat_s = 5.0\naction = \"heal\"\ncandidate = \"best\"\n\n\
         [[timeline]]\nat_s = 20.0\naction = \"heal\"\ncandidate = \"other-1\"\n\n\
         [[timeline]]\nat_s = 15.0",
    );
    let r = simulate_fleet(&sc, &spec(FleetShare::Digest), &[1], 1).unwrap();
    let d = r.degrade.unwrap();
    assert_eq!((d.degraded_at_s, d.healed_at_s), (15.0, Some(30.0)));
}

/// Herding is read on 1 s buckets of at least 20 attempts: a run that never makes that many
/// in a second has no busiest share.
#[test]
fn seconds_of_few_attempts_do_not_count_as_herding() {
    let text = SMALL
        .replace("rate_per_s = 8.0", "rate_per_s = 3.0")
        .replace("retries = 3", "retries = 0");
    let sc = Scenario::parse(&text, "fleet-sparse").unwrap();
    let r = simulate_fleet(&sc, &spec(FleetShare::None), &[1], 1).unwrap();
    let d = r.degrade.unwrap();
    assert_eq!(
        (d.busiest_share, d.single_busiest_share),
        (0.0, 0.0),
        "{d:?}"
    );
}

/// Clients learning alone spread the traffic more than one coordinator taking all of it.
/// Before the degrade the best candidate takes whole seconds; from the degrade on (no heal
/// here) it is out, so the busiest share over those seconds is below the run's.
#[test]
fn herding_compares_the_fleet_with_one_coordinator() {
    let text = SMALL.replace("rate_per_s = 8.0", "rate_per_s = 40.0");
    let no_heal = &text[..text.rfind("[[timeline]]").unwrap()];
    let sc = Scenario::parse(no_heal, "fleet-busy").unwrap();
    let r = simulate_fleet(&sc, &spec(FleetShare::None), &[1], 1).unwrap();
    let d = r.degrade.unwrap();
    assert_eq!(d.healed_at_s, None);
    assert!(d.busiest_share_after < d.busiest_share, "{d:?}");
    assert!(
        d.single_busiest_share_after > d.busiest_share_after,
        "{d:?}"
    );
    assert!(d.herding_ratio_after < 1.0, "{d:?}");
}

/// A degrade more than 5 s after an open loop's arrivals end leaves nothing to sample (the
/// window before it starts after the last arrival); the run still ends with the requests
/// still open then, and measures no client.
#[test]
fn a_degrade_after_the_arrivals_end_leaves_the_run_to_finish() {
    let text = SMALL
        .replace("at_s = 15.0", "at_s = 46.0")
        .replace("mean = 40.0, sd = 10.0", "mean = 20000.0, sd = 10.0")
        .replace("mean = 90.0, sd = 20.0", "mean = 20000.0, sd = 20.0");
    let no_heal = &text[..text.rfind("[[timeline]]").unwrap()];
    let sc = Scenario::parse(no_heal, "fleet-late-degrade").unwrap();
    let r = simulate_fleet(&sc, &spec(FleetShare::Digest), &[1], 1).unwrap();
    let d = r.degrade.unwrap();
    assert_eq!((d.degraded_at_s, d.clients), (46.0, 0.0));
    // No client was measured, so no detection time is reported.
    assert_eq!((d.detection_s, d.detection_s_max), (None, None));
    assert!(r.ttfb_ms > 0.0);
}
