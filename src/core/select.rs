//! The draw itself: the O(log n) tree path, or a draw over an evaluated set (subsets,
//! fallbacks, deterministic mode, arms and decision records).

use rand::{Rng, RngExt};

use super::draw::{argmax_by_order, pick_linear};
use super::evaluate::Detail;
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

/// Which way a draw went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DrawPath {
    /// The O(log n) sum trees.
    Tree,
    /// An evaluated draw: the set, its probabilities and its notes are in `Core::eval`.
    Evaluated,
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
        self.fleet.tree_has_unexcluded(set.exclude)
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
    ) -> Option<(Drawn, DrawPath)> {
        let variant = arm
            .and_then(|a| self.arms.get(a))
            .and_then(|a| a.model.as_ref());
        if mode == DrawMode::Fast && variant.is_none() && self.tree_applies(set) {
            self.flush_stale();
            return self
                .fleet
                .tree_draw(set.exclude, &self.model, rng)
                .map(|d| (d, DrawPath::Tree));
        }
        let mut ev = std::mem::take(&mut self.eval);
        let detail = if mode == DrawMode::Record {
            Detail::FilterNotes
        } else {
            Detail::Probabilities
        };
        self.evaluate_with(variant, set, &mut ev, detail);
        let deterministic = variant
            .map(|m| m.config().deterministic)
            .unwrap_or(self.model.config().deterministic);
        let drawn = if ev.keys.is_empty() {
            None
        } else if deterministic {
            let order: Vec<u64> = ev
                .keys
                .iter()
                .map(|&i| self.fleet.slots[i as usize].added_seq)
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
        drawn.map(|d| (d, DrawPath::Evaluated))
    }
}
