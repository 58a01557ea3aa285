//! An attempt still running as a censored sample: its age, and in a queueing fleet the
//! candidate's silence.

use super::{ctx, model};
use crate::score::{Config, Overall, ScoreContext, Stats};
use crate::vocab::CandidateInfo;

/// The default model's time component for `stats` with an attempt running `pending_ms`, at
/// `now_s` in a fleet whose queueing evidence is `queueing` and whose average try takes
/// 200 ms.
fn time(stats: &Stats, queueing: f32, pending_ms: f64, now_s: f64) -> f64 {
    let m = model(Config::default());
    let overall = Overall {
        attempt_ms: Some(200.0),
        ..Overall::default()
    };
    let c = ScoreContext {
        pending_ms,
        now_s,
        queueing,
        ..ctx(overall)
    };
    m.components(&m.fixed(&CandidateInfo::new("a")), stats, &c)
        .time_to_success
}

/// Tries of 100 ms, half of them successes: 200 ms per success, the fleet's average.
fn half_successful() -> Stats {
    Stats {
        success: Some(0.5),
        attempt_ms: Some(100.0),
        ..Stats::default()
    }
}

#[test]
fn a_running_attempt_older_than_expected_reads_as_a_try_that_long() {
    let stats = half_successful();
    let time = |pending_ms: f64, stats: &Stats| time(stats, 0.0, pending_ms, 0.0);
    // Expected: 100 / 0.5 = 200 ms per success, r = 1.
    assert!((time(0.0, &stats) - (-1.0f64).exp()).abs() < 1e-12);
    assert_eq!(time(90.0, &stats), time(0.0, &stats), "younger than a try");
    // 400 ms running: at least 400 / 0.5 = 800 ms per success, r = 4.
    assert!((time(400.0, &stats) - (-4.0f64).exp()).abs() < 1e-12);
    // A candidate never tried is expected to take the average try; beyond it, its age counts.
    let unknown = Stats::default();
    assert_eq!(time(150.0, &unknown), time(0.0, &unknown));
    assert!((time(600.0, &unknown) - (-3.0f64).exp()).abs() < 1e-12);
}

#[test]
fn in_a_queueing_fleet_a_running_attempt_counts_only_while_its_candidate_is_silent() {
    // The last outcome came at 10 s.
    let stats = Stats {
        last_sample_s: Some(10.0),
        ..half_successful()
    };
    let queue = |pending_ms: f64, now_s: f64| time(&stats, 1.0, pending_ms, now_s);
    let steady = queue(0.0, 10.05);
    assert!((steady - (-1.0f64).exp()).abs() < 1e-12);
    // A queue: an attempt 400 ms old, but the candidate answered 50 ms ago.
    assert_eq!(
        queue(400.0, 10.05),
        steady,
        "a candidate that answers is not hanging"
    );
    // Silent for 300 ms of the attempt's 400: at least 300 / 0.5 = 600 ms per success, r = 3.
    assert!((queue(400.0, 10.3) - (-3.0f64).exp()).abs() < 1e-12);
    // Silent longer than the attempt has run: its age counts, r = 4.
    assert!((queue(400.0, 11.0) - (-4.0f64).exp()).abs() < 1e-12);
    // A failure (a timeout reported 50 ms ago) is no answer: the attempt's age counts, r = 4.
    let failed = Stats {
        consecutive_failures: 1,
        ..stats.clone()
    };
    assert!((time(&failed, 1.0, 400.0, 10.05) - (-4.0f64).exp()).abs() < 1e-12);
    // Latencies that are the servers' own: the age counts however recent the last answer.
    assert!((time(&stats, 0.0, 400.0, 10.05) - (-4.0f64).exp()).abs() < 1e-12);
    // Half the evidence of a queue: the age and the silence mix on the ratio scale,
    // sqrt(400 * 300) ms: at least that over 0.5 per success, against 200 ms.
    let r = (400.0f64 * 300.0).sqrt() / 0.5 / 200.0;
    assert!((time(&stats, 0.5, 400.0, 10.3) - (-r).exp()).abs() < 1e-9);
    // A weak sign of queueing: the age nearly in full (400^0.99 * 50^0.01 ms).
    let r = 400.0f64.powf(0.99) * 50.0f64.powf(0.01) / 0.5 / 200.0;
    assert!((time(&stats, 0.01, 400.0, 10.05) - (-r).exp()).abs() < 1e-6);
}
