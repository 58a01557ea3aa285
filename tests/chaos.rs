//! Chaos through real actors: over 100,000 attempts while workers stop mid-attempt, send
//! duplicate `Done`s and stray reports, and the supervised coordinator is killed twice.
//!
//! Afterwards nothing is in flight or waiting, every request was either granted or rejected
//! with a reason, the statistics right after each restart equal the snapshot file it loaded,
//! and no panic escaped (a panicking handler would abort the System and fail the test).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use actix::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::actor::{
    Answer, Coordinator, Crash, Done, GetState, LoadOutcome, Permit, Ready, Report, SaveSnapshot,
    TakeSnapshot,
};
use selection_coordinator::snapshot::{Loaded, Snapshot, SnapshotStore};
use selection_coordinator::{
    CandidateInfo, Config, FailureClass, Limits, Next, Outcome, Rejection, Request,
};

#[path = "support/snapshot_dir.rs"]
mod snapshot_dir;
use snapshot_dir::with_snapshot_dir;

/// Attempts to run (grants received by workers).
const ATTEMPTS: u64 = 100_000;
/// Workers asking at once; the global limit keeps most of them waiting.
const WORKERS: usize = 32;
const GLOBAL_LIMIT: u32 = 8;
const STOP_MID_ATTEMPT: f64 = 0.10;
const DUPLICATE_DONE: f64 = 0.05;
const STRAY_REPORT: f64 = 0.05;
/// Grants after which the coordinator is killed (a snapshot is saved a little before each).
const CRASH_AT: [u64; 2] = [35_000, 70_000];
const SAVE_BEFORE_CRASH: u64 = 3_000;

#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    granted: u64,
    completed: u64,
    stopped_mid_attempt: u64,
    duplicate_done: u64,
    stray_report: u64,
    rejected: BTreeMap<&'static str, u64>,
    ready_errors: u64,
    workers_started: u64,
    live_workers: usize,
}

type Shared = Rc<RefCell<Tally>>;

struct Worker {
    coordinator: Addr<Coordinator>,
    tally: Shared,
    rng: SmallRng,
    /// A permit held while the worker stops: dropped with the worker, mid-attempt.
    held: Option<Permit>,
}

impl Worker {
    fn spawn(coordinator: Addr<Coordinator>, tally: Shared, seed: u64) {
        {
            let mut t = tally.borrow_mut();
            t.workers_started += 1;
            t.live_workers += 1;
        }
        Worker {
            coordinator,
            tally,
            rng: SmallRng::seed_from_u64(seed),
            held: None,
        }
        .start();
    }

    /// Asks for the next slot, or stops once enough attempts ran.
    fn ask(&mut self, ctx: &mut Context<Self>) {
        if self.tally.borrow().granted >= ATTEMPTS {
            ctx.stop();
            return;
        }
        self.tally.borrow_mut().requests += 1;
        let ready = Ready::new(Request::any(), ctx.address().recipient());
        self.coordinator
            .send(ready)
            .into_actor(self)
            .map(|result, act, ctx| {
                if !matches!(result, Ok(Ok(_))) {
                    // Not answered: count it and ask again rather than hang.
                    act.tally.borrow_mut().ready_errors += 1;
                    act.ask(ctx);
                }
            })
            .spawn(ctx);
    }

    fn run(&mut self, mut permit: Permit) {
        let candidate = permit.candidate().as_str().as_bytes()[0] - b'a';
        // Candidates differ so the statistics have something to learn.
        let outcome = if self.rng.random_bool(0.05 + 0.05 * candidate as f64) {
            Outcome::failure(FailureClass::Timeout)
        } else {
            let ms = 10.0 + 20.0 * candidate as f64 + self.rng.random_range(0.0..5.0);
            Outcome::success_with(ms, ms * 1.5, 50_000, ms * 3.0)
        };
        permit.report(outcome);
        let (attempt, incarnation) = (permit.attempt(), permit.incarnation());
        permit.done(Next::Finish);
        let mut t = self.tally.borrow_mut();
        t.completed += 1;
        if self.rng.random_bool(DUPLICATE_DONE) {
            t.duplicate_done += 1;
            self.coordinator.do_send(Done {
                attempt,
                incarnation,
                next: Next::Finish,
            });
        }
        if self.rng.random_bool(STRAY_REPORT) {
            t.stray_report += 1;
            self.coordinator.do_send(Report {
                attempt,
                incarnation,
                outcome: Outcome::success(),
            });
        }
    }
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.ask(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        let held = self.held.is_some();
        let mut t = self.tally.borrow_mut();
        t.live_workers -= 1;
        if held && t.granted < ATTEMPTS {
            let seed = 1_000 + t.workers_started;
            drop(t);
            Worker::spawn(self.coordinator.clone(), self.tally.clone(), seed);
        }
        // `held` drops with the actor: the slot comes back through the permit's Drop.
    }
}

impl Handler<Answer> for Worker {
    type Result = ();

    fn handle(&mut self, answer: Answer, ctx: &mut Context<Self>) {
        match answer {
            Answer::Granted(permit) => {
                self.tally.borrow_mut().granted += 1;
                if self.rng.random_bool(STOP_MID_ATTEMPT) {
                    self.tally.borrow_mut().stopped_mid_attempt += 1;
                    self.held = Some(permit);
                    ctx.stop();
                    return;
                }
                self.run(permit);
            }
            Answer::Rejected { reason, .. } => {
                *self
                    .tally
                    .borrow_mut()
                    .rejected
                    .entry(reason.as_str())
                    .or_default() += 1;
            }
        }
        self.ask(ctx);
    }
}

fn load(store: &SnapshotStore) -> Snapshot {
    match store.load().unwrap() {
        Loaded::Snapshot(s) => s,
        other => panic!("expected a snapshot file, got {other:?}"),
    }
}

/// The statistics without the ages, the wall-clock stamp and the decision rate, which move on
/// as time passes.
fn statistics(mut s: Snapshot) -> Snapshot {
    s.saved_at_unix_ms = None;
    s.rates = None;
    for c in &mut s.candidates {
        c.stats.last_sample_age_s = None;
    }
    s
}

/// Lets the workers run until `n` grants were received (no sleep: the System is busy until
/// then, and yielding hands it the thread).
async fn wait_for_grants(tally: &Shared, n: u64) {
    while tally.borrow().granted < n {
        tokio::task::yield_now().await;
    }
}

/// On real time, so the coordinator's periodic refresh interleaves with the workers and the
/// crashes: a paused clock would stand still for the whole run, the System never being idle.
/// Nothing here sleeps.
#[test]
fn chaos_nothing_is_lost() {
    with_snapshot_dir(chaos_nothing_is_lost_in);
}

async fn chaos_nothing_is_lost_in(dir: PathBuf) {
    let started = Instant::now();
    let store = SnapshotStore::new(&dir, "coordinator.json").unwrap();
    let limits = Limits {
        global: GLOBAL_LIMIT,
        ..Limits::default()
    };
    let mut coordinator = Coordinator::with_seed(Config::default(), limits, 42).unwrap();
    for id in ["a", "b", "c", "d"] {
        coordinator = coordinator.with_candidate(CandidateInfo::new(id)).unwrap();
    }
    // No periodic saves: the snapshot a restart loads is the one this test saved last.
    // A mailbox that never makes `send` wait: the crash probes below are queued in order.
    let c = coordinator
        .with_snapshots(store.clone(), None)
        .unwrap()
        .with_mailbox_capacity(1 << 20)
        .start_supervised();

    let tally: Shared = Rc::default();
    for seed in 0..WORKERS as u64 {
        Worker::spawn(c.clone(), tally.clone(), seed);
    }

    let mut restarts = Vec::new();
    for at in CRASH_AT {
        wait_for_grants(&tally, at - SAVE_BEFORE_CRASH).await;
        c.send(SaveSnapshot).await.unwrap().unwrap();
        wait_for_grants(&tally, at).await;
        let on_file = load(&store);
        // Queued back to back, with no worker message in between: the state just before the
        // crash, the crash, and the state right after the restart.
        let before = c.send(TakeSnapshot);
        c.do_send(Crash);
        let after = c.send(TakeSnapshot);
        let (before, after) = (before.await.unwrap(), after.await.unwrap());
        let (before, after, on_file) = (statistics(before), statistics(after), statistics(on_file));
        assert_ne!(
            before, on_file,
            "attempts ran between the save and the crash"
        );
        assert_eq!(
            after, on_file,
            "statistics after the restart equal the last snapshot"
        );
        let attempts: u64 = after.candidates.iter().map(|c| c.stats.attempts).sum();
        restarts.push((tally.borrow().granted, attempts));
    }

    while tally.borrow().live_workers > 0 {
        tokio::task::yield_now().await;
    }
    // Every worker message was sent before its worker stopped, so it is ahead of this one.
    let s = c.send(GetState).await.unwrap();
    let t = tally.borrow();
    let rejected: u64 = t.rejected.values().sum();

    println!("chaos: {:.1?} in this build", started.elapsed());
    println!(
        "attempts granted {} (requests {}), completed with report+done {}, workers stopped \
         mid-attempt {} ({:.1}%), workers started {}",
        t.granted,
        t.requests,
        t.completed,
        t.stopped_mid_attempt,
        100.0 * t.stopped_mid_attempt as f64 / t.granted as f64,
        t.workers_started
    );
    println!(
        "duplicate Done sent {} ({:.1}% of completed), stray Report sent {} ({:.1}%)",
        t.duplicate_done,
        100.0 * t.duplicate_done as f64 / t.completed as f64,
        t.stray_report,
        100.0 * t.stray_report as f64 / t.completed as f64
    );
    println!("rejected {rejected} by reason {:?}", t.rejected);
    for (i, (granted, attempts)) in restarts.iter().enumerate() {
        println!(
            "restart {}: after {granted} grants; statistics restored from the snapshot file \
             ({attempts} reported attempts in it) = equal",
            i + 1
        );
    }
    println!(
        "coordinator: incarnation {}, in flight {}, waiting {}, open {}, tracked {}; shell {:?}",
        s.incarnation, s.in_flight, s.waiting, s.open_requests, s.tracked_requests, s.shell
    );

    assert!(t.granted >= ATTEMPTS);
    assert_eq!(s.incarnation, 2, "killed twice, restarted twice");
    assert_eq!(
        s.snapshots.loaded,
        LoadOutcome::Restored { candidates: 4 },
        "the second restart loaded the snapshot"
    );
    assert_eq!(
        (s.in_flight, s.waiting, s.open_requests, s.tracked_requests),
        (0, 0, 0, 0)
    );
    assert_eq!(t.ready_errors, 0);
    assert_eq!(
        t.requests,
        t.granted + rejected,
        "every request was granted or rejected with a reason"
    );
    assert!(t
        .rejected
        .keys()
        .all(|r| *r == Rejection::CoordinatorRestarted.as_str()));
    assert!(
        t.rejected.values().sum::<u64>() > 0,
        "a crash met waiting requests"
    );
    // The injected faults hit their rates within a wide margin (seeded, so exact per run).
    let share = |n: u64, of: u64| n as f64 / of as f64;
    assert!((0.08..0.12).contains(&share(t.stopped_mid_attempt, t.granted)));
    assert!((0.04..0.06).contains(&share(t.duplicate_done, t.completed)));
    assert!((0.04..0.06).contains(&share(t.stray_report, t.completed)));
    // Every stray was counted: as an unknown attempt, or as stale when a restart came between.
    let strays = t.duplicate_done + t.stray_report;
    assert!(s.shell.unknown_attempt <= strays);
    assert!(s.shell.unknown_attempt + s.shell.stale >= strays);
    assert_eq!(s.shell.duplicate_outcome, 0);
    assert_eq!(s.shell.invalid_input, 0);
}
