//! The attempts part: one slot per attempt in flight, reused through a free list, the count
//! of attempts in flight over all candidates, and (while a lease is set) the attempts in the
//! order they were granted, so the oldest one's lease says when the core must next look.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use super::{AttemptId, Error, Key};

/// One attempt in flight (or a free slot kept for reuse).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct AttemptSlot {
    pub(super) gen: u32,
    pub(super) active: bool,
    pub(super) reported: bool,
    /// The caller said a first byte came: no longer evidence of a slow answer.
    pub(super) answered: bool,
    /// Its outcome was an overload failure (whether its request retries is read at `done`).
    pub(super) shed: bool,
    pub(super) key: Key,
    pub(super) request: u32,
    /// The candidate's attempts in flight when this one was granted, itself included.
    pub(super) concurrency: u32,
    /// The candidate's limit in force when this one was granted.
    pub(super) limit: u32,
    pub(super) granted_s: f64,
    /// The first-byte deadline advised with its grant, ms after it; infinite without one.
    pub(super) advised_ms: f64,
    /// The arm that drew it (an index into the core's arms), if arms were configured and its
    /// arm is still in force.
    pub(super) arm: Option<u8>,
}

/// What a new attempt starts with; [`Attempts::start`] adds its slot and generation.
#[derive(Debug, Clone, Copy)]
pub(super) struct NewAttempt {
    pub(super) key: Key,
    pub(super) request: u32,
    pub(super) concurrency: u32,
    pub(super) limit: u32,
    pub(super) granted_s: f64,
    pub(super) arm: Option<u8>,
}

/// Stale entries of the lease order tolerated beyond the attempts in flight.
const LEASE_SLACK: usize = 64;

/// The attempts in flight: slots indexed by [`AttemptId`], a free list, and their count.
#[derive(Debug, Default)]
pub(super) struct Attempts {
    slots: Vec<AttemptSlot>,
    free: Vec<u32>,
    in_flight: u32,
    /// While leases are kept: (grant time, slot, generation) in grant order. Entries of
    /// attempts that ended go lazily (at the front, or all at once when they pile up).
    leases: Option<VecDeque<(f64, u32, u32)>>,
}

impl Attempts {
    /// The slot of a live attempt; [`Error::UnknownAttempt`] for one released, reclaimed or
    /// never granted.
    #[inline]
    pub(super) fn index(&self, id: AttemptId) -> Result<usize, Error> {
        match self.slots.get(id.index()) {
            Some(a) if a.active && a.gen == id.generation() => Ok(id.index()),
            _ => Err(Error::UnknownAttempt(id)),
        }
    }

    /// Attempts in flight over all candidates.
    #[inline]
    pub(super) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Books a new attempt in a free slot (or a new one) under the slot's next generation.
    #[inline]
    pub(super) fn start(&mut self, new: NewAttempt) -> AttemptId {
        let a = match self.free.pop() {
            Some(a) => a,
            None => {
                self.slots.push(AttemptSlot::default());
                self.slots.len() as u32 - 1
            }
        };
        let slot = &mut self.slots[a as usize];
        let gen = slot.gen.wrapping_add(1);
        *slot = AttemptSlot {
            gen,
            active: true,
            reported: false,
            answered: false,
            shed: false,
            key: new.key,
            request: new.request,
            concurrency: new.concurrency,
            limit: new.limit,
            granted_s: new.granted_s,
            advised_ms: f64::INFINITY,
            arm: new.arm,
        };
        self.in_flight += 1;
        if let Some(leases) = &mut self.leases {
            leases.push_back((new.granted_s, a, gen));
            if leases.len() > 2 * self.in_flight as usize + LEASE_SLACK {
                let slots = &self.slots;
                leases.retain(|&(_, a, gen)| Self::live(slots, a, gen));
            }
        }
        AttemptId::new(a, gen)
    }

    /// Notes the first-byte deadline advised with live attempt `a`'s grant.
    #[inline]
    pub(super) fn advise(&mut self, a: usize, ms: f64) {
        if let Some(slot) = self.slots.get_mut(a) {
            slot.advised_ms = ms;
        }
    }

    #[inline]
    fn live(slots: &[AttemptSlot], a: u32, gen: u32) -> bool {
        slots
            .get(a as usize)
            .is_some_and(|s| s.active && s.gen == gen)
    }

    /// Keeps the attempts in grant order (`on`: a lease is set) or stops.
    pub(super) fn keep_leases(&mut self, on: bool) {
        match (on, self.leases.is_some()) {
            (true, false) => {
                let mut order: Vec<(f64, u32, u32)> = self
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.active)
                    .map(|(a, s)| (s.granted_s, a as u32, s.gen))
                    .collect();
                order.sort_by(|x, y| x.0.total_cmp(&y.0));
                self.leases = Some(order.into());
            }
            (false, true) => self.leases = None,
            _ => {}
        }
    }

    /// Moves every running attempt's grant time `by_s` seconds later, none past `now_s`
    /// ([`Core::driver_paused`](super::Core::driver_paused)); the lease order is kept.
    pub(super) fn shift_grants(&mut self, by_s: f64, now_s: f64) {
        for s in self.slots.iter_mut().filter(|s| s.active) {
            s.granted_s = (s.granted_s + by_s).min(now_s);
        }
        if let Some(leases) = &mut self.leases {
            for lease in leases.iter_mut() {
                lease.0 = (lease.0 + by_s).min(now_s);
            }
        }
    }

    /// The grant time of the oldest attempt in flight, while leases are kept (possibly of an
    /// attempt that ended since: then earlier than it need be).
    #[inline]
    pub(super) fn oldest_grant_s(&self) -> Option<f64> {
        self.leases.as_ref()?.front().map(|&(g, _, _)| g)
    }

    /// The oldest attempt in flight if it was granted at or before `cutoff_s`, taken out of
    /// the lease order (the caller reclaims it); entries of attempts that ended are dropped.
    pub(super) fn next_expired(&mut self, cutoff_s: f64) -> Option<usize> {
        let leases = self.leases.as_mut()?;
        while let Some(&(granted_s, a, gen)) = leases.front() {
            if !Self::live(&self.slots, a, gen) {
                leases.pop_front();
            } else if granted_s <= cutoff_s {
                leases.pop_front();
                return Some(a as usize);
            } else {
                break;
            }
        }
        None
    }

    /// Ends attempt `a` (which must be active): frees its slot and returns what it was.
    #[inline]
    pub(super) fn finish(&mut self, a: usize) -> AttemptSlot {
        let slot = &mut self.slots[a];
        debug_assert!(slot.active, "attempt {a} finished twice");
        slot.active = false;
        self.free.push(a as u32);
        self.in_flight -= 1;
        *slot
    }

    /// Slot `a`, if it was ever used (active or not).
    #[inline]
    pub(super) fn get(&self, a: usize) -> Option<&AttemptSlot> {
        self.slots.get(a)
    }

    /// Number of slots, active or free.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every slot, active or free, by index.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, AttemptSlot> {
        self.slots.iter()
    }

    /// Every slot, active or free, by index, to change.
    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, AttemptSlot> {
        self.slots.iter_mut()
    }
}

impl Index<usize> for Attempts {
    type Output = AttemptSlot;

    #[inline]
    fn index(&self, a: usize) -> &AttemptSlot {
        &self.slots[a]
    }
}

impl IndexMut<usize> for Attempts {
    #[inline]
    fn index_mut(&mut self, a: usize) -> &mut AttemptSlot {
        &mut self.slots[a]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(request: u32) -> NewAttempt {
        NewAttempt {
            key: Key { idx: 3, gen: 1 },
            request,
            concurrency: 1,
            limit: 8,
            granted_s: 2.5,
            arm: None,
        }
    }

    #[test]
    fn a_freed_slot_is_reused_under_a_new_generation() {
        let mut at = Attempts::default();
        let a = at.start(new(7));
        let b = at.start(new(8));
        assert_eq!(at.in_flight(), 2);
        assert_eq!(at.index(a), Ok(a.index()));
        assert_eq!(at[a.index()].request, 7);
        assert_eq!(at[b.index()].key, Key { idx: 3, gen: 1 });

        let ended = at.finish(a.index());
        assert_eq!(ended.request, 7);
        assert!(!ended.active);
        assert_eq!(at.in_flight(), 1);
        assert_eq!(at.index(a), Err(Error::UnknownAttempt(a)));

        // The freed slot comes back with the next generation: the old id stays invalid.
        let c = at.start(new(9));
        assert_eq!(c.index(), a.index());
        assert_ne!(c.generation(), a.generation());
        assert_eq!(at.index(a), Err(Error::UnknownAttempt(a)));
        assert_eq!(at.index(c), Ok(c.index()));
        assert_eq!(at.len(), 2);
        assert_eq!(at.iter().filter(|s| s.active).count(), 2);
    }

    #[test]
    fn an_unknown_id_is_an_error() {
        let mut at = Attempts::default();
        let a = at.start(new(1));
        let beyond = AttemptId::new(5, 1);
        assert_eq!(at.index(beyond), Err(Error::UnknownAttempt(beyond)));
        assert!(at.get(5).is_none());
        assert!(at.get(a.index()).is_some_and(|s| s.active));
    }
}
