//! The fleet part: the candidate slots, their static info (with the ids), the id index, the sum
//! trees over the drawable slots, and the counts that spare the common checks a scan.

use std::collections::HashMap;

use rand::{Rng, RngExt};

use super::draw::SumTree;
use super::index::IdIndex;
use super::select::{DrawSet, Drawn};
use super::{CandidateId, CandidateInfo, Key};
use crate::decision::DecisionReason;
use crate::score::{FeedbackBook, Fixed, Learned, LoadFit, Overall, PackedStats, ScoreModel};

/// One candidate's state inside the core: what a decision, an outcome and a release touch.
/// Its static info lives apart (`Fleet::infos`) so a cycle reads only this, a few
/// cache lines, even when the fleet is far larger than the cache.
///
/// 256 bytes, aligned to the cache line: exactly four lines each, in a fixed order (`repr(C)`)
/// so [`Slot::touch`] can reach every line.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    pub(crate) in_flight: u32,
    pub(crate) gen: u32,
    /// The info's own in-flight limit; 0 for none (an info's limit is at least 1).
    pub(crate) own_limit: u32,
    /// The learned limit ([`UNLIMITED`](super::UNLIMITED) while adaptive limits are off); in the padding before
    /// `added_seq`, so the slot keeps its size.
    pub(crate) adaptive_limit: u32,
    pub(crate) added_seq: u64,
    /// Added and not removed.
    pub(crate) live: bool,
    /// Live and allowed by the strict price limit: may ever be granted.
    pub(crate) usable: bool,
    /// Usable and below its in-flight limit.
    pub(crate) available: bool,
    pub(crate) perf_ok: bool,
    pub(crate) price_ok: bool,
    pub(crate) ejected: bool,
    /// Has positive leaves in the trees (available and passing every filter).
    pub(crate) in_tree: bool,
    /// Its score-channel leaves wait in `Fleet::stale` for the next draw.
    pub(crate) stale: bool,
    /// The score parts fixed by the info and the config.
    pub(crate) fixed: Fixed,
    /// The learned components at the last full refresh; see `Core::components_of`.
    pub(crate) learned: Learned,
    pub(crate) stats: PackedStats,
}

impl Slot {
    /// Reads one value from each of the slot's four cache lines. A grant calls it: its outcome
    /// will read and write the statistics, and on a fleet larger than the cache the four
    /// misses then overlap instead of coming one after another.
    #[inline]
    pub(crate) fn touch(&self) -> (u32, f64, u64) {
        let (first, last) = self.stats.ends();
        (self.in_flight, self.learned.last() + first, u64::from(last))
    }
}

/// The fleet part: every candidate's slot, info and id, the id index, the channel sum trees
/// over the drawable slots, and the counts a decision reads instead of scanning. Its refresh
/// (which needs the scoring model, the clock and the limits) is `Core`'s, in `fleet.rs`.
#[derive(Debug)]
pub(super) struct Fleet {
    pub(super) slots: Vec<Slot>,
    /// Each slot's static info, apart from the slot: changes, records and grants (for the id)
    /// read it.
    pub(super) infos: Vec<CandidateInfo>,
    /// Slots of removed candidates with nothing in flight, for reuse.
    pub(super) free_slots: Vec<u32>,
    /// Slots of removed candidates whose attempts still run, by id: adding the id again
    /// takes its slot back (`Core::add_with_stats`).
    pub(super) draining: HashMap<CandidateId, u32>,
    pub(super) by_id: IdIndex,
    /// One sum tree per score channel, over the slots.
    pub(super) trees: Vec<SumTree>,
    /// Slots that are usable ([`Slot::usable`]).
    pub(super) usable_count: usize,
    /// Slots that are available ([`Slot::available`]).
    pub(super) avail: usize,
    /// Slots in the trees ([`Slot::in_tree`]).
    pub(super) avail_pass: usize,
    pub(super) ejected_count: usize,
    pub(super) live_count: usize,
    /// The sum of the live candidates' stakes.
    pub(super) stake_total: f64,
    /// The all-candidate averages.
    pub(super) overall: Overall,
    /// The next slot's `added_seq`.
    pub(super) next_added: u64,
    /// Candidates whose score leaves are written at the next draw.
    pub(super) stale: Vec<u32>,
    /// `(slot, attempt)` for each slot with an attempt still running without a report as of
    /// the last coarse refresh or scan, the oldest then; sorted by slot, one entry per slot, so it takes
    /// memory per running attempt, not per candidate. See `Core::pending_ms`.
    pub(super) oldest_pending: Vec<(u32, u32)>,
    /// Each slot a scan between coarse refreshes last rescored for an attempt running long,
    /// sorted by slot: the scans rescore it again when that age has doubled, or once the
    /// attempt has ended. See `Core::scan_running`.
    pub(super) charged: Vec<Charge>,
    /// Per slot, whether its candidate slows under concurrency.
    pub(super) load_fit: Vec<LoadFit>,
    /// Per slot, what its server reported about its queue and service time.
    pub(super) feedback: FeedbackBook,
    /// Leaves zeroed for one tree draw, as (slot, channel, value), to put back after it.
    saved_leaves: Vec<(usize, usize, f64)>,
}

/// A scan's charge of a candidate for an attempt running long (`Core::scan_running`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Charge {
    /// The candidate's slot.
    pub(super) slot: u32,
    /// The attempt's slot and generation: a later attempt in the same slot is another one.
    pub(super) attempt: (u32, u32),
    /// The attempt's age when charged, ms.
    pub(super) age_ms: f64,
    /// When, seconds since the epoch.
    pub(super) at_s: f64,
}

impl Fleet {
    /// An empty fleet with one sum tree per score channel.
    pub(super) fn new(channels: usize) -> Self {
        Fleet {
            slots: Vec::new(),
            infos: Vec::new(),
            free_slots: Vec::new(),
            draining: HashMap::new(),
            by_id: IdIndex::default(),
            trees: vec![SumTree::default(); channels],
            usable_count: 0,
            avail: 0,
            avail_pass: 0,
            ejected_count: 0,
            live_count: 0,
            stake_total: 0.0,
            overall: Overall::default(),
            next_added: 0,
            stale: Vec::new(),
            oldest_pending: Vec::new(),
            charged: Vec::new(),
            load_fit: Vec::new(),
            feedback: FeedbackBook::default(),
            saved_leaves: Vec::new(),
        }
    }

    /// The slot of a live candidate.
    #[inline]
    pub(super) fn index_of(&self, id: &CandidateId) -> Option<u32> {
        self.by_id.get(&self.infos, id.as_str())
    }

    /// A live candidate's key (slot and generation).
    pub(super) fn key_of(&self, id: &CandidateId) -> Option<Key> {
        self.index_of(id).map(|idx| Key {
            idx,
            gen: self.slots[idx as usize].gen,
        })
    }

    /// Whether `k` still names a live candidate.
    #[inline]
    pub(super) fn key_valid(&self, k: Key) -> bool {
        self.slots
            .get(k.idx as usize)
            .is_some_and(|s| s.gen == k.gen && s.live)
    }

    /// Whether slot `idx` of generation `gen` is in `exclude`.
    #[inline]
    pub(super) fn excluded(exclude: &[Key], idx: u32, gen: u32) -> bool {
        exclude.iter().any(|k| k.idx == idx && k.gen == gen)
    }

    /// Whether slot `idx`'s candidate has every capability in `caps`.
    #[inline]
    pub(super) fn caps_ok(&self, idx: u32, caps: &[String]) -> bool {
        caps.is_empty()
            || caps
                .iter()
                .all(|c| self.infos[idx as usize].capabilities.iter().any(|x| x == c))
    }

    /// Lists a candidate's score leaves for the next draw's write.
    #[inline]
    pub(super) fn mark_stale(&mut self, idx: usize) {
        let slot = &mut self.slots[idx];
        if !slot.stale {
            slot.stale = true;
            self.stale.push(idx as u32);
        }
    }

    /// Whether a request could be granted now: some candidate in its set has capacity.
    #[inline]
    pub(super) fn servable(&self, set: DrawSet<'_>) -> bool {
        self.avail != 0 && self.any_in(set, |s| s.available, self.avail)
    }

    /// The slots a draw set names, with their index (every slot when it names none; a named
    /// key whose slot was reused since is left out). Exclusions and capabilities are the
    /// caller's to check. For the records, the explanations and parking, not the draw.
    pub(super) fn in_reach<'a>(
        &'a self,
        set: DrawSet<'a>,
    ) -> impl Iterator<Item = (u32, &'a Slot)> + 'a {
        let named = set.eligible.into_iter().flatten().filter_map(move |k| {
            let s = &self.slots[k.idx as usize];
            (s.gen == k.gen).then_some((k.idx, s))
        });
        let all = set
            .eligible
            .is_none()
            .then(|| (0u32..).zip(&self.slots))
            .into_iter()
            .flatten();
        named.chain(all)
    }

    /// Whether any candidate the request may use exists at all, with capacity or not.
    #[inline]
    pub(super) fn has_eligible(&self, set: DrawSet<'_>) -> bool {
        self.any_in(set, |s| s.usable, self.usable_count)
    }

    /// Whether some candidate in `set` passes `has`; `count` is how many slots pass it fleet-wide
    /// (kept up to date), which answers a plain request (no names, exclusions or capabilities,
    /// most of them) inline; the others scan, out of line.
    #[inline]
    fn any_in(&self, set: DrawSet<'_>, has: impl Fn(&Slot) -> bool, count: usize) -> bool {
        if set.eligible.is_none() && set.exclude.is_empty() && set.caps.is_empty() {
            return count > 0;
        }
        self.any_in_scan(set, has, count)
    }

    /// [`Fleet::any_in`] for a set that names, excludes or needs something.
    #[inline(never)]
    fn any_in_scan(&self, set: DrawSet<'_>, has: impl Fn(&Slot) -> bool, count: usize) -> bool {
        match set.eligible {
            Some(keys) => keys.iter().any(|k| {
                let s = &self.slots[k.idx as usize];
                s.gen == k.gen
                    && has(s)
                    && !Self::excluded(set.exclude, k.idx, k.gen)
                    && self.caps_ok(k.idx, set.caps)
            }),
            None if set.caps.is_empty() => {
                let excluded = set
                    .exclude
                    .iter()
                    .filter(|k| self.key_valid(**k) && has(&self.slots[k.idx as usize]))
                    .count();
                count > excluded
            }
            None => self.slots.iter().enumerate().any(|(i, s)| {
                has(s)
                    && !Self::excluded(set.exclude, i as u32, s.gen)
                    && self.caps_ok(i as u32, set.caps)
            }),
        }
    }

    /// Whether the tree draw can serve a set with these exclusions: some candidate in the
    /// trees is not excluded.
    #[inline]
    pub(super) fn tree_has_unexcluded(&self, exclude: &[Key]) -> bool {
        let excluded_in_tree = exclude
            .iter()
            .filter(|k| self.key_valid(**k) && self.slots[k.idx as usize].in_tree)
            .count();
        self.avail_pass > excluded_in_tree
    }

    /// Probability of leaf `idx` in the trees as they stand (no stale leaves wait).
    #[inline]
    pub(super) fn tree_probability(&self, idx: usize, model: &ScoreModel) -> f64 {
        let uniform = model.uniform_channel();
        let n = self.trees[uniform].total();
        if n <= 0.0 {
            return 0.0;
        }
        let mut p = 0.0;
        let mut empty = 0.0;
        for (c, ch) in model.channels().iter().enumerate() {
            if c == uniform {
                p += ch.mass / n;
                continue;
            }
            let t = self.trees[c].total();
            let leaf = self.trees[c].get(idx);
            if t > 0.0 {
                p += ch.mass * leaf / t;
            } else {
                empty += ch.mass;
            }
        }
        p + empty / n
    }

    /// Draws from the trees (their stale leaves written first by the caller), with the
    /// excluded candidates' leaves zeroed for the draw. With the pick, the score channel the
    /// roll fell in, if not the floor's, and whether that channel had no weight over the free
    /// candidates (the pick is then the uniform channel's; see `hold`).
    pub(super) fn tree_draw<R: Rng + ?Sized>(
        &mut self,
        exclude: &[Key],
        model: &ScoreModel,
        rng: &mut R,
    ) -> Option<(Drawn, Option<ScoreRoll>)> {
        debug_assert!(self.stale.is_empty(), "stale leaves must be written first");
        self.saved_leaves.clear();
        for k in exclude {
            if self.key_valid(*k) && self.slots[k.idx as usize].in_tree {
                for (c, tree) in self.trees.iter_mut().enumerate() {
                    self.saved_leaves
                        .push((k.idx as usize, c, tree.get(k.idx as usize)));
                    tree.set(k.idx as usize, 0.0);
                }
            }
        }
        let uniform = model.uniform_channel();
        let n = self.trees[uniform].total();
        let mut roll = None;
        let result = if n > 0.0 {
            let u: f64 = rng.random();
            let mut acc = 0.0;
            let mut chosen = uniform;
            for (c, ch) in model.channels().iter().enumerate() {
                acc += ch.mass;
                if u < acc && ch.mass > 0.0 {
                    chosen = c;
                    break;
                }
            }
            let weighed = self.trees[chosen].total() > 0.0;
            if chosen != uniform {
                roll = Some(ScoreRoll {
                    channel: chosen,
                    empty: !weighed,
                });
            }
            let tree = if weighed { chosen } else { uniform };
            let u2: f64 = rng.random();
            self.trees[tree]
                .sample(u2 * self.trees[tree].total())
                .map(|idx| Drawn {
                    idx: idx as u32,
                    probability: self.tree_probability(idx, model),
                    reason: if n == 1.0 {
                        DecisionReason::OnlyChoice
                    } else {
                        DecisionReason::Draw
                    },
                    roll: Some(u),
                })
        } else {
            None
        };
        for &(idx, c, v) in self.saved_leaves.iter().rev() {
            self.trees[c].set(idx, v);
        }
        result.map(|d| (d, roll))
    }
}

/// Where a tree draw's roll fell when it fell in a score channel (not the floor's).
#[derive(Clone, Copy, Debug)]
pub(super) struct ScoreRoll {
    /// The channel.
    pub(super) channel: usize,
    /// Whether the channel had no weight over the free candidates (the pick was then uniform).
    pub(super) empty: bool,
}

#[cfg(test)]
mod tests {
    use super::Slot;

    #[test]
    fn a_slot_is_four_cache_lines() {
        assert_eq!(std::mem::size_of::<Slot>(), 256);
        assert_eq!(std::mem::align_of::<Slot>(), 64);
        // `touch` reads one value per line.
        assert!(std::mem::offset_of!(Slot, learned) + 48 > 64);
        assert!(std::mem::offset_of!(Slot, learned) + 48 <= 128);
    }
}
