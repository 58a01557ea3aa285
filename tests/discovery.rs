//! Discovery: the catalogue in virtual time, the actor with a fake fetcher under tokio's
//! paused clock, and the `livepeer-discovery` comparison.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use selection_coordinator::discovery::sim::{self, DiscoveryScenario};
use selection_coordinator::discovery::{
    Action, CandidateChange, Catalogue, Demand, Discovery, DiscoveryConfig, FetchError, Fetcher,
    Pool, RefreshReason, SetCandidates, Snapshot,
};
use selection_coordinator::{CandidateId, CandidateInfo};

fn ids(n: usize) -> Vec<CandidateId> {
    (0..n)
        .map(|i| CandidateId::new(format!("c{i:04}")))
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn drain(cat: &mut Catalogue) -> Vec<Action> {
    std::iter::from_fn(|| cat.poll_action()).collect()
}

fn fetches(actions: &[Action]) -> Vec<CandidateId> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Fetch(id) => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn added(actions: &[Action]) -> Vec<CandidateId> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(info) => Some(info.id.clone()),
            _ => None,
        })
        .collect()
}

fn catalogue(config: DiscoveryConfig, seed: u64, t0: Instant) -> Catalogue {
    Catalogue::new(config, t0, SmallRng::seed_from_u64(seed)).unwrap()
}

/// Answers every running fetch of `batch` at `at`, all successfully.
fn answer_all(cat: &mut Catalogue, batch: &[CandidateId], at: Instant) -> Vec<Action> {
    for id in batch {
        assert!(cat.fetched(id, Ok(CandidateInfo::new(id.clone())), at));
    }
    drain(cat)
}

// ----- the pure catalogue ---------------------------------------------------------------

#[test]
fn a_pass_fetches_everyone_once_in_batches_of_the_cap() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        batch_size: 100,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 7, t0);
    cat.set_candidates(ids(250), t0);
    let mut seen = HashSet::new();
    let mut t = t0;
    let mut batch = fetches(&drain(&mut cat));
    let mut sizes = Vec::new();
    while !batch.is_empty() {
        sizes.push(batch.len());
        assert_eq!(cat.in_flight(), batch.len());
        for id in &batch {
            assert!(seen.insert(id.clone()), "{id} fetched twice in one pass");
        }
        t += ms(50);
        batch = fetches(&answer_all(&mut cat, &batch, t));
    }
    assert_eq!(sizes, vec![100, 100, 50]);
    assert_eq!(seen.len(), 250);
    assert_eq!(cat.stats().passes, 1);
    assert_eq!(cat.stats().peak_in_flight, 100);
    assert_eq!(cat.cache_size(), 250);
    // The next pass starts one interval after the first started, not earlier.
    cat.tick(t0 + Duration::from_secs(899));
    assert!(fetches(&drain(&mut cat)).is_empty());
    cat.tick(t0 + Duration::from_secs(900));
    assert_eq!(fetches(&drain(&mut cat)).len(), 100);
}

#[test]
fn the_order_is_shuffled_by_a_seeded_rng() {
    let t0 = Instant::now();
    let order = |seed| {
        let mut cat = catalogue(DiscoveryConfig::default(), seed, t0);
        cat.set_candidates(ids(50), t0);
        fetches(&drain(&mut cat))
    };
    assert_eq!(order(1), order(1));
    assert_ne!(order(1), order(2));
    assert_ne!(order(1), ids(50), "not shuffled");
}

#[test]
fn the_cutoff_grows_while_nobody_answers_and_stops_once_someone_does() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    assert_eq!(batch.len(), 3);
    // Nobody answers: the wait grows 0.5 -> 1 -> 2 s without cutting anyone.
    for at in [ms(500), ms(1000)] {
        cat.tick(t0 + at);
        assert!(
            drain(&mut cat).is_empty(),
            "cut at {at:?} with no answer yet"
        );
        assert_eq!(cat.in_flight(), 3);
    }
    assert_eq!(cat.next_deadline(), Some(t0 + secs(2)));
    // One answers at 1.5 s; the others are cut at the next checkpoint (2 s).
    let first = batch[0].clone();
    assert!(cat.fetched(&first, Ok(CandidateInfo::new(first.clone())), t0 + ms(1500)));
    cat.tick(t0 + ms(1999));
    assert_eq!(cat.in_flight(), 2);
    cat.tick(t0 + secs(2));
    let actions = drain(&mut cat);
    let cancelled: HashSet<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Cancel(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, batch[1..].iter().cloned().collect());
    assert_eq!(added(&actions), vec![first]);
    assert_eq!(cat.stats().timeouts, 2);
    // A cut fetch answering late is ignored.
    assert!(!cat.fetched(
        &batch[1],
        Ok(CandidateInfo::new(batch[1].clone())),
        t0 + secs(3)
    ));
    assert_eq!(cat.stats().late, 1);
}

#[test]
fn with_no_answer_at_all_everything_is_cut_at_the_last_checkpoint() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(4), t0);
    drain(&mut cat);
    let mut t = t0;
    let mut cut_at = None;
    while cut_at.is_none() {
        t = cat.next_deadline().expect("a checkpoint is armed");
        cat.tick(t);
        if drain(&mut cat)
            .iter()
            .any(|a| matches!(a, Action::Cancel(_)))
        {
            cut_at = Some(t);
        }
    }
    assert_eq!(cut_at, Some(t0 + secs(6)));
    assert_eq!(cat.stats().timeouts, 4);
    assert_eq!(cat.cache_size(), 0);
    assert!(t > t0);
}

#[test]
fn answers_are_added_fastest_first_within_a_batch() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 9, t0);
    cat.set_candidates(ids(20), t0);
    let batch = fetches(&drain(&mut cat));
    let mut rng = SmallRng::seed_from_u64(4);
    let mut latency: HashMap<CandidateId, u64> = HashMap::new();
    for id in &batch {
        latency.insert(id.clone(), rng.gen_range(1..400));
    }
    // Deliver in an arbitrary order, each at its own latency (all before the 0.5 s cutoff).
    let mut by_arrival: Vec<_> = batch.clone();
    by_arrival.sort_by_key(|id| latency[id]);
    let mut actions = Vec::new();
    for id in &by_arrival {
        cat.fetched(id, Ok(CandidateInfo::new(id.clone())), t0 + ms(latency[id]));
        actions.extend(drain(&mut cat));
    }
    let order = added(&actions);
    assert_eq!(order.len(), 20);
    let lats: Vec<u64> = order.iter().map(|id| latency[id]).collect();
    assert!(lats.windows(2).all(|w| w[0] <= w[1]), "{lats:?}");
    // The catalogue keeps the latency too.
    let eligible: Vec<u64> = cat
        .eligible(&[], t0 + secs(1))
        .iter()
        .map(|i| latency[&i.id])
        .collect();
    assert!(eligible.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        cat.entry(&order[0]).unwrap().latency,
        Some(ms(latency[&order[0]]))
    );
}

#[test]
fn expired_info_is_removed_then_refetched_and_added_back() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 10_000.0,
        expiry_s: 60.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, t0 + ms(10));
    assert_eq!(cat.eligible_count(&[], t0 + secs(59)), 3);
    assert_eq!(cat.next_deadline(), Some(t0 + ms(60_010)));
    // At expiry: out of the coordinator and the pool, and refetched at once.
    let at = t0 + ms(60_010);
    assert_eq!(
        cat.eligible_count(&[], at),
        0,
        "expired info is not eligible"
    );
    cat.tick(at);
    let actions = drain(&mut cat);
    let removed: HashSet<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(removed.len(), 3);
    let refetch = fetches(&actions);
    assert_eq!(refetch.len(), 3);
    // One answers, one fails, one is cut: only the first comes back.
    cat.fetched(
        &refetch[0],
        Ok(CandidateInfo::new(refetch[0].clone())),
        at + ms(20),
    );
    cat.fetched(
        &refetch[1],
        Err(FetchError::Failed("refused".into())),
        at + ms(30),
    );
    cat.tick(at + ms(500));
    let back = added(&drain(&mut cat));
    assert_eq!(back, vec![refetch[0].clone()]);
    assert_eq!(cat.eligible_count(&[], at + secs(1)), 1);
    assert_eq!(cat.stats().errors, 1);
}

#[test]
fn a_failed_refresh_keeps_valid_info_until_it_expires() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 100.0,
        expiry_s: 150.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(1), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, t0);
    cat.tick(t0 + secs(100));
    let again = fetches(&drain(&mut cat));
    assert_eq!(again, batch);
    cat.fetched(&again[0], Err(FetchError::Timeout), t0 + secs(101));
    assert_eq!(drain(&mut cat).len(), 1, "only the pass report");
    assert_eq!(cat.eligible_count(&[], t0 + secs(149)), 1);
    assert_eq!(cat.entry(&again[0]).unwrap().failures, 1);
    cat.tick(t0 + secs(150));
    assert!(drain(&mut cat).contains(&Action::Remove(again[0].clone())));
}

#[test]
fn refreshing_pauses_when_idle_and_resumes_on_demand() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 50.0,
        expiry_s: 120.0,
        idle_pause_s: Some(100.0),
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(5), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, t0 + ms(10));
    cat.tick(t0 + secs(50));
    let batch = fetches(&drain(&mut cat));
    assert_eq!(batch.len(), 5, "second pass before going idle");
    answer_all(&mut cat, &batch, t0 + secs(50) + ms(10));
    // 100 s without a request: the pass due at 100 s does not start.
    assert!(cat.paused(t0 + secs(100)));
    cat.tick(t0 + secs(100));
    assert!(fetches(&drain(&mut cat)).is_empty());
    // Only expiry is left: it removes (at 170.01 s) but does not refetch while idle.
    let mut removed_at = Vec::new();
    while let Some(t) = cat.next_deadline() {
        assert!(
            t <= t0 + secs(171),
            "a deadline past the last expiry: {:?}",
            t - t0
        );
        cat.tick(t);
        let actions = drain(&mut cat);
        assert!(fetches(&actions).is_empty(), "fetched while idle");
        for a in actions {
            if let Action::Remove(_) = a {
                removed_at.push(t - t0);
            }
        }
    }
    assert_eq!(removed_at, vec![secs(170) + ms(10); 5]);
    assert_eq!(cat.next_deadline(), None, "nothing to do until a request");
    // A request resumes at once.
    let eligible = cat.demand(&[], t0 + secs(200));
    assert_eq!(eligible, 0);
    assert!(!cat.paused(t0 + secs(200)));
    assert_eq!(fetches(&drain(&mut cat)).len(), 5);
    assert_eq!(cat.stats().fetches, 15);
}

#[test]
fn a_small_eligible_pool_triggers_an_immediate_refresh_within_the_backoff() {
    let t0 = Instant::now();
    let config = DiscoveryConfig {
        interval_s: 900.0,
        threshold_backoff_s: 10.0,
        idle_pause_s: None,
        ..DiscoveryConfig::default()
    };
    let mut cat = catalogue(config, 1, t0);
    cat.set_candidates(ids(10), t0);
    assert_eq!(cat.threshold(), 5, "min(8, ceil(10/2))");
    let batch = fetches(&drain(&mut cat));
    // Only 4 answer; 6 fail.
    for (k, id) in batch.iter().enumerate() {
        let r = if k < 4 {
            Ok(CandidateInfo::new(id.clone()))
        } else {
            Err(FetchError::Failed("down".into()))
        };
        cat.fetched(id, r, t0 + ms(10));
    }
    drain(&mut cat);
    assert!(!cat.refreshing());
    // A request sees 4 < 5: a pass starts now instead of at 900 s.
    assert_eq!(cat.demand(&[], t0 + secs(1)), 4);
    let actions = drain(&mut cat);
    assert_eq!(fetches(&actions).len(), 10);
    assert_eq!(cat.stats().threshold_refreshes, 1);
    let batch = fetches(&actions);
    for id in &batch {
        cat.fetched(
            id,
            Err(FetchError::Failed("down".into())),
            t0 + secs(1) + ms(10),
        );
    }
    let done = drain(&mut cat);
    assert!(done.iter().any(|a| matches!(
        a,
        Action::RefreshDone(r) if r.reason == RefreshReason::PoolThreshold && r.failed == 10
    )));
    // Still too few, but within the 10 s backoff: no new pass until 11 s.
    cat.demand(&[], t0 + secs(5));
    assert!(fetches(&drain(&mut cat)).is_empty());
    assert_eq!(cat.next_deadline(), Some(t0 + secs(11)));
    cat.tick(t0 + secs(11));
    assert_eq!(fetches(&drain(&mut cat)).len(), 10);
    assert_eq!(cat.stats().threshold_refreshes, 2);
}

#[test]
fn capabilities_are_checked_against_the_cache() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    for (k, id) in batch.iter().enumerate() {
        let mut info = CandidateInfo::new(id.clone()).with_capability("h264");
        if k == 0 {
            info = info.with_capability("av1");
        }
        cat.fetched(id, Ok(info), t0 + ms(5));
    }
    drain(&mut cat);
    let t = t0 + secs(1);
    assert_eq!(cat.eligible_count(&["h264".into()], t), 3);
    let av1 = cat.eligible(&["h264".into(), "av1".into()], t);
    assert_eq!(av1.len(), 1);
    assert_eq!(av1[0].id, batch[0]);
    assert_eq!(cat.eligible_count(&["vp9".into()], t), 0);
}

#[test]
fn info_for_another_id_or_with_bad_numbers_is_refused() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(2), t0);
    let batch = fetches(&drain(&mut cat));
    cat.fetched(
        &batch[0],
        Ok(CandidateInfo::new("someone-else")),
        t0 + ms(5),
    );
    cat.fetched(
        &batch[1],
        Ok(CandidateInfo::new(batch[1].clone()).with_stake(f64::NAN)),
        t0 + ms(5),
    );
    assert!(added(&drain(&mut cat)).is_empty());
    assert_eq!(cat.stats().invalid, 2);
}

#[test]
fn perf_scores_are_merged_and_pushed_as_updates() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(2), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, t0 + ms(5));
    cat.set_perf_scores(
        "FRA",
        vec![(batch[0].clone(), 0.8), (batch[1].clone(), f64::NAN)],
        t0,
    );
    let actions = drain(&mut cat);
    assert_eq!(actions.len(), 1, "{actions:?}");
    match &actions[0] {
        Action::Update(info) => {
            assert_eq!(info.id, batch[0]);
            assert_eq!(info.perf_scores["FRA"], 0.8);
        }
        other => panic!("expected an update, got {other:?}"),
    }
    // The same scores again change nothing.
    cat.set_perf_scores("FRA", vec![(batch[0].clone(), 0.8)], t0);
    assert!(drain(&mut cat).is_empty());
}

#[test]
fn candidates_dropped_by_the_source_are_removed_and_new_ones_fetched() {
    let t0 = Instant::now();
    let mut cat = catalogue(DiscoveryConfig::default(), 1, t0);
    cat.set_candidates(ids(3), t0);
    let batch = fetches(&drain(&mut cat));
    answer_all(&mut cat, &batch, t0 + ms(5));
    let mut next = ids(2);
    next.push(CandidateId::new("new"));
    cat.set_candidates(next, t0 + secs(1));
    let actions = drain(&mut cat);
    assert!(actions.contains(&Action::Remove(CandidateId::new("c0002"))));
    assert_eq!(fetches(&actions), vec![CandidateId::new("new")]);
}

// ----- the actor, with a fake fetcher under tokio's paused clock --------------------------

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
                .insert(id.clone(), ms(rng.gen_range(1..max_ms)));
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
fn the_actor_refetches_expired_info() {
    System::new().block_on(async {
        tokio::time::pause();
        let all = ids(5);
        let fetcher = FakeFetcher::with_latencies(&all, 3, 50);
        let config = DiscoveryConfig {
            interval_s: 10_000.0,
            expiry_s: 60.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let (addr, log) = start(config, all.clone(), fetcher.clone());
        tokio::time::sleep(secs(1)).await;
        assert_eq!(count(&log, is_add), 5);
        fetcher.failing.lock().unwrap().insert(all[0].clone());
        tokio::time::sleep(secs(61)).await;
        let removed = count(&log, |c| matches!(c, CandidateChange::Remove(_)));
        assert_eq!(removed, 5);
        assert_eq!(count(&log, is_add), 9, "4 came back after the refetch");
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 10);
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

// ----- the livepeer-discovery comparison ---------------------------------------------------

#[test]
fn livepeer_discovery_cached_beats_per_request_fanout() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/livepeer-discovery.toml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert!(DiscoveryScenario::is_discovery(&text));
    let mut scenario = DiscoveryScenario::from_toml_str(&text).unwrap();
    assert_eq!((scenario.candidates, scenario.streams), (1000, 100));
    scenario.seeds.truncate(1);
    let report = sim::run(&scenario).unwrap();
    let fanout = &report.policies[0];
    let cached = &report.policies[1];
    assert_eq!(fanout.policy, "per-request-fanout");
    assert_eq!(cached.policy, "cached");
    assert_eq!(fanout.discovery_fetches, 100_000);
    assert_eq!(fanout.peak_concurrent_fetches, 100_000);
    assert!(fanout.stream_start_wait_ms.mean >= 500.0, "{fanout:?}");
    assert!(cached.fetches_per_refresh <= 1000.0, "{cached:?}");
    assert_eq!(cached.discovery_fetches, 1000);
    assert!(cached.peak_concurrent_fetches <= 100, "{cached:?}");
    assert_eq!(cached.streams_started, 100);
    assert_eq!(
        cached.stream_start_wait_ms.max, 0.0,
        "warm cache: no network wait"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["scenario"], "livepeer-discovery");
    assert!(json["policies"][1]["peak_concurrent_fetches"].is_u64());
    println!("{}", sim::render_table(&report));
}

// ----- random operation sequences ------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Advance(u64),
        Answer(usize, u8),
        Demand(bool),
        PoolLow,
        RefreshNow,
        SetCandidates(Vec<bool>),
        PerfScores(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..20_000).prop_map(Op::Advance),
            6 => (0usize..64, 0u8..4).prop_map(|(i, k)| Op::Answer(i, k)),
            2 => any::<bool>().prop_map(Op::Demand),
            1 => Just(Op::PoolLow),
            1 => Just(Op::RefreshNow),
            1 => proptest::collection::vec(any::<bool>(), 12).prop_map(Op::SetCandidates),
            1 => (0u8..3).prop_map(Op::PerfScores),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever happens: never more fetches than the batch size, never two fetches of one
        /// candidate at once, the coordinator's view (replayed from the actions) is exactly the
        /// published set, nothing expired stays published, and the next deadline is in the
        /// future (a driver never spins).
        #[test]
        fn the_catalogue_keeps_its_promises(ops in proptest::collection::vec(op(), 1..120), seed in 0u64..1000) {
            let t0 = Instant::now();
            let config = DiscoveryConfig {
                interval_s: 30.0,
                batch_size: 4,
                expiry_s: 45.0,
                idle_pause_s: Some(60.0),
                threshold_backoff_s: 5.0,
                ..DiscoveryConfig::default()
            };
            let mut cat = Catalogue::new(config, t0, SmallRng::seed_from_u64(seed)).unwrap();
            let pool = ids(12);
            let mut now = t0;
            let mut running: Vec<CandidateId> = Vec::new();
            let mut coordinator: HashSet<CandidateId> = HashSet::new();
            cat.set_candidates(pool.clone(), now);
            for op in ops {
                match op {
                    Op::Advance(ms_) => {
                        now += ms(ms_);
                        cat.tick(now);
                    }
                    Op::Answer(i, kind) => {
                        if running.is_empty() {
                            continue;
                        }
                        let id = running[i % running.len()].clone();
                        let result = match kind {
                            0 | 1 => Ok(CandidateInfo::new(id.clone()).with_capability("x")),
                            2 => Err(FetchError::Timeout),
                            _ => Err(FetchError::Failed("no".into())),
                        };
                        prop_assert!(cat.fetched(&id, result, now), "{id} was running");
                        running.retain(|r| r != &id);
                    }
                    Op::Demand(cap) => {
                        let req: Vec<String> = if cap { vec!["x".into()] } else { vec![] };
                        let n = cat.demand(&req, now);
                        prop_assert_eq!(n, cat.eligible_count(&req, now));
                    }
                    Op::PoolLow => cat.pool_low(now),
                    Op::RefreshNow => cat.refresh_now(now),
                    Op::SetCandidates(keep) => {
                        let ids: Vec<CandidateId> = pool
                            .iter()
                            .zip(keep)
                            .filter(|(_, k)| *k)
                            .map(|(id, _)| id.clone())
                            .collect();
                        cat.set_candidates(ids, now);
                    }
                    Op::PerfScores(v) => {
                        let scores = pool.iter().map(|id| (id.clone(), f64::from(v))).collect::<Vec<_>>();
                        cat.set_perf_scores("FRA", scores, now);
                    }
                }
                while let Some(a) = cat.poll_action() {
                    match a {
                        Action::Fetch(id) => {
                            prop_assert!(!running.contains(&id), "{id} fetched twice at once");
                            running.push(id);
                        }
                        Action::Cancel(id) => {
                            prop_assert!(running.contains(&id), "cancel of {id} not running");
                            running.retain(|r| r != &id);
                        }
                        Action::Add(info) => prop_assert!(coordinator.insert(info.id.clone()), "double add"),
                        Action::Update(info) => prop_assert!(coordinator.contains(&info.id), "update of absent"),
                        Action::Remove(id) => prop_assert!(coordinator.remove(&id), "remove of absent"),
                        Action::RefreshDone(r) => prop_assert!(r.fetches as usize <= 12 * 2),
                    }
                }
                prop_assert!(running.len() <= 4);
                prop_assert_eq!(running.len(), cat.in_flight());
                prop_assert_eq!(coordinator.len(), cat.cache_size());
                prop_assert_eq!(cat.eligible_count(&[], now), cat.cache_size(), "expired info still published");
                for id in &coordinator {
                    prop_assert!(cat.entry(id).is_some_and(|e| e.published));
                }
                if let Some(t) = cat.next_deadline() {
                    prop_assert!(t > now, "deadline {:?} not after now", t.saturating_duration_since(t0));
                }
            }
        }
    }
}
