//! Coordinator faults: supervised restarts, snapshots saved and loaded, stale permits, the
//! handle's retry, and bad input at the actor answered with typed errors.

use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::actor::{
    AcquireError, Answer, Coordinator, Crash, Done, GetState, LoadOutcome, Ready, Report,
    SaveSnapshot, SetConfig, SetLimits, State, Stop, TakeSnapshot,
};
use selection_coordinator::snapshot::SnapshotStore;
use selection_coordinator::{
    CandidateInfo, Config, Error, Limits, Next, Outcome, Rejection, Request,
};
use tokio::sync::mpsc;

mod support;
use support::{load, next_answer, next_permit, probe, with_snapshot_dir, without_ages, Probe};

fn build(candidates: &[&str], global: u32) -> Coordinator {
    let limits = Limits {
        global,
        ..Limits::default()
    };
    let mut c = Coordinator::with_seed(Config::default(), limits, 5).unwrap();
    for id in candidates {
        c = c.with_candidate(CandidateInfo::new(*id)).unwrap();
    }
    c
}

async fn state(c: &Addr<Coordinator>) -> State {
    c.send(GetState).await.unwrap()
}

/// Runs `n` attempts that each report a success with the given timing, one at a time.
async fn learn(
    c: &Addr<Coordinator>,
    rx: &mut mpsc::UnboundedReceiver<Answer>,
    w: &Addr<Probe>,
    n: usize,
    ms: f64,
) {
    for _ in 0..n {
        c.send(Ready::new(Request::any(), w.clone().recipient()))
            .await
            .unwrap()
            .unwrap();
        let mut p = next_permit(rx).await;
        p.report(Outcome::success_with(ms, ms, 1000, ms));
        p.done(Next::Finish);
    }
}

#[test]
fn a_crash_restarts_from_the_last_snapshot_and_answers_waiters() {
    with_snapshot_dir(a_crash_restarts_from_the_last_snapshot_and_answers_waiters_in);
}

async fn a_crash_restarts_from_the_last_snapshot_and_answers_waiters_in(dir: PathBuf) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "coordinator.json").unwrap();
    let c = build(&["a", "b"], 1)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start_supervised();
    assert_eq!(state(&c).await.snapshots.loaded, LoadOutcome::Missing);
    let (w, mut rx) = probe();

    learn(&c, &mut rx, &w, 5, 20.0).await;
    let saved = c.send(SaveSnapshot).await.unwrap().unwrap();
    assert_eq!(saved, Some(store.path()));
    // Learned after the save: lost by the crash, as with a real process.
    learn(&c, &mut rx, &w, 5, 900.0).await;
    let before_crash = c.send(TakeSnapshot).await.unwrap();
    let on_file = load(&store);
    assert_ne!(without_ages(before_crash), without_ages(on_file.clone()));

    // One attempt running, one request waiting for the only slot.
    c.send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    let mut held = next_permit(&mut rx).await;
    let waiting = c
        .send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();

    c.do_send(Crash);
    let after = c.send(TakeSnapshot).await.unwrap();
    // As old as they are: the ages (and the stamp) moved on by the real time since the save.
    assert_eq!(
        without_ages(after.clone()),
        without_ages(on_file.clone()),
        "statistics after the restart are the last snapshot"
    );

    match next_answer(&mut rx).await {
        Answer::Rejected { request, reason } => {
            assert_eq!(
                (request, reason),
                (waiting, Rejection::CoordinatorRestarted)
            )
        }
        other => panic!("expected a restart rejection, got {other:?}"),
    }
    let s = state(&c).await;
    assert_eq!(s.incarnation, 1);
    assert_eq!(s.snapshots.loaded, LoadOutcome::Restored { candidates: 2 });
    // The running attempt is carried into the new core: it still holds the only slot.
    assert_eq!(
        (s.in_flight, s.waiting, s.open_requests, s.tracked_requests),
        (1, 0, 1, 1)
    );
    assert_eq!((s.shell.carried, s.shell.stale), (1, 0));

    // A new request waits for the carried attempt's slot, although the new core hands out
    // the same attempt ids.
    let (old_attempt, old_incarnation) = (held.attempt(), held.incarnation());
    let winner = held.candidate().clone();
    held.report(Outcome::success_with(1.0, 1.0, 1, 1.0));
    c.send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    let s = state(&c).await;
    assert_eq!(
        (s.in_flight, s.waiting),
        (1, 1),
        "the limit holds across the restart"
    );
    held.done(Next::Finish);
    let fresh = next_permit(&mut rx).await;
    assert_eq!(fresh.incarnation(), 1);
    // The carried attempt is released: messages naming it again are stale and must not
    // touch the fresh attempt (which may have the same id).
    c.send(Done {
        attempt: old_attempt,
        incarnation: old_incarnation,
        next: Next::Finish,
    })
    .await
    .unwrap();
    c.send(Report {
        attempt: old_attempt,
        incarnation: old_incarnation,
        outcome: Outcome::success(),
    })
    .await
    .unwrap();
    let s = state(&c).await;
    assert_eq!(s.shell.stale, 2, "a second done and a report: stale");
    assert_eq!(s.in_flight, 1, "the fresh attempt keeps its slot");
    // The carried attempt's report was learned, once.
    let after_report = c.send(TakeSnapshot).await.unwrap();
    let attempts = |snap: &selection_coordinator::snapshot::Snapshot| {
        snap.candidates
            .iter()
            .find(|c| c.info.id == winner)
            .map(|c| c.stats.attempts)
            .unwrap()
    };
    assert_eq!(attempts(&after_report), attempts(&on_file) + 1);
    drop(fresh);
}

#[actix::test]
async fn an_attempt_on_a_candidate_removed_before_a_restart_is_not_carried() {
    tokio::time::pause();
    let c = build(&["a", "b"], 4).start_supervised();
    let (w, mut rx) = probe();
    c.send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    let held = next_permit(&mut rx).await;
    c.send(selection_coordinator::actor::RemoveCandidate(
        held.candidate().clone(),
    ))
    .await
    .unwrap()
    .unwrap();
    c.do_send(Crash);
    let s = state(&c).await;
    assert_eq!((s.incarnation, s.in_flight, s.shell.carried), (1, 0, 0));
    // Its release names nothing in the new core: stale, and no slot of it is freed.
    c.send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    let fresh = next_permit(&mut rx).await;
    drop(held);
    let s = state(&c).await;
    assert_eq!((s.in_flight, s.shell.stale), (1, 1));
    drop(fresh);
}

#[actix::test]
async fn the_handle_asks_again_once_after_a_restart() {
    tokio::time::pause();
    let handle = build(&["a"], 1).start_supervised_handle();
    let held = handle.acquire(Request::any()).await.unwrap();
    let h2 = handle.clone();
    let waiter = actix::spawn(async move { h2.acquire(Request::any()).await });
    while handle.state().await.unwrap().waiting == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    handle.addr().do_send(Crash);
    // The retry waits in the new incarnation: the carried attempt holds the only slot.
    while handle.state().await.unwrap().incarnation == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while handle.state().await.unwrap().waiting == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(!waiter.is_finished());
    drop(held); // carried: frees the slot for the retry
    let permit = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(permit.incarnation(), 1);
    let s = handle.state().await.unwrap();
    assert_eq!(
        (
            s.in_flight,
            s.shell.stale,
            s.shell.carried,
            s.shell.permits_dropped
        ),
        (1, 0, 1, 1)
    );
    drop(permit);

    // Two restarts while waiting: the retry is asked once, the second rejection is returned.
    // The attempt running is carried through both and keeps the only slot, so the retry
    // waits in the second incarnation too.
    let blocker = handle.acquire(Request::any()).await.unwrap();
    let h2 = handle.clone();
    let waiter = actix::spawn(async move { h2.acquire(Request::any()).await });
    while handle.state().await.unwrap().waiting == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    handle.addr().do_send(Crash);
    while handle.state().await.unwrap().incarnation == 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while handle.state().await.unwrap().waiting == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    handle.addr().do_send(Crash);
    let out = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.unwrap_err(),
        AcquireError::Rejected(Rejection::CoordinatorRestarted)
    );
    let s = handle.state().await.unwrap();
    assert_eq!((s.incarnation, s.in_flight, s.shell.carried), (3, 1, 3));
    // Granted two incarnations ago and carried twice: its release still frees the slot.
    drop(blocker);
    let s = handle.state().await.unwrap();
    assert_eq!((s.in_flight, s.shell.stale), (0, 0));
}

#[test]
fn snapshots_are_saved_periodically_and_on_stop_and_loaded_at_start() {
    with_snapshot_dir(snapshots_are_saved_periodically_and_on_stop_and_loaded_at_start_in);
}

async fn snapshots_are_saved_periodically_and_on_stop_and_loaded_at_start_in(dir: PathBuf) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "snap.json").unwrap();
    let c = build(&["a", "b"], 4)
        .with_snapshots(store.clone(), Some(Duration::from_millis(10)))
        .unwrap()
        .start();
    let (w, mut rx) = probe();
    learn(&c, &mut rx, &w, 20, 35.0).await;
    let learned = c.send(TakeSnapshot).await.unwrap();
    // Periodic: the file catches up without being asked.
    let mut waited = 0;
    while !(store.path().exists() && without_ages(load(&store)) == without_ages(learned.clone())) {
        assert!(waited < 500, "no periodic snapshot within 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert!(state(&c).await.snapshots.saves >= 1);

    // On stop: learned after the last periodic save and still written.
    learn(&c, &mut rx, &w, 3, 70.0).await;
    let last = c.send(TakeSnapshot).await.unwrap();
    c.send(Stop).await.unwrap();
    while c.connected() && c.send(GetState).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(without_ages(load(&store)), without_ages(last.clone()));

    // A new coordinator (a restarted process) loads it and knows what was learned.
    let c2 = build(&[], 4)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start();
    let s = state(&c2).await;
    assert_eq!(s.snapshots.loaded, LoadOutcome::Restored { candidates: 2 });
    assert_eq!(
        s.candidate("a").unwrap().stats.attempts + s.candidate("b").unwrap().stats.attempts,
        23
    );
    assert_eq!(
        without_ages(c2.send(TakeSnapshot).await.unwrap()),
        without_ages(last)
    );
}

#[test]
fn a_corrupt_snapshot_is_moved_aside_and_the_coordinator_starts_fresh() {
    with_snapshot_dir(a_corrupt_snapshot_is_moved_aside_and_the_coordinator_starts_fresh_in);
}

async fn a_corrupt_snapshot_is_moved_aside_and_the_coordinator_starts_fresh_in(dir: PathBuf) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "snap.json").unwrap();
    std::fs::write(store.path(), b"{\"version\": 1, \"overall\": ").unwrap();
    let c = build(&["a"], 4)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start();
    let s = state(&c).await;
    let LoadOutcome::Quarantined { moved_to, problem } = &s.snapshots.loaded else {
        panic!("expected a quarantined file, got {:?}", s.snapshots.loaded);
    };
    assert!(moved_to.exists() && !store.path().exists());
    assert!(problem.contains("not a snapshot"), "{problem}");
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 0);

    // Incompatible version: same treatment. (One coordinator per file: the first stops.)
    let mut snap = c.send(TakeSnapshot).await.unwrap();
    c.send(Stop).await.unwrap();
    while c.connected() && c.send(GetState).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    snap.version = 99;
    std::fs::write(store.path(), serde_json::to_vec(&snap).unwrap()).unwrap();
    let c2 = build(&["a"], 4)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start();
    let loaded = state(&c2).await.snapshots.loaded;
    assert!(
        matches!(&loaded, LoadOutcome::Quarantined { problem, .. } if problem.contains("version 99")),
        "{loaded:?}"
    );
    // And the coordinator serves.
    let (w, mut rx) = probe();
    learn(&c2, &mut rx, &w, 1, 10.0).await;
}

#[actix::test]
async fn bad_input_at_the_actor_gets_typed_errors_not_hangs() {
    tokio::time::pause();
    let c = build(&["a"], 2).start_supervised();
    let (w, mut rx) = probe();
    let ready = |r: Request| c.send(Ready::new(r, w.clone().recipient()));

    assert_eq!(
        ready(Request::only(["ghost"])).await.unwrap(),
        Err(Error::UnknownCandidate("ghost".into()))
    );
    assert!(matches!(
        ready(Request::only(Vec::<String>::new())).await.unwrap(),
        Err(Error::InvalidRequest(m)) if m.contains("eligible set is empty")
    ));
    assert!(matches!(
        ready(Request::any().with_parallelism(0)).await.unwrap(),
        Err(Error::InvalidRequest(_))
    ));
    let bad_limits = Limits {
        max_attempt_s: Some(f64::NAN),
        ..Limits::default()
    };
    assert!(matches!(
        c.send(SetLimits(bad_limits)).await.unwrap(),
        Err(Error::InvalidLimits(m)) if m.contains("max_attempt_s")
    ));
    let bad_config = Config {
        refresh_ms: 0,
        ..Config::default()
    };
    assert!(matches!(
        c.send(SetConfig(bad_config)).await.unwrap(),
        Err(Error::Config(_))
    ));

    // NaN, infinite and negative durations in a report: counted, ignored, nothing learned.
    ready(Request::any()).await.unwrap().unwrap();
    let mut p = next_permit(&mut rx).await;
    for v in [f64::NAN, f64::INFINITY, -1.0] {
        c.send(Report {
            attempt: p.attempt(),
            incarnation: p.incarnation(),
            outcome: Outcome::success_with(v, 1.0, 10, 1.0),
        })
        .await
        .unwrap();
    }
    let s = state(&c).await;
    assert_eq!(
        s.shell.invalid_input, 8,
        "5 refused messages and 3 bad reports"
    );
    assert_eq!(s.candidate("a").unwrap().stats.attempts, 0);
    // The valid report still counts, and the coordinator keeps serving.
    p.report(Outcome::success());
    p.done(Next::Finish);
    ready(Request::any()).await.unwrap().unwrap();
    drop(next_permit(&mut rx).await);
    let s = state(&c).await;
    assert_eq!(
        (s.candidate("a").unwrap().stats.attempts, s.incarnation),
        (1, 0)
    );
}

/// Shutting the actix System down stops the actor, which saves its snapshot on the way out.
#[test]
fn shutting_the_system_down_saves_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "snap.json").unwrap();
    let system = System::new();
    let learned = system.block_on(async {
        let c = build(&["a", "b"], 4)
            .with_snapshots(store.clone(), None)
            .unwrap()
            .start_supervised();
        let (w, mut rx) = probe();
        learn(&c, &mut rx, &w, 7, 15.0).await;
        c.send(TakeSnapshot).await.unwrap()
    });
    assert!(!store.path().exists(), "nothing saved before the shutdown");
    drop(system);
    assert_eq!(without_ages(load(&store)), without_ages(learned));
}

/// A restart takes statistics from the snapshot, not the candidate set: a candidate removed
/// after the save stays removed, one added after it is kept with fresh statistics.
#[test]
fn a_restart_keeps_the_candidate_set_in_force() {
    with_snapshot_dir(a_restart_keeps_the_candidate_set_in_force_in);
}

async fn a_restart_keeps_the_candidate_set_in_force_in(dir: PathBuf) {
    tokio::time::pause();
    use selection_coordinator::actor::{AddCandidate, RemoveCandidate};
    let store = SnapshotStore::new(&dir, "snap.json").unwrap();
    let c = build(&["a", "b"], 4)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start_supervised();
    let (w, mut rx) = probe();
    learn(&c, &mut rx, &w, 6, 25.0).await;
    c.send(SaveSnapshot).await.unwrap().unwrap();
    let on_file = load(&store);
    c.send(RemoveCandidate("b".into())).await.unwrap().unwrap();
    c.send(AddCandidate(CandidateInfo::new("c")))
        .await
        .unwrap()
        .unwrap();
    c.do_send(Crash);
    let after = c.send(TakeSnapshot).await.unwrap();
    let ids: Vec<&str> = after
        .candidates
        .iter()
        .map(|c| c.info.id.as_str())
        .collect();
    assert_eq!(ids, ["a", "c"]);
    assert_eq!(
        without_ages(after.clone()).candidates[0],
        without_ages(on_file.clone()).candidates[0],
        "a's statistics restored"
    );
    assert_eq!(after.candidates[1].stats.attempts, 0);
    assert_eq!(
        state(&c).await.snapshots.loaded,
        LoadOutcome::Restored { candidates: 1 }
    );
}

#[cfg(feature = "decision-records")]
#[actix::test]
async fn decision_records_go_on_after_a_restart() {
    tokio::time::pause();
    let handle = build(&["a", "b"], 4).start_supervised_handle();
    let mut records = handle.subscribe_channel(1.0, 64).await.unwrap();
    let count = |rx: &mut mpsc::Receiver<_>| {
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        n
    };
    for _ in 0..3 {
        drop(handle.acquire(Request::any()).await.unwrap());
    }
    assert_eq!(count(&mut records), 3);
    handle.addr().send(Stop).await.unwrap();
    for _ in 0..3 {
        drop(handle.acquire(Request::any()).await.unwrap());
    }
    assert_eq!(state(handle.addr()).await.subscribers, 1);
    assert_eq!(
        count(&mut records),
        3,
        "the restarted core records for its subscribers"
    );
}

#[actix::test]
async fn a_restart_keeps_the_name_in_digests_and_numbers_them_after_the_old_ones() {
    use selection_coordinator::actor::{SetShareIdentity, TakeDigest};
    tokio::time::pause();
    let c = build(&["a", "b"], 4).start_supervised();
    c.send(SetShareIdentity {
        name: "client-1".into(),
        seq_base: 1_000,
    })
    .await
    .unwrap();
    let (w, mut rx) = probe();
    learn(&c, &mut rx, &w, 4, 25.0).await;
    tokio::time::advance(Duration::from_secs(5)).await;
    let before = c.send(TakeDigest).await.unwrap();
    assert_eq!(before.sender, "client-1");
    c.do_send(Crash);
    learn(&c, &mut rx, &w, 4, 25.0).await;
    let after = c.send(TakeDigest).await.unwrap();
    assert_eq!(
        after.sender, "client-1",
        "the restarted core keeps its name"
    );
    assert!(
        after.seq > before.seq,
        "digest {} after the restart is numbered after {} before it",
        after.seq,
        before.seq
    );
}

/// A worker of the earlier incarnation naming its request after a restart (here a `Cancel`)
/// is told the request is unknown: the new core's request ids are not the old ones, so it
/// cannot cancel another worker's request that happens to get the same slot.
#[actix::test]
async fn a_request_id_of_an_earlier_incarnation_reaches_no_request_of_the_new_one() {
    use selection_coordinator::actor::Cancel;
    let c = build(&["a"], 1).start_supervised();
    let (w, mut rx) = probe();
    let old = c
        .send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    let held = next_permit(&mut rx).await;
    c.do_send(Crash);
    // A new worker's request waits behind the carried attempt.
    let new = c
        .send(Ready::new(Request::any(), w.clone().recipient()))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(new, old, "a new id");
    match c.send(Cancel { request: old }).await.unwrap() {
        Err(Error::UnknownRequest(id)) => assert_eq!(id, old),
        other => panic!("expected the old request to be unknown, got {other:?}"),
    }
    let s = state(&c).await;
    assert_eq!(s.waiting, 1, "the new request still waits");
    drop(held);
    match next_answer(&mut rx).await {
        Answer::Granted(p) => assert_eq!(p.request(), new),
        other => panic!("expected the new request's grant, got {other:?}"),
    }
}

/// A crash skips the save at stop only once: a later clean stop of the restarted coordinator
/// saves what it learned, as any stop does.
#[test]
fn a_stop_after_a_crash_saves_the_snapshot_again() {
    with_snapshot_dir(a_stop_after_a_crash_saves_the_snapshot_again_in);
}

async fn a_stop_after_a_crash_saves_the_snapshot_again_in(dir: PathBuf) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "coordinator.json").unwrap();
    let c = build(&["a", "b"], 1)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start_supervised();
    let (w, mut rx) = probe();
    c.do_send(Crash);
    assert_eq!(state(&c).await.incarnation, 1);
    assert!(!store.path().exists(), "a crash saves nothing");
    learn(&c, &mut rx, &w, 3, 20.0).await;
    c.do_send(Stop);
    let s = state(&c).await;
    assert_eq!(s.incarnation, 2);
    assert_eq!(s.snapshots.loaded, LoadOutcome::Restored { candidates: 2 });
    let attempts: u64 = load(&store)
        .candidates
        .iter()
        .map(|c| c.stats.attempts)
        .sum();
    assert_eq!(
        attempts, 3,
        "the stop saved what was learned after the crash"
    );
}

/// A snapshot file loaded at the start has aged by the time since it was written: an
/// ejection that would have ended meanwhile is over.
#[test]
fn a_snapshot_file_loaded_a_day_later_has_aged() {
    with_snapshot_dir(a_snapshot_file_loaded_a_day_later_has_aged_in);
}

async fn a_snapshot_file_loaded_a_day_later_has_aged_in(dir: PathBuf) {
    tokio::time::pause();
    let store = SnapshotStore::new(&dir, "coordinator.json").unwrap();
    let c = build(&["a", "b"], 1).start();
    let (w, mut rx) = probe();
    learn(&c, &mut rx, &w, 4, 20.0).await;
    let mut snapshot = c.send(TakeSnapshot).await.unwrap();
    let day_ago = std::time::SystemTime::now() - Duration::from_secs(24 * 3600);
    snapshot = snapshot.stamped(day_ago);
    for cand in &mut snapshot.candidates {
        cand.stats.ejections = 1;
        cand.stats.ejected_for_s = Some(600.0);
    }
    store.save(&snapshot).unwrap();
    let fresh = build(&[], 1)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start();
    let s = state(&fresh).await;
    assert_eq!(s.snapshots.loaded, LoadOutcome::Restored { candidates: 2 });
    let ejected = |snap: selection_coordinator::snapshot::Snapshot| {
        snap.candidates
            .iter()
            .filter(|c| c.stats.ejected_for_s.is_some())
            .count()
    };
    assert_eq!(
        ejected(fresh.send(TakeSnapshot).await.unwrap()),
        0,
        "a ten-minute ejection written a day ago has ended"
    );

    // The same snapshot stamped now restores the ejections as current.
    let store = SnapshotStore::new(dir.join("later"), "coordinator.json").unwrap();
    store
        .save(&snapshot.stamped(std::time::SystemTime::now()))
        .unwrap();
    let fresh = build(&[], 1)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .start();
    assert_eq!(ejected(fresh.send(TakeSnapshot).await.unwrap()), 2);
}

/// Giving a coordinator its snapshot store again (to change the period) replaces the first:
/// the coordinator does not refuse its own file as in use.
#[test]
fn a_coordinator_given_its_store_again_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "coordinator.json").unwrap();
    let c = build(&["a"], 1)
        .with_snapshots(store.clone(), None)
        .unwrap()
        .with_snapshots(store.clone(), Some(Duration::from_secs(60)))
        .expect("its own file is not in use by another coordinator");
    drop(c);
    // Dropped, it frees the file for another coordinator.
    build(&["a"], 1).with_snapshots(store, None).unwrap();
}
