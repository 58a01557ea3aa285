//! The draw itself: the O(log n) tree path, or a draw over an evaluated set (subsets,
//! fallbacks, deterministic mode, arms and decision records).

use rand::{Rng, RngExt};

use super::draw::{argmax_by_order, pick_linear};
use super::{Core, Key};
use crate::decision::DecisionReason;

/// How a draw is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DrawMode {
    /// The O(log n) tree when it applies, else an evaluated draw.
    Fast,
    /// Always evaluated, so others (the shadows) can replay it over the same set.
    Evaluate,
    /// Evaluated, with what each filter removed noted, for a decision record.
    Record,
}

/// What a request may draw from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DrawSet<'a> {
    pub(crate) eligible: Option<&'a [Key]>,
    pub(crate) exclude: &'a [Key],
    pub(crate) caps: &'a [String],
}

impl DrawSet<'_> {
    pub(crate) const ALL: DrawSet<'static> = DrawSet {
        eligible: None,
        exclude: &[],
        caps: &[],
    };
}

/// The result of a draw.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Drawn {
    pub(crate) idx: u32,
    pub(crate) probability: f64,
    pub(crate) reason: DecisionReason,
    pub(crate) roll: Option<f64>,
}

impl Core {
    /// Whether the O(log n) tree draw applies to this set.
    pub(super) fn tree_applies(&self, set: DrawSet<'_>) -> bool {
        if set.eligible.is_some() || !set.caps.is_empty() || self.model.config().deterministic {
            return false;
        }
        let excluded_in_tree = set
            .exclude
            .iter()
            .filter(|k| self.key_valid(**k) && self.slots[k.idx as usize].in_tree)
            .count();
        self.avail_pass > excluded_in_tree
    }

    /// Draws from the trees, with the excluded candidates' leaves zeroed for the draw.
    pub(super) fn tree_draw<R: Rng + ?Sized>(
        &mut self,
        exclude: &[Key],
        rng: &mut R,
    ) -> Option<Drawn> {
        self.flush_stale();
        let mut saved = std::mem::take(&mut self.saved_leaves);
        saved.clear();
        for k in exclude {
            if self.key_valid(*k) && self.slots[k.idx as usize].in_tree {
                for (c, tree) in self.trees.iter_mut().enumerate() {
                    saved.push((k.idx as usize, c, tree.get(k.idx as usize)));
                    tree.set(k.idx as usize, 0.0);
                }
            }
        }
        let uniform = self.model.uniform_channel();
        let n = self.trees[uniform].total();
        let result = if n > 0.0 {
            let u: f64 = rng.random();
            let mut acc = 0.0;
            let mut chosen = uniform;
            for (c, ch) in self.model.channels().iter().enumerate() {
                acc += ch.mass;
                if u < acc && ch.mass > 0.0 {
                    chosen = c;
                    break;
                }
            }
            let tree = if self.trees[chosen].total() > 0.0 {
                chosen
            } else {
                uniform
            };
            let u2: f64 = rng.random();
            self.trees[tree]
                .sample(u2 * self.trees[tree].total())
                .map(|idx| Drawn {
                    idx: idx as u32,
                    probability: self.leaf_probability(idx),
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
        for &(idx, c, v) in saved.iter().rev() {
            self.trees[c].set(idx, v);
        }
        self.saved_leaves = saved;
        result
    }

    /// Makes one decision for `set`: the tree when it applies, else an evaluated draw, as
    /// `mode` says. An evaluated draw fills `self.eval`; an arm with its own model always
    /// evaluates.
    pub(crate) fn draw<R: Rng + ?Sized>(
        &mut self,
        set: DrawSet<'_>,
        rng: &mut R,
        mode: DrawMode,
        arm: Option<usize>,
    ) -> Option<(Drawn, bool)> {
        let variant = arm
            .and_then(|a| self.arms.get(a))
            .and_then(|a| a.model.as_ref());
        if mode == DrawMode::Fast && variant.is_none() && self.tree_applies(set) {
            return self.tree_draw(set.exclude, rng).map(|d| (d, false));
        }
        let mut ev = std::mem::take(&mut self.eval);
        self.evaluate_with(variant, set, &mut ev, mode == DrawMode::Record);
        let deterministic = variant
            .map(|m| m.config().deterministic)
            .unwrap_or(self.model.config().deterministic);
        let drawn = if ev.keys.is_empty() {
            None
        } else if deterministic {
            let order: Vec<u64> = ev
                .keys
                .iter()
                .map(|&i| self.slots[i as usize].added_seq)
                .collect();
            argmax_by_order(&ev.probs, &order).map(|j| Drawn {
                idx: ev.keys[j],
                probability: ev.probs[j],
                reason: DecisionReason::Deterministic,
                roll: None,
            })
        } else {
            let u: f64 = rng.random();
            pick_linear(&ev.probs, u).map(|j| Drawn {
                idx: ev.keys[j],
                probability: ev.probs[j],
                reason: if !ev.fallbacks.is_empty() {
                    DecisionReason::Fallback
                } else if ev.keys.len() == 1 {
                    DecisionReason::OnlyChoice
                } else {
                    DecisionReason::Draw
                },
                roll: Some(u),
            })
        };
        self.eval = ev;
        drawn.map(|d| (d, true))
    }
}
