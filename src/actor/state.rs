//! The snapshot [`GetState`](super::GetState) returns.

use serde::Serialize;

use crate::core::{CandidateInfo, Core, Counters, Limits, ShadowStats};
use crate::error::Error;
use crate::score::{Components, Config, Stats};

use super::persist::SnapshotStatus;

/// One candidate as the coordinator sees it now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateState {
    /// Static info.
    pub info: CandidateInfo,
    /// Learned statistics.
    pub stats: Stats,
    /// Score components at the last refresh.
    pub components: Components,
    /// Attempts in flight.
    pub in_flight: u32,
    /// Its in-flight limit.
    pub limit: u32,
    /// Whether it is ejected now.
    pub ejected: bool,
    /// Whether it was removed (visible while its attempts finish).
    pub removed: bool,
}

/// What the actor shell counted: input it ignored and slots it took back.
///
/// Worker messages never fail loudly: a stray `Done` or a second report is counted here and
/// otherwise ignored. Messages with a result also return their error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShellCounters {
    /// Reports or releases of attempts that are already done, reclaimed, or never granted.
    pub unknown_attempt: u64,
    /// Second and later reports of the same attempt.
    pub duplicate_outcome: u64,
    /// Messages naming a request that is finished, rejected, or never made.
    pub unknown_request: u64,
    /// Malformed input: requests, outcomes, candidates, limits, configs.
    pub invalid_input: u64,
    /// Grants whose worker was gone: the slot was released at once for the next waiter.
    pub taken_back: u64,
    /// Permits dropped without `done` (their slot was released as `Finish`).
    pub permits_dropped: u64,
    /// Requests ended because their worker went away: waiting ones cancelled, and ones kept
    /// open (`Next::Keep`) with nothing running finished.
    pub abandoned: u64,
    /// Decision records a full subscriber could not take.
    pub records_dropped: u64,
    /// Reports and releases of permits granted before a restart whose attempt was not
    /// carried into the new core (ignored: the new core may reuse their attempt ids).
    pub stale: u64,
    /// Attempts running at a restart that the new core took over (their permits' reports
    /// and releases count as the new core's).
    pub carried: u64,
}

impl ShellCounters {
    /// Every ignored input (the four error counts).
    pub fn errors(&self) -> u64 {
        self.unknown_attempt + self.duplicate_outcome + self.unknown_request + self.invalid_input
    }

    pub(crate) fn count(&mut self, error: &Error) {
        match error {
            Error::UnknownAttempt(_) => self.unknown_attempt += 1,
            Error::DuplicateOutcome(_) => self.duplicate_outcome += 1,
            Error::UnknownRequest(_) => self.unknown_request += 1,
            _ => self.invalid_input += 1,
        }
    }
}

/// A snapshot of the coordinator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct State {
    /// Every candidate, in the order added (removed ones while attempts on them run).
    pub candidates: Vec<CandidateState>,
    /// Requests waiting for a slot.
    pub waiting: usize,
    /// Attempts in flight.
    pub in_flight: u32,
    /// Requests the core holds open (waiting or running).
    pub open_requests: usize,
    /// Requests the actor holds a reply for; equal to `open_requests` unless something leaks.
    pub tracked_requests: usize,
    /// The limits in force.
    pub limits: Limits,
    /// The scoring config in force.
    pub config: Config,
    /// The core's counters: decisions, rejections, ejections, reclaimed attempts.
    pub counters: Counters,
    /// The actor's counters: ignored input, taken-back grants, dropped permits.
    pub shell: ShellCounters,
    /// Decision-record subscribers.
    pub subscribers: usize,
    /// Restarts so far: 0 for the first run, bumped by every supervised restart. Permits carry
    /// the incarnation that granted them.
    pub incarnation: u64,
    /// The snapshot store, what the last load found, and saves.
    pub snapshots: SnapshotStatus,
    /// The arms' names, when the config has arms.
    pub arms: Vec<String>,
    /// How each shadow policy has agreed with the live choices.
    pub shadows: Vec<ShadowStats>,
}

impl State {
    pub(crate) fn read(
        core: &Core,
        tracked_requests: usize,
        shell: ShellCounters,
        subscribers: usize,
        incarnation: u64,
        snapshots: SnapshotStatus,
    ) -> Self {
        State {
            candidates: core
                .candidates()
                .map(|c| CandidateState {
                    info: c.info.clone(),
                    stats: c.stats.clone(),
                    components: c.components,
                    in_flight: c.in_flight,
                    limit: c.limit,
                    ejected: c.ejected,
                    removed: c.removed,
                })
                .collect(),
            waiting: core.waiting(),
            in_flight: core.in_flight(),
            open_requests: core.open_requests(),
            tracked_requests,
            limits: core.limits(),
            config: core.config().clone(),
            counters: core.counters(),
            shell,
            subscribers,
            incarnation,
            snapshots,
            arms: core.arm_names().into_iter().map(String::from).collect(),
            shadows: core.shadow_stats(),
        }
    }

    /// The candidate with this id, live or removed with attempts still running. An id is
    /// listed once: a candidate added again while attempts of its removed self still run
    /// takes their slot back, and counts them.
    pub fn candidate(&self, id: &str) -> Option<&CandidateState> {
        self.candidates.iter().find(|c| c.info.id.as_str() == id)
    }
}
