//! The presets that reproduce the original systems' scoring exactly: lassie's and Livepeer's.

use std::collections::BTreeMap;

use super::components::Weights;
use super::config::{
    AttemptTime, Config, EjectionConfig, EmaConfig, Mode, PerfConfig, PriceConfig, WindowConfig,
};
use super::deadline::DeadlineConfig;
use super::feedback::FeedbackConfig;
use super::last_attempt::LastAttemptConfig;
use super::load_gate::LoadConfig;
use super::share::ShareConfig;
use super::unseen::UnseenConfig;
use crate::limit::AdaptiveConfig;

impl Config {
    /// lassie's scoring, exactly: connect 1, ttfb 1, bandwidth 0.5, success 1, tags verified 3 and
    /// fast-retrieval 2; alpha 0.5, overall alpha 0.2 (their 0.8 old-value weight); weights drawn
    /// proportionally (exponent 1, no floor, no decay, no window, no ejection).
    pub fn lassie() -> Self {
        let mut tags = BTreeMap::new();
        tags.insert("verified".to_string(), 3.0);
        tags.insert("fast-retrieval".to_string(), 2.0);
        Config {
            weights: Weights {
                success: 1.0,
                connect: 1.0,
                ttfb: 1.0,
                bandwidth: 0.5,
                ..Weights::ZERO
            },
            tag_weights: tags,
            ..Self::original("lassie", Mode::Sum)
        }
    }

    /// Livepeer's probability selection with its defaults: stake 0.7, randomness 0.3, price 0
    /// (exp factor 100), a perf filter that falls back to all, a strict max price
    /// (`ignoreMaxPriceIfNeeded` false) when one is set.
    pub fn livepeer() -> Self {
        Config {
            weights: Weights {
                stake: 0.7,
                price: 0.0,
                uniform: 0.3,
                ..Weights::ZERO
            },
            price: PriceConfig {
                exp_factor: 100.0,
                max: None,
                ignore_max_if_none_pass: false,
            },
            ..Self::original("livepeer", Mode::Mixture)
        }
    }

    /// What both originals share: no weights or tags yet, weights drawn as they are (exponent
    /// 1, no time exponent, no floor), the load always counted, plain averages (alpha 0.5,
    /// overall alpha 0.2, the first sample replacing the prior; no decay, drift, pooling or
    /// probes), and none of the coordinator's later features (feedback, ejection, sharing,
    /// adaptive limits, last-attempt cost, deadline advice).
    fn original(preset: &str, mode: Mode) -> Self {
        Config {
            preset: Some(preset.into()),
            mode,
            weights: Weights::ZERO,
            tag_weights: BTreeMap::new(),
            exponent: 1.0,
            time_exponent: 0.0,
            load: LoadConfig::ALWAYS,
            feedback: FeedbackConfig::OFF,
            floor: 0.0,
            floor_period_s: 0.0,
            deterministic: false,
            ema: EmaConfig {
                alpha: 0.5,
                overall_alpha: 0.2,
                success_prior: 1.0,
                first_sample_replaces_prior: true,
                half_life_s: None,
                warm_up: false,
                drift: 0.0,
                pooling: false,
                probe_s: 0.0,
                heal_probes: false,
                record_probes: false,
                max_gain: 1.0,
                attempt_time: AttemptTime::FirstByte,
            },
            window: WindowConfig::default(),
            price: PriceConfig::default(),
            perf: PerfConfig::default(),
            ejection: EjectionConfig {
                enabled: false,
                ..EjectionConfig::default()
            },
            refresh_ms: 1000,
            refresh_per_candidate_us: 0.0,
            arms: Vec::new(),
            shadows: Vec::new(),
            share: ShareConfig::default(),
            adaptive: AdaptiveConfig::default(),
            unseen: UnseenConfig::AVERAGE,
            last_attempt: LastAttemptConfig::OFF,
            deadline: DeadlineConfig::OFF,
        }
    }
}
