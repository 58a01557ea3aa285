//! The coordinator's embedding API: snapshot saves that leave the actor free, a coordinator on
//! a thread of its own for plain tokio, the handle's operator methods with one error type, and
//! metrics present from the start.
//!
//! The actix tests pause tokio's clock; the tests on plain tokio talk to a coordinator on
//! another thread, whose clock a pause here could not reach, and wait on answers only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{
    Answer, Coordinator, CoordinatorGone, CoordinatorHandle, GetState, HandleError, Ready,
    SaveSnapshot, State, TakeSnapshot,
};
use selection_coordinator::metrics::names;
use selection_coordinator::snapshot::SnapshotStore;
use selection_coordinator::{
    CandidateInfo, Config, Error, FailureClass, Limits, Next, Outcome, Rejection, Request,
};
use tokio::sync::mpsc;

mod support;
use support::{load, next_answer, next_permit, probe, with_snapshot_dir, without_ages};

fn build(candidates: usize, global: u32) -> Coordinator {
    let limits = Limits {
        global,
        ..Limits::default()
    };
    let mut c = Coordinator::with_seed(Config::default(), limits, 9).unwrap();
    for i in 0..candidates {
        c = c
            .with_candidate(CandidateInfo::new(format!("c{i}")))
            .unwrap();
    }
    c
}

/// Runs `n` attempts through the handle, each reporting a success with the given timing.
async fn learn(handle: &CoordinatorHandle, n: usize, ms: f64) {
    for _ in 0..n {
        let mut p = handle.acquire(Request::any()).await.unwrap();
        p.report(Outcome::success_with(ms, ms, 1000, ms));
    }
}

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

fn is_send_sync<T: Send + Sync>(_: &T) {}

/// A service on plain tokio: the coordinator runs on its own thread, the handle works here.
#[tokio::test]
async fn start_in_thread_serves_a_plain_tokio_runtime_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "snap.json").unwrap();
    let handle = build(2, 2)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start_in_thread()
        .unwrap();
    is_send_sync(&handle);
    let mut permit = tokio::time::timeout(Duration::from_secs(5), handle.acquire(Request::any()))
        .await
        .unwrap()
        .unwrap();
    is_send_sync(&permit);
    permit.report(Outcome::success_with(10.0, 12.0, 4096, 30.0));
    drop(permit);
    // From another task, on a runtime the coordinator knows nothing of.
    let h2 = handle.clone();
    let other = tokio::spawn(async move {
        let mut p = h2.acquire(Request::any()).await.unwrap();
        p.report(Outcome::success());
    });
    other.await.unwrap();
    let s = state(&handle).await;
    assert_eq!((s.counters.decisions, s.in_flight), (2, 0));
    let attempts: u64 = s.candidates.iter().map(|c| c.stats.attempts).sum();
    assert_eq!(attempts, 2);
    let learned = handle.take_snapshot().await.unwrap();

    tokio::time::timeout(Duration::from_secs(5), handle.stop())
        .await
        .expect("the thread ends when asked");
    assert_eq!(without_ages(load(&store)), without_ages(learned));
    assert_eq!(handle.state().await.unwrap_err(), CoordinatorGone);
    // Stopping again returns at once.
    handle.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_a_coordinator_on_its_own_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "snap.json").unwrap();
    let handle = build(2, 2)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start_in_thread()
        .unwrap();
    let addr = handle.addr().clone();
    let clone = handle.clone();
    learn(&clone, 4, 25.0).await;
    drop(handle);
    // A clone remains: still serving.
    let learned = clone.take_snapshot().await.unwrap();
    drop(clone);
    // The stop went ahead of this message, which is never answered: it fails once the
    // coordinator is gone, its stop save written.
    let answer = tokio::time::timeout(Duration::from_secs(5), addr.send(GetState))
        .await
        .expect("the coordinator stops when its last handle is dropped");
    assert!(answer.is_err());
    assert_eq!(without_ages(load(&store)), without_ages(learned));
}

#[actix::test]
async fn the_handle_answers_every_operator_message_with_one_error_type() {
    tokio::time::pause();
    // Two candidates: a request asked again excludes the one it tried.
    let handle = build(2, 1).start_handle();
    let refused = |r: Result<(), HandleError>| match r {
        Err(HandleError::Refused(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    };

    // Candidates.
    handle.add_candidate(CandidateInfo::new("b")).await.unwrap();
    assert_eq!(
        refused(handle.add_candidate(CandidateInfo::new("b")).await),
        Error::DuplicateCandidate("b".into())
    );
    handle
        .update_candidate(CandidateInfo::new("b").with_tag("verified"))
        .await
        .unwrap();
    let b = state(&handle).await.candidate("b").unwrap().info.clone();
    assert!(b.tags.iter().any(|t| t.as_str() == "verified"), "{b:?}");
    assert_eq!(
        refused(handle.update_candidate(CandidateInfo::new("ghost")).await),
        Error::UnknownCandidate("ghost".into())
    );
    handle.remove_candidate("b").await.unwrap();
    assert!(matches!(
        refused(handle.remove_candidate("ghost").await),
        Error::UnknownCandidate(_)
    ));

    // Config.
    let bad = Config {
        refresh_ms: 0,
        ..Config::default()
    };
    assert!(matches!(
        refused(handle.set_config(bad).await),
        Error::Config(_)
    ));
    let deterministic = Config::default().deterministic();
    handle.set_config(deterministic.clone()).await.unwrap();
    assert_eq!(state(&handle).await.config, deterministic);
    assert!(matches!(
        refused(handle.set_arm_share("nope", 1.0).await),
        Error::Config(_)
    ));

    // A dry run.
    let record = handle.explain(Request::any()).await.unwrap();
    assert!(record.winner.is_some(), "{record:?}");
    assert_eq!(record.candidates.len(), 2);
    assert!(matches!(
        handle.explain(Request::only(["ghost"])).await,
        Err(HandleError::Refused(Error::UnknownCandidate(_)))
    ));
    assert_eq!(state(&handle).await.counters.decisions, 0);

    // Requests: one waits behind the only slot and is cancelled; one kept open is asked
    // again and finished.
    let (w, mut rx) = probe();
    let ready = |r: Request| handle.addr().send(Ready::new(r, w.clone().recipient()));
    let kept = ready(Request::any()).await.unwrap().unwrap();
    let p = next_permit(&mut rx).await;
    let first = p.candidate().clone();
    let waiting = ready(Request::any()).await.unwrap().unwrap();
    handle.cancel(waiting).await.unwrap();
    match next_answer(&mut rx).await {
        Answer::Rejected { request, reason } => {
            assert_eq!((request, reason), (waiting, Rejection::Cancelled))
        }
        other => panic!("expected a cancellation, got {other:?}"),
    }
    assert!(matches!(
        refused(handle.cancel(waiting).await),
        Error::UnknownRequest(_)
    ));
    p.done(Next::Keep);
    handle.reask(kept).await.unwrap();
    let again = next_permit(&mut rx).await;
    assert_eq!(again.request(), kept);
    assert_ne!(again.candidate(), &first);
    let p = again;
    p.done(Next::Keep);
    handle.finish(kept).await.unwrap();
    assert!(matches!(
        refused(handle.finish(kept).await),
        Error::UnknownRequest(_)
    ));
    assert!(matches!(
        refused(handle.reask(kept).await),
        Error::UnknownRequest(_)
    ));
    let s = state(&handle).await;
    assert_eq!((s.open_requests, s.in_flight), (0, 0));
    assert_eq!(handle.take_snapshot().await.unwrap().candidates.len(), 2);

    // Gone: every method says so, with the same error.
    handle.stop().await;
    let gone = HandleError::CoordinatorGone(CoordinatorGone);
    assert_eq!(
        handle.add_candidate(CandidateInfo::new("x")).await,
        Err(gone.clone())
    );
    assert_eq!(handle.remove_candidate("c0").await, Err(gone.clone()));
    assert_eq!(
        handle.set_config(Config::default()).await,
        Err(gone.clone())
    );
    assert_eq!(
        handle.explain(Request::any()).await.unwrap_err(),
        gone.clone()
    );
    assert_eq!(handle.cancel(kept).await, Err(gone));
    assert_eq!(handle.take_snapshot().await.unwrap_err(), CoordinatorGone);
}

/// A snapshot write hook that holds the first write at its start until opened; later writes
/// pass at once.
struct Gate {
    /// The thread the first write runs on, once it has started.
    entered: mpsc::UnboundedReceiver<ThreadId>,
    /// Dropping it lets the held write go on.
    release: Option<std::sync::mpsc::Sender<()>>,
}

impl Gate {
    fn new() -> (Arc<dyn Fn() + Send + Sync>, Gate) {
        let (entered_tx, entered) = mpsc::unbounded_channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        let first = AtomicBool::new(true);
        let hook = move || {
            if first.swap(false, Ordering::SeqCst) {
                let _ = entered_tx.send(thread::current().id());
                // Returns when the sender is dropped.
                let _ = held.lock().unwrap().recv();
            }
        };
        let gate = Gate {
            entered,
            release: Some(release),
        };
        (Arc::new(hook), gate)
    }

    /// Waits until the first write has started; answers its thread.
    async fn entered(&mut self) -> ThreadId {
        tokio::time::timeout(Duration::from_secs(5), self.entered.recv())
            .await
            .expect("no snapshot write started")
            .unwrap()
    }

    fn open(&mut self) {
        self.release = None;
    }
}

/// Polls the state until `done` holds (the clock is paused: sleeps are virtual, and while a
/// snapshot write runs on the blocking pool tokio does not move the clock on).
async fn wait_until(handle: &CoordinatorHandle, what: &str, done: impl Fn(&State) -> bool) {
    for _ in 0..1000 {
        if done(&state(handle).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{what}: not within 1000 polls");
}

#[actix::test]
async fn periodic_saves_are_written_off_the_actor_thread_while_grants_go_on() {
    tokio::time::pause();
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "snap.json").unwrap();
    let (hook, mut gate) = Gate::new();
    let handle = build(2_000, 8)
        .with_snapshots(store.clone(), Some(Duration::from_millis(10)))
        .unwrap()
        .with_snapshot_write_hook(hook)
        .start_handle();
    learn(&handle, 5, 20.0).await;
    let first = handle.take_snapshot().await.unwrap();

    // The first periodic save is due at 10 ms: it is taken on the actor and written elsewhere.
    let writer = gate.entered().await;
    assert_ne!(
        writer,
        thread::current().id(),
        "the write runs on the blocking pool, not on the actor's thread"
    );
    // While it is held: grants go on, and the periodic saves falling due are skipped.
    learn(&handle, 200, 900.0).await;
    tokio::time::advance(Duration::from_millis(35)).await;
    // (The actor reads its mailbox before its timer: ask until the timer has had its turn.)
    let mut s = state(&handle).await;
    for _ in 0..100 {
        if s.snapshots.skipped > 0 {
            break;
        }
        tokio::task::yield_now().await;
        s = state(&handle).await;
    }
    assert_eq!(s.counters.decisions, 205);
    assert_eq!((s.snapshots.saves, s.snapshots.save_errors), (0, 0));
    assert!(s.snapshots.skipped >= 1, "{:?}", s.snapshots);
    assert!(!store.path().exists());

    // Let go, it lands with what was known when it was taken.
    gate.open();
    wait_until(&handle, "the held save", |s| s.snapshots.saves >= 1).await;
    assert_eq!(without_ages(load(&store)), without_ages(first));

    // The next periods catch up with what was learned since.
    let now = without_ages(handle.take_snapshot().await.unwrap());
    for _ in 0..100 {
        if without_ages(load(&store)) == now {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(without_ages(load(&store)), now);

    // And the save at stop still lands.
    learn(&handle, 3, 50.0).await;
    let last = handle.take_snapshot().await.unwrap();
    handle.stop().await;
    assert_eq!(without_ages(load(&store)), without_ages(last));
    assert_eq!(handle.state().await.unwrap_err(), CoordinatorGone);
}

#[test]
fn an_explicit_save_answers_after_its_write_and_an_older_one_never_overwrites_it() {
    with_snapshot_dir(
        an_explicit_save_answers_after_its_write_and_an_older_one_never_overwrites_it_in,
    );
}

async fn an_explicit_save_answers_after_its_write_and_an_older_one_never_overwrites_it_in(
    dir: PathBuf,
) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "snap.json").unwrap();
    let (hook, mut gate) = Gate::new();
    let c = build(50, 4)
        .with_snapshots(store.clone(), Some(Duration::from_millis(10)))
        .unwrap()
        .with_snapshot_write_hook(hook)
        .start();
    let handle = CoordinatorHandle::new(c.clone());
    learn(&handle, 5, 20.0).await;
    // A periodic save taken now, held before it writes.
    gate.entered().await;
    learn(&handle, 5, 700.0).await;
    let newer = c.send(TakeSnapshot).await.unwrap();
    // The explicit save is taken after it, written at once, and answered when on disk.
    let saved = c.send(SaveSnapshot).await.unwrap().unwrap();
    assert_eq!(saved, Some(store.path()));
    assert_eq!(without_ages(load(&store)), without_ages(newer.clone()));
    assert_eq!(state(&handle).await.snapshots.saves, 1);

    // The older periodic save, let go, finds a newer file and leaves it.
    gate.open();
    wait_until(&handle, "the older save", |s| s.snapshots.skipped >= 1).await;
    let s = state(&handle).await;
    assert_eq!((s.snapshots.saves, s.snapshots.save_errors), (1, 0));
    assert_eq!(without_ages(load(&store)), without_ages(newer));

    // Without a store an explicit save answers `None`.
    let plain = build(1, 1).start();
    assert_eq!(plain.send(SaveSnapshot).await.unwrap().unwrap(), None);
}

/// The save at stop runs on the actor's thread and must be the last word: a periodic save
/// taken before it, still held when the actor is gone, finds a newer file and leaves it.
#[test]
fn the_stop_save_is_never_overwritten_by_an_earlier_periodic_save() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "snap.json").unwrap();
    let system = System::new();
    let last = system.block_on(async {
        tokio::time::pause();
        let (hook, mut gate) = Gate::new();
        let handle = build(50, 4)
            .with_snapshots(store.clone(), Some(Duration::from_millis(10)))
            .unwrap()
            .with_snapshot_write_hook(hook)
            .start_handle();
        learn(&handle, 5, 20.0).await;
        gate.entered().await;
        learn(&handle, 5, 700.0).await;
        let last = handle.take_snapshot().await.unwrap();
        handle.stop().await;
        assert_eq!(without_ages(load(&store)), without_ages(last.clone()));
        gate.open();
        last
    });
    // Dropping the System waits for the blocking pool: the held save has run by now.
    drop(system);
    assert_eq!(without_ages(load(&store)), without_ages(last));
}

/// A snapshot held in memory moves what one coordinator learned into another through the
/// handle; one with an unusable number is refused and changes nothing.
#[actix::test]
async fn a_snapshot_in_memory_is_restored_through_the_handle() {
    tokio::time::pause();
    let teacher = build(2, 4).start_handle();
    learn(&teacher, 20, 40.0).await;
    let snapshot = teacher.take_snapshot().await.unwrap();
    assert_eq!(snapshot.candidates.len(), 2);

    let learner = build(0, 4).start_handle();
    let mut bad = snapshot.clone();
    bad.candidates[0].stats.success = Some(f64::NAN);
    match learner.restore_snapshot(bad).await {
        Err(HandleError::Refused(Error::InvalidSnapshot(m))) => assert!(m.contains("success")),
        other => panic!("{other:?}"),
    }
    assert!(
        state(&learner).await.candidates.is_empty(),
        "nothing changed"
    );

    learner.restore_snapshot(snapshot.clone()).await.unwrap();
    let s = state(&learner).await;
    assert_eq!(s.candidates.len(), 2);
    let attempts: u64 = s.candidates.iter().map(|c| c.stats.attempts).sum();
    assert_eq!(attempts, 20, "the statistics came with the candidates");
    // And it decides on them.
    let mut p = learner.acquire(Request::any()).await.unwrap();
    p.report(Outcome::success());
    drop(p);

    // The actor stamps what it hands out; one taken a day ago restores a day older (the
    // ejection it held ended meanwhile).
    assert!(snapshot.saved_at_unix_ms.is_some(), "stamped");
    let mut old = snapshot;
    old.candidates[0].stats.ejected_for_s = Some(60.0);
    let age = old.candidates[0].stats.last_sample_age_s.unwrap();
    let day = Duration::from_secs(24 * 3600);
    let old = old.stamped(std::time::SystemTime::now() - day);
    let aged = build(0, 4).start_handle();
    aged.restore_snapshot(old).await.unwrap();
    let s = state(&aged).await;
    assert!(
        !s.candidates[0].ejected,
        "the ejection ran out during the day"
    );
    let restored = aged.take_snapshot().await.unwrap().candidates[0]
        .stats
        .last_sample_age_s;
    assert!(
        restored.unwrap() >= age + day.as_secs_f64() - 1.0,
        "{restored:?}"
    );
}

/// An `acquire` future dropped while it waits (a caller's timeout) gives its place up at once:
/// with room for one waiter, the next caller waits instead of being refused, long before any
/// housekeeping pass.
#[actix::test]
async fn a_dropped_acquire_gives_its_place_up_at_once() {
    tokio::time::pause();
    let config = Config {
        refresh_ms: 3_600_000,
        ..Config::default()
    };
    let limits = Limits {
        global: 1,
        max_waiting: 1,
        ..Limits::default()
    };
    let handle = Coordinator::with_seed(config, limits, 3)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    let held = handle.acquire(Request::any()).await.unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(1), handle.acquire(Request::any()));
    assert!(gave_up.await.is_err(), "it waits: the slot is held");
    // The abandon message goes ahead of the next ask in the mailbox.
    let next = {
        let handle = handle.clone();
        tokio::spawn(async move { handle.acquire(Request::any()).await })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        state(&handle).await.waiting,
        1,
        "only the live caller waits"
    );
    assert_eq!(state(&handle).await.shell.abandoned, 1);
    drop(held);
    let permit = next
        .await
        .unwrap()
        .expect("granted, not refused as QueueFull");
    assert_eq!(permit.candidate().as_str(), "a");
}

/// A lease that runs out on a permit from `acquire` is a reclaim, not a rejection anyone
/// hears: the rejections metric counts only the answers a worker actor gets.
#[test]
fn a_reclaimed_acquire_permit_is_not_counted_as_a_rejection() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let (reclaimed, rejections) = System::new().block_on(async {
        tokio::time::pause();
        let config = Config {
            refresh_ms: 5,
            ..Config::default()
        };
        let limits = Limits {
            max_attempt_s: Some(0.02),
            ..Limits::default()
        };
        let handle = Coordinator::with_seed(config, limits, 1)
            .unwrap()
            .with_candidate(CandidateInfo::new("a"))
            .unwrap()
            .start_handle();
        let held: Vec<_> =
            futures::future::join_all((0..3).map(|_| handle.acquire(Request::any())))
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
        // A worker actor's request, reclaimed too: it hears so, and that is counted.
        let (w, mut rx) = probe();
        handle
            .addr()
            .send(Ready::new(Request::any(), w.recipient()))
            .await
            .unwrap()
            .unwrap();
        let worker_permit = next_permit(&mut rx).await;
        match next_answer(&mut rx).await {
            Answer::Rejected { reason, .. } => assert_eq!(reason, Rejection::Reclaimed),
            other => panic!("expected the reclaim's answer, got {other:?}"),
        }
        let s = handle.state().await.unwrap();
        drop((held, worker_permit));
        (s.counters.reclaimed, s.counters.rejections)
    });
    assert_eq!(reclaimed, 4);
    assert_eq!(
        rejections.iter().sum::<u64>(),
        0,
        "the core counts no rejection"
    );
    let counted: u64 = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(k, ..)| {
            k.key().name() == names::REJECTIONS
                && k.key().labels().any(|l| l.value() == "reclaimed")
        })
        .map(|(.., v)| match v {
            DebugValue::Counter(n) => n,
            other => panic!("a counter, got {other:?}"),
        })
        .sum();
    assert_eq!(counted, 1, "only the worker actor's answer");
}

/// `n` attempts of 20 ms of (paused) tokio time, each a success.
async fn learn_in_time(handle: &CoordinatorHandle, n: usize) {
    for _ in 0..n {
        let mut p = handle.acquire(Request::any()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        p.report(Outcome::success());
    }
}

/// An attempt that runs 20 ms, then across a jump of tokio's clock by `pause` (no timer runs
/// meanwhile, as when the process is stopped), then 20 ms more, and succeeds.
async fn succeed_across_a_pause(handle: &CoordinatorHandle, pause: Duration) {
    let mut held = handle.acquire(Request::any()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    tokio::time::advance(pause).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    held.report(Outcome::success());
}

/// The actor stopped for ten hours (a paused process or machine: tokio's clock jumps and no
/// timer runs meanwhile) while an attempt ran: the pause is neither its timeout (the lease is
/// 30 s) nor its candidate's latency when it then succeeds.
#[actix::test]
async fn a_pause_of_the_actor_is_not_blamed_on_the_attempts_running() {
    tokio::time::pause();
    let limits = Limits {
        max_attempt_s: Some(30.0),
        ..Limits::default()
    };
    let handle = Coordinator::with_seed(Config::default(), limits, 3)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .start_handle();
    learn_in_time(&handle, 20).await;
    succeed_across_a_pause(&handle, Duration::from_secs(10 * 3600)).await;
    let s = state(&handle).await;
    assert_eq!(s.counters.pauses, 1);
    assert_eq!(s.counters.reclaimed, 0, "the pause is no timeout");
    // The pause skipped is how late the timer found the clock: up to one refresh period (the
    // timer's period while idle, 100 ms) before it may still count, as a 140 ms try at most.
    let attempt_ms = s.candidates[0].stats.attempt_ms.unwrap();
    assert!(attempt_ms < 140.0, "attempt_ms {attempt_ms}");
}

/// A pause seen by a timer that fired for housekeeping while the core itself was not yet due
/// (a large fleet's refresh stretched to 5 s): the timer's lateness is checked before anything
/// re-arms it.
#[actix::test]
async fn a_pause_is_seen_whatever_the_timer_fired_for() {
    tokio::time::pause();
    let limits = Limits {
        max_attempt_s: Some(30.0),
        ..Limits::default()
    };
    let config = Config {
        refresh_per_candidate_us: 1_000_000.0,
        ..Config::default()
    };
    let mut c = Coordinator::with_seed(config, limits, 3).unwrap();
    for id in ["a", "b", "c", "d", "e"] {
        c = c.with_candidate(CandidateInfo::new(id)).unwrap();
    }
    let handle = c.start_handle();
    learn_in_time(&handle, 20).await;
    // Past a housekeeping tick, so the next timer is housekeeping's, the core's refresh ahead.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    succeed_across_a_pause(&handle, Duration::from_secs(3)).await;
    assert_eq!(state(&handle).await.counters.pauses, 1);
}

/// A flooded mailbox delays the timer (actix reads messages first) but is no pause: the actor
/// runs throughout, and the attempt's real time stands. Real time, on a thread of its own.
#[test]
fn a_flooded_actor_is_not_taken_for_a_paused_one() {
    use selection_coordinator::actor::Explain;
    System::new().block_on(async {
        let limits = Limits {
            max_attempt_s: Some(30.0),
            ..Limits::default()
        };
        let mut c = Coordinator::with_seed(Config::default(), limits, 3)
            .unwrap()
            .with_mailbox_capacity(1 << 16);
        // Enough candidates that an explain costs more than sending one.
        for i in 0..200 {
            c = c
                .with_candidate(CandidateInfo::new(format!("c{i}")))
                .unwrap();
        }
        let handle = c.start_in_thread().unwrap();
        let mut held = handle.acquire(Request::any()).await.unwrap();
        let started = std::time::Instant::now();
        let flood_for = Duration::from_secs(3);
        let tasks: Vec<_> = (0..2000)
            .map(|_| {
                let addr = handle.addr().clone();
                actix::spawn(async move {
                    while started.elapsed() < flood_for {
                        let _ = addr.send(Explain(Request::any())).await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        held.report(Outcome::success());
        drop(held);
        let s = handle.state().await.unwrap();
        assert_eq!(s.counters.pauses, 0, "the actor ran throughout");
    });
}

/// Two coordinators of one process given the same snapshot file: the second is refused (each
/// would overwrite the other's statistics, and a restart would load the other's candidates);
/// once the first is gone the file is free.
#[test]
fn two_coordinators_cannot_share_a_snapshot_file() {
    use selection_coordinator::snapshot::SnapshotError;
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let db = build(2, 4).with_snapshots(store.clone(), None).unwrap();
    match build(1, 4).with_snapshots(store.clone(), None) {
        Err(SnapshotError::InUse(path)) => assert!(path.ends_with("pool.json")),
        other => panic!("expected the file in use, got {:?}", other.map(|_| ())),
    }
    let elsewhere = SnapshotStore::new(dir.path(), "cache.json").unwrap();
    let _cache = build(1, 4).with_snapshots(elsewhere, None).unwrap();
    drop(db);
    let _db_again = build(2, 4).with_snapshots(store, None).unwrap();
}

/// A coordinator whose every address is dropped stops at its next housekeeping pass, supervised
/// or not: it writes its snapshot as at any stop and frees the file for a new coordinator (its
/// self-arming timer kept it alive for good before).
#[actix::test]
async fn a_coordinator_with_no_address_left_stops_and_frees_its_file() {
    tokio::time::pause();
    for supervised in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
        let c = build(2, 4).with_snapshots(store.clone(), None).unwrap();
        let addr = if supervised {
            c.start_supervised()
        } else {
            c.start()
        };
        addr.send(GetState).await.unwrap();
        drop(addr);
        let mut waited_ms = 0;
        while build(2, 4).with_snapshots(store.clone(), None).is_err() {
            assert!(
                waited_ms < 5_000,
                "supervised {supervised}: still claimed after 5 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited_ms += 10;
        }
        assert!(store.path().exists(), "the stop wrote its snapshot");
    }
}

/// Snapshot saves are counted by result in the metrics, so a store that stopped taking them
/// shows on the dashboard and in alerts, not only in `State::snapshots`.
#[test]
fn snapshot_saves_are_counted_by_result_in_the_metrics() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let store = SnapshotStore::new(&snaps, "snap.json").unwrap();
    // One reading of every counter (the debugging recorder's snapshot resets them to 0), and
    // the count of `result` in it.
    let read = || snapshotter.snapshot().into_vec();
    let saves = |values: &[(_, _, _, DebugValue)], result: &str| -> u64 {
        values
            .iter()
            .filter(|(key, ..)| {
                let key: &metrics_util::CompositeKey = key;
                key.key().name() == names::SNAPSHOT_SAVES
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "result" && l.value() == result)
            })
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => *n,
                other => panic!("{} is a counter, got {other:?}", names::SNAPSHOT_SAVES),
            })
            .sum()
    };
    System::new().block_on(async {
        tokio::time::pause();
        let handle = build(3, 4)
            .with_snapshots(store, Some(Duration::from_millis(10)))
            .unwrap()
            .start_handle();
        learn(&handle, 5, 20.0).await;
        wait_until(&handle, "a first save", |s| s.snapshots.saves >= 1).await;
        // The store's directory becomes a file: every save from now on fails.
        std::fs::remove_dir_all(&snaps).unwrap();
        std::fs::write(&snaps, b"not a directory").unwrap();
        wait_until(&handle, "a failed save", |s| s.snapshots.save_errors >= 1).await;
        // Past the next gauge tick (the refresh period).
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The counters read as the last tick set them: no more than the state says now.
        let s = state(&handle).await.snapshots;
        let values = read();
        let (written, failed) = (saves(&values, "written"), saves(&values, "failed"));
        assert!((1..=s.saves).contains(&written), "{written} written, {s:?}");
        assert!(
            (1..=s.save_errors).contains(&failed),
            "{failed} failed, {s:?}"
        );
        assert!(saves(&values, "skipped") <= s.skipped);
        handle.stop().await;
    });
}

/// A permit sends only the first valid outcome: an invalid one is refused at once with the
/// error and leaves the attempt unreported (a corrected one may follow), and a second
/// report is refused as a duplicate instead of being counted.
#[actix::test]
async fn a_permit_reports_one_valid_outcome_and_says_why_it_refuses_others() {
    let handle = build(1, 1).start_handle();
    let mut permit = handle.acquire(Request::any()).await.unwrap();
    let nan = Outcome::success_with(f64::NAN, 12.0, 4096, 30.0);
    assert!(matches!(
        permit.try_report(nan),
        Err(Error::InvalidOutcome { .. })
    ));
    permit.try_report(Outcome::success()).unwrap();
    assert!(matches!(
        permit.try_report(Outcome::failure(FailureClass::Transport)),
        Err(Error::DuplicateOutcome(_))
    ));
    // The fire-and-forget form refuses the same way (with a warning in the log).
    permit.report(Outcome::failure(FailureClass::Transport));
    drop(permit);
    let s = state(&handle).await;
    let c = &s.candidates[0].stats;
    assert_eq!((c.attempts, c.successes), (1, 1), "{c:?}");
    assert_eq!(s.shell.duplicate_outcome + s.shell.invalid_input, 0);
}
