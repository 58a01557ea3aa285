//! A candidate that has failed its last twenty attempts without ever answering is hopeless
//! (time component 0) whatever the fleet's reference time, and only such a candidate.

use super::*;

/// A candidate's statistics after `answers` answers of 20 ms, then `refusals` refusals of
/// 0.1 ms, observed through the model, with a fleet reference of its own.
fn after(m: &ScoreModel, answers: u32, refusals: u32) -> Stats {
    let mut stats = Stats::default();
    let mut overall = Overall::default();
    let mut now = 0.0;
    for _ in 0..answers {
        now += 0.01;
        m.observe(
            &mut stats,
            &mut overall,
            &Outcome::success(),
            Some(20.0),
            now,
            0,
        );
    }
    let refused = Outcome::failure(FailureClass::Refused);
    for _ in 0..refusals {
        now += 0.001;
        m.observe(&mut stats, &mut overall, &refused, Some(0.1), now, 0);
    }
    stats
}

#[test]
fn twenty_failures_without_an_answer_ever_make_a_candidate_hopeless() {
    let m = model(Config::default());
    let fixed = m.fixed(&CandidateInfo::new("a"));
    // References as a live fleet of 20 ms servers shows them, and as a dead candidate's own
    // refusals pull them (an average over every outcome).
    for reference_ms in [20.0, 1.0] {
        let overall = Overall {
            attempt_ms: Some(reference_ms),
            ..Overall::default()
        };
        let time = |s: &Stats| m.components(&fixed, s, &ctx(overall)).time_to_success;
        let dead = after(&m, 0, 20);
        assert_eq!(time(&dead), 0.0, "reference {reference_ms} ms: {dead:?}");
        // Nineteen could be bad luck; the time component alone judges them (small, not 0).
        let unlucky = after(&m, 0, 19);
        assert!(time(&unlucky) > 0.0, "reference {reference_ms} ms");
        // A candidate that ever answered is judged by its times, however long its streak.
        let fallen = after(&m, 1, 40);
        assert!(
            time(&fallen) > 0.0,
            "reference {reference_ms} ms: {fallen:?}"
        );
    }
    // And before the fleet's first reference.
    let none = ctx(Overall::default());
    assert_eq!(
        m.components(&fixed, &after(&m, 0, 20), &none)
            .time_to_success,
        0.0
    );
    assert!(
        m.components(&fixed, &after(&m, 0, 19), &none)
            .time_to_success
            > 0.0
    );
}
