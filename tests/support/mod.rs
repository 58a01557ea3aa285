//! Test workers shared by the actor test binaries.

use std::time::{Duration, Instant};

use actix::prelude::*;
use selection_coordinator::actor::{Answer, Permit};
use selection_coordinator::snapshot::{Loaded, Snapshot, SnapshotStore};
use tokio::sync::mpsc;

mod snapshot_dir;
#[allow(unused_imports)] // not every test binary saves snapshots
pub use snapshot_dir::with_snapshot_dir;

/// A worker that hands every answer to the test, which then plays the worker's part.
pub struct Probe {
    answers: mpsc::UnboundedSender<Answer>,
}

impl Actor for Probe {
    type Context = Context<Self>;
}

impl Handler<Answer> for Probe {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        let _ = self.answers.send(answer);
    }
}

/// Stops the probe, as a worker that goes away.
#[derive(Message)]
#[rtype(result = "()")]
#[allow(dead_code)] // not every test binary stops its probe
pub struct StopProbe;

impl Handler<StopProbe> for Probe {
    type Result = ();
    fn handle(&mut self, _: StopProbe, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// The coordinator's clock (tokio's, paused in most actor tests), for deadlines.
#[allow(dead_code)] // not every test binary sets deadlines
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// A started probe and the answers it receives.
pub fn probe() -> (Addr<Probe>, mpsc::UnboundedReceiver<Answer>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Probe { answers: tx }.start(), rx)
}

/// The next answer the probe received (panics after 5 s without one).
pub async fn next_answer(rx: &mut mpsc::UnboundedReceiver<Answer>) -> Answer {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("no answer within 5 s")
        .expect("probe gone")
}

/// The next answer, which must be a grant.
#[allow(dead_code)] // not every test binary takes permits this way
pub async fn next_permit(rx: &mut mpsc::UnboundedReceiver<Answer>) -> Permit {
    match next_answer(rx).await {
        Answer::Granted(p) => p,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// The snapshot in `store` (panics on anything else).
#[allow(dead_code)] // not every test binary saves snapshots
pub fn load(store: &SnapshotStore) -> Snapshot {
    match store.load().unwrap() {
        Loaded::Snapshot(s) => s,
        other => panic!("expected a snapshot, got {other:?}"),
    }
}

/// The statistics without the ages that grow as time passes, the wall-clock stamp, and the
/// decision rate (measured over time: a restored core measures on from the saved one).
#[allow(dead_code)] // not every test binary saves snapshots
pub fn without_ages(mut s: Snapshot) -> Snapshot {
    s.saved_at_unix_ms = None;
    s.rates = None;
    for c in &mut s.candidates {
        c.stats.last_sample_age_s = None;
    }
    s
}
