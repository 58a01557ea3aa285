//! `load.fleet_relative`: where the fleet queues, attempts in flight are counted against the
//! fleet's mean attempts in flight per candidate.

use super::*;
use crate::score::fleet_scale;

#[test]
fn attempts_in_flight_count_against_the_fleets_mean_as_far_as_it_queues() {
    // The mean attempts in flight per live candidate, at least 1, to the queueing evidence.
    assert_eq!(fleet_scale(0, 10, 1.0), 1.0);
    assert_eq!(fleet_scale(5, 10, 1.0), 1.0);
    assert_eq!(fleet_scale(200, 10, 1.0), 20.0);
    assert_eq!(fleet_scale(200, 10, 0.0), 1.0);
    assert!((fleet_scale(200, 10, 0.5) - 20f64.sqrt()).abs() < 1e-12);
    assert_eq!(fleet_scale(7, 0, 1.0), 7.0);
    let m = model(Config::default());
    let load = |m: &ScoreModel, in_flight: u32, scale: f64| {
        m.load_component(in_flight, u32::MAX, 500, 0.0, true, 1.0, scale, 0.0, None)
    };
    // Twenty in flight where the fleet's mean is twenty: 1 / 2, not 1 / 21.
    assert_eq!(load(&m, 20, 20.0), 0.5);
    assert_eq!(load(&m, 20, 1.0), 1.0 / 21.0);
    // Twice the mean weighs against the mean as two attempts do against one.
    let relative = load(&m, 40, 20.0) / load(&m, 20, 20.0);
    assert!((relative - load(&m, 2, 1.0) / load(&m, 1, 1.0)).abs() < 1e-12);
    // Off, and lassie's load for everyone: counted as they are.
    let mut off = Config::default();
    off.load.fleet_relative = false;
    assert_eq!(load(&model(off), 20, 20.0), 1.0 / 21.0);
    let lassie = Config {
        load: LoadConfig::ALWAYS,
        ..Config::default()
    };
    assert_eq!(load(&model(lassie), 20, 20.0), 1.0 / 21.0);
    // A per-candidate limit is counted as it is.
    assert_eq!(
        m.load_component(5, 10, 500, 0.0, true, 1.0, 20.0, 0.0, None),
        0.5
    );
}
