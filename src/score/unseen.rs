//! What the draw assumes of a candidate it has never or rarely sampled (`[unseen]`).
//!
//! Without a sample, a candidate's time per success is unknown. Scoring it as the average
//! attempt of the moment (what the fleet's traffic, drawn to the best candidates, currently
//! costs) is an optimistic guess: on a large fleet most candidates of each request's subset
//! are unknown, and each draws about as much as the best known one, so the coordinator keeps
//! sampling the population at random. With `unseen.prior = "pooled"` an unknown candidate is
//! instead scored at what the sampled candidates are worth on average: the pooled center of
//! their `ln(time per success)` (the same empirical-Bayes pool that shrinks rarely sampled
//! candidates toward it, [`super::ScoreModel::pooled_deviation`]), less `optimism` standard
//! deviations of the spread the candidates really show. A known good candidate then wins over
//! the unknown ones beside it, and an unknown one still wins over a known bad one.
//!
//! With either prior, a **sampled** candidate gains `optimism` standard deviations of what
//! pooling leaves uncertain of its estimate (optimism in the face of uncertainty): a candidate
//! sampled once or twice, or one whose estimate has just moved on a change (a healed server's
//! first answers after a bad spell), draws a little more than its expected value alone would
//! give it, so the samples that settle it come sooner, and the bonus fades as they come. A
//! busy candidate's estimate is sure, and it gains next to nothing.

use serde::{Deserialize, Serialize};

use super::{ScoreContext, ScoreModel};

/// What an unsampled candidate's time per success is taken to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnseenPrior {
    /// The average attempt of the moment (the all-candidate average of attempt times): as good
    /// as what the traffic costs now.
    Average,
    /// The pooled center of the sampled candidates' times per success (on a log scale), less
    /// `optimism` standard deviations of their spread. Needs `ema.pooling` (and `ema.drift`
    /// above 0); without it the prior is `average`.
    Pooled,
}

/// How candidates never or rarely sampled are scored; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnseenConfig {
    /// What an unsampled candidate's time per success is taken to be.
    pub prior: UnseenPrior,
    /// How many standard deviations of what is still unknown of a candidate's time per
    /// success (log scale) count in its favour. A sampled candidate is unknown by its pooled
    /// estimate's remaining uncertainty, which shrinks with its samples (with either prior;
    /// needs `ema.pooling`); with `prior = "pooled"` an unsampled one is unknown by the
    /// candidates' whole spread. At least 0; 0 (the default) scores each at its expected
    /// value.
    pub optimism: f64,
}

impl Default for UnseenConfig {
    fn default() -> Self {
        super::Config::default().unseen
    }
}

impl UnseenConfig {
    /// An unsampled candidate is as good as the average attempt, and every candidate is scored
    /// at its expected value (the default; lassie, Livepeer).
    pub const AVERAGE: UnseenConfig = UnseenConfig {
        prior: UnseenPrior::Average,
        optimism: 0.0,
    };
}

impl ScoreModel {
    /// Whether unsampled candidates take the pooled prior.
    #[inline]
    pub(crate) fn pooled_prior(&self) -> bool {
        self.config.unseen.prior == UnseenPrior::Pooled && self.pooling()
    }

    /// With the pooled prior: the time per success an unsampled candidate is drawn at, ms;
    /// `None` (scored as average) before a refresh has found a center or without the prior.
    pub(crate) fn unseen_per_success(&self, ctx: &ScoreContext) -> Option<f64> {
        if !self.pooled_prior() || !ctx.center.is_finite() {
            return None;
        }
        let ln = ctx.center - self.config.unseen.optimism * ctx.spread.max(0.0).sqrt();
        let ps = ln.exp();
        (ps.is_finite() && ps > 0.0).then_some(ps)
    }

    /// What a sampled candidate's pooled `ln(time per success)` gains from what remains
    /// unknown of it: `optimism` times the standard deviation of the pooled estimate,
    /// `keep * var` (`keep` the share of its own deviation pooling keeps, `var` its
    /// estimate's variance), with either prior.
    #[inline]
    pub(crate) fn uncertainty_bonus(&self, keep: f64, var: f64) -> f64 {
        if self.config.unseen.optimism <= 0.0 {
            return 0.0;
        }
        let v = (keep * var).max(0.0);
        if v.is_finite() {
            self.config.unseen.optimism * v.sqrt()
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::{Config, Overall, Stats};
    use crate::vocab::CandidateInfo;

    fn ctx(center: f64, spread: f64) -> ScoreContext {
        ScoreContext {
            spread,
            center,
            ..crate::score::tests::ctx(Overall {
                attempt_ms: Some(100.0),
                ..Overall::default()
            })
        }
    }

    fn time(config: Config, stats: &Stats, ctx: &ScoreContext) -> f64 {
        let m = ScoreModel::new(config).expect("valid config");
        m.components(&m.fixed(&CandidateInfo::new("a")), stats, ctx)
            .time_to_success
    }

    fn with(prior: UnseenPrior, optimism: f64) -> Config {
        Config {
            unseen: UnseenConfig { prior, optimism },
            ..Config::default()
        }
    }

    /// Two candidates at the center (100 ms, with `ctx(100f64.ln(), _)`) by their estimates,
    /// one sure of it, one not.
    fn sure_and_unsure() -> (Stats, Stats) {
        let sure = Stats {
            attempt_ms: Some(100.0),
            success: Some(1.0),
            attempt_var: 0.0,
            ..Stats::default()
        };
        let unsure = Stats {
            attempt_var: 0.25,
            ..sure.clone()
        };
        (sure, unsure)
    }

    #[test]
    fn an_unsampled_candidate_is_worth_the_pooled_center() {
        // The sampled candidates take 200 ms per success on (geometric) average; the average
        // attempt is 100 ms.
        let c = ctx(200f64.ln(), 0.25);
        let unknown = Stats::default();
        let pooled = time(with(UnseenPrior::Pooled, 0.0), &unknown, &c);
        assert!((pooled - (-2.0f64).exp()).abs() < 1e-12, "{pooled}");
        // Optimism: one standard deviation of the spread (0.5 on the log scale) in its favour.
        let hopeful = time(with(UnseenPrior::Pooled, 1.0), &unknown, &c);
        let expected = (-(200f64.ln() - 0.5).exp() / 100.0).exp();
        assert!((hopeful - expected).abs() < 1e-12, "{hopeful}");
        // "average": as good as the average attempt, whatever the others are worth.
        let average = time(with(UnseenPrior::Average, 0.0), &unknown, &c);
        assert!((average - (-1.0f64).exp()).abs() < 1e-12, "{average}");
        // Before a refresh has found a center, the pooled prior falls back to the average.
        let early = time(
            with(UnseenPrior::Pooled, 0.0),
            &unknown,
            &ctx(f64::NAN, 0.0),
        );
        assert!((early - (-1.0f64).exp()).abs() < 1e-12, "{early}");
    }

    #[test]
    fn optimism_favours_the_uncertain_sampled_candidate_only() {
        let c = ctx(100f64.ln(), 0.25);
        let (sure, unsure) = sure_and_unsure();
        let calm = with(UnseenPrior::Pooled, 0.0);
        assert_eq!(time(calm.clone(), &sure, &c), time(calm, &unsure, &c));
        let hopeful = with(UnseenPrior::Pooled, 1.0);
        assert_eq!(
            time(hopeful.clone(), &sure, &c),
            (-1.0f64).exp(),
            "nothing unknown, no bonus"
        );
        assert!(time(hopeful.clone(), &unsure, &c) > time(hopeful, &sure, &c));
    }

    #[test]
    fn with_the_average_prior_optimism_favours_uncertain_sampled_candidates_too() {
        let c = ctx(100f64.ln(), 0.25);
        let (sure, unsure) = sure_and_unsure();
        let hopeful = with(UnseenPrior::Average, 0.5);
        assert_eq!(time(hopeful.clone(), &sure, &c), (-1.0f64).exp());
        // Pooling keeps 0.25 / (0.25 + 0.25) of the deviation; the bonus is half a standard
        // deviation of what remains: 0.5 * sqrt(0.5 * 0.25) on the log scale.
        let bonus = 0.5 * (0.5f64 * 0.25).sqrt();
        let expected = (-(100f64.ln() - bonus).exp() / 100.0).exp();
        let got = time(hopeful.clone(), &unsure, &c);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
        // An unsampled candidate is still scored at the average attempt.
        assert_eq!(time(hopeful, &Stats::default(), &c), (-1.0f64).exp());
        // The default scores every candidate at its expected value.
        assert_eq!(Config::default().unseen, UnseenConfig::AVERAGE);
    }

    #[test]
    fn a_negative_optimism_is_refused() {
        let bad = with(UnseenPrior::Pooled, -1.0);
        let err = bad.validate().expect_err("negative optimism");
        assert!(err.to_string().contains("unseen.optimism"), "{err}");
    }
}
