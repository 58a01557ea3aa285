//! Snapshot writes off the actor thread, one at a time and never out of order.
//!
//! The actor only takes the [`Snapshot`] value (an in-memory copy of the statistics) and hands
//! it to the [`Saver`] as a [`Job`]; serializing it to JSON, writing, `fsync`, `rename` and the
//! directory's `fsync` run on tokio's blocking pool (periodic saves and [`SaveSnapshot`]), so a
//! save of many candidates never stalls the grants. Only the save at stop runs on the actor
//! thread: the actor must not be gone before its last snapshot is on disk.
//!
//! - **One write at a time:** every write holds one lock for its whole length.
//! - **Never out of order:** each job carries a sequence number taken when its snapshot was
//!   taken; the lock holds the number of the newest snapshot written, and a job older than
//!   that is skipped instead of overwriting a newer file. So a save at stop, or an explicit
//!   one, that starts writing before an older queued job cannot be undone by it.
//! - **At most one periodic save in flight:** a periodic save due while the previous one is
//!   still queued or writing is skipped (counted in [`SnapshotStatus::skipped`]).
//!
//! [`SaveSnapshot`]: super::SaveSnapshot

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::persist::SnapshotStatus;
use crate::snapshot::{Snapshot, SnapshotError, SnapshotStore};

/// Called on the writing thread when a job starts, before it takes the write lock
/// (fault-injection tests hold a job there to order writes as they please).
pub(crate) type WriteHook = Arc<dyn Fn() + Send + Sync>;

/// What the writes did, shared by the actor and the writing threads.
#[derive(Debug, Default)]
struct Tally {
    saves: u64,
    save_errors: u64,
    last_error: Option<String>,
    skipped: u64,
}

#[derive(Debug)]
struct Shared {
    store: SnapshotStore,
    /// Held for a whole write; holds the sequence number of the newest snapshot written.
    written: Mutex<u64>,
    /// The sequence number of the last job made.
    taken: AtomicU64,
    /// A periodic save is queued or being written.
    periodic: AtomicBool,
    tally: Mutex<Tally>,
}

/// Locks a mutex whose holder may have panicked: the data (counts, a sequence number) stays
/// meaningful.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes the snapshots of one store, in order.
#[derive(Clone)]
pub(crate) struct Saver {
    shared: Arc<Shared>,
    hook: Option<WriteHook>,
}

impl fmt::Debug for Saver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Saver")
            .field("shared", &self.shared)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Saver {
    pub(crate) fn new(store: SnapshotStore) -> Self {
        Saver {
            shared: Arc::new(Shared {
                store,
                written: Mutex::new(0),
                taken: AtomicU64::new(0),
                periodic: AtomicBool::new(false),
                tally: Mutex::new(Tally::default()),
            }),
            hook: None,
        }
    }

    pub(crate) fn set_hook(&mut self, hook: WriteHook) {
        self.hook = Some(hook);
    }

    pub(crate) fn store(&self) -> &SnapshotStore {
        &self.shared.store
    }

    /// A job writing `snapshot`, numbered after every job made before it.
    pub(crate) fn job(&self, snapshot: Snapshot) -> Job {
        let seq = self.shared.taken.fetch_add(1, Ordering::SeqCst) + 1;
        Job {
            saver: self.clone(),
            seq,
            snapshot,
            periodic: false,
        }
    }

    /// Marks a periodic save in flight and returns its job, or counts a skip and returns
    /// `None` while the previous periodic save is still queued or writing.
    pub(crate) fn periodic_job(&self, take: impl FnOnce() -> Snapshot) -> Option<Job> {
        if self.shared.periodic.swap(true, Ordering::SeqCst) {
            lock(&self.shared.tally).skipped += 1;
            tracing::debug!("periodic snapshot skipped: the previous one is still being written");
            return None;
        }
        let mut job = self.job(take());
        job.periodic = true;
        Some(job)
    }

    /// Waits for a write in progress to end (not for jobs queued behind it).
    pub(crate) fn wait_for_write(&self) {
        drop(lock(&self.shared.written));
    }

    /// The counts of [`SnapshotStatus`] (`saves`, `save_errors`, `last_error`, `skipped`).
    pub(crate) fn fill(&self, status: &mut SnapshotStatus) {
        let tally = lock(&self.shared.tally);
        status.saves = tally.saves;
        status.save_errors = tally.save_errors;
        status.last_error.clone_from(&tally.last_error);
        status.skipped = tally.skipped;
    }
}

/// One snapshot to write. Dropped unrun (a runtime shutting down), a periodic job still
/// clears its in-flight mark.
#[derive(Debug)]
pub(crate) struct Job {
    saver: Saver,
    seq: u64,
    snapshot: Snapshot,
    periodic: bool,
}

impl Job {
    /// Writes the snapshot (blocking: serialization and file I/O), unless a newer one is on
    /// disk already. Success and failure are counted and a failure is logged; the answer is
    /// the path written.
    pub(crate) fn run(self) -> Result<PathBuf, SnapshotError> {
        let shared = &self.saver.shared;
        let path = shared.store.path();
        if let Some(hook) = &self.saver.hook {
            hook();
        }
        let mut newest = lock(&shared.written);
        if *newest > self.seq {
            lock(&shared.tally).skipped += 1;
            tracing::debug!("snapshot {} skipped: a newer one was written", self.seq);
            return Ok(path);
        }
        let result = shared.store.save(&self.snapshot);
        let mut tally = lock(&shared.tally);
        match &result {
            Ok(()) => {
                *newest = self.seq;
                tally.saves += 1;
            }
            Err(e) => {
                tracing::warn!("snapshot save failed: {e}");
                tally.save_errors += 1;
                tally.last_error = Some(e.to_string());
            }
        }
        result.map(|()| path)
    }

    /// Runs the job on tokio's blocking pool and waits for it without blocking the caller's
    /// thread.
    pub(crate) async fn run_blocking(self) -> Result<PathBuf, SnapshotError> {
        let shared = Arc::clone(&self.saver.shared);
        match tokio::task::spawn_blocking(move || self.run()).await {
            Ok(result) => result,
            Err(e) => {
                let problem = format!("the snapshot write did not finish: {e}");
                tracing::warn!("{problem}");
                let mut tally = lock(&shared.tally);
                tally.save_errors += 1;
                tally.last_error = Some(problem.clone());
                Err(SnapshotError::Io {
                    path: shared.store.path(),
                    source: std::io::Error::other(problem),
                })
            }
        }
    }

    /// Runs the job on tokio's blocking pool without waiting for it; the result is counted
    /// and a failure logged.
    pub(crate) fn spawn(self) {
        drop(tokio::task::spawn_blocking(move || self.run()));
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.periodic {
            self.saver.shared.periodic.store(false, Ordering::SeqCst);
        }
    }
}
