//! The actor, with a fake fetcher under tokio's paused clock.

use super::*;

#[derive(Clone, Default)]
struct Gauge {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Counts a running fetch; dropping it (an answer or a cancelled future) uncounts it.
struct Running(Gauge);

impl Running {
    fn new(g: &Gauge) -> Self {
        let n = g.now.fetch_add(1, Ordering::SeqCst) + 1;
        g.peak.fetch_max(n, Ordering::SeqCst);
        Running(g.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A fetcher with a latency and a failure mode per candidate.
#[derive(Clone, Default)]
struct FakeFetcher {
    latency: Arc<Mutex<HashMap<CandidateId, Duration>>>,
    failing: Arc<Mutex<HashSet<CandidateId>>>,
    panicking: Arc<Mutex<HashSet<CandidateId>>>,
    calls: Arc<AtomicUsize>,
    gauge: Gauge,
}

impl FakeFetcher {
    fn with_latencies(ids: &[CandidateId], seed: u64, max_ms: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let f = FakeFetcher::default();
        for id in ids {
            f.latency
                .lock()
                .unwrap()
                .insert(id.clone(), ms(rng.random_range(1..max_ms)));
        }
        f
    }
}

impl Fetcher for FakeFetcher {
    async fn fetch(&self, id: &CandidateId) -> Result<CandidateInfo, FetchError> {
        let _running = Running::new(&self.gauge);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let latency = self
            .latency
            .lock()
            .unwrap()
            .get(id)
            .copied()
            .unwrap_or(ms(10));
        tokio::time::sleep(latency).await;
        if self.panicking.lock().unwrap().contains(id) {
            panic!("fake fetcher panics for {id}");
        }
        if self.failing.lock().unwrap().contains(id) {
            return Err(FetchError::Failed("refused".into()));
        }
        Ok(CandidateInfo::new(id.clone()).with_capability("h264"))
    }
}

type Log = Rc<RefCell<Vec<CandidateChange>>>;

fn start(
    config: DiscoveryConfig,
    candidates: Vec<CandidateId>,
    fetcher: FakeFetcher,
) -> (Addr<Discovery<FakeFetcher>>, Log) {
    let log: Log = Rc::default();
    let sink = {
        let log = log.clone();
        move |c: CandidateChange| log.borrow_mut().push(c)
    };
    let actor = Discovery::new(config, candidates, fetcher, sink)
        .unwrap()
        .with_seed(5);
    (actor.start(), log)
}

fn count(log: &Log, pred: impl Fn(&CandidateChange) -> bool) -> usize {
    log.borrow().iter().filter(|c| pred(c)).count()
}

fn is_add(c: &CandidateChange) -> bool {
    matches!(c, CandidateChange::Add(_))
}

#[test]
fn the_actor_never_runs_more_fetches_than_the_batch_size() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(300);
        let fetcher = FakeFetcher::with_latencies(&all, 1, 400);
        let config = DiscoveryConfig {
            batch_size: 40,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all, fetcher.clone());
        tokio::time::sleep(secs(30)).await;
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!(status.stats.passes, 1);
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 300);
        assert_eq!(fetcher.gauge.peak.load(Ordering::SeqCst), 40);
        assert_eq!(fetcher.gauge.now.load(Ordering::SeqCst), 0);
        assert_eq!(count(&log, is_add), 300);
        // The pool comes from the cache, fastest first, with no fetch.
        let pool = addr
            .send(Pool {
                required: vec!["h264".into()],
            })
            .await
            .unwrap();
        assert_eq!(pool.len(), 300);
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 300);
    });
}

#[test]
fn the_actor_cuts_slow_fetches_and_drops_their_futures() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(10);
        let fetcher = FakeFetcher::with_latencies(&all, 2, 100);
        for id in &all[..3] {
            fetcher.latency.lock().unwrap().insert(id.clone(), secs(30));
        }
        let (addr, log) = start(DiscoveryConfig::default(), all, fetcher.clone());
        tokio::time::sleep(ms(499)).await;
        assert_eq!(fetcher.gauge.now.load(Ordering::SeqCst), 3);
        tokio::time::sleep(ms(2)).await;
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!(status.stats.timeouts, 3);
        assert_eq!(status.stats.ok, 7);
        assert_eq!(
            fetcher.gauge.now.load(Ordering::SeqCst),
            0,
            "cut futures dropped"
        );
        assert_eq!(count(&log, is_add), 7);
    });
}

#[test]
fn the_actor_waits_longer_when_nobody_answers() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(4);
        let fetcher = FakeFetcher::default();
        for id in &all {
            fetcher.latency.lock().unwrap().insert(id.clone(), ms(3000));
        }
        fetcher
            .latency
            .lock()
            .unwrap()
            .insert(all[0].clone(), ms(1500));
        let (addr, log) = start(DiscoveryConfig::default(), all, fetcher.clone());
        // Nobody by 0.5 s or 1 s: the wait grows; the first answers at 1.5 s; the rest are
        // cut at the 2 s checkpoint.
        tokio::time::sleep(ms(1900)).await;
        assert_eq!(fetcher.gauge.now.load(Ordering::SeqCst), 3);
        tokio::time::sleep(ms(200)).await;
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!((status.stats.ok, status.stats.timeouts), (1, 3));
        assert_eq!(count(&log, is_add), 1);
    });
}

#[test]
fn a_panicking_fetch_counts_as_an_error_and_the_actor_carries_on() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 3, 50);
        fetcher.panicking.lock().unwrap().insert(all[2].clone());
        let config = DiscoveryConfig {
            interval_s: 100.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(count(&log, is_add), 4, "the others reach the sink");
        assert!(!log.borrow().contains(&CandidateChange::Add(
            CandidateInfo::new(all[2].clone()).with_capability("h264")
        )));
        let status = addr.send(Snapshot).await.expect("the actor still answers");
        assert_eq!(status.stats.errors, 1);
        assert_eq!(status.cache_size, 4);
        // It keeps refreshing: the next pass fetches everyone again.
        fetcher.panicking.lock().unwrap().clear();
        tokio::time::sleep(secs(100)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 10);
        assert_eq!(count(&log, is_add), 5);
        assert_eq!(addr.send(Snapshot).await.unwrap().cache_size, 5);
    });
}

#[test]
fn stop_ends_the_fetching() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 3, 50);
        let config = DiscoveryConfig {
            interval_s: 100.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 5);
        addr.send(selection_coordinator::actor::Stop).await.unwrap();
        tokio::time::sleep(secs(1_000)).await;
        assert_eq!(
            fetcher.calls.load(Ordering::SeqCst),
            5,
            "no pass after Stop"
        );
        assert_eq!(log.borrow().len(), 5);
        assert!(addr.send(Snapshot).await.is_err(), "the actor is gone");
        assert_eq!(
            Arc::strong_count(&fetcher.calls),
            1,
            "its fetcher was dropped"
        );
    });
}

#[test]
fn dropping_every_address_stops_the_actor() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 3, 50);
        let config = DiscoveryConfig {
            interval_s: 100.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, _log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        drop(addr);
        no_fetch_after_the_drop(&fetcher, secs(1_000), 5, "no pass once unreachable").await;
    });
}

#[test]
fn the_actor_refetches_expired_info() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 3, 50);
        let config = DiscoveryConfig {
            interval_s: 100.0,
            expiry_s: 150.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(count(&log, is_add), 5);
        // The refresh at 100 s fails for everyone; the info stays until it expires at 150 s.
        fetcher.failing.lock().unwrap().extend(all.iter().cloned());
        tokio::time::sleep(secs(119)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 10);
        assert_eq!(count(&log, |c| matches!(c, CandidateChange::Remove(_))), 0);
        fetcher.failing.lock().unwrap().retain(|id| *id == all[0]);
        tokio::time::sleep(secs(31)).await;
        let removed = count(&log, |c| matches!(c, CandidateChange::Remove(_)));
        assert_eq!(removed, 5);
        assert_eq!(count(&log, is_add), 9, "4 came back after the refetch");
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 15);
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!(status.cache_size, 4);
    });
}

#[test]
fn the_actor_pauses_when_idle_and_resumes_on_demand() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 4, 50);
        let config = DiscoveryConfig {
            interval_s: 50.0,
            expiry_s: 1000.0,
            idle_pause_s: Some(120.0),
            ..DiscoveryConfig::default()
        };
        let (addr, _log) = start(config, all, fetcher.clone());
        // Passes at 0, 50, 100; idle from 120 s, so none at 150 or 200.
        tokio::time::sleep(secs(230)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 15);
        assert!(addr.send(Snapshot).await.unwrap().paused);
        // A request resumes at once (the refresh is overdue).
        let eligible = addr.send(Demand { required: vec![] }).await.unwrap();
        assert_eq!(eligible, 5);
        tokio::time::sleep(secs(1)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 20);
        assert!(!addr.send(Snapshot).await.unwrap().paused);
    });
}

#[test]
fn the_actor_refreshes_at_once_when_the_pool_is_too_small() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(10);
        let fetcher = FakeFetcher::with_latencies(&all, 5, 50);
        for id in &all[..7] {
            fetcher.failing.lock().unwrap().insert(id.clone());
        }
        let config = DiscoveryConfig {
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(count(&log, is_add), 3);
        fetcher.failing.lock().unwrap().clear();
        // 3 eligible < min(8, 5): a pass starts now, not in 15 minutes.
        assert_eq!(addr.send(Demand::default()).await.unwrap(), 3);
        tokio::time::sleep(secs(1)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 20);
        assert_eq!(count(&log, is_add), 10);
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!(status.stats.threshold_refreshes, 1);
        // Enough now: more requests trigger nothing.
        assert_eq!(addr.send(Demand::default()).await.unwrap(), 10);
        tokio::time::sleep(secs(60)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 20);
        addr.send(SetCandidates(all[..9].to_vec())).await.unwrap();
        assert_eq!(count(&log, |c| matches!(c, CandidateChange::Remove(_))), 1);
    });
}

#[test]
fn the_actor_records_its_metrics() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use selection_coordinator::discovery::{
        METRIC_CACHE_AGE, METRIC_CACHE_SIZE, METRIC_IN_FLIGHT, METRIC_REFRESH_DURATION,
        METRIC_REQUESTS,
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(6);
        let fetcher = FakeFetcher::with_latencies(&all, 6, 100);
        fetcher
            .latency
            .lock()
            .unwrap()
            .insert(all[0].clone(), secs(30));
        fetcher.failing.lock().unwrap().insert(all[1].clone());
        let (_addr, _log) = start(DiscoveryConfig::default(), all, fetcher);
        tokio::time::sleep(secs(20)).await;
    });
    let snapshot = snapshotter.snapshot().into_vec();
    let find = |name: &str, label: Option<&str>| {
        snapshot
            .iter()
            .find(|(k, ..)| {
                k.key().name() == name
                    && label.is_none_or(|l| k.key().labels().any(|x| x.value() == l))
            })
            .map(|(.., v)| v)
    };
    let counter = |label| match find(METRIC_REQUESTS, Some(label)) {
        Some(DebugValue::Counter(c)) => *c,
        other => panic!("{label}: {other:?}"),
    };
    assert_eq!(
        (counter("ok"), counter("error"), counter("timeout")),
        (4, 1, 1)
    );
    match find(METRIC_REFRESH_DURATION, None) {
        Some(DebugValue::Histogram(h)) => {
            assert_eq!(h.len(), 1);
            // One batch cut at the 0.5 s checkpoint (tokio timers round up to the millisecond).
            let d = h[0].into_inner();
            assert!((0.5..0.51).contains(&d), "{d}");
        }
        other => panic!("{other:?}"),
    }
    let gauge = |name| match find(name, None) {
        Some(DebugValue::Gauge(g)) => g.into_inner(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(gauge(METRIC_CACHE_SIZE), 4.0);
    assert_eq!(gauge(METRIC_IN_FLIGHT), 0.0);
    let age = gauge(METRIC_CACHE_AGE);
    assert!((10.0..=20.0).contains(&age), "age {age}");
}

/// Several results settled at once (two fetches cut at one checkpoint) all count.
#[test]
fn the_request_counter_counts_every_result_settled_at_once() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use selection_coordinator::discovery::METRIC_REQUESTS;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::default();
        for id in &all[..3] {
            fetcher.latency.lock().unwrap().insert(id.clone(), secs(30));
        }
        let (addr, _log) = start(DiscoveryConfig::default(), all, fetcher);
        tokio::time::sleep(secs(1)).await;
        let stats = addr.send(Snapshot).await.unwrap().stats;
        assert_eq!((stats.ok, stats.timeouts), (2, 3));
    });
    let snapshot = snapshotter.snapshot().into_vec();
    let counter = |label: &str| {
        snapshot
            .iter()
            .filter(|(k, ..)| {
                k.key().name() == METRIC_REQUESTS && k.key().labels().any(|x| x.value() == label)
            })
            .map(|(.., v)| match v {
                DebugValue::Counter(c) => *c,
                other => panic!("{other:?}"),
            })
            .sum::<u64>()
    };
    assert_eq!((counter("ok"), counter("timeout")), (2, 3));
}

/// The cache-size gauge follows a candidate the source dropped at once, even while a new
/// candidate's fetch is still running (not only at the next periodic refresh of the gauges).
#[test]
fn the_cache_size_gauge_follows_a_dropped_candidate_at_once() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use selection_coordinator::discovery::METRIC_CACHE_SIZE;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let cache_size = || {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(k, ..)| k.key().name() == METRIC_CACHE_SIZE)
            .map(|(.., v)| match v {
                DebugValue::Gauge(g) => g.into_inner(),
                other => panic!("{other:?}"),
            })
    };
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(6);
        let fetcher = FakeFetcher::default();
        fetcher
            .latency
            .lock()
            .unwrap()
            .insert(all[5].clone(), secs(60));
        let config = DiscoveryConfig {
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all[..5].to_vec(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(cache_size(), Some(5.0));
        // c0000 leaves, c0005 (slow to answer) arrives.
        addr.send(SetCandidates(all[1..].to_vec())).await.unwrap();
        tokio::time::sleep(ms(100)).await;
        assert_eq!(count(&log, |c| matches!(c, CandidateChange::Remove(_))), 1);
        assert_eq!(fetcher.gauge.now.load(Ordering::SeqCst), 1);
        assert_eq!(cache_size(), Some(4.0));
    });
}

/// A pass started between scheduled ones (here by `RefreshNow`) is cut at its checkpoints
/// like any other, not left waiting for the timer of the next scheduled pass.
#[test]
fn a_pass_started_on_request_cuts_its_slow_fetches_at_the_cutoff() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::default();
        let config = DiscoveryConfig {
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, _log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(addr.send(Snapshot).await.unwrap().stats.passes, 1);
        fetcher
            .latency
            .lock()
            .unwrap()
            .insert(all[0].clone(), secs(60));
        addr.send(RefreshNow).await.unwrap();
        tokio::time::sleep(secs(1)).await;
        let status = addr.send(Snapshot).await.unwrap();
        assert_eq!(status.in_flight, 0, "the slow fetch is cut at 0.5 s");
        assert_eq!((status.stats.timeouts, status.stats.passes), (1, 2));
        assert_eq!(fetcher.gauge.now.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_pool_request_resumes_a_paused_discovery() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::default();
        let config = DiscoveryConfig {
            interval_s: 50.0,
            expiry_s: 1000.0,
            idle_pause_s: Some(120.0),
            ..DiscoveryConfig::default()
        };
        let (addr, _log) = start(config, all, fetcher.clone());
        tokio::time::sleep(secs(230)).await;
        assert!(addr.send(Snapshot).await.unwrap().paused);
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 15);
        let pool = addr.send(Pool { required: vec![] }).await.unwrap();
        assert_eq!(pool.len(), 5);
        tokio::time::sleep(secs(1)).await;
        assert_eq!(
            fetcher.calls.load(Ordering::SeqCst),
            20,
            "refreshed at once"
        );
        assert!(!addr.send(Snapshot).await.unwrap().paused);
    });
}

#[test]
fn pool_low_refreshes_at_once() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(10);
        let fetcher = FakeFetcher::default();
        fetcher
            .failing
            .lock()
            .unwrap()
            .extend(all[..7].iter().cloned());
        let config = DiscoveryConfig {
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all, fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(count(&log, is_add), 3);
        fetcher.failing.lock().unwrap().clear();
        addr.send(PoolLow).await.unwrap();
        tokio::time::sleep(secs(1)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 20);
        assert_eq!(count(&log, is_add), 10);
    });
}

/// Dropping every address in the middle of a pass stops the actor at the next answer: the
/// pass's later batches are not fetched.
#[test]
fn dropping_every_address_mid_pass_fetches_no_further_batch() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::default();
        for id in &all {
            fetcher.latency.lock().unwrap().insert(id.clone(), ms(100));
        }
        let config = DiscoveryConfig {
            batch_size: 1,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, _log) = start(config, all, fetcher.clone());
        tokio::time::sleep(ms(50)).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 1);
        drop(addr);
        no_fetch_after_the_drop(&fetcher, secs(10), 1, "no batch after the drop").await;
    });
}

/// New perf scores reach the coordinator at once, as updated info of the candidates it has.
#[test]
fn perf_scores_reach_the_coordinators_candidates() {
    use selection_coordinator::actor::{Coordinator, GetState};
    use selection_coordinator::{Config, Limits};
    System::new().block_on(async {
        tokio::time::pause();
        let coordinator = Coordinator::with_seed(Config::default(), Limits::default(), 1)
            .unwrap()
            .start();
        let all = ids(3);
        let discovery = Discovery::new(
            DiscoveryConfig::default(),
            all.clone(),
            FakeFetcher::default(),
            coordinator.clone(),
        )
        .unwrap()
        .with_seed(3)
        .start();
        tokio::time::sleep(secs(1)).await;
        assert_eq!(
            coordinator.send(GetState).await.unwrap().candidates.len(),
            3
        );
        discovery
            .send(SetPerfScores {
                region: "FRA".into(),
                scores: vec![(all[0].clone(), 0.7), (all[1].clone(), 0.2)],
            })
            .await
            .unwrap();
        tokio::time::sleep(ms(10)).await;
        let state = coordinator.send(GetState).await.unwrap();
        let score = |id: &CandidateId| {
            let c = state.candidates.iter().find(|c| c.info.id == *id).unwrap();
            c.info.perf_scores.get("FRA").copied()
        };
        assert_eq!(
            (score(&all[0]), score(&all[1]), score(&all[2])),
            (Some(0.7), Some(0.2), None)
        );
    });
}

#[test]
fn the_coordinator_breaks_ties_by_discovery_latency() {
    use selection_coordinator::actor::{Coordinator, CoordinatorHandle, GetState};
    use selection_coordinator::{Config, Limits, Request};
    System::new().block_on(async {
        tokio::time::pause();
        let coordinator =
            Coordinator::with_seed(Config::default().deterministic(), Limits::default(), 1)
                .unwrap()
                .start();
        let all = ids(5);
        let fetcher = FakeFetcher::default();
        for (id, latency) in all.iter().zip([400, 100, 300, 50, 200]) {
            fetcher
                .latency
                .lock()
                .unwrap()
                .insert(id.clone(), ms(latency));
        }
        let discovery = Discovery::new(
            DiscoveryConfig::default(),
            all.clone(),
            fetcher,
            coordinator.clone(),
        )
        .unwrap()
        .with_seed(3)
        .start();
        tokio::time::sleep(secs(1)).await;
        let state = coordinator.send(GetState).await.unwrap();
        let order: Vec<&str> = state
            .candidates
            .iter()
            .map(|c| c.info.id.as_str())
            .collect();
        assert_eq!(
            order,
            ["c0003", "c0001", "c0004", "c0002", "c0000"],
            "fastest first"
        );
        // All candidates score the same, so the deterministic draw picks the fastest responder.
        let handle = CoordinatorHandle::new(coordinator.clone());
        let permit = handle
            .acquire(Request::any().requiring("h264"))
            .await
            .unwrap();
        assert_eq!(permit.candidate().as_str(), "c0003");
        drop(permit);
        // Dropped by the source: gone from the coordinator too.
        discovery
            .send(SetCandidates(all[1..].to_vec()))
            .await
            .unwrap();
        tokio::time::sleep(ms(10)).await;
        let state = coordinator.send(GetState).await.unwrap();
        assert!(state
            .candidates
            .iter()
            .all(|c| c.info.id.as_str() != "c0000"));
    });
}

#[test]
fn a_coordinator_handle_is_a_sink_across_threads() {
    use selection_coordinator::actor::{Coordinator, GetState};
    use selection_coordinator::{Config, Limits};
    let handle = Coordinator::with_seed(Config::default(), Limits::default(), 7)
        .unwrap()
        .start_in_thread()
        .unwrap();
    let all = ids(5);
    System::new().block_on(async {
        let discovery = Discovery::new(
            DiscoveryConfig::default(),
            all.clone(),
            FakeFetcher::with_latencies(&all, 3, 20),
            handle.clone(),
        )
        .unwrap()
        .with_seed(7)
        .start();
        let deadline = Instant::now() + secs(10);
        loop {
            let state = handle.addr().send(GetState).await.unwrap();
            if state.candidates.len() == 5 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "discovery never filled the coordinator"
            );
            tokio::time::sleep(ms(10)).await;
        }
        discovery
            .send(selection_coordinator::actor::Stop)
            .await
            .unwrap();
    });
    // Dropping the last handle stops the coordinator and its thread.
}

/// `wait` after the actor's last address was dropped, `fetcher` has been called `calls`
/// times, no more (`why`), and the actor is gone (it held the fetcher's counter).
async fn no_fetch_after_the_drop(fetcher: &FakeFetcher, wait: Duration, calls: usize, why: &str) {
    tokio::time::sleep(wait).await;
    assert_eq!(fetcher.calls.load(Ordering::SeqCst), calls, "{why}");
    assert_eq!(
        Arc::strong_count(&fetcher.calls),
        1,
        "the actor was dropped"
    );
}
