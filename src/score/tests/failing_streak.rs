//! A change called on a failure makes its candidate failing, so that its next answer is a
//! change too.

use super::model;
use crate::score::evidence::failing;
use crate::score::{Config, Overall, Stats};
use crate::vocab::{FailureClass, Outcome};

#[test]
fn a_change_called_on_failures_makes_the_candidate_failing_and_its_next_answer_a_change() {
    let m = model(Config::default());
    let mut stats = Stats::default();
    let mut overall = Overall::default();
    let mut now = 0.0;
    // A candidate that answers in 18-22 ms and has never failed.
    for i in 0..50 {
        now += 0.1;
        let t = 18.0 + f64::from(i % 5);
        m.observe(
            &mut stats,
            &mut overall,
            &Outcome::success(),
            Some(t),
            now,
            0,
        );
    }
    // Two timeouts of a second in a row: a surprise, then a change called on a failure.
    let timeout = Outcome::failure(FailureClass::Timeout);
    for _ in 0..2 {
        now += 0.1;
        m.observe(&mut stats, &mut overall, &timeout, Some(1000.0), now, 0);
    }
    assert!(stats.success.is_some_and(|s| s < 0.3), "{stats:?}");
    assert_eq!(
        stats.consecutive_failures, 3,
        "two failures, counted as a streak"
    );
    assert!(failing(stats.success, stats.consecutive_failures));
    // So its next answer is a change (the candidate recovered), not a step of the average.
    now += 1.0;
    let observed = m.observe(
        &mut stats,
        &mut overall,
        &Outcome::success(),
        Some(20.0),
        now,
        0,
    );
    assert!(observed.recovered, "{stats:?}");
    assert!(stats.success.is_some_and(|s| s > 0.8), "{stats:?}");
}
