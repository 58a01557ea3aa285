//! Live A/B arms and shadow policies over one set of candidates and statistics.
//!
//! An arm is a config that takes a share of requests: it draws with its own weights, mode,
//! exponent, floor and filters, over the statistics every arm shares. A request's arm is fixed
//! when it arrives, by its key when it has one (the same key always lands in the same arm), else
//! by a draw. A shadow takes no traffic: on a sampled share of decisions it evaluates the same
//! drawn set with the same roll and the coordinator notes whether it would have picked the same
//! candidate, and what probability it gave the live winner.

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use super::draw::{argmax_by_order, pick_linear};
use super::evaluate::{Detail, Evaluation};
use super::scoring::Scoring;
use super::select::DrawSet;
use super::Core;
use crate::decision::ShadowVerdict;
use crate::score::{Config, ScoreModel};

/// An arm at run time.
#[derive(Debug)]
pub(crate) struct ArmState {
    pub(crate) name: String,
    /// Upper end of this arm's slice of [0, 1).
    cum: f64,
    /// `None` when the arm draws exactly like the top-level config (it keeps the tree path).
    pub(crate) model: Option<ScoreModel>,
}

/// A shadow at run time.
#[derive(Debug)]
pub(crate) struct ShadowState {
    sample: f64,
    acc: f64,
    /// `None` when it draws exactly like the live config (it then sees the same cached scores).
    model: Option<ScoreModel>,
    stats: ShadowStats,
}

/// Sets what every arm and shadow that draws with a config of its own has in force: its floor,
/// from its own `floor` and `floor_period_s`, at the coordinator's decision rate over its `live`
/// candidates, and its `load.shed_relief` at the share of sheds the coordinator's requests
/// retried ([`ScoreModel::set_in_force`]).
pub(crate) fn set_in_force(
    arms: &mut [ArmState],
    shadows: &mut [ShadowState],
    decisions_per_s: f64,
    live: usize,
    shed_retried: f64,
) {
    let models = arms
        .iter_mut()
        .filter_map(|a| a.model.as_mut())
        .chain(shadows.iter_mut().filter_map(|s| s.model.as_mut()));
    for model in models {
        model.set_in_force(decisions_per_s, live, shed_retried);
    }
}

/// How a shadow policy did against the live choices it was asked about.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowStats {
    /// The shadow's name.
    pub name: String,
    /// Decisions it was asked about.
    pub sampled: u64,
    /// Of those, how many times it would have picked the live winner.
    pub agreed: u64,
    /// Sum over sampled decisions of the probability it gave the live winner.
    pub winner_probability_sum: f64,
}

impl ShadowStats {
    /// Share of sampled decisions where it agreed (0 before any).
    pub fn agreement(&self) -> f64 {
        if self.sampled == 0 {
            0.0
        } else {
            self.agreed as f64 / self.sampled as f64
        }
    }

    /// Mean probability it gave the live winner.
    pub fn mean_winner_probability(&self) -> f64 {
        if self.sampled == 0 {
            0.0
        } else {
            self.winner_probability_sum / self.sampled as f64
        }
    }
}

/// FNV-1a with a final mix: a stable hash, so a key maps to the same arm in every process and version.
fn key_point(key: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV's high bits are poorly mixed for short keys: finish with splitmix64's mixer.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Each arm's share of the requests, in `[0, 1]`, summing to 1.
pub(crate) fn shares(arms: &[ArmState]) -> impl Iterator<Item = f64> + '_ {
    arms.iter().scan(0.0, |before, a| {
        let share = a.cum - *before;
        *before = a.cum;
        Some(share)
    })
}

impl Core {
    /// Builds the arms and shadows of the config in force. Shadow counts restart.
    pub(crate) fn build_variants(&mut self) -> Result<(), crate::Error> {
        let config = self.model.config().clone();
        let total: f64 = config.arms.iter().map(|a| a.share).sum();
        let mut arms = Vec::with_capacity(config.arms.len());
        let mut cum = 0.0;
        for arm in &config.arms {
            cum += arm.share / total;
            let own = drawn_with(&arm.config, &config);
            let model = if own.draws_like(&config) {
                None
            } else {
                Some(ScoreModel::new(own)?)
            };
            arms.push(ArmState {
                name: arm.name.clone(),
                cum,
                model,
            });
        }
        if let Some(last) = arms.last_mut() {
            last.cum = 1.0;
        }
        let mut shadows = Vec::with_capacity(config.shadows.len());
        for s in &config.shadows {
            let own = drawn_with(&s.config, &config);
            shadows.push(ShadowState {
                sample: s.sample,
                acc: 0.0,
                model: if own.draws_like(&config) {
                    None
                } else {
                    Some(ScoreModel::new(own)?)
                },
                stats: ShadowStats {
                    name: s.name.clone(),
                    ..ShadowStats::default()
                },
            });
        }
        self.arms = arms;
        self.shadows = shadows;
        Ok(())
    }

    /// The arm of a new request: by its key when it has one, else by a draw.
    pub(crate) fn assign_arm<R: Rng + ?Sized>(&self, key: Option<&str>, rng: &mut R) -> u8 {
        match key {
            Some(k) => self.arm_of_key(k),
            None if self.arms.len() <= 1 => 0,
            None => self.arm_at(rng.random::<f64>()),
        }
    }

    /// The arm a request with key `key` lands in.
    pub(crate) fn arm_of_key(&self, key: &str) -> u8 {
        if self.arms.len() <= 1 {
            return 0;
        }
        self.arm_at(key_point(key))
    }

    /// The arm at point `u` in [0, 1) of the cumulative shares.
    fn arm_at(&self, u: f64) -> u8 {
        self.arms
            .iter()
            .position(|a| u < a.cum)
            .unwrap_or(self.arms.len() - 1) as u8
    }

    /// Which shadows look at this decision (a bit each), by deterministic accumulators.
    pub(crate) fn sample_shadows(&mut self) -> u64 {
        let mut mask = 0;
        for (i, s) in self.shadows.iter_mut().enumerate().take(64) {
            s.acc += s.sample;
            if s.acc >= 1.0 {
                s.acc -= 1.0;
                mask |= 1 << i;
            }
        }
        mask
    }

    /// After a reload: open requests keep their arm when an arm of that name still exists;
    /// the others are assigned again by share, at random (a request's key is not kept). An
    /// attempt in flight keeps the arm that drew it, under its new index, or none if that arm
    /// is gone.
    pub(crate) fn remap_arms<R: Rng + ?Sized>(&mut self, old: &[String], rng: &mut R) {
        let map: Vec<Option<u8>> = old
            .iter()
            .map(|name| {
                self.arms
                    .iter()
                    .position(|a| &a.name == name)
                    .map(|i| i as u8)
            })
            .collect();
        for a in self.attempts.iter_mut().filter(|a| a.active) {
            a.arm = a.arm.and_then(|i| map.get(i as usize).copied().flatten());
        }
        for i in 0..self.requests.len() {
            if !self.requests[i].active {
                continue;
            }
            let kept = map.get(self.requests[i].arm as usize).copied().flatten();
            let arm = match kept {
                Some(a) => a,
                None => self.assign_arm(None, rng),
            };
            self.requests[i].arm = arm;
        }
    }

    /// The arms' names, in config order (a grant's `arm` indexes this).
    pub fn arm_names(&self) -> Vec<&str> {
        self.arms.iter().map(|a| a.name.as_str()).collect()
    }

    /// An arm's name by index.
    pub fn arm_name(&self, arm: usize) -> Option<&str> {
        self.arms.get(arm).map(|a| a.name.as_str())
    }

    /// How each shadow policy has done since the config was last set.
    pub fn shadow_stats(&self) -> Vec<ShadowStats> {
        self.shadows.iter().map(|s| s.stats.clone()).collect()
    }
}

impl ShadowState {
    /// Asks each sampled shadow what it would pick from `set` with the live draw's roll.
    pub(crate) fn judge_shadows(
        shadows: &mut [ShadowState],
        scoring: Scoring<'_>,
        set: DrawSet<'_>,
        winner: u32,
        roll: Option<f64>,
        mask: u64,
    ) -> Vec<ShadowVerdict> {
        let mut ev = Evaluation::default();
        let mut verdicts = Vec::new();
        for i in 0..shadows.len().min(64) {
            if mask & (1 << i) == 0 {
                continue;
            }
            let model = shadows[i].model.as_ref();
            scoring.evaluate_with(model, set, &mut ev, Detail::Probabilities);
            let deterministic = model.unwrap_or(scoring.model).config().deterministic;
            let pick = if deterministic {
                let order: Vec<u64> = ev
                    .keys
                    .iter()
                    .map(|&k| scoring.fleet.slots[k as usize].added_seq)
                    .collect();
                argmax_by_order(&ev.probs, &order)
            } else {
                pick_linear(&ev.probs, roll.unwrap_or(0.5))
            };
            let choice = pick.map(|j| ev.keys[j]);
            let p_winner = ev
                .keys
                .iter()
                .position(|&k| k == winner)
                .map(|j| ev.probs[j])
                .unwrap_or(0.0);
            let agreed = choice == Some(winner);
            let verdict = ShadowVerdict {
                name: shadows[i].stats.name.clone(),
                choice: choice.map(|k| scoring.fleet.infos[k as usize].id.clone()),
                agreed,
                winner_probability: p_winner,
            };
            let st = &mut shadows[i].stats;
            st.sampled += 1;
            st.agreed += agreed as u64;
            st.winner_probability_sum += p_winner;
            verdicts.push(verdict);
        }
        verdicts
    }
}

/// An arm's or shadow's config without variants of its own (validation refuses nesting).
/// The config an arm or shadow draws with: its own `config`, with what is the top level's
/// (`docs/arms.md`) taken from `top`: how statistics are learned (`ema`, `window`: the
/// window's buckets and minimum are read when a draw scores them), what acts on attempts
/// and candidates (`deadline`, `adaptive`, `share`, the refresh, the ejection thresholds; the
/// arm's own `ejection.enabled` stays, for its draws), and no arms or shadows of its own.
fn drawn_with(own: &Config, top: &Config) -> Config {
    Config {
        arms: Vec::new(),
        shadows: Vec::new(),
        ema: top.ema.clone(),
        window: top.window.clone(),
        deadline: top.deadline.clone(),
        adaptive: top.adaptive.clone(),
        share: top.share.clone(),
        refresh_ms: top.refresh_ms,
        refresh_per_candidate_us: top.refresh_per_candidate_us,
        ejection: crate::score::EjectionConfig {
            enabled: own.ejection.enabled,
            ..top.ejection.clone()
        },
        ..own.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::{key_point, set_in_force, ArmState, ShadowState, ShadowStats};
    use crate::score::{Config, ScoreModel};

    #[test]
    fn arms_and_shadows_with_their_own_config_scale_their_own_floor() {
        let own = |floor: f64, period: f64| {
            let c = Config {
                exponent: 2.0,
                floor,
                floor_period_s: period,
                ..Config::default()
            };
            Some(ScoreModel::new(c).unwrap())
        };
        let mut arms = vec![
            ArmState {
                name: "scaled".into(),
                cum: 0.5,
                model: own(0.01, 10.0),
            },
            ArmState {
                name: "as-set".into(),
                cum: 1.0,
                model: own(0.01, 0.0),
            },
        ];
        let mut shadows = vec![ShadowState {
            sample: 1.0,
            acc: 0.0,
            model: own(0.2, 10.0),
            stats: ShadowStats::default(),
        }];
        // 30 decisions a second over 40 candidates.
        set_in_force(&mut arms, &mut shadows, 30.0, 40, 0.25);
        let floor = |m: &Option<ScoreModel>| m.as_ref().unwrap().floor();
        // A quarter of the sheds retried: a quarter of each config's relief.
        let relief = |m: &Option<ScoreModel>| m.as_ref().unwrap().shed_relief_in_force();
        assert_eq!(relief(&arms[0].model), 0.25);
        assert_eq!(relief(&shadows[0].model), 0.25);
        assert!((floor(&arms[0].model) - 0.01 * 0.075).abs() < 1e-12);
        assert_eq!(floor(&arms[1].model), 0.01);
        // 0.2 x 30 / 40 x 10 s = 1.5 tries per period: in force in full.
        assert_eq!(floor(&shadows[0].model), 0.2);
    }

    #[test]
    fn key_points_are_stable_and_spread() {
        assert_eq!(key_point("user-42"), key_point("user-42"));
        let below = (0..10_000)
            .filter(|i| key_point(&format!("k{i}")) < 0.5)
            .count();
        assert!((4_700..5_300).contains(&below), "{below}");
    }
}
