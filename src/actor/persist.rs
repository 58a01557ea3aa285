//! Persistence and restarts: snapshots saved periodically and on stop, loaded at start, and the
//! rebuild a supervised coordinator goes through when it restarts.
//!
//! The writes themselves, off the actor thread and in order, are the [`Saver`]'s.
//!
//! A restart is treated as a crash of everything the actor held in memory about requests: the
//! core is rebuilt from the configuration in force and the last saved snapshot, every request
//! that was waiting is answered with [`Rejection::CoordinatorRestarted`], and the incarnation
//! number goes up so that reports and releases of permits granted before the restart (whose
//! attempt ids the new core may reuse) are counted as stale and ignored.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::ledger::Ledger;
use super::messages::Reply;
use super::permit::Answer;
use super::saver::Saver;
use super::timer::now;
use super::Coordinator;
use crate::core::{CandidateInfo, Core};
use crate::error::Rejection;
use crate::snapshot::{FileClaim, Loaded, Snapshot, SnapshotError, SnapshotStore};

/// What the last snapshot load found (at start, and at every restart).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadOutcome {
    /// No snapshot store is configured.
    #[default]
    NotConfigured,
    /// The store had no file yet: started fresh.
    Missing,
    /// The snapshot was loaded: statistics of this many candidates were restored.
    Restored {
        /// Candidates in the snapshot.
        candidates: usize,
    },
    /// The file was corrupt or incompatible: it was moved aside and the coordinator started
    /// fresh.
    Quarantined {
        /// Where the bad file now is.
        moved_to: PathBuf,
        /// What was wrong with it.
        problem: String,
    },
    /// The file could not be read or applied: started fresh (the file is left in place).
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// Where snapshots go and what happened to them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SnapshotStatus {
    /// The snapshot file, when a store is configured.
    pub path: Option<PathBuf>,
    /// What the last load found.
    pub loaded: LoadOutcome,
    /// Snapshots written.
    pub saves: u64,
    /// Writes that failed (the coordinator keeps running; the previous file stays intact).
    pub save_errors: u64,
    /// The last write error.
    pub last_error: Option<String>,
    /// Saves not written: a periodic save that came due while the previous one was still
    /// being written (the next period tries again), or a save whose snapshot was older than
    /// one already written (the file is never set back to an older snapshot).
    pub skipped: u64,
}

/// The snapshot store and how often to save.
#[derive(Debug)]
pub(crate) struct Persistence {
    pub(crate) saver: Saver,
    pub(crate) every: Option<Duration>,
    /// No other coordinator of the process saves to this file while this one does.
    _claim: FileClaim,
}

impl Coordinator {
    /// Saves snapshots to `store` every `every` (if given) and when the coordinator stops, and
    /// loads the store's snapshot now: candidates it names that are not known yet are added
    /// with their statistics, known ones get the saved statistics.
    ///
    /// `every` is at least 1 ms; a period too long to add to the clock (`Duration::MAX`)
    /// saves on stop only, as `None` does.
    ///
    /// A corrupt or incompatible file is moved aside with a warning and the coordinator starts
    /// fresh ([`LoadOutcome::Quarantined`] in [`State::snapshots`](super::State::snapshots));
    /// only an I/O error that prevents even that is returned.
    ///
    /// One file per coordinator: while this coordinator lives, another of the process given
    /// the same file is refused with [`SnapshotError::InUse`] (two would overwrite each
    /// other's statistics, and a restart would load the other's candidates). The file is free
    /// once the coordinator has stopped: after `CoordinatorHandle::stop().await`, or at its
    /// next housekeeping pass once no address, handle or permit of it is left.
    pub fn with_snapshots(
        mut self,
        store: SnapshotStore,
        every: Option<Duration>,
    ) -> Result<Self, SnapshotError> {
        // Released first if this coordinator had a store already.
        self.persistence = None;
        let claim = store.claim()?;
        self.snapshots.path = Some(store.path());
        let loaded = store.load()?;
        let saver = Saver::new(store);
        self.persistence = Some(Persistence {
            saver,
            every,
            _claim: claim,
        });
        let outcome = self.apply_loaded(loaded);
        self.snapshots.loaded = outcome;
        Ok(self)
    }

    /// Restores a loaded snapshot into the current core and says what happened.
    fn apply_loaded(&mut self, loaded: Loaded) -> LoadOutcome {
        match loaded {
            Loaded::Missing => LoadOutcome::Missing,
            Loaded::Quarantined { moved_to, problem } => {
                LoadOutcome::Quarantined { moved_to, problem }
            }
            Loaded::Snapshot(snapshot) => {
                let downtime = snapshot.downtime(SystemTime::now());
                match self.call(|core, rng, now| core.restore_after(&snapshot, downtime, now, rng))
                {
                    Ok(()) => LoadOutcome::Restored {
                        candidates: snapshot.candidates.len(),
                    },
                    Err(e) => {
                        tracing::warn!("snapshot could not be applied ({e}); starting fresh");
                        LoadOutcome::Failed {
                            error: e.to_string(),
                        }
                    }
                }
            }
        }
    }

    /// Writes the current snapshot now, on the calling thread, if a store is configured: the
    /// save at stop, which must land before the actor is gone. It waits for a write in
    /// progress and is never overwritten by an older queued one. Errors are counted and
    /// logged: a failed write must not take the coordinator down.
    pub(crate) fn save_snapshot_now(&mut self) -> Result<Option<PathBuf>, SnapshotError> {
        let Some(p) = &self.persistence else {
            return Ok(None);
        };
        p.saver.job(self.snapshot()).run().map(Some)
    }

    /// A periodic save: the snapshot is taken here, the write runs on tokio's blocking pool.
    /// Skipped (and counted) while the previous periodic save is still being written.
    pub(crate) fn save_snapshot_periodic(&mut self) {
        let Some(p) = &self.persistence else {
            return;
        };
        if let Some(job) = p.saver.periodic_job(|| self.snapshot()) {
            job.spawn();
        }
    }

    /// An explicit save ([`SaveSnapshot`](super::SaveSnapshot)): the snapshot is taken now,
    /// and the returned future writes it on tokio's blocking pool and answers the path.
    pub(crate) fn save_snapshot_later(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<PathBuf>, SnapshotError>> + 'static {
        let job = self
            .persistence
            .as_ref()
            .map(|p| p.saver.job(self.snapshot()));
        async move {
            match job {
                Some(job) => job.run_blocking().await.map(Some),
                None => Ok(None),
            }
        }
    }

    /// What [`State::snapshots`](super::State::snapshots) reports: the load, and the saves'
    /// counts.
    pub(crate) fn snapshot_status(&self) -> SnapshotStatus {
        let mut status = self.snapshots.clone();
        if let Some(p) = &self.persistence {
            p.saver.fill(&mut status);
        }
        status
    }

    /// Sets the snapshot-save counters (only with a store: without one they stay absent).
    pub(crate) fn snapshot_metrics(&mut self) {
        if let Some(p) = &self.persistence {
            // The saver's counts only: the load's outcome and the last error are not needed.
            let mut s = SnapshotStatus::default();
            p.saver.fill(&mut s);
            self.metrics
                .on_snapshot_saves(s.saves, s.save_errors, s.skipped);
        }
    }

    /// For fault-injection tests: runs `hook` on the writing thread at the start of each
    /// snapshot write (before it waits for the writes ahead of it), so a test can hold a save
    /// in flight. Call it after [`Coordinator::with_snapshots`]; without a store it does
    /// nothing.
    #[doc(hidden)]
    pub fn with_snapshot_write_hook(
        mut self,
        hook: std::sync::Arc<dyn Fn() + Send + Sync>,
    ) -> Self {
        if let Some(p) = &mut self.persistence {
            p.saver.set_hook(hook);
        }
        self
    }

    /// Answers every waiting request: the coordinator is going away (or restarting).
    pub(crate) fn answer_waiting(&mut self) {
        let core = &self.core;
        let waiting = self
            .ledger
            .iter_mut()
            .filter(|(request, _)| core.waiting_asks(*request).is_some_and(|n| n > 0));
        for (request, reply) in waiting {
            // A worker that is gone needs no answer.
            let _ = reply.deliver(Answer::Rejected {
                request,
                reason: Rejection::CoordinatorRestarted,
            });
        }
    }

    /// The supervisor restarts the actor: a new core from the configuration in force, the
    /// candidates known, and their statistics from the last saved snapshot (or, without a
    /// store, fresh statistics). Requests and attempts of the old incarnation are gone.
    pub(crate) fn rebuild(&mut self) {
        let now = now();
        let config = self.core.config().clone();
        let limits = self.core.limits();
        let candidates: Vec<CandidateInfo> = self
            .core
            .candidates()
            .filter(|c| !c.removed)
            .map(|c| c.info.clone())
            .collect();
        // The old core was valid with this config and these limits, so a new one is too; the
        // fallback only guards against that ever changing.
        let core = Core::new(config.clone(), now)
            .and_then(|c| c.with_limits(limits))
            .or_else(|_| Core::new(config, now));
        let Ok(mut core) = core else {
            tracing::error!("coordinator restart could not rebuild its core; keeping the old one");
            return;
        };
        let known: Vec<String> = candidates.iter().map(|c| c.id.to_string()).collect();
        for info in candidates {
            if let Err(e) = core.add_candidate(info, now, &mut self.rng) {
                tracing::warn!("restart: candidate not re-added: {e}");
            }
        }
        core.set_close_events(true);
        // A worker of the old incarnation may still name its request (Cancel, Reask,
        // Finish): the new core's ids must not reach another request with it.
        core.continue_request_ids(&self.core);
        // What the shell set on the old core goes on: its subscribers' records and its name
        // in a fleet, with digests numbered after the old core's.
        core.set_record_rate(self.subscribers.core_rate());
        if let Some((name, seq_base)) = self.core.share_identity_after(now) {
            core.set_share_identity(name, seq_base);
        }
        let old = std::mem::replace(&mut self.core, core);
        self.ledger = Ledger::default();
        let granted_under = self.incarnation;
        self.incarnation += 1;
        self.timer.reset();
        // The last saved snapshot: a write in progress ends first.
        let outcome = match self.persistence.as_ref().map(|p| {
            p.saver.wait_for_write();
            p.saver.store().load()
        }) {
            None => LoadOutcome::NotConfigured,
            // A candidate removed since the snapshot stays removed: the candidate set is the
            // operator's, only the statistics come from the file.
            Some(Ok(Loaded::Snapshot(mut snapshot))) => {
                snapshot
                    .candidates
                    .retain(|c| known.iter().any(|k| k == c.info.id.as_str()));
                self.apply_loaded(Loaded::Snapshot(snapshot))
            }
            Some(Ok(loaded)) => self.apply_loaded(loaded),
            Some(Err(e)) => LoadOutcome::Failed {
                error: e.to_string(),
            },
        };
        // The permits of the old core run on: the new one holds their slots until they end.
        let carried = self
            .carried
            .carry_over(&old, granted_under, &mut self.core, now);
        self.shell.carried += carried.len() as u64;
        for &attempt in &carried {
            if let Some(request) = self.core.attempt_request(attempt) {
                // Nobody to answer: the permit's answer was its grant.
                self.ledger.open(request, Reply::Once(None));
            }
        }
        tracing::warn!(
            incarnation = self.incarnation,
            carried = carried.len(),
            "coordinator restarted; snapshot load: {outcome:?}"
        );
        self.snapshots.loaded = outcome;
    }

    /// What the coordinator has learned now, stamped with the wall-clock time, so a restore
    /// after a while (a restart, a load elsewhere) ages it by as much.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.core.snapshot().stamped(SystemTime::now())
    }
}
