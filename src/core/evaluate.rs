//! The evaluated path: the drawn set with every filter and fallback and each candidate's
//! probability, for subsets, fallbacks, deterministic mode, arms and decision records.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::decision::{ConsideredCandidate, Fallback, FilterNote};
use crate::score::{ChannelKind, ScoreModel};
use scoring::{ScoredAt, Scoring};

/// How much an evaluation writes down besides the probabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Detail {
    /// The drawn set, its probabilities and the fallbacks taken: what a draw needs.
    Probabilities,
    /// Also which candidates each filter removed and why, for a record or an explanation.
    FilterNotes,
}

/// Scratch space for an evaluated draw, reused across decisions.
#[derive(Debug, Default)]
pub(crate) struct Evaluation {
    pub(crate) keys: Vec<u32>,
    pub(crate) probs: Vec<f64>,
    /// Components per key, computed for an arm's or shadow's model (empty for the main one,
    /// whose components are cached in the slots).
    comps: Vec<Components>,
    values: Vec<f64>,
    totals: Vec<f64>,
    /// Each key's success average, read for a last attempt's draw.
    success: Vec<f64>,
    /// Each key's expected share of sheds at its next grant, read for a last attempt's draw.
    shed: Vec<f64>,
    pub(crate) filters: Vec<FilterNote>,
    pub(crate) fallbacks: Vec<Fallback>,
    /// Counts usable candidates at their in-flight limit too: a query of what a draw would
    /// give with a free slot everywhere ([`Core::preference`]), never a draw.
    pub(crate) any_load: bool,
    /// The score channels with no weight over the drawn set, and their mass: the share of a
    /// draw's roll that finds no candidate with weight among the free ones (see `hold`).
    pub(crate) empty_channels: Vec<usize>,
    pub(crate) empty: f64,
}

impl Evaluation {
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.probs.clear();
        self.comps.clear();
        self.values.clear();
        self.totals.clear();
        self.success.clear();
        self.shed.clear();
        self.filters.clear();
        self.fallbacks.clear();
        self.empty_channels.clear();
        self.empty = 0.0;
    }
}

impl Core {
    /// Computes the drawn set with every filter and fallback, and each candidate's probability.
    /// O(k) for a subset, O(n) for all. Fills `ev`, with filter notes as `detail` says.
    pub(crate) fn evaluate(&self, set: DrawSet<'_>, ev: &mut Evaluation, detail: Detail) {
        self.scoring().evaluate_with(None, set, ev, detail);
    }
}

impl Scoring<'_> {
    /// [`Core::evaluate`] with another model (an arm's or a shadow's): its weights, mode,
    /// exponent, floor and filters over the same candidates and statistics. A strict maximum
    /// price is the coordinator's own (top-level) rule; an arm's price limit always falls back.
    pub(crate) fn evaluate_with(
        &self,
        model: Option<&ScoreModel>,
        set: DrawSet<'_>,
        ev: &mut Evaluation,
        detail: Detail,
    ) {
        ev.clear();
        let push = |ev: &mut Evaluation, i: u32, s: &Slot| {
            let free = s.available || (ev.any_load && s.usable);
            if free && !Fleet::excluded(set.exclude, i, s.gen) && self.fleet.caps_ok(i, set.caps) {
                ev.keys.push(i);
            }
        };
        match set.eligible {
            Some(keys) => {
                for k in keys {
                    let s = &self.fleet.slots[k.idx as usize];
                    if s.gen == k.gen {
                        push(ev, k.idx, s);
                    }
                }
            }
            None => {
                for (i, s) in self.fleet.slots.iter().enumerate() {
                    push(ev, i as u32, s);
                }
            }
        }
        let variant = model.is_some();
        let m = model.unwrap_or(self.model);
        let cfg = m.config();
        if detail == Detail::FilterNotes && !variant && !cfg.price.ignore_max_if_none_pass {
            if let Some(max) = cfg.price.max {
                // A strict maximum price makes candidates unusable outright, so they never reach
                // the filters below; a record still says who was removed and why.
                self.note_strict_price(set, ev, max);
            }
        }
        if ev.keys.is_empty() {
            return;
        }
        if let Some(min) = cfg.perf.active_min() {
            let why = format!(
                "perf score{} below {min}",
                cfg.perf
                    .region
                    .as_ref()
                    .map(|r| format!(" in {r}"))
                    .unwrap_or_default(),
            );
            self.apply_filter(
                ev,
                detail,
                "perf",
                why,
                "none passed: all candidates kept",
                |i| {
                    if variant {
                        cfg.perf.passes(&self.fleet.infos[i].perf_scores)
                    } else {
                        self.fleet.slots[i].perf_ok
                    }
                },
            );
        }
        if cfg.price.max.is_some() {
            let why = format!("price above {}", cfg.price.max.unwrap_or_default());
            self.apply_filter(
                ev,
                detail,
                "price",
                why,
                "none under the maximum price: limit ignored",
                |i| {
                    if variant {
                        cfg.price
                            .max
                            .is_none_or(|max| self.fleet.infos[i].price <= max)
                    } else {
                        self.fleet.slots[i].price_ok
                    }
                },
            );
        }
        if cfg.ejection.enabled {
            self.apply_filter(
                ev,
                detail,
                "ejection",
                "ejected after consecutive failures".into(),
                "all ejected: ejection ignored",
                |i| !self.fleet.slots[i].ejected,
            );
        }
        if variant {
            for &i in &ev.keys {
                let s = &self.fleet.slots[i as usize];
                let fixed = m.fixed(&self.fleet.infos[i as usize]);
                let c = m.components(
                    &fixed,
                    &s.stats.unpack(),
                    &self.score_context(i as usize, ScoredAt::Rest),
                );
                ev.comps.push(c);
            }
        }
        // Channel values and totals over the drawn set.
        let channels = m.channels();
        let uniform = m.uniform_channel();
        let nc = channels.len();
        ev.totals.resize(nc, 0.0);
        let (last, last_shed) = if set.last {
            let shed = self
                .pool
                .shedding
                .then(|| m.shed_rate(self.pool.queueing))
                .flatten();
            (m.last_attempt_rate(), shed)
        } else {
            (None, None)
        };
        for (j, &i) in ev.keys.iter().enumerate() {
            let own;
            let comps = if variant {
                &ev.comps[j]
            } else {
                own = self.components_of(i as usize);
                &own
            };
            for (c, ch) in channels.iter().enumerate() {
                let v = if c == uniform {
                    1.0
                } else {
                    m.channel_value(ch.kind, comps)
                };
                ev.values.push(v);
                ev.totals[c] += v;
            }
            if last.is_some() {
                let weight = m.success_weight(self.fleet.slots[i as usize].stats.attempts());
                ev.success
                    .push(self.pool.shrunk_success(comps.success, weight));
            }
            if last_shed.is_some() {
                ev.shed.push(self.shed_next(i as usize));
            }
        }
        // The channels without weight over the free candidates, as the scores give them (a
        // last attempt's odds below only reweigh a draw).
        for (c, ch) in channels.iter().enumerate() {
            if c != uniform && ev.totals[c] <= 0.0 && ch.mass > 0.0 {
                ev.empty += ch.mass;
                ev.empty_channels.push(c);
            }
        }
        let mut empty = ev.empty;
        if last.is_some() || last_shed.is_some() {
            Self::weigh_last_attempt(ev, last, last_shed, nc, uniform);
            // The odds may have emptied a channel: its mass is spread evenly as well.
            empty = 0.0;
            for (c, ch) in channels.iter().enumerate() {
                if c != uniform && ev.totals[c] <= 0.0 {
                    empty += ch.mass;
                }
            }
        }
        let n = ev.keys.len() as f64;
        for j in 0..ev.keys.len() {
            let mut p = empty / n;
            for (c, ch) in channels.iter().enumerate() {
                if c == uniform {
                    p += ch.mass / n;
                } else if ev.totals[c] > 0.0 {
                    p += ch.mass * ev.values[j * nc + c] / ev.totals[c];
                }
            }
            ev.probs.push(p);
        }
        // A sole candidate is drawn for certain, but `mass * value / total` with the value its
        // own total need not give the mass back to the last bit (0.9999999999999999 for some
        // values), so say it exactly: a record, `explain` and the probability gauge read 1. The
        // draw is the same either way (it picks among the positive weights).
        if let [p] = ev.probs.as_mut_slice() {
            *p = 1.0;
        }
    }

    /// A last attempt's draw: every weight but the floor's multiplied by
    /// [`ScoreModel::last_attempt_factor`] against the best success average in the set (with
    /// `rate`) and by [`ScoreModel::shed_factor`] (with `shed_rate`), and the channel totals
    /// taken again. Out of line: most draws are not a last attempt's.
    #[cold]
    #[inline(never)]
    fn weigh_last_attempt(
        ev: &mut Evaluation,
        rate: Option<f64>,
        shed_rate: Option<f64>,
        nc: usize,
        uniform: usize,
    ) {
        let best = ev.success.iter().copied().fold(0.0, f64::max);
        ev.totals.iter_mut().for_each(|t| *t = 0.0);
        for j in 0..ev.keys.len() {
            let mut f = 1.0;
            if let (Some(rate), Some(&s)) = (rate, ev.success.get(j)) {
                f *= ScoreModel::last_attempt_factor(rate, s, best);
            }
            if let (Some(rate), Some(&p)) = (shed_rate, ev.shed.get(j)) {
                f *= ScoreModel::shed_factor(rate, p);
            }
            for c in 0..nc {
                let v = &mut ev.values[j * nc + c];
                if c != uniform {
                    *v *= f;
                }
                ev.totals[c] += *v;
            }
        }
    }

    pub(super) fn note_strict_price(&self, set: DrawSet<'_>, ev: &mut Evaluation, max: f64) {
        let eligible = |i: u32, s: &Slot| {
            s.live
                && !s.price_ok
                && !Fleet::excluded(set.exclude, i, s.gen)
                && self.fleet.caps_ok(i, set.caps)
        };
        let removed: Vec<_> = self
            .fleet
            .in_reach(set)
            .filter(|&(i, s)| eligible(i, s))
            .map(|(i, _)| self.fleet.infos[i as usize].id.clone())
            .collect();
        if !removed.is_empty() {
            ev.filters.push(FilterNote {
                filter: "price".to_string(),
                removed,
                why: format!("price above {max} (strict: ignore_max_if_none_pass = false)"),
            });
        }
    }

    pub(super) fn apply_filter(
        &self,
        ev: &mut Evaluation,
        detail: Detail,
        name: &str,
        why: String,
        fallback: &str,
        pass: impl Fn(usize) -> bool,
    ) {
        let passing = ev.keys.iter().filter(|&&i| pass(i as usize)).count();
        if passing == ev.keys.len() {
            return;
        }
        if passing == 0 {
            ev.fallbacks.push(Fallback {
                filter: name.to_string(),
                action: fallback.to_string(),
            });
            return;
        }
        if detail == Detail::FilterNotes {
            let removed = ev
                .keys
                .iter()
                .filter(|&&i| !pass(i as usize))
                .map(|&i| self.fleet.infos[i as usize].id.clone())
                .collect();
            ev.filters.push(FilterNote {
                filter: name.to_string(),
                removed,
                why,
            });
        }
        ev.keys.retain(|&i| pass(i as usize));
    }

    /// [`Core::considered`] for an evaluation made with another model.
    pub(crate) fn considered_with(
        &self,
        model: Option<&ScoreModel>,
        ev: &Evaluation,
    ) -> Vec<ConsideredCandidate> {
        let m = model.unwrap_or(self.model);
        let nc = m.channels().len();
        let sum_mode = matches!(m.channels()[0].kind, ChannelKind::SumScore);
        ev.keys
            .iter()
            .zip(&ev.probs)
            .enumerate()
            .map(|(j, (&i, &p))| {
                let comps = ev
                    .comps
                    .get(j)
                    .copied()
                    .unwrap_or_else(|| self.components_of(i as usize));
                let score = m.score(&comps);
                let weight = if sum_mode { ev.values[j * nc] } else { p };
                ConsideredCandidate {
                    id: self.fleet.infos[i as usize].id.clone(),
                    components: comps,
                    score,
                    weight,
                    probability: p,
                    limit: {
                        let l = self.limit_of(&self.fleet.slots[i as usize]);
                        (l != UNLIMITED).then_some(l)
                    },
                    deadline_ms: self.deadline_ms(i as usize, true),
                }
            })
            .collect()
    }
}
