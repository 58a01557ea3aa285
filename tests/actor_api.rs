//! The coordinator's embedding API: metrics present from the start.

use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{Coordinator, CoordinatorHandle, State};
use selection_coordinator::metrics::names;
use selection_coordinator::{CandidateInfo, Config, Limits, Rejection};

async fn state(handle: &CoordinatorHandle) -> State {
    handle.state().await.unwrap()
}

/// A scrape right after the start finds the gauges and the zero counters, long before the
/// first housekeeping tick.
#[test]
fn metrics_are_there_right_after_the_start() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    System::new().block_on(async {
        tokio::time::pause();
        let started = tokio::time::Instant::now();
        let config = Config {
            refresh_ms: 60_000,
            ..Config::default()
        };
        let handle = Coordinator::with_seed(config, Limits::default(), 1)
            .unwrap()
            .with_candidate(CandidateInfo::new("a"))
            .unwrap()
            .with_candidate(CandidateInfo::new("b"))
            .unwrap()
            .start_handle();
        state(&handle).await;
        assert!(started.elapsed() < Duration::from_secs(60), "no tick yet");
    });
    let values: Vec<_> = snapshotter.snapshot().into_vec();
    let find = |name: &str, label: Option<(&str, &str)>| {
        values
            .iter()
            .find(|(k, ..)| {
                k.key().name() == name
                    && label.is_none_or(|(lk, lv)| {
                        k.key().labels().any(|l| l.key() == lk && l.value() == lv)
                    })
            })
            .map(|(.., v)| v)
    };
    let gauge = |name: &str, label| match find(name, label) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{name} {label:?}: expected a gauge, got {other:?}"),
    };
    let counter = |name: &str, label| match find(name, label) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name} {label:?}: expected a counter, got {other:?}"),
    };
    assert_eq!(gauge(names::CANDIDATES, None), 2.0);
    assert_eq!(gauge(names::WAITING, None), 0.0);
    assert_eq!(gauge(names::OPEN_REQUESTS, None), 0.0);
    assert_eq!(gauge(names::IN_FLIGHT, None), 0.0);
    assert_eq!(gauge(names::CANDIDATES_EJECTED, None), 0.0);
    for id in ["a", "b"] {
        let p = gauge(names::CANDIDATE_PROBABILITY, Some(("candidate", id)));
        assert!((p - 0.5).abs() < 1e-9, "{id}: {p}");
        assert_eq!(
            gauge(names::CANDIDATE_IN_FLIGHT, Some(("candidate", id))),
            0.0
        );
    }
    for reason in Rejection::ALL {
        assert_eq!(
            counter(names::REJECTIONS, Some(("reason", reason.as_str()))),
            0
        );
    }
    for name in [names::FILTER_FALLBACKS, names::RECLAIMED, names::EJECTIONS] {
        assert_eq!(counter(name, None), 0, "{name}");
    }
}
