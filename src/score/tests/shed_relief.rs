//! `load.shed_relief`: where the fleet queues, overload failures that follow a candidate's
//! load are charged by the load component, not a second time by the overload window.

use super::*;

/// The overload component of a candidate whose window holds 30 outcomes, 12 of them overload
/// failures (0.6 when counted in full), in a fleet with queueing evidence `queueing` whose
/// requests retried every shed.
fn overload(config: Config, queueing: f32, follows_load: bool) -> f64 {
    overload_retried(config, queueing, follows_load, 1.0)
}

/// As [`overload`], with `retried` the share of sheds whose requests went on.
fn overload_retried(config: Config, queueing: f32, follows_load: bool, retried: f64) -> f64 {
    let mut stats = Stats::default();
    for i in 0..30 {
        stats.window.record(0, 10, i % 5 < 2);
    }
    let mut cx = ctx(Overall::default());
    cx.queueing = queueing;
    cx.overload_follows_load = follows_load;
    let mut m = model(config);
    m.set_shed_retried(retried);
    m.learned(&stats, &cx, None).overload
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn sheds_that_follow_the_load_count_as_far_as_the_fleet_does_not_queue() {
    let default = Config::default();
    assert_eq!(default.load.shed_relief, 1.0);
    // A fleet whose latencies are the servers' own: counted in full.
    assert!(close(overload(default.clone(), 0.0, true), 0.6));
    // A fleet that queues in full: the load component alone charges the sheds.
    assert!(close(overload(default.clone(), 1.0, true), 1.0));
    // In part: the component to the power 1 - q.
    assert!(close(overload(default.clone(), 0.5, true), 0.6f64.sqrt()));
    // Failures that come at any load are counted in full in any fleet.
    assert!(close(overload(default.clone(), 1.0, false), 0.6));
    // Off, or with the fleet's queueing not read: as before.
    let mut off = default.clone();
    off.load.shed_relief = 0.0;
    assert!(close(overload(off, 1.0, true), 0.6));
    let mut unread = default;
    unread.load.queueing = false;
    assert!(close(overload(unread, 1.0, true), 0.6));
}

#[test]
fn sheds_that_end_their_requests_count_in_full() {
    let default = Config::default();
    // No request went on after a shed: every shed was an error, the window's to count.
    assert!(close(
        overload_retried(default.clone(), 1.0, true, 0.0),
        0.6
    ));
    // Half of them went on: half the relief.
    assert!(close(
        overload_retried(default.clone(), 1.0, true, 0.5),
        0.6f64.sqrt()
    ));
    // Out of range is read as its bound.
    assert!(close(overload_retried(default, 1.0, true, 7.0), 1.0));
}

#[test]
fn a_relief_outside_zero_to_one_is_refused_by_name() {
    let mut c = Config::default();
    c.load.shed_relief = 1.5;
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("load.shed_relief"), "{err}");
}
