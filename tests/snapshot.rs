//! Snapshots: what a core learned survives a restart; bad files are moved aside.

#[cfg(unix)]
#[path = "support/owner.rs"]
mod owner;

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::snapshot::{Loaded, Snapshot, SnapshotStore};
use selection_coordinator::{
    CandidateInfo, Config, Core, Error, Event, FailureClass, Next, Outcome, Request,
};

fn trained_core(seed: u64) -> (Core, Instant) {
    let start = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut core = Core::new(Config::default(), start).unwrap();
    for i in 0..5 {
        core.add_candidate(
            CandidateInfo::new(format!("c{i}")).with_stake(i as f64),
            start,
            &mut rng,
        )
        .unwrap();
    }
    let mut now = start;
    for step in 0..400 {
        now += Duration::from_millis(7);
        core.ready(Request::any(), now, &mut rng).unwrap();
        while let Some(e) = core.poll_event() {
            if let Event::Granted(g) = e {
                let bad = g.candidate.as_str() == "c0" || rng.random_bool(0.1);
                let outcome = if bad {
                    Outcome::failure(FailureClass::Overload)
                } else {
                    Outcome::success_with(5.0 + step as f64 % 3.0, 12.0, 10_000, 40.0)
                };
                core.outcome(g.attempt, outcome, now).unwrap();
                core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
            }
        }
    }
    (core, now)
}

#[test]
fn restart_keeps_what_was_learned() {
    let (core, _) = trained_core(3);
    let snap = core.snapshot();
    assert_eq!(snap.candidates.len(), 5);
    assert!(snap.candidates.iter().any(|c| c.stats.attempts > 0));

    // A new core with another epoch, as after a process restart.
    let later = Instant::now() + Duration::from_secs(3600);
    let mut rng = SmallRng::seed_from_u64(9);
    let mut fresh = Core::new(Config::default(), later).unwrap();
    fresh.restore(&snap, later, &mut rng).unwrap();
    assert_eq!(
        fresh.snapshot(),
        snap,
        "statistics after restart equal the snapshot"
    );
    let c0 = fresh.candidate(&"c0".into()).unwrap();
    // The default config shuns c0 after a few failures, before its overload window holds
    // `min_samples` outcomes, so the success EMA is what remembers it.
    assert!(c0.components.success < 0.5, "c0 is still known as failing");
}

#[test]
fn store_writes_atomically_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "stats.json").unwrap();
    assert!(matches!(store.load().unwrap(), Loaded::Missing));
    let (core, _) = trained_core(5);
    let snap = core.snapshot();
    store.save(&snap).unwrap();
    store.save(&snap).unwrap(); // overwriting works too
    match store.load().unwrap() {
        Loaded::Snapshot(s) => assert_eq!(s, snap),
        other => panic!("expected a snapshot, got {other:?}"),
    }
    // Only the snapshot is left in the directory: no temporary files.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["stats.json".to_string()]);
}

#[test]
fn corrupt_or_incompatible_snapshots_are_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "stats.json").unwrap();
    std::fs::write(store.path(), b"{ this is not json").unwrap();
    match store.load().unwrap() {
        Loaded::Quarantined { moved_to, problem } => {
            assert!(moved_to.exists());
            assert!(problem.contains("not a snapshot"), "{problem}");
        }
        other => panic!("expected quarantine, got {other:?}"),
    }
    assert!(!store.path().exists());

    let (core, _) = trained_core(1);
    let mut snap = core.snapshot();
    snap.version = 99;
    std::fs::write(store.path(), serde_json::to_vec(&snap).unwrap()).unwrap();
    match store.load().unwrap() {
        Loaded::Quarantined { problem, .. } => assert!(problem.contains("version 99"), "{problem}"),
        other => panic!("expected quarantine, got {other:?}"),
    }
    // A NaN smuggled in as a huge exponent or a negative number is refused too.
    let mut snap = core.snapshot();
    snap.candidates[0].stats.connect_ms = Some(-1.0);
    assert!(Snapshot::from_json(&serde_json::to_string(&snap).unwrap()).is_err());
    // So is a negative first-byte spread.
    let mut snap = core.snapshot();
    assert!(
        snap.overall.ttfb_spread.is_some(),
        "the trained core learned one"
    );
    snap.overall.ttfb_spread = Some(-0.5);
    let err = Snapshot::from_json(&serde_json::to_string(&snap).unwrap()).unwrap_err();
    assert!(err.to_string().contains("overall.ttfb_spread"), "{err}");
    // A field the overall averages do not have (misspelled, or from a newer build) is refused
    // as in every other part, not dropped.
    let mut v = serde_json::to_value(core.snapshot()).unwrap();
    v["overall"]["tttfb_ms"] = serde_json::json!(12.0);
    let err = Snapshot::from_json(&v.to_string()).unwrap_err();
    assert!(err.to_string().contains("tttfb_ms"), "{err}");
}

#[test]
fn writes_stay_in_the_given_directory() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["../escape.json", "a/b.json", "..", ""] {
        assert!(
            SnapshotStore::new(dir.path(), bad).is_err(),
            "{bad:?} accepted"
        );
    }
    #[cfg(unix)]
    {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("stats.json")).unwrap();
        let store = SnapshotStore::new(dir.path(), "stats.json").unwrap();
        let (core, _) = trained_core(2);
        assert!(store.save(&core.snapshot()).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    }
}

#[test]
fn inconsistent_counts_and_repeated_candidates_are_refused() {
    let (core, _) = trained_core(4);
    let good = core.snapshot();
    good.validate().unwrap();
    let refused = |edit: &dyn Fn(&mut Snapshot), want: &str| {
        let mut snap = good.clone();
        edit(&mut snap);
        let text = serde_json::to_string(&snap).unwrap();
        let err = Snapshot::from_json(&text).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    };
    refused(
        &|s| {
            let twin = s.candidates[1].clone();
            s.candidates.push(twin);
        },
        "c1 appears twice",
    );
    refused(
        &|s| s.candidates[2].stats.successes = s.candidates[2].stats.attempts + 1,
        "c2.successes",
    );
    refused(
        &|s| s.candidates[0].stats.window = vec![(100, 1), (5, 0)],
        "c0.window",
    );
}

/// Statistics handed to `add_with_stats` are checked as a snapshot's are, so a core never holds
/// statistics its own snapshot would be refused for.
#[test]
fn unusable_raw_statistics_are_refused_by_field() {
    use selection_coordinator::score::Stats;
    let now = Instant::now();
    let mut core = Core::new(Config::default(), now).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let cases = [
        (
            Stats {
                success: Some(f64::NAN),
                ..Stats::default()
            },
            "stats.success",
        ),
        (
            Stats {
                attempt_ms: Some(-1.0),
                ..Stats::default()
            },
            "stats.attempt_ms",
        ),
        (
            Stats {
                success: Some(1.5),
                ..Stats::default()
            },
            "stats.success",
        ),
        (
            Stats {
                attempts: 1,
                successes: 2,
                ..Stats::default()
            },
            "stats.successes",
        ),
        (
            Stats {
                overload_evidence: 2.0,
                ..Stats::default()
            },
            "stats.overload_evidence",
        ),
        // Finite, but too far for a snapshot's age in microseconds.
        (
            Stats {
                ejected_until_s: Some(1e305),
                ..Stats::default()
            },
            "stats.ejected_until_s",
        ),
        (
            Stats {
                last_sample_s: Some(-1e305),
                ..Stats::default()
            },
            "stats.last_sample_s",
        ),
    ];
    for (i, (stats, want)) in cases.into_iter().enumerate() {
        match core.add_with_stats(CandidateInfo::new(format!("c{i}")), stats, now, &mut rng) {
            Err(Error::InvalidCandidate { field, .. }) => assert_eq!(field, want),
            other => panic!("case {i}: {other:?}"),
        }
    }
    assert_eq!(core.candidates().count(), 0, "nothing was added");
    // Usable statistics go in, and the snapshot taken after them is valid.
    let good = Stats {
        success: Some(0.9),
        attempt_ms: Some(12.0),
        attempts: 10,
        successes: 9,
        ..Stats::default()
    };
    core.add_with_stats(CandidateInfo::new("ok"), good, now, &mut rng)
        .unwrap();
    core.snapshot().validate().unwrap();
}

/// A new core (another epoch, as after a process restart) with `snap` restored as taken
/// `downtime` ago.
fn restored_after(snap: &Snapshot, downtime: Duration) -> Core {
    let later = Instant::now();
    let mut rng = SmallRng::seed_from_u64(9);
    let mut fresh = Core::new(Config::default(), later).unwrap();
    fresh
        .restore_after(snap, downtime, later, &mut rng)
        .unwrap();
    fresh
}

/// A snapshot restored a while after it was taken is as old as it is: ages grow by the
/// downtime, ejections run on, the overload window moves on; the stamp says how long.
#[test]
fn a_snapshot_restored_after_downtime_has_aged() {
    let (core, _) = trained_core(3);
    let mut snap = core.snapshot();
    assert!(
        snap.saved_at_unix_ms.is_none(),
        "the pure core stamps nothing"
    );
    // c0 is ejected for a minute more, with a full overload window.
    let c0 = snap
        .candidates
        .iter_mut()
        .find(|c| c.info.id.as_str() == "c0")
        .unwrap();
    c0.stats.ejected_for_s = Some(60.0);
    c0.stats.window = vec![(5, 5); 4];
    let age = c0.stats.last_sample_age_s.unwrap();

    let restored = |downtime: Duration| {
        let c0 = restored_after(&snap, downtime)
            .snapshot()
            .candidates
            .into_iter()
            .find(|c| c.info.id.as_str() == "c0");
        c0.unwrap().stats
    };
    let at_once = restored(Duration::ZERO);
    assert_eq!(at_once.ejected_for_s, Some(60.0));
    assert_eq!(at_once.window.iter().filter(|b| b.1 > 0).count(), 4);
    let ten_s = restored(Duration::from_secs(10));
    assert_eq!(ten_s.ejected_for_s, Some(50.0));
    assert!((ten_s.last_sample_age_s.unwrap() - (age + 10.0)).abs() < 1e-6);
    let week = restored(Duration::from_secs(7 * 24 * 3600));
    assert_eq!(week.ejected_for_s, None, "the ejection ended meanwhile");
    assert!(week.window.iter().all(|b| b.1 == 0), "{:?}", week.window);
    assert!(week.last_sample_age_s.unwrap() >= 7.0 * 24.0 * 3600.0);

    // The stamp: a week-old one reads a week; none, or one from the future, reads nothing.
    let now = std::time::SystemTime::now();
    let stamped = snap
        .clone()
        .stamped(now - Duration::from_secs(7 * 24 * 3600));
    let downtime = stamped.downtime(now).as_secs_f64();
    assert!((downtime - 7.0 * 24.0 * 3600.0).abs() < 0.01, "{downtime}");
    assert_eq!(snap.downtime(now), Duration::ZERO);
    let future = snap.clone().stamped(now + Duration::from_secs(60));
    assert_eq!(future.downtime(now), Duration::ZERO);
    // It survives a round trip through JSON; a snapshot written without it still loads.
    let json = serde_json::to_string(&stamped).unwrap();
    assert_eq!(Snapshot::from_json(&json).unwrap(), stamped);
    assert!(!serde_json::to_string(&snap)
        .unwrap()
        .contains("saved_at_unix_ms"));
}

/// A stamp from a wall clock never set (1970, a machine without a battery-backed clock before
/// NTP) reads as decades of downtime: every age is capped, and the restore goes through.
#[test]
fn a_snapshot_stamped_before_the_clock_was_set_still_restores() {
    let (core, _) = trained_core(4);
    let snap = core
        .snapshot()
        .stamped(std::time::UNIX_EPOCH + Duration::from_secs(600));
    let downtime = snap.downtime(std::time::SystemTime::now());
    assert!(downtime > Duration::from_secs(50 * 365 * 24 * 3600));
    let fresh = restored_after(&snap, downtime);
    assert_eq!(fresh.candidates().count(), 5);
    for c in fresh.snapshot().candidates {
        assert!(c.stats.last_sample_age_s.unwrap() > 1e8, "{:?}", c.stats);
        assert_eq!(c.stats.ejected_for_s, None);
    }
}

/// One file per owner in a process: a second claim on the same file is refused until the
/// first is dropped; a file elsewhere is free.
#[test]
fn a_snapshot_file_is_claimed_by_one_owner_at_a_time() {
    use selection_coordinator::snapshot::SnapshotError;
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let first = store.claim().unwrap();
    let same = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    match same.claim() {
        Err(SnapshotError::InUse(path)) => assert!(path.ends_with("pool.json")),
        other => panic!("expected the file in use, got {other:?}"),
    }
    // The same file under another name: through `..`, and through a symbolic link.
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let dotdot = SnapshotStore::new(dir.path().join("sub/.."), "pool.json").unwrap();
    assert!(matches!(dotdot.claim(), Err(SnapshotError::InUse(_))));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let linked = SnapshotStore::new(&link, "pool.json").unwrap();
    assert!(matches!(linked.claim(), Err(SnapshotError::InUse(_))));
    let other = SnapshotStore::new(dir.path(), "cache.json").unwrap();
    let _cache = other.claim().unwrap();
    drop(first);
    let _again = same.claim().unwrap();
}

/// Temporary files an earlier process left with this process's id (a crash in a container
/// always running as process 1) do not stop a save.
#[test]
fn stale_temporary_files_of_an_earlier_process_do_not_stop_a_save() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let pid = std::process::id();
    // Many, so the test does not depend on the process-wide count of writes so far.
    for n in 0..2_000u64 {
        std::fs::write(dir.path().join(format!(".pool.json.tmp-{pid}-{n}")), b"{").unwrap();
    }
    let (core, _) = trained_core(7);
    store.save(&core.snapshot()).unwrap();
    assert!(matches!(store.load().unwrap(), Loaded::Snapshot(_)));
}

/// A save never removes another writer's temporary file (two stores of one process on one
/// file, or a caller's save beside the coordinator's): each write has a file of its own.
#[test]
fn a_save_leaves_another_writers_temporary_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "shared.json").unwrap();
    // Where a writer of this process put its write in progress, by the process id alone.
    let other = dir
        .path()
        .join(format!(".shared.json.tmp-{}", std::process::id()));
    std::fs::write(&other, b"half a snapshot").unwrap();
    let (core, _) = trained_core(6);
    store.save(&core.snapshot()).unwrap();
    assert_eq!(std::fs::read(&other).unwrap(), b"half a snapshot");
    assert!(matches!(store.load().unwrap(), Loaded::Snapshot(_)));
}

/// A path that is not a regular file is refused before it is opened, and left as it is: a
/// FIFO blocked the load (and a save replaced it), a device was read without end or moved
/// aside as a corrupt snapshot. A symbolic link is refused on load as on save, so a store
/// that could never save fails at its start.
#[cfg(unix)]
#[test]
fn a_path_that_is_not_a_regular_file_is_refused_and_left_alone() {
    use selection_coordinator::snapshot::SnapshotError;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let store = SnapshotStore::at(&fifo).unwrap();
    assert!(matches!(store.load(), Err(SnapshotError::NotAFile(_))));
    let (core, _) = trained_core(8);
    assert!(matches!(
        store.save(&core.snapshot()),
        Err(SnapshotError::NotAFile(_))
    ));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    let as_dir = SnapshotStore::at(dir.path()).unwrap();
    assert!(matches!(as_dir.load(), Err(SnapshotError::NotAFile(_))));

    let real = dir.path().join("real.json");
    SnapshotStore::at(&real)
        .unwrap()
        .save(&core.snapshot())
        .unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let linked = SnapshotStore::at(&link).unwrap();
    assert!(matches!(linked.load(), Err(SnapshotError::Symlink(_))));
}

/// Across processes the claim is an exclusive lock on `.<name>.lock` beside the file: held
/// elsewhere (here by another open file of this process, as another process would hold it),
/// the claim is refused; once free, the claim removes the temporary files of writes that
/// never finished.
#[test]
fn a_claim_locks_the_file_across_processes_and_clears_unfinished_writes() {
    use selection_coordinator::snapshot::SnapshotError;
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join(".pool.json.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    match store.claim() {
        Err(SnapshotError::InUseElsewhere(path)) => assert!(path.ends_with("pool.json")),
        other => panic!("expected the file in use elsewhere, got {other:?}"),
    }
    let unfinished = dir.path().join(".pool.json.tmp-1-00000000000000ab-3");
    std::fs::write(&unfinished, b"half a snap").unwrap();
    let unrelated = dir.path().join(".cache.json.tmp-1-00000000000000ab-3");
    std::fs::write(&unrelated, b"another file's").unwrap();
    // Another store whose name begins as this one's temporary files do: its lock file and
    // its temporary files are its own.
    let other = SnapshotStore::new(dir.path(), "pool.json.tmp-old").unwrap();
    let other_claim = other.claim().unwrap();
    let others_lock = dir.path().join(".pool.json.tmp-old.lock");
    let others_unfinished = dir
        .path()
        .join(".pool.json.tmp-old.tmp-1-00000000000000ab-3");
    std::fs::write(&others_unfinished, b"half of its snap").unwrap();
    drop(lock);
    let claim = store.claim().unwrap();
    assert!(!unfinished.exists());
    assert!(unrelated.exists());
    assert!(others_lock.exists());
    assert!(others_unfinished.exists());
    drop((claim, other_claim));
}

/// A claim removes no temporary file of this process: a save beside the coordinator's (a
/// caller's own `SnapshotStore::save` on the file) keeps its write while claims come and go.
#[test]
fn a_claim_leaves_this_processs_writes_in_progress_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let mut core = Core::new(Config::default(), Instant::now()).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    for i in 0..3_000 {
        core.add_candidate(
            CandidateInfo::new(format!("c{i}")),
            Instant::now(),
            &mut rng,
        )
        .unwrap();
    }
    let snapshot = core.snapshot();
    let saving = {
        let store = store.clone();
        std::thread::spawn(move || (0..40).filter(|_| store.save(&snapshot).is_err()).count())
    };
    while !saving.is_finished() {
        drop(store.claim().unwrap());
    }
    assert_eq!(saving.join().unwrap(), 0, "saves failed");
}

/// Names the file system would refuse once the temporary file's suffix is added, and names
/// that are not UTF-8, are refused with errors that say so.
#[cfg(unix)]
#[test]
fn names_too_long_or_not_utf8_are_refused_as_such() {
    use selection_coordinator::snapshot::{SnapshotError, MAX_NAME_LEN};
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(MAX_NAME_LEN + 1);
    assert!(matches!(
        SnapshotStore::new(dir.path(), &long),
        Err(SnapshotError::NameTooLong(_))
    ));
    let longest = SnapshotStore::new(dir.path(), &"n".repeat(MAX_NAME_LEN)).unwrap();
    let (core, _) = trained_core(9);
    longest.save(&core.snapshot()).unwrap();
    let odd = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"sn\xffap.json"));
    assert!(matches!(
        SnapshotStore::at(&odd),
        Err(SnapshotError::NotUtf8(_))
    ));
}

/// A save keeps the permissions of the file it replaces (a snapshot an operator made private
/// stays private).
#[cfg(unix)]
#[test]
fn a_save_keeps_the_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let (core, _) = trained_core(10);
    store.save(&core.snapshot()).unwrap();
    let path = store.path();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    store.save(&core.snapshot()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// A save keeps the owner and group of the file it replaces where the process may set them:
/// a coordinator run as root over a snapshot an operator gave to a service user leaves it to
/// that user.
#[cfg(unix)]
#[test]
fn a_save_keeps_the_files_owner() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let (core, _) = trained_core(10);
    store.save(&core.snapshot()).unwrap();
    let path = store.path();
    let Some((uid, gid)) = owner::give_to_another_user(&path) else {
        return;
    };
    store.save(&core.snapshot()).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (uid, gid));
}

/// Each unusable file is moved aside under a name of its own: a second one never overwrites
/// the first, so both can be looked at.
#[test]
fn every_quarantined_file_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "stats.json").unwrap();
    let mut moved = Vec::new();
    for body in [&b"first bad"[..], &b"second bad"[..]] {
        std::fs::write(store.path(), body).unwrap();
        match store.load().unwrap() {
            Loaded::Quarantined { moved_to, .. } => moved.push(moved_to),
            other => panic!("expected quarantine, got {other:?}"),
        }
    }
    assert_ne!(moved[0], moved[1]);
    assert_eq!(std::fs::read(&moved[0]).unwrap(), b"first bad");
    assert_eq!(std::fs::read(&moved[1]).unwrap(), b"second bad");
}

/// A backslash is a separator on some systems: a name with one is refused as not plain.
#[test]
fn a_name_with_a_backslash_is_refused() {
    use selection_coordinator::snapshot::SnapshotError;
    match SnapshotStore::new(std::env::temp_dir(), "..\\escape.json") {
        Err(SnapshotError::BadName(name)) => assert_eq!(name, "..\\escape.json"),
        other => panic!("expected a bad name, got {other:?}"),
    }
}

/// A claim removes what unfinished writes of other processes left, in the current form
/// (process id, a 16-digit token, a count) and in the earlier one (process id and count), and
/// leaves files that only look alike.
#[test]
fn a_claim_removes_unfinished_writes_of_both_forms_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::new(dir.path(), "pool.json").unwrap();
    let current = dir.path().join(".pool.json.tmp-1-00000000000000ab-3");
    let earlier = dir.path().join(".pool.json.tmp-1-3");
    let short_token = dir.path().join(".pool.json.tmp-1-00ab-3");
    for f in [&current, &earlier, &short_token] {
        std::fs::write(f, b"half a snap").unwrap();
    }
    let _claim = store.claim().unwrap();
    assert!(!current.exists(), "an unfinished write is removed");
    assert!(
        !earlier.exists(),
        "an unfinished write of the earlier form is removed"
    );
    assert!(
        short_token.exists(),
        "a name that is not a temporary file's is left"
    );
}

/// A restore brings back no more ejections than `ejection.max_share` allows of the live
/// fleet: the ones ending last stay, the others end.
#[test]
fn a_restore_holds_ejections_to_the_share_allowed() {
    let (trained, _) = trained_core(3);
    let mut snap = trained.snapshot();
    snap.candidates
        .retain(|c| ["c1", "c2"].contains(&c.info.id.as_str()));
    snap.candidates[0].stats.ejected_for_s = Some(100.0);
    snap.candidates[1].stats.ejected_for_s = Some(200.0);
    let mut config = Config::default();
    config.ejection.enabled = true;
    config.ejection.max_share = 0.34;
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut core = Core::new(config, now).unwrap();
    core.add_candidate(CandidateInfo::new("z"), now, &mut rng)
        .unwrap();
    core.restore(&snap, now, &mut rng).unwrap();
    // Three live candidates, a share of 0.34: one may be ejected, the one ending last.
    let record = core.explain(&Request::any(), now).unwrap();
    let removed: Vec<&str> = record
        .filters
        .iter()
        .filter(|f| f.filter == "ejection")
        .flat_map(|f| f.removed.iter().map(|id| id.as_str()))
        .collect();
    assert_eq!(removed, ["c2"], "{record:?}");
    let mut drawn = std::collections::HashSet::new();
    for _ in 0..200 {
        core.ready(Request::any(), now, &mut rng).unwrap();
        while let Some(e) = core.poll_event() {
            if let Event::Granted(g) = e {
                drawn.insert(g.candidate.to_string());
                core.done(g.attempt, Next::Finish, now, &mut rng).unwrap();
            }
        }
    }
    assert!(drawn.contains("c1") && !drawn.contains("c2"), "{drawn:?}");
}

/// A restore keeps what steers the draw beyond the statistics: each candidate's load fit
/// (whether its times grow with its load) and its server's feedback averages, with the
/// fleet's reference. A core restored from the snapshot scores every candidate as the core it
/// was taken from.
#[test]
fn a_restore_keeps_the_load_fits_and_the_server_feedback() {
    use selection_coordinator::ServerFeedback;
    let start = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default(), start).unwrap();
    for i in 0..4 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), start, &mut rng)
            .unwrap();
    }
    let mut now = start;
    let mut running = Vec::new();
    for step in 0..6_000u32 {
        now += Duration::from_millis(2);
        if step % 2 == 0 && step < 5_900 {
            core.ready(Request::any(), now, &mut rng).unwrap();
        } else if !running.is_empty() {
            let a = running.swap_remove(rng.random_range(0..running.len()));
            let id = core.attempt_candidate(a).unwrap().to_string();
            let n: u32 = id[1..].parse().unwrap();
            let k = core.candidate(&id.as_str().into()).unwrap().in_flight as f64;
            // c1's times grow with its load; every server reports its queue.
            let t = 10.0 * f64::from(n + 1) * if n == 1 { k } else { 1.0 };
            let o = Outcome::success_with(1.0, t, 10_000, t * 2.0).feedback(ServerFeedback::new(
                n * 3,
                Duration::from_millis(5 * u64::from(n + 1)),
            ));
            core.outcome(a, o, now).unwrap();
            core.done(a, Next::Finish, now, &mut rng).unwrap();
        }
        while let Some(e) = core.poll_event() {
            if let Event::Granted(g) = e {
                running.push(g.attempt);
            }
        }
    }
    assert!(running.is_empty() && core.waiting() == 0);
    let snap = core.snapshot();
    assert!(snap.feedback_reference_ms.is_some());
    assert!(snap
        .candidates
        .iter()
        .all(|c| c.load_fit.is_some() && c.feedback.is_some()));
    let back = Snapshot::from_json(&serde_json::to_string(&snap).unwrap()).unwrap();
    let mut restored = Core::new(Config::default(), now).unwrap();
    restored.restore(&back, now, &mut rng).unwrap();
    let later = now + Duration::from_millis(200);
    core.tick(later, &mut rng);
    restored.tick(later, &mut rng);
    // Equal up to the microsecond rounding of the ages a snapshot stores.
    for (a, b) in core.candidates().zip(restored.candidates()) {
        assert_eq!(a.info.id, b.info.id);
        for ((name, x), (_, y)) in a
            .components
            .entries()
            .into_iter()
            .zip(b.components.entries())
        {
            assert!(
                (x - y).abs() <= 1e-6 * x.abs().max(1e-12),
                "{} {name}: {x} against {y}",
                a.info.id
            );
        }
    }
    // And the snapshot of the restored core keeps them as they were.
    let again = restored.snapshot();
    for (a, b) in snap.candidates.iter().zip(&again.candidates) {
        assert_eq!(
            (a.load_fit, a.feedback),
            (b.load_fit, b.feedback),
            "{}",
            a.info.id
        );
    }
    assert_eq!(snap.feedback_reference_ms, again.feedback_reference_ms);
}
