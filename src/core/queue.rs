//! The wait queue: requests waiting for a slot, in arrival order, and their deadlines.
//!
//! Plain requests (eligible = all, nothing excluded, no capabilities) stand in a FIFO whose
//! stale entries are skipped lazily at the head; the rest stand in an ordered map the pump
//! scans for the oldest servable one. Both are ordered by the request's arrival sequence, so
//! the oldest servable request is always served first.
//!
//! A request of the map that the pump finds unservable is **parked**: it leaves the map, so
//! later pumps do not check it again, and is listed under each candidate that could serve it
//! (the candidates it names, or those with its capabilities), or under any candidate when it
//! names none. When one of them gains capacity ([`WaitQueue::wake`], called where a candidate
//! becomes available) its parked requests go back into the map at their place in arrival
//! order. Without it, every pump (one per grant and release) would check every waiting
//! request no candidate can serve, and a few thousand such waiters, or a few dozen needing a
//! capability over a large fleet, would slow the grants of every other request. Parked
//! requests still wait: they count in [`WaitQueue::len`] and their deadlines stay due.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::{ReqSlot, NO_DEADLINE};

/// Stale FIFO entries tolerated beyond the live ones before they are dropped.
const STALE_SLACK: usize = 64;

/// Where a request stands in the [`WaitQueue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Queued {
    /// Not waiting (granted all it asked for, or never asked).
    #[default]
    No,
    /// In the FIFO of plain requests.
    Fast,
    /// In the ordered map of requests with a subset, exclusions or capabilities.
    General,
    /// Out of the map until a candidate that could serve it gains capacity.
    Parked,
}

/// Where a parked request is listed: the candidate slots that could serve it, or any.
pub(super) enum WakeOn<'a> {
    /// A candidate in these slots gains capacity.
    Slots(&'a [u32]),
    /// Any candidate gains capacity.
    Any,
}

/// The requests waiting for a slot; see the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct WaitQueue {
    /// Plain requests as (sequence, request index), oldest first; entries of requests that
    /// left are removed lazily.
    fast: VecDeque<(u64, u32)>,
    /// The other waiting requests by sequence.
    general: BTreeMap<u64, u32>,
    /// (deadline ns, sequence, request index) of waiting requests with a deadline.
    deadlines: BTreeSet<(u64, u64, u32)>,
    /// Requests waiting (in `fast` or `general`, or parked).
    waiting: usize,
    next_seq: u64,
    /// Parked requests by request index, with the number of the park that listed them (an
    /// entry of an earlier park, the request woke and parked again or left, is stale) and
    /// how many entries that park made.
    parked: HashMap<u32, (u64, usize)>,
    /// Parked requests listed under a candidate slot, as (request index, park number).
    by_slot: HashMap<u32, Vec<(u32, u64)>>,
    /// Parked requests any candidate may serve.
    by_any: Vec<(u32, u64)>,
    /// Entries in `by_slot` and `by_any`, stale ones included.
    entries: usize,
    /// Entries of the parked requests' current parks.
    live_entries: usize,
    /// Times the stale entries were dropped.
    compactions: u64,
    parks: u64,
    /// Parked requests woken so far (the pump restarts its scan when it moves).
    wakes: u64,
}

impl WaitQueue {
    /// The arrival sequence for a new request.
    #[inline]
    pub(super) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Requests waiting.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.waiting
    }

    /// Queues request `idx` if it asks for something and is not queued yet.
    #[inline]
    pub(super) fn push(&mut self, r: &mut ReqSlot, idx: u32) {
        if r.pending == 0 || r.queued != Queued::No {
            return;
        }
        self.waiting += 1;
        if r.extras.is_none() {
            r.queued = Queued::Fast;
            self.fast.push_back((r.seq, idx));
        } else {
            r.queued = Queued::General;
            self.general.insert(r.seq, idx);
        }
        if r.deadline_ns != NO_DEADLINE {
            self.deadlines.insert((r.deadline_ns, r.seq, idx));
        }
    }

    /// Takes request `idx` out of the queue (its asks are the caller's).
    #[inline]
    pub(super) fn remove(&mut self, r: &mut ReqSlot, idx: u32) {
        match r.queued {
            Queued::No => {}
            // Its FIFO entry goes lazily (the head check skips it).
            Queued::Fast => self.waiting -= 1,
            Queued::General => {
                self.waiting -= 1;
                self.general.remove(&r.seq);
            }
            // Its entries go lazily (they name an earlier park).
            Queued::Parked => {
                self.waiting -= 1;
                self.unlist(idx);
            }
        }
        r.queued = Queued::No;
        if r.deadline_ns != NO_DEADLINE {
            self.deadlines.remove(&(r.deadline_ns, r.seq, idx));
        }
    }

    /// A plain request that now excludes something moves to the general map, keeping its
    /// place in arrival order.
    #[inline]
    pub(super) fn move_to_general(&mut self, r: &mut ReqSlot, idx: u32) {
        if r.queued == Queued::Fast {
            r.queued = Queued::General;
            self.general.insert(r.seq, idx);
        }
    }

    /// Whether a FIFO entry still stands for its request.
    #[inline]
    fn current(requests: &[ReqSlot], seq: u64, idx: u32) -> bool {
        let r = &requests[idx as usize];
        r.active && r.queued == Queued::Fast && r.seq == seq && r.pending > 0
    }

    /// The oldest plain request still waiting, dropping stale entries before it.
    #[inline]
    pub(super) fn fast_head(&mut self, requests: &[ReqSlot]) -> Option<(u64, u32)> {
        while let Some(&(seq, idx)) = self.fast.front() {
            if Self::current(requests, seq, idx) {
                return Some((seq, idx));
            }
            self.fast.pop_front();
        }
        None
    }

    /// Drops the FIFO's stale entries: at once when nothing waits, and otherwise once they
    /// outnumber the live ones (plus a slack), so requests rejected or cancelled behind one
    /// that waits long leave nothing behind: each drop at least halves the FIFO, which keeps
    /// the cost per request constant.
    #[inline]
    pub(super) fn clear_stale(&mut self, requests: &[ReqSlot]) {
        if self.waiting == 0 {
            self.fast.clear();
        } else if self.fast.len() > 2 * self.waiting + STALE_SLACK {
            self.fast
                .retain(|&(seq, idx)| Self::current(requests, seq, idx));
            self.fast.shrink_to(2 * self.fast.len() + STALE_SLACK);
        }
    }

    /// The plain requests still waiting, oldest first.
    pub(super) fn fast<'a>(&'a self, requests: &'a [ReqSlot]) -> impl Iterator<Item = u32> + 'a {
        self.fast
            .iter()
            .filter(|&&(seq, idx)| Self::current(requests, seq, idx))
            .map(|&(_, idx)| idx)
    }

    /// The other waiting requests with a sequence in `from..before`, oldest first, as
    /// (sequence, request index).
    #[inline]
    pub(super) fn general(&self, from: u64, before: u64) -> impl Iterator<Item = (u64, u32)> + '_ {
        // Most requests are plain: an empty map is skipped without a range search.
        let range =
            (!self.general.is_empty() && from < before).then(|| self.general.range(from..before));
        range.into_iter().flatten().map(|(&s, &i)| (s, i))
    }

    /// Parks request `idx` (in the map, found unservable) until a candidate `on` names gains
    /// capacity.
    pub(super) fn park(&mut self, r: &mut ReqSlot, idx: u32, on: WakeOn<'_>) {
        if r.queued != Queued::General {
            return;
        }
        self.general.remove(&r.seq);
        r.queued = Queued::Parked;
        self.parks += 1;
        let park = self.parks;
        let listed = match on {
            WakeOn::Slots(slots) => {
                for &slot in slots {
                    self.by_slot.entry(slot).or_default().push((idx, park));
                }
                slots.len()
            }
            WakeOn::Any => {
                self.by_any.push((idx, park));
                1
            }
        };
        self.parked.insert(idx, (park, listed));
        self.entries += listed;
        self.live_entries += listed;
        // Stale entries are dropped once they outnumber the live ones, which keeps the cost
        // per park constant.
        if self.entries > 2 * self.live_entries + 64 {
            self.compactions += 1;
            let parked = &self.parked;
            let live = |&(i, p): &(u32, u64)| parked.get(&i).is_some_and(|&(q, _)| q == p);
            self.by_slot.retain(|_, list| {
                list.retain(live);
                !list.is_empty()
            });
            self.by_any.retain(live);
            self.entries = self.by_slot.values().map(Vec::len).sum::<usize>() + self.by_any.len();
        }
    }

    /// Takes a parked request off the parked list (its entries go stale).
    fn unlist(&mut self, idx: u32) {
        if let Some((_, listed)) = self.parked.remove(&idx) {
            self.live_entries -= listed;
        }
    }

    /// Requests parked.
    #[inline]
    pub(super) fn parked(&self) -> usize {
        self.parked.len()
    }

    /// The parked requests, by index.
    pub(super) fn parked_requests(&self) -> impl Iterator<Item = u32> + '_ {
        self.parked.keys().copied()
    }

    /// Parked requests woken so far.
    #[inline]
    pub(super) fn wakes(&self) -> u64 {
        self.wakes
    }

    /// The candidate in `slot` gained capacity: the requests parked for it, and those any
    /// candidate may serve, go back into the map.
    #[inline]
    pub(super) fn wake(&mut self, slot: u32, requests: &mut [ReqSlot]) {
        if self.parked.is_empty() {
            return;
        }
        if let Some(list) = self.by_slot.remove(&slot) {
            self.entries -= list.len();
            self.unpark(list, requests);
        }
        if !self.by_any.is_empty() {
            let list = std::mem::take(&mut self.by_any);
            self.entries -= list.len();
            self.unpark(list, requests);
        }
    }

    /// Every parked request goes back into the map (what could serve them changed other than
    /// by a candidate gaining capacity: candidates came, left or changed, limits or config
    /// changed).
    pub(super) fn wake_all(&mut self, requests: &mut [ReqSlot]) {
        if self.parked.is_empty() {
            return;
        }
        self.wakes += self.parked.len() as u64;
        self.live_entries = 0;
        for (idx, _) in self.parked.drain() {
            let r = &mut requests[idx as usize];
            r.queued = Queued::General;
            self.general.insert(r.seq, idx);
        }
        self.by_slot.clear();
        self.by_any.clear();
        self.entries = 0;
    }

    fn unpark(&mut self, list: Vec<(u32, u64)>, requests: &mut [ReqSlot]) {
        for (idx, park) in list {
            if self.parked.get(&idx).is_some_and(|&(p, _)| p == park) {
                self.unlist(idx);
                self.wakes += 1;
                let r = &mut requests[idx as usize];
                r.queued = Queued::General;
                self.general.insert(r.seq, idx);
            }
        }
    }

    /// The earliest deadline of a waiting request, nanoseconds since the epoch.
    #[inline]
    pub(super) fn first_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(d, _, _)| d)
    }

    /// The waiting request whose deadline is earliest, if it is at or before `now_ns`.
    #[inline]
    pub(super) fn due(&self, now_ns: u64) -> Option<u32> {
        match self.deadlines.first() {
            Some(&(d, _, idx)) if d <= now_ns => Some(idx),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(seq: u64, deadline_ns: u64, plain: bool) -> ReqSlot {
        ReqSlot {
            active: true,
            pending: 1,
            seq,
            deadline_ns,
            extras: (!plain).then(Default::default),
            ..ReqSlot::default()
        }
    }

    #[test]
    fn keeps_arrival_order_and_counts() {
        let mut q = WaitQueue::default();
        let mut rs: Vec<ReqSlot> = Vec::new();
        for i in 0..4u32 {
            let seq = q.next_seq();
            rs.push(slot(seq, NO_DEADLINE, i % 2 == 0));
        }
        for (i, r) in rs.iter_mut().enumerate() {
            q.push(r, i as u32);
            // A second push of a queued request changes nothing.
            q.push(r, i as u32);
        }
        assert_eq!(q.len(), 4);
        assert_eq!(q.fast_head(&rs), Some((0, 0)));
        assert_eq!(q.fast(&rs).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(q.general(0, u64::MAX).collect::<Vec<_>>(), [(1, 1), (3, 3)]);
        assert_eq!(q.general(2, u64::MAX).collect::<Vec<_>>(), [(3, 3)]);

        // The head leaves: its entry is dropped lazily, the next plain one is the head.
        q.remove(&mut rs[0], 0);
        assert_eq!(q.len(), 3);
        assert_eq!(q.fast_head(&rs), Some((2, 2)));

        // A plain request that starts excluding moves to the general map in its place.
        q.move_to_general(&mut rs[2], 2);
        assert_eq!(rs[2].queued, Queued::General);
        assert_eq!(q.len(), 3);
        assert_eq!(q.fast_head(&rs), None);
        assert_eq!(
            q.general(0, u64::MAX).collect::<Vec<_>>(),
            [(1, 1), (2, 2), (3, 3)]
        );
        for (i, r) in rs.iter_mut().enumerate().skip(1) {
            q.remove(r, i as u32);
        }
        assert_eq!(q.len(), 0);
        q.clear_stale(&rs);
        assert_eq!(q.fast.len(), 0);
    }

    /// Plain requests that leave behind one that keeps waiting leave a bounded number of
    /// entries: the FIFO is compacted once the stale ones outnumber the waiting ones.
    #[test]
    fn stale_entries_behind_a_long_waiter_stay_bounded() {
        let mut q = WaitQueue::default();
        let mut rs: Vec<ReqSlot> = vec![slot(0, NO_DEADLINE, true)];
        q.push(&mut rs[0], 0);
        for i in 1..10_000u64 {
            rs.push(slot(i, NO_DEADLINE, true));
            let idx = rs.len() as u32 - 1;
            q.push(&mut rs[idx as usize], idx);
            q.remove(&mut rs[idx as usize], idx);
            rs[idx as usize].active = false;
            q.clear_stale(&rs);
            assert!(
                q.fast.len() <= 2 * q.len() + STALE_SLACK + 1,
                "{}",
                q.fast.len()
            );
        }
        assert_eq!(q.len(), 1);
        assert_eq!(q.fast_head(&rs), Some((0, 0)));
    }

    /// Parking costs the same per request whatever the number parked: entries of current parks
    /// never count as stale, and stale ones are dropped once they outnumber the live ones.
    #[test]
    fn parked_requests_listed_under_many_slots_are_not_compacted_again_and_again() {
        let mut q = WaitQueue::default();
        let mut rs: Vec<ReqSlot> = Vec::new();
        let slots: Vec<u32> = (0..16).collect();
        for i in 0..1_000u32 {
            let seq = q.next_seq();
            rs.push(slot(seq, NO_DEADLINE, false));
            q.push(&mut rs[i as usize], i);
            q.park(&mut rs[i as usize], i, WakeOn::Slots(&slots));
        }
        assert_eq!((q.parked(), q.len(), q.compactions), (1_000, 1_000, 0));
        assert_eq!(q.entries, 16_000);
        // Slot 0 frees: every request wakes (and would park again, under all 16 slots).
        q.wake(0, &mut rs);
        assert_eq!((q.parked(), q.general.len()), (0, 1_000));
        for i in 0..1_000u32 {
            q.park(&mut rs[i as usize], i, WakeOn::Slots(&slots));
        }
        // 15,000 stale entries beside 16,000 live ones: dropped once, not at every park.
        assert_eq!(q.compactions, 1);
        assert!(q.entries <= 2 * q.live_entries + 64, "{}", q.entries);
        assert_eq!(q.live_entries, 16_000);
        // A parked request that leaves takes its entries out of the live count.
        q.remove(&mut rs[0], 0);
        assert_eq!((q.parked(), q.live_entries), (999, 15_984));
    }

    #[test]
    fn deadlines_come_due_in_order_and_leave_with_their_request() {
        let mut q = WaitQueue::default();
        let mut rs = [slot(0, 300, true), slot(1, 100, false), slot(2, 200, true)];
        for (i, r) in rs.iter_mut().enumerate() {
            q.push(r, i as u32);
        }
        assert_eq!(q.first_deadline(), Some(100));
        assert_eq!(q.due(99), None);
        assert_eq!(q.due(100), Some(1));
        q.remove(&mut rs[1], 1);
        assert_eq!(q.due(250), Some(2));
        q.remove(&mut rs[2], 2);
        assert_eq!(q.first_deadline(), Some(300));
        // Nothing asked for: never queued.
        let mut idle = ReqSlot {
            pending: 0,
            ..slot(3, 50, true)
        };
        q.push(&mut idle, 3);
        assert_eq!(idle.queued, Queued::No);
        assert_eq!(q.first_deadline(), Some(300));
    }
}
