//! Attempts that outlive a restart.
//!
//! A supervised restart builds a new core, but the permits of the earlier incarnation keep
//! running their attempts. The new core takes each of them over ([`Core::carry`]): it holds
//! its candidate's slot until the permit releases it, so the limits hold across the restart,
//! and the permit's report is learned. Permits still carry the incarnation that granted them;
//! this map turns (incarnation, attempt) into the attempt the current core knows it by.
//! Attempt ids are generational, so an entry whose attempt ended some other way (a lease ran
//! out) names nothing in the core: until the next housekeeping tick prunes the entry, its
//! permit's message is counted as an unknown attempt, and after it as stale (a message from an
//! earlier incarnation).

use std::collections::HashMap;

use crate::core::{AttemptId, Core};

/// Attempts of earlier incarnations and the ids the current core gave them.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    ids: HashMap<(u64, AttemptId), AttemptId>,
}

impl Carried {
    /// The current core's id for an attempt of an earlier incarnation, if it was carried.
    pub(crate) fn get(&self, incarnation: u64, attempt: AttemptId) -> Option<AttemptId> {
        self.ids.get(&(incarnation, attempt)).copied()
    }

    /// The attempt was released: its permit sends nothing more that counts.
    pub(crate) fn forget(&mut self, incarnation: u64, attempt: AttemptId) {
        self.ids.remove(&(incarnation, attempt));
    }

    /// Forgets the attempts the core no longer runs (released or reclaimed).
    pub(crate) fn prune(&mut self, core: &Core) {
        if !self.ids.is_empty() {
            self.ids.retain(|_, a| core.attempt_request(*a).is_some());
        }
    }

    /// The restart: every attempt `old` runs (granted under `incarnation`, or carried into
    /// it) is taken over by `new`. Returns their ids in `new`; an attempt on a candidate
    /// `new` does not have is left out, and its permit's messages are stale.
    pub(crate) fn carry_over(
        &mut self,
        old: &Core,
        incarnation: u64,
        new: &mut Core,
        now: std::time::Instant,
    ) -> Vec<AttemptId> {
        let mut moved: HashMap<AttemptId, AttemptId> = HashMap::new();
        for (attempt, candidate, reported) in old.running() {
            if let Ok(id) = new.carry(candidate, reported, now) {
                moved.insert(attempt, id);
            }
        }
        // Carried once already: follow the attempt into the new core.
        let mut ids: HashMap<(u64, AttemptId), AttemptId> = self
            .ids
            .drain()
            .filter_map(|(key, a)| moved.get(&a).map(|&id| (key, id)))
            .collect();
        for (&attempt, &id) in &moved {
            ids.insert((incarnation, attempt), id);
        }
        self.ids = ids;
        moved.into_values().collect()
    }
}
