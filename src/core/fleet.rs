//! The fleet of candidate slots: their limits, cached components, filter flags, the
//! channel sum trees' leaves, and the refresh that keeps them current.

use super::slots::Charge;
#[allow(clippy::wildcard_imports)]
use super::*;
use crate::score::{Components, Learned, StatsView};
use scoring::ScoredAt;

/// How often the coarse refresh also recomputes the components no channel reads (they are
/// only displayed), in seconds of core time.
const UNUSED_REFRESH_S: f64 = 1.0;

pub(crate) use super::clock::BUCKET_BASE;

/// What moved since a candidate's last refresh, which says how much of it is recomputed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Refresh {
    /// Only its in-flight count (a grant or a release): the learned components are kept from
    /// the last full refresh; only the load component, read on assembly, moves.
    Load,
    /// Its info, the config or its liveness: everything is recomputed from its statistics.
    Full,
    /// An outcome just updated its statistics: everything is recomputed from them, except the
    /// components no channel reads, which are kept.
    Outcome,
    /// The coarse refresh of every candidate: everything is recomputed (the unread components
    /// at most once a second), and the leaves are written deferred, for one rebuild after.
    Coarse,
    /// The scan of attempts still running between coarse refreshes: recomputed as by the
    /// coarse refresh, the leaves written at the next draw.
    Scan,
}

impl Core {
    /// The limit in force: the lower of the static one and the learned one.
    #[inline]
    pub(crate) fn limit_of(&self, slot: &Slot) -> u32 {
        self.scoring().limit_of(slot)
    }

    /// The static limit: the candidate's own `max_in_flight`, else `Limits::per_candidate`.
    #[inline]
    pub(crate) fn static_limit_of(&self, slot: &Slot) -> u32 {
        self.scoring().static_limit_of(slot)
    }

    /// Slot `idx`'s components: the learned ones as of its last full refresh, the rest as
    /// they stand. Zero for a removed candidate.
    #[inline]
    pub(crate) fn components_of(&self, idx: usize) -> Components {
        self.scoring().components_of(idx)
    }

    /// Finds each candidate's oldest attempt still running without a report (the earliest
    /// granted, the lowest attempt index among equals). O(a + n) for `a` attempt slots and `n`
    /// candidate slots, in one pass over the attempts (by index, so the first of equal grant
    /// times stays) and one over the candidates for the slot order.
    pub(super) fn find_oldest_pending(&mut self) {
        const NONE: u32 = u32::MAX;
        if self.attempts.in_flight() == 0 {
            // Nothing runs (and nothing to allocate on the decision path).
            self.fleet.oldest_pending.clear();
            return;
        }
        let mut oldest = vec![NONE; self.fleet.slots.len()];
        for (a, att) in self.attempts.iter().enumerate() {
            if !att.active || att.reported || att.answered {
                continue;
            }
            let Some(best) = oldest.get_mut(att.key.idx as usize) else {
                continue;
            };
            if *best == NONE
                || att
                    .granted_s
                    .total_cmp(&self.attempts[*best as usize].granted_s)
                    .is_lt()
            {
                *best = a as u32;
            }
        }
        let pending = &mut self.fleet.oldest_pending;
        pending.clear();
        pending.extend(
            oldest
                .iter()
                .enumerate()
                .filter(|&(_, &a)| a != NONE)
                .map(|(slot, &a)| (slot as u32, a)),
        );
    }

    /// The current window bucket (see [`Clock::bucket`](super::clock::Clock::bucket)).
    #[inline]
    pub(crate) fn bucket(&self) -> u64 {
        self.clock.bucket()
    }

    /// Recomputes static filter flags after the info or the config changed.
    pub(crate) fn refresh_static(&mut self, idx: usize) {
        let cfg = self.model.config();
        let info = &self.fleet.infos[idx];
        let perf_ok = cfg.perf.passes(&info.perf_scores);
        let price_ok = cfg.price.max.is_none_or(|m| info.price <= m);
        let strict = !cfg.price.ignore_max_if_none_pass;
        let fixed = self.model.fixed(info);
        let own_limit = info.max_in_flight.unwrap_or(0);
        let slot = &mut self.fleet.slots[idx];
        slot.perf_ok = perf_ok;
        slot.price_ok = price_ok;
        slot.fixed = fixed;
        slot.own_limit = own_limit;
        let usable = slot.live && (!strict || price_ok);
        if usable != slot.usable {
            slot.usable = usable;
            if usable {
                self.fleet.usable_count += 1;
            } else {
                self.fleet.usable_count -= 1;
            }
        }
    }

    /// Recomputes one candidate's availability, components and tree leaves. O(C log n).
    pub(crate) fn refresh_leaf(&mut self, idx: usize) {
        self.refresh_slot(idx, Refresh::Full);
    }

    /// [`Core::refresh_leaf`] after an outcome updated the candidate's statistics.
    #[inline]
    pub(crate) fn refresh_after_outcome(&mut self, idx: usize) {
        self.refresh_slot(idx, Refresh::Outcome);
    }

    /// After a grant or a release only the in-flight count moved: recompute the load component
    /// and keep the others from the last full refresh (an outcome, a change, the coarse tick),
    /// which saves the transcendental functions on the hot path. O(C log n).
    #[inline]
    pub(crate) fn refresh_load(&mut self, idx: usize) {
        let slot = &self.fleet.slots[idx];
        let available = slot.usable && slot.in_flight < self.limit_of(slot);
        // The usual case: the candidate stays available and is not ejected (only an outcome
        // ejects), so no flag or count moves and only its score leaves wait for the next draw.
        if available == slot.available && !slot.ejected {
            self.fleet.mark_stale(idx);
            return;
        }
        self.refresh_slot(idx, Refresh::Load);
    }

    /// Recomputes one candidate's flags, counts and (unless only its load moved) learned
    /// components, and lists or writes its leaves, as `how` says.
    #[inline]
    pub(super) fn refresh_slot(&mut self, idx: usize, how: Refresh) {
        let deferred = matches!(how, Refresh::Coarse);
        let now_s = self.clock.now_s;
        let slot = &self.fleet.slots[idx];
        let limit = self.limit_of(slot);
        let available = slot.usable && slot.in_flight < limit;
        // With ejection switched off (a reload, or restored statistics) an old ejection time
        // must not keep a candidate out of the tree while evaluated draws let it in.
        let ejected = self.model.config().ejection.enabled
            && slot.live
            && slot.stats.ejected_until_s().is_some_and(|u| u > now_s);
        let learned = if !slot.live {
            Some(Learned::default())
        } else if !matches!(how, Refresh::Load) {
            let from_outcome = matches!(how, Refresh::Outcome);
            // Components no channel reads cannot move a draw: an outcome keeps them, and the
            // coarse refresh recomputes them at most once a second (`next_unused_s`), for
            // display.
            let keep = from_outcome
                || (matches!(how, Refresh::Coarse | Refresh::Scan)
                    && self.clock.now_s < self.clock.next_unused_s);
            let previous = keep.then_some(&slot.learned);
            let at = if from_outcome {
                ScoredAt::Outcome
            } else {
                ScoredAt::Rest
            };
            let ctx = self.scoring().score_context(idx, at);
            // Remote evidence, when this core shares, is scored as a prior on top; otherwise
            // the packed statistics are read as they are.
            match self
                .share
                .as_ref()
                .and_then(|_| self.blended(idx, &slot.stats.unpack()))
            {
                Some(b) => Some(self.model.learned(&b, &ctx, previous)),
                None => Some(self.model.learned(&slot.stats, &ctx, previous)),
            }
        } else {
            None
        };
        let in_tree = available && slot.perf_ok && slot.price_ok && !ejected;
        let slot = &mut self.fleet.slots[idx];
        if let Some(l) = learned {
            slot.learned = l;
        }
        if available != slot.available {
            slot.available = available;
            if available {
                self.fleet.avail += 1;
                self.queue.wake(idx as u32, &mut self.requests);
            } else {
                self.fleet.avail -= 1;
            }
        }
        if ejected != slot.ejected {
            slot.ejected = ejected;
            if ejected {
                self.fleet.ejected_count += 1;
            } else {
                self.fleet.ejected_count -= 1;
            }
        }
        let entered_or_left = in_tree != slot.in_tree;
        if entered_or_left {
            slot.in_tree = in_tree;
            if in_tree {
                self.fleet.avail_pass += 1;
            } else {
                self.fleet.avail_pass -= 1;
            }
        }
        let uniform = self.model.uniform_channel();
        if deferred {
            for c in 0..self.fleet.trees.len() {
                let v = self.leaf_value(c, idx);
                self.fleet.trees[c].set_deferred(idx, v);
            }
            return;
        }
        // The uniform leaf (the drawable count the invariants check) is kept current; it only
        // moves when the candidate enters or leaves the drawable set, and not reading it
        // otherwise saves a cache miss per event on large fleets. The score leaves are written
        // once at the next draw, so a grant, an outcome and a release of the same candidate
        // between two draws cost one leaf update instead of three.
        if entered_or_left {
            self.fleet.trees[uniform].set(idx, if in_tree { 1.0 } else { 0.0 });
        }
        self.fleet.mark_stale(idx);
    }

    /// The value leaf `idx` of channel `c` should hold now.
    #[inline]
    pub(super) fn leaf_value(&self, c: usize, idx: usize) -> f64 {
        self.scoring().leaf_value(c, idx)
    }

    /// Brings the scores up to date before a draw: everything when something global changed
    /// or the coarse tick is due, else the attempts still running when their scan is due, and
    /// the candidates a round of digests named.
    #[inline]
    pub(super) fn refresh_due(&mut self) {
        if self.dirty || self.clock.now_s >= self.clock.next_refresh_s {
            self.refresh_all();
        } else {
            if self.clock.now_s >= self.clock.next_scan_s {
                self.scan_running();
            }
            self.refresh_digested();
        }
    }

    /// Between two coarse refreshes of a large fleet, every `refresh_ms`: finds each
    /// candidate's oldest unanswered attempt again and rescores the candidates whose attempt
    /// has run past twice what one is expected to take, then again each time its age doubles
    /// (and once more when it ends), so a server that stops answering is charged about as
    /// soon as on a small fleet, however far apart the fleet's coarse refreshes are; ends the
    /// ejections that are over; wakes the parked requests. O(attempts running), plus a pass
    /// over the flags while any candidate is ejected.
    #[cold]
    #[inline(never)]
    fn scan_running(&mut self) {
        let before = std::mem::take(&mut self.fleet.charged);
        self.find_oldest_pending();
        self.queue.wake_all(&mut self.requests);
        let now_s = self.clock.now_s;
        let reference_ms = self.fleet.overall.attempt_ms.map(|o| o.max(1.0));
        let mut charged = Vec::new();
        let mut rescore = Vec::new();
        for &(slot, a) in &self.fleet.oldest_pending {
            let att = &self.attempts[a as usize];
            let age_ms = (now_s - att.granted_s) * 1000.0;
            let attempt = (a, att.gen);
            let last = before
                .binary_search_by_key(&slot, |c| c.slot)
                .ok()
                .map(|i| before[i])
                .filter(|c| c.attempt == attempt);
            let due = match last {
                Some(c) => age_ms >= 2.0 * c.age_ms,
                None => {
                    // `ScoreModel::censored_time` charges an attempt once its age passes the
                    // expected time, between the candidate's own estimate and the fleet's.
                    let own_ms = self.fleet.slots[slot as usize].stats.attempt_ms();
                    let expected_ms = match (own_ms, reference_ms) {
                        (Some(t), Some(o)) => t.min(o),
                        (t, o) => t.or(o).unwrap_or(0.0),
                    };
                    age_ms > 2.0 * expected_ms
                }
            };
            if due {
                rescore.push(slot);
                charged.push(Charge {
                    slot,
                    attempt,
                    age_ms,
                    at_s: now_s,
                });
            } else if let Some(c) = last {
                charged.push(c);
            }
        }
        // A charged attempt that ended without an outcome of its candidate since the charge
        // (an outcome rescores it): lift the charge.
        let slots = &self.fleet.slots;
        rescore.extend(
            before
                .iter()
                .filter(|c| charged.binary_search_by_key(&c.slot, |d| d.slot).is_err())
                .filter(|c| {
                    slots[c.slot as usize]
                        .stats
                        .last_sample_s()
                        .is_none_or(|l| l < c.at_s)
                })
                .map(|c| c.slot),
        );
        if self.fleet.ejected_count > 0 && self.model.config().ejection.enabled {
            let over = |s: &Slot| s.ejected && s.stats.ejected_until_s().is_none_or(|u| u <= now_s);
            rescore.extend(
                (0..self.fleet.slots.len() as u32).filter(|&i| over(&self.fleet.slots[i as usize])),
            );
        }
        rescore.sort_unstable();
        rescore.dedup();
        for &idx in &rescore {
            self.refresh_slot(idx as usize, Refresh::Scan);
        }
        self.fleet.charged = charged;
        self.clock.next_scan_s = now_s + self.base_period_s();
    }

    /// Recomputes every candidate (the coarse tick): windows forget, statistics decay, the
    /// all-candidate averages move, ejections end. O(n).
    pub(crate) fn refresh_all(&mut self) {
        let n = self.fleet.slots.len();
        for tree in &mut self.fleet.trees {
            tree.reserve_leaves(n);
        }
        self.find_oldest_pending();
        // Parked requests are woken where a candidate gains capacity; each coarse refresh
        // also checks them all again, so none waits past it whatever the cause.
        self.queue.wake_all(&mut self.requests);
        self.fleet.feedback.settle();
        self.refresh_share();
        self.refresh_pool();
        for idx in 0..n {
            self.refresh_slot(idx, Refresh::Coarse);
        }
        if self.clock.now_s >= self.clock.next_unused_s {
            self.clock.next_unused_s = self.clock.now_s + UNUSED_REFRESH_S;
        }
        for tree in &mut self.fleet.trees {
            tree.rebuild();
        }
        // Every leaf was just written.
        for &idx in &self.fleet.stale {
            self.fleet.slots[idx as usize].stale = false;
        }
        self.fleet.stale.clear();
        self.dirty = false;
        self.fleet.charged.clear();
        let period = self.next_refresh_period();
        self.clock.next_refresh_s = self.clock.now_s + period;
        self.clock.next_scan_s = self.clock.now_s + self.base_period_s();
    }

    /// `refresh_ms` in seconds: the shortest refresh period, and the scans' period.
    fn base_period_s(&self) -> f64 {
        self.model.config().refresh_ms as f64 / 1000.0
    }

    /// Brings the next coarse refresh within `refresh_ms`.
    fn refresh_soon(&mut self) {
        let soon = self.clock.now_s + self.base_period_s();
        self.clock.next_refresh_s = self.clock.next_refresh_s.min(soon);
    }

    /// The period until the next coarse refresh: `refresh_ms` after the fleet or the config
    /// changed, then twice the last period, up to the settled period
    /// ([`Config::refresh_period_s`]), which a large fleet stretches. A fleet being learned
    /// moves its all-candidate averages and pooled center at every refresh, and every draw
    /// weighs candidates scored against them, so it is refreshed often; a settled one is not.
    fn next_refresh_period(&mut self) -> f64 {
        let base = self.base_period_s();
        let live = self.fleet.live_count;
        let settled = self.model.config().refresh_period_s(live).max(base);
        let period = (2.0 * self.clock.refresh_period_s).max(base).min(settled);
        self.clock.refresh_period_s = period;
        period
    }

    /// A failing candidate answered (a heal, `Pool::healed`): the fleet may be coming back
    /// from an outage, so the next coarse refresh, which judges every candidate's probes,
    /// comes within `refresh_ms`; at most once per settled period, so a fleet where some
    /// candidate heals all the time is not refreshed at every one.
    pub(super) fn heal_seen(&mut self) {
        let now_s = self.clock.now_s;
        let settled = self.model.config().refresh_period_s(self.fleet.live_count);
        if now_s - self.clock.heal_pull_s >= settled {
            self.clock.heal_pull_s = now_s;
            self.refresh_soon();
        }
    }

    /// A candidate joined or left: once a tenth of the fleet has since the refresh period
    /// last started over, it starts over, and the next refresh comes within `refresh_ms`.
    pub(super) fn fleet_resized(&mut self) {
        let (live, at_start) = (self.fleet.live_count, self.clock.refresh_live);
        if live.abs_diff(at_start) * 10 >= at_start.max(1) {
            self.clock.refresh_live = live;
            self.clock.refresh_period_s = 0.0;
            self.refresh_soon();
        }
    }

    /// Rebuilds the trees after the channel layout changed (a new config).
    pub(crate) fn rebuild_trees(&mut self) {
        // A component the old config left unread may be read now: recompute every one.
        self.clock.next_unused_s = f64::NEG_INFINITY;
        // And the refresh period starts again from `refresh_ms`.
        self.clock.refresh_period_s = 0.0;
        self.fleet.trees = vec![SumTree::default(); self.model.channels().len()];
        for slot in &mut self.fleet.slots {
            slot.in_tree = false;
            slot.stale = false;
        }
        self.fleet.stale.clear();
        self.fleet.avail_pass = 0;
        for idx in 0..self.fleet.slots.len() {
            self.refresh_static(idx);
        }
        self.refresh_all();
    }

    /// Probability of leaf `idx` in the trees, counting the leaves still waiting in the stale
    /// list at their current value (a draw writes them first and reads
    /// [`Fleet::tree_probability`](super::slots::Fleet::tree_probability)).
    pub(crate) fn leaf_probability(&self, idx: usize) -> f64 {
        if self.fleet.stale.is_empty() {
            return self.fleet.tree_probability(idx, &self.model);
        }
        let uniform = self.model.uniform_channel();
        let n = self.fleet.trees[uniform].total();
        if n <= 0.0 {
            return 0.0;
        }
        let mut p = 0.0;
        let mut empty = 0.0;
        for (c, ch) in self.model.channels().iter().enumerate() {
            if c == uniform {
                p += ch.mass / n;
                continue;
            }
            let mut t = self.fleet.trees[c].total();
            let mut leaf = self.fleet.trees[c].get(idx);
            if !self.fleet.stale.is_empty() {
                let mut replaced = 0.0;
                for &j in &self.fleet.stale {
                    let j = j as usize;
                    let old = self.fleet.trees[c].get(j);
                    replaced += old;
                    t += self.leaf_value(c, j) - old;
                }
                // A stale leaf that dwarfed all the others leaves only its rounding noise in
                // `t`: sum the leaves afresh (a query; a draw flushes stale leaves first).
                if replaced > t * 1e6 {
                    t = (0..self.fleet.slots.len())
                        .map(|j| {
                            if self.fleet.slots[j].stale {
                                self.leaf_value(c, j)
                            } else {
                                self.fleet.trees[c].get(j)
                            }
                        })
                        .sum();
                }
                if self.fleet.slots[idx].stale {
                    leaf = self.leaf_value(c, idx);
                }
            }
            if t > 0.0 {
                p += ch.mass * leaf / t;
            } else {
                empty += ch.mass;
            }
        }
        p + empty / n
    }
}
