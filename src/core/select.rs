//! The draw itself: the O(log n) tree path, or a draw over an evaluated set (subsets,
//! fallbacks, deterministic mode, arms and decision records).

use rand::{Rng, RngExt};

use super::arms::ArmState;
use super::attempt_slots::Attempts;
use super::clock::Clock;
use super::draw::{most_probable, pick_linear, pick_linear_from};
use super::evaluate::{Detail, Evaluation};
use super::pool::Pool;
use super::scoring::Scoring;
use super::slots::Fleet;
use super::{Key, Limits};
use crate::decision::DecisionReason;
use crate::score::ScoreModel;

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
    /// An evaluated draw: the set, its probabilities and its notes are in the evaluation
    /// buffer.
    Evaluated,
}

/// What a request may draw from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DrawSet<'a> {
    pub(crate) eligible: Option<&'a [Key]>,
    pub(super) exclude: &'a [Key],
    pub(super) caps: &'a [String],
    /// The request's last attempt: drawn by its odds of success as well
    /// (`last_attempt.failure_cost`, `last_attempt.shed_cost`).
    pub(super) last: bool,
}

impl DrawSet<'_> {
    pub(crate) const ALL: DrawSet<'static> = DrawSet {
        eligible: None,
        exclude: &[],
        caps: &[],
        last: false,
    };
}

/// What a draw decided.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pick {
    /// A candidate, and the way the draw went.
    Drawn(Drawn, DrawPath),
    /// The roll found no candidate with weight among the free ones while one with weight is
    /// busy at its limit: the request waits for a release (see `hold`).
    Wait,
}

/// The result of a draw.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Drawn {
    pub(crate) idx: u32,
    pub(crate) probability: f64,
    pub(crate) reason: DecisionReason,
    pub(crate) roll: Option<f64>,
}

/// The parts a draw touches: the fleet (a tree draw writes the stale leaves first and zeroes
/// the excluded ones for the draw), the evaluation buffer, and, read only, the rest of what
/// scoring reads and the arms. Borrowed apart from the requests, so a request's own draw set
/// can be read while it draws.
pub(super) struct Drawer<'a> {
    pub(super) fleet: &'a mut Fleet,
    pub(super) eval: &'a mut Evaluation,
    pub(super) model: &'a ScoreModel,
    pub(super) limits: &'a Limits,
    pub(super) clock: &'a Clock,
    pub(super) pool: &'a Pool,
    pub(super) attempts: &'a Attempts,
    pub(super) arms: &'a [ArmState],
    pub(super) share: Option<&'a super::digest::ShareState>,
}

impl Drawer<'_> {
    /// What scoring reads, and the evaluation buffer to write.
    #[inline]
    fn split(&mut self) -> (Scoring<'_>, &mut Evaluation) {
        (
            Scoring {
                model: self.model,
                limits: self.limits,
                clock: self.clock,
                fleet: self.fleet,
                pool: self.pool,
                attempts: self.attempts,
                share: self.share,
            },
            self.eval,
        )
    }

    /// What scoring reads.
    #[inline]
    pub(crate) fn scoring(&self) -> Scoring<'_> {
        Scoring {
            model: self.model,
            limits: self.limits,
            clock: self.clock,
            fleet: self.fleet,
            pool: self.pool,
            attempts: self.attempts,
            share: self.share,
        }
    }

    /// Whether a last attempt's draw weighs anything the tree does not hold: success
    /// averages (`last_attempt.failure_cost`), or sheds where a candidate sheds with its load
    /// and the fleet does not queue (`last_attempt.shed_cost`).
    #[inline]
    fn last_attempt_weighed(&self) -> bool {
        self.model.last_attempt_rate().is_some()
            || (self.pool.shedding && self.model.shed_rate(self.pool.queueing).is_some())
    }

    /// Whether the O(log n) tree draw applies to this set.
    #[inline]
    fn tree_applies(&self, set: DrawSet<'_>) -> bool {
        if set.eligible.is_some()
            || !set.caps.is_empty()
            || self.model.config().deterministic
            || (set.last && self.last_attempt_weighed())
        {
            return false;
        }
        self.fleet.tree_has_unexcluded(set.exclude)
    }

    /// Writes the score leaves that changed since the last draw. O(s C log n) for s stale
    /// candidates.
    #[inline]
    fn flush_stale(&mut self) {
        let uniform = self.model.uniform_channel();
        for i in 0..self.fleet.stale.len() {
            let idx = self.fleet.stale[i] as usize;
            self.fleet.slots[idx].stale = false;
            for c in 0..self.fleet.trees.len() {
                if c != uniform {
                    let v = self.scoring().leaf_value(c, idx);
                    self.fleet.trees[c].set(idx, v);
                }
            }
        }
        self.fleet.stale.clear();
    }

    /// Makes one decision for `set`: the tree when it applies, else an evaluated draw, as
    /// `mode` says. An evaluated draw fills the evaluation buffer; an arm with its own model
    /// always evaluates. `None`: nothing to draw from.
    pub(crate) fn draw<R: Rng + ?Sized>(
        &mut self,
        set: DrawSet<'_>,
        rng: &mut R,
        mode: DrawMode,
        arm: Option<usize>,
    ) -> Option<Pick> {
        let variant = arm
            .and_then(|a| self.arms.get(a))
            .and_then(|a| a.model.as_ref());
        if mode == DrawMode::Fast && variant.is_none() && self.tree_applies(set) {
            self.flush_stale();
            let (d, roll) = self.fleet.tree_draw(set.exclude, self.model, rng)?;
            // A roll in a score channel that found no weight among the free candidates, or
            // found only a candidate failing past hope, waits for a busy one with weight.
            if let Some(r) = roll {
                let scoring = self.scoring();
                if (r.empty || scoring.past_hope(d.idx as usize))
                    && scoring.busy_with_weight(set, None, &[r.channel])
                {
                    return Some(Pick::Wait);
                }
            }
            return Some(Pick::Drawn(d, DrawPath::Tree));
        }
        let detail = if mode == DrawMode::Record {
            Detail::FilterNotes
        } else {
            Detail::Probabilities
        };
        let (scoring, ev) = self.split();
        scoring.evaluate_with(variant, set, ev, detail);
        if ev.keys.is_empty() {
            return None;
        }
        let deterministic = variant
            .map(|m| m.config().deterministic)
            .unwrap_or(scoring.model.config().deterministic);
        // Some channel has no weight over the free candidates while a busy one has: a roll in
        // it waits (`hold`). Deterministic draws wait whenever that is so.
        let waits = ev.empty > 0.0 && scoring.busy_with_weight(set, variant, &ev.empty_channels);
        let reason = |ev: &Evaluation| {
            if !ev.fallbacks.is_empty() {
                DecisionReason::Fallback
            } else if ev.keys.len() == 1 {
                DecisionReason::OnlyChoice
            } else {
                DecisionReason::Draw
            }
        };
        let drawn = if deterministic {
            if waits {
                return Some(Pick::Wait);
            }
            most_probable(&scoring.fleet.slots, &ev.keys, &ev.probs).map(|j| Drawn {
                idx: ev.keys[j],
                probability: ev.probs[j],
                reason: DecisionReason::Deterministic,
                roll: None,
            })
        } else {
            let u: f64 = rng.random();
            let j = if waits {
                if u < ev.empty {
                    return Some(Pick::Wait);
                }
                // The rest of the roll picks as the weights do: what the empty channels spread
                // evenly over the set is taken off each candidate.
                let share = ev.empty / ev.keys.len() as f64;
                let weighted: Vec<f64> = ev.probs.iter().map(|p| p - share).collect();
                pick_linear_from(&weighted, u - ev.empty)
            } else {
                pick_linear(&ev.probs, u)
            };
            j.map(|j| Drawn {
                idx: ev.keys[j],
                probability: ev.probs[j],
                reason: reason(ev),
                roll: Some(u),
            })
        };
        if let Some(d) = &drawn {
            // A candidate failing past hope, picked, is the floor's probe as far as the floor
            // put it in the draw; the rest of its share waits for a busy candidate with weight.
            if scoring.past_hope(d.idx as usize)
                && scoring.busy_with_weight(set, variant, &scoring.score_channels(variant))
            {
                // Of its probability, what a roll past the empty channels' share (which
                // waited above) could give it: the floor's part probes, the rest waits.
                let n = ev.keys.len();
                let reached = d.probability - if waits { ev.empty / n as f64 } else { 0.0 };
                let probe = scoring.floor_share(variant, n);
                if deterministic || rng.random::<f64>() * reached >= probe {
                    return Some(Pick::Wait);
                }
            }
        }
        drawn.map(|d| Pick::Drawn(d, DrawPath::Evaluated))
    }
}
