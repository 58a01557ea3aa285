//! Out-of-range values at the public API: a channel capacity, a mailbox capacity, a fleet
//! queue, durations up to `Duration::MAX` and a zero polling interval. Each is clamped to a
//! documented bound or refused with a typed error; none panics the caller or the actor.
//!
//! Actor tests pause tokio's clock, which the coordinator reads, so they run in virtual time;
//! the fleet config tests need no NATS server (the config is checked before connecting).

use std::path::PathBuf;
use std::time::Duration;

use selection_coordinator::actor::{Coordinator, CoordinatorHandle, SubscribeChannel};
use selection_coordinator::{CandidateInfo, Config, Limits, Outcome, Request};

#[path = "support/snapshot_dir.rs"]
mod snapshot_dir;
use snapshot_dir::with_snapshot_dir;

fn coordinator() -> Coordinator {
    Coordinator::with_seed(Config::default(), Limits::default(), 7)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
}

/// One request granted, reported and released: the actor is alive and deciding.
async fn decides(handle: &CoordinatorHandle) {
    let mut permit = handle.acquire(Request::any()).await.unwrap();
    assert_eq!(permit.candidate().as_str(), "a");
    permit.report(Outcome::success());
    drop(permit);
    assert!(handle.state().await.is_ok(), "the coordinator stopped");
}

#[actix::test]
async fn subscribe_channel_capacity_is_clamped_not_a_panic() {
    tokio::time::pause();
    let handle = coordinator().start_handle();
    let rx = handle.subscribe_channel(1.0, usize::MAX).await.unwrap();
    assert_eq!(rx.max_capacity(), SubscribeChannel::MAX_CAPACITY);
    let rx0 = handle.subscribe_channel(1.0, 0).await.unwrap();
    assert_eq!(rx0.max_capacity(), 1);
    decides(&handle).await;
}

#[actix::test]
async fn mailbox_capacity_is_clamped_not_a_panic() {
    tokio::time::pause();
    let handle = coordinator()
        .with_mailbox_capacity(usize::MAX)
        .start_handle();
    // Every clone of the address counts a sender against the mailbox's capacity.
    let other = handle.clone();
    let addr = other.addr().clone();
    decides(&handle).await;
    decides(&CoordinatorHandle::new(addr)).await;
}

#[test]
fn snapshot_period_past_the_clock_means_never_not_a_panic() {
    with_snapshot_dir(snapshot_period_past_the_clock_means_never_not_a_panic_in);
}

async fn snapshot_period_past_the_clock_means_never_not_a_panic_in(dir: PathBuf) {
    tokio::time::pause();
    let store = selection_coordinator::snapshot::SnapshotStore::new(&dir, "s.json").unwrap();
    let handle = coordinator()
        .with_snapshots(store, Some(Duration::MAX))
        .unwrap()
        .start_handle();
    decides(&handle).await;
    // Housekeeping and the core's refreshes keep firing; no periodic snapshot is due.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    decides(&handle).await;
    assert!(
        !dir.join("s.json").exists(),
        "a snapshot was saved periodically"
    );
}

#[cfg(feature = "fleet")]
mod fleet {
    use std::time::Duration;

    use selection_coordinator::fleet::{Fleet, FleetConfig, FleetError};

    fn config() -> FleetConfig {
        // A port nothing listens on: these configs must be refused before any connection.
        FleetConfig::new("nats://127.0.0.1:1", "prod", "node-a")
    }

    fn refused(config: &FleetConfig, field: &str) {
        match config.validate() {
            Err(FleetError::Config(message)) => {
                assert!(message.contains(field), "`{message}` does not name {field}")
            }
            other => panic!("{field}: expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn queue_beyond_the_maximum_is_refused() {
        let mut c = config();
        c.queue = FleetConfig::MAX_QUEUE;
        c.validate().unwrap();
        for queue in [FleetConfig::MAX_QUEUE + 1, usize::MAX] {
            c.queue = queue;
            refused(&c, "receive queue");
        }
    }

    #[test]
    fn durations_beyond_a_day_are_refused() {
        assert_eq!(FleetConfig::MAX_DURATION, Duration::from_secs(86_400));
        type Set = fn(&mut FleetConfig, Duration);
        let fields: [(&str, Set); 5] = [
            ("digest period", |c, d| c.period = d),
            ("urgent digests' gap", |c, d| c.urgent_gap = Some(d)),
            ("connect timeout", |c, d| c.connect_timeout = d),
            ("maximum reconnect delay", |c, d| c.max_reconnect_delay = d),
            ("ping interval", |c, d| c.ping_interval = d),
        ];
        for (field, set) in fields {
            let mut c = config();
            set(&mut c, FleetConfig::MAX_DURATION);
            c.validate()
                .unwrap_or_else(|e| panic!("{field} at the maximum: {e}"));
            for d in [
                FleetConfig::MAX_DURATION + Duration::from_nanos(1),
                Duration::MAX,
            ] {
                set(&mut c, d);
                refused(&c, field);
            }
        }
    }

    #[actix::test]
    async fn start_refuses_an_endless_period_before_connecting() {
        tokio::time::pause();
        let addr = super::coordinator().start_handle().addr().clone();
        let mut c = config();
        c.period = Duration::MAX;
        match Fleet::start(c, addr.clone()).await {
            Err(FleetError::Config(m)) => assert!(m.contains("digest period"), "{m}"),
            other => panic!("expected a config error, got {other:?}"),
        }
        let mut c = config();
        c.queue = usize::MAX;
        assert!(matches!(
            Fleet::start(c, addr).await,
            Err(FleetError::Config(_))
        ));
    }
}

#[cfg(feature = "http")]
mod perf_scores {
    use std::time::Duration;

    use selection_coordinator::discovery::perf_scores::{PerfScoreSource, PerfScores};

    /// An address nothing listens on: every fetch fails at once, and the loop goes on.
    fn closed_url() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/scores")
    }

    #[test]
    fn zero_interval_is_raised_to_the_minimum() {
        let source = PerfScoreSource::new(&closed_url(), "FRA").unwrap();
        assert_eq!(source.interval(), Duration::from_secs(600));
        let zero = source.clone().with_interval(Duration::ZERO);
        assert_eq!(zero.interval(), PerfScoreSource::MIN_INTERVAL);
        assert_eq!(PerfScoreSource::MIN_INTERVAL, Duration::from_millis(1));
        // Tokio's interval caps a period that long itself: no bound is needed above.
        let endless = source.with_interval(Duration::MAX);
        assert_eq!(endless.interval(), Duration::MAX);
    }

    #[tokio::test]
    async fn run_with_a_zero_or_endless_interval_keeps_running() {
        tokio::time::pause();
        for interval in [Duration::ZERO, Duration::MAX] {
            let source = PerfScoreSource::new(&closed_url(), "FRA")
                .unwrap()
                .with_interval(interval);
            let task = tokio::spawn(PerfScores::new(source).run(|_, _| {}));
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                tokio::task::yield_now().await;
            }
            assert!(!task.is_finished(), "{interval:?}: the polling task ended");
            task.abort();
            let err = task.await.unwrap_err();
            assert!(err.is_cancelled(), "{interval:?}: {err}");
        }
    }
}
