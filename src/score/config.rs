//! The scoring config: fields, defaults, and validation that reports every problem
//! with its field path. The presets are in `presets.rs`; parsing and overlaying them, `load.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::components::Weights;
use super::deadline::DeadlineConfig;
use super::feedback::FeedbackConfig;
use super::last_attempt::LastAttemptConfig;
use super::load_gate::LoadConfig;
use super::share::ShareConfig;
use super::stats::WINDOW_RING;
use super::unseen::UnseenConfig;
use crate::error::{ConfigError, Problem};
use crate::limit::AdaptiveConfig;

/// How component scores become a draw probability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// lassie: weight = (sum over k of w_k * c_k) ^ exponent; probability proportional to weight.
    #[default]
    Sum,
    /// Livepeer: p = sum over k of w_k * c_k / (sum of c_k over the drawn set).
    Mixture,
}

impl Default for Weights {
    fn default() -> Self {
        Config::default().weights
    }
}

/// Exponential moving averages. Alpha is always the weight of the newest sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmaConfig {
    /// Per-candidate alpha (lassie 0.5).
    pub alpha: f64,
    /// All-candidate alpha (lassie's "0.8" is the old-value weight, so 0.2 here).
    pub overall_alpha: f64,
    /// The success EMA of a candidate never tried (optimistic: 1.0), and the value statistics
    /// decay toward.
    pub success_prior: f64,
    /// `false`: the prior counts as the value before the first sample, so one failure moves the
    /// success EMA from the prior by `alpha` only. `true` (lassie): the first sample replaces
    /// the prior outright.
    pub first_sample_replaces_prior: bool,
    /// Statistics without fresh samples decay toward the prior with this half-life, seconds.
    /// `None` keeps them forever (lassie).
    pub half_life_s: Option<f64>,
    /// `true`: a candidate's first samples are averaged evenly (the n-th weighs `1 / (n + 1)`,
    /// the success prior counting as one sample) until that weight falls to `alpha`, so a low
    /// alpha's steadiness costs no slow start. `false`: every sample weighs `alpha`.
    pub warm_up: bool,
    /// Evidence that ages: how far a candidate's true attempt time may wander, as a share of
    /// itself per square root of a second. Set, the attempt-time estimate is a Kalman filter
    /// (a new sample weighs more the older and less certain the estimate is, and a surprise
    /// makes the next sample weigh nearly everything), and the filter's gain is the least
    /// weight a sample gets in the candidate's other averages. 0: fixed-weight EMAs
    /// (lassie, Livepeer).
    pub drift: f64,
    /// With `drift` set: pool the candidates' time estimates (empirical Bayes). Each
    /// candidate's relative time is shrunk toward the average by its uncertainty against the
    /// spread the candidates really show, so candidates whose differences are within noise
    /// draw alike instead of herding on whichever looked fastest last.
    pub pooling: bool,
    /// With `drift` set: a candidate not sampled for this many seconds and idle is drawn as if
    /// its time were average until a try of it is granted, so a shunned candidate is probed
    /// about once per period however small its share (a healed one is seen soon). The
    /// period stretches on large fleets so scheduled probes stay within 1 % of the draws.
    /// 0: no scheduled probes (the floor still probes).
    pub probe_s: f64,
    /// With `drift` and `probe_s` set: when a failing candidate (success average below 0.3
    /// after three or more failures in a row) answers, every other failing candidate is
    /// probed at once instead of at its next scheduled probe. Failures that come together
    /// (a partition, a shared dependency) tend to heal together.
    pub heal_probes: bool,
    /// With `drift` and `probe_s` set: candidates with a good record (at least 10 attempts,
    /// 80 % or more of them successes) that have gone idle share a probe budget of their own,
    /// 1 % of the draws, so each is probed about every `idle ones / (1 % of the draws per
    /// second)` seconds (at least `probe_s`) instead of at the fleet-wide period. A server
    /// that served well and then went quiet is the one worth returning to; in a small fleet
    /// with one server shunned it is probed every second or two, not every ten.
    pub record_probes: bool,
    /// With `drift` set: the most weight a sample that is not a change gets in the
    /// attempt-time filter (and so, at half of it, in the other averages), in (0, 1]. The
    /// filter's variance grows with the time since the last sample; below 1 it stops growing
    /// where a sample would weigh this much, so a candidate sampled once a minute (a client
    /// with little traffic per candidate) still averages several samples instead of taking the
    /// last one for the truth. Changes (two surprises in a row, a fast answer, an answer after
    /// failures, the lag test) weigh as the capped variance says. Pooling reads the capped
    /// variance too and trusts such estimates more, which herds identical heavy-tailed
    /// candidates. 1: no cap. Default 1 (`docs/tuning.md`, "Evidence that ages by time, at
    /// low traffic").
    pub max_gain: f64,
    /// Where an attempt's time ends for `time_to_success` and the attempt-time filter: at a
    /// success's first byte (the default) or at its completion. Failures count to their end
    /// either way.
    pub attempt_time: AttemptTime,
}

/// Where a successful attempt's time ends, as `time_to_success` counts it
/// ([`EmaConfig::attempt_time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AttemptTime {
    /// At the first byte (`Success::ttfb_ms`, else the whole attempt): the wait before data
    /// flows, what request-response callers and streaming retrievals feel. The default.
    #[default]
    FirstByte,
    /// At completion (`Success::duration_ms`, else the attempt as the core timed it, grant to
    /// report): the whole transfer. For bulk downloads from candidates whose bandwidth
    /// differs, where a quick first byte followed by a slow transfer is the slower choice.
    /// An attempt that has reported its first byte still counts as running until it ends.
    Completion,
}

impl Default for EmaConfig {
    fn default() -> Self {
        Config::default().ema
    }
}

/// The bucketed overload-error window (MongoDB's proposal: 10 buckets of 1 s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowConfig {
    /// Number of buckets (1 to 16).
    pub buckets: u32,
    /// Bucket width, seconds.
    pub bucket_s: f64,
    /// No effect until this many samples are in the window.
    pub min_samples: u32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            buckets: 10,
            bucket_s: 1.0,
            min_samples: 10,
        }
    }
}

/// Price scoring and the maximum-price filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PriceConfig {
    /// The price component is exp(-price / exp_factor) (Livepeer: 100).
    pub exp_factor: f64,
    /// Candidates above this price are filtered out.
    pub max: Option<f64>,
    /// When no candidate is under `max`, ignore the filter (and say so) instead of refusing.
    pub ignore_max_if_none_pass: bool,
}

impl Default for PriceConfig {
    fn default() -> Self {
        PriceConfig {
            exp_factor: 100.0,
            max: None,
            ignore_max_if_none_pass: true,
        }
    }
}

/// The minimum-perf-score filter (Livepeer): none pass means all pass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerfConfig {
    /// The region whose score is checked.
    pub region: Option<String>,
    /// Candidates scoring below this in the region are filtered out. `None` or 0 switches the
    /// filter off (as Livepeer's `-minPerfScore 0`); a negative value is refused.
    pub min_score: Option<f64>,
}

impl PerfConfig {
    /// The minimum score when the filter is on.
    pub fn active_min(&self) -> Option<f64> {
        self.min_score.filter(|m| *m > 0.0)
    }

    /// Whether a candidate with these perf scores passes the filter (true when it is off).
    pub fn passes(&self, scores: &BTreeMap<String, f64>) -> bool {
        match (&self.region, self.active_min()) {
            (Some(region), Some(min)) => scores.get(region).is_some_and(|s| *s >= min),
            (None, Some(min)) => scores.values().any(|s| *s >= min),
            _ => true,
        }
    }
}

/// Outlier ejection (Envoy style).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EjectionConfig {
    /// Whether ejection runs at all.
    pub enabled: bool,
    /// Consecutive failures (overload, timeout, transport, refused) that eject a candidate.
    pub consecutive_failures: u32,
    /// First ejection, seconds; the n-th ejection lasts n times this.
    pub base_s: f64,
    /// The longest ejection, seconds.
    pub max_s: f64,
    /// Never eject more than this share of candidates (0 to 1).
    pub max_share: f64,
}

impl Default for EjectionConfig {
    fn default() -> Self {
        EjectionConfig {
            enabled: false,
            consecutive_failures: 5,
            base_s: 30.0,
            max_s: 300.0,
            max_share: 0.5,
        }
    }
}

/// The scoring model's whole configuration.
///
/// Load it from TOML or JSON ([`Config::from_toml_str`], [`Config::from_json_str`],
/// [`Config::load`]); a file may start from a preset with `preset = "lassie"` and override
/// fields. Every documented field is listed in `docs/config.toml`.
///
/// The derived serde `Deserialize` maps fields only: it does not apply `preset` and checks no
/// value (the coordinator still refuses an invalid config when it is handed one). In a
/// document of your own, read it with
/// `#[serde(deserialize_with = "Config::deserialize_with_presets")]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The preset this config started from (informational once loaded).
    pub preset: Option<String>,
    /// How components combine.
    pub mode: Mode,
    /// Component weights.
    pub weights: Weights,
    /// Extra score per tag the candidate has, e.g. `verified = 3`.
    pub tag_weights: BTreeMap<String, f64>,
    /// The score is raised to this power before drawing (sharpening; 1 = off).
    pub exponent: f64,
    /// Sum mode: the weight is also multiplied by `time_to_success ^ time_exponent`, i.e.
    /// `exp(-time_exponent * r)` with `r` the expected time to a success against the average
    /// (0 = off). Ignored in mixture mode.
    pub time_exponent: f64,
    /// Which candidates the load component applies to.
    pub load: LoadConfig,
    /// How what servers report with their responses (queue, service time) weighs.
    pub feedback: FeedbackConfig,
    /// Every candidate in the drawn set gets at least `floor / n` probability (0 to 1): a shunned
    /// candidate is still probed and can recover. How much of it is in force follows
    /// [`Config::floor_period_s`] ([`crate::Core::floor_in_force`]).
    pub floor: f64,
    /// The floor is spent in full only where it tries each candidate at least once per this
    /// many seconds (`floor` x decisions per second / live candidates); below that it shrinks
    /// in proportion (seconds, at least 0; 0 = the floor as set, always).
    pub floor_period_s: f64,
    /// Pick the most probable candidate instead of drawing (ties: the earliest added).
    pub deterministic: bool,
    /// Moving averages.
    pub ema: EmaConfig,
    /// Overload error window.
    pub window: WindowConfig,
    /// Price scoring and filter.
    pub price: PriceConfig,
    /// Perf-score filter.
    pub perf: PerfConfig,
    /// Outlier ejection.
    pub ejection: EjectionConfig,
    /// How often every candidate's cached score is refreshed (windows forget, statistics decay,
    /// all-candidate averages move, attempts still running age), milliseconds: the shortest
    /// period, which [`Config::refresh_per_candidate_us`] stretches for a settled large fleet
    /// (whose attempts still running are checked this often all the same).
    pub refresh_ms: u64,
    /// A settled fleet's refresh period is at least this many microseconds per live candidate
    /// (with 200: 100 ms up to 500 candidates, 2 s at 10,000); after a change of the
    /// candidates or the config it starts at `refresh_ms` and doubles at each refresh up to
    /// that. 0: every `refresh_ms` whatever the fleet.
    pub refresh_per_candidate_us: f64,
    /// Live A/B arms: each request is assigned one by share (sticky by its key) and drawn with
    /// that arm's weights and filters; all arms share the learned statistics. Empty: one policy.
    pub arms: Vec<Arm>,
    /// Shadow policies: they never grant; on a sampled share of decisions they compute what they
    /// would have chosen, and the coordinator records their agreement with the live choice.
    pub shadows: Vec<Shadow>,
    /// How evidence from other coordinators (digests) is merged as a prior; see
    /// [`ShareConfig`].
    pub share: ShareConfig,
    /// Adaptive per-candidate concurrency limits (off by default).
    pub adaptive: AdaptiveConfig,
    /// How candidates never or rarely sampled are scored.
    pub unseen: UnseenConfig,
    /// How the last attempt of a request with a known number of attempts is drawn.
    pub last_attempt: LastAttemptConfig,
    /// The deadline advice grants carry ([`DeadlineConfig`]).
    pub deadline: DeadlineConfig,
}

/// A named policy variant that takes a share of live traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Its name (a metric label).
    pub name: String,
    /// Its share of requests (shares are relative: 1 and 1 is 50/50).
    pub share: f64,
    /// How it draws: weights, mode, exponent, floor, filters. Statistics are learned once, with
    /// the top-level config's averages and window, and shared by every arm.
    pub config: Config,
}

/// A named policy variant judged on live traffic without taking any.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shadow {
    /// Its name.
    pub name: String,
    /// The share of decisions it is asked about, in (0, 1].
    pub sample: f64,
    /// How it would draw.
    pub config: Config,
}

impl Default for Config {
    /// The project's own default, tuned in the simulator (see `docs/tuning.md`): the expected
    /// time to a success (failures included) ranks candidates as a factor `exp(-14 r)` of the
    /// weight; the overload window and success keep traffic off a candidate that fails fast;
    /// load spreads work, but only over candidates that have answered "overloaded" (or are
    /// still unknown); exponent 24 turns a clear score gap into a near-certain choice; stake,
    /// price and tags are off until a deployment weighs them. The 1% floor keeps probing a
    /// shunned candidate so it can recover; statistics start as plain averages and settle
    /// into EMAs of alpha 0.1, without decay. Servers that report their queue and service time
    /// with each response ([`crate::ServerFeedback`]) are drawn by their expected completion
    /// as well, a factor `exp(3 (1 - r))`.
    fn default() -> Self {
        Config {
            preset: None,
            mode: Mode::Sum,
            weights: Weights {
                success: 2.0,
                connect: 0.0,
                ttfb: 1.0,
                bandwidth: 0.0,
                overload: 6.0,
                load: 16.0,
                stake: 0.0,
                price: 0.0,
                uniform: 0.0,
                time_to_success: 0.0,
                feedback: 0.0,
            },
            tag_weights: BTreeMap::new(),
            exponent: 24.0,
            time_exponent: 14.0,
            load: LoadConfig::DEFAULT,
            feedback: FeedbackConfig::default(),
            floor: 0.01,
            floor_period_s: 10.0,
            deterministic: false,
            ema: EmaConfig {
                alpha: 0.1,
                overall_alpha: 0.2,
                success_prior: 1.0,
                first_sample_replaces_prior: false,
                half_life_s: None,
                warm_up: true,
                drift: 0.1,
                pooling: true,
                probe_s: 1.0,
                heal_probes: true,
                record_probes: true,
                max_gain: 1.0,
                attempt_time: AttemptTime::FirstByte,
            },
            window: WindowConfig::default(),
            price: PriceConfig::default(),
            perf: PerfConfig::default(),
            ejection: EjectionConfig::default(),
            refresh_ms: 100,
            refresh_per_candidate_us: 200.0,
            arms: Vec::new(),
            shadows: Vec::new(),
            share: ShareConfig::default(),
            adaptive: AdaptiveConfig::default(),
            unseen: UnseenConfig::AVERAGE,
            last_attempt: LastAttemptConfig::DEFAULT,
            deadline: DeadlineConfig::DEFAULT,
        }
    }
}

/// The largest natural log a draw weight may reach ([`Config::validate`]): below
/// `ln(f64::MAX)` (709.8) with room for summing a million of them.
const MAX_LOG_WEIGHT: f64 = 690.0;

impl Config {
    /// Sum mode: the draw weight of a candidate with every component at its best and an
    /// average time per success must stay above what a float holds, or every weight is 0 and
    /// the draw silently turns uniform (tiny weights, or a huge `time_exponent`).
    fn check_underflow(&self, total: f64, problems: &mut Vec<Problem>) {
        let exponents = [self.exponent, self.time_exponent];
        if self.mode != Mode::Sum
            || !(total.is_finite() && total > 0.0)
            || !exponents.iter().all(|e| e.is_finite() && *e >= 0.0)
        {
            return;
        }
        let from_weights = self.exponent * total.ln();
        let log_best = from_weights - self.time_exponent;
        if log_best >= -MAX_LOG_WEIGHT {
            return;
        }
        let (path, fix) = if self.time_exponent > -from_weights {
            ("time_exponent", "lower time_exponent")
        } else {
            ("weights", "scale the weights up (only their ratios matter)")
        };
        problems.push(Problem::new(
            path,
            format!(
                "the best draw weight (every component at its best, an average time per \
                 success) is e^{log_best:.0}, below what a float holds (about \
                 e^-{MAX_LOG_WEIGHT:.0}), so every weight would be 0 and the draw uniform: {fix}"
            ),
        ));
    }
}

/// The narrowest overload-window bucket, seconds (`window.bucket_s`).
const MIN_WINDOW_BUCKET_S: f64 = 0.001;
/// The largest `ema.drift` a config may set (a share per square root of a second).
const MAX_DRIFT: f64 = 100.0;
/// The largest `unseen.optimism` a config may set (standard deviations).
const MAX_OPTIMISM: f64 = 10.0;

/// The names [`Config::preset`] accepts.
pub const PRESETS: [&str; 3] = ["default", "lassie", "livepeer"];

impl Config {
    /// The same config with argmax instead of a draw.
    pub fn deterministic(mut self) -> Self {
        self.deterministic = true;
        self
    }

    /// A preset by name: `default`, `lassie` or `livepeer`.
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        match name {
            "default" => Ok(Config::default()),
            "lassie" => Ok(Config::lassie()),
            "livepeer" => Ok(Config::livepeer()),
            other => Err(ConfigError::single(
                "preset",
                format!(
                    "unknown preset `{other}`; expected one of {}",
                    PRESETS.join(", ")
                ),
            )),
        }
    }

    /// Loads a preset name or a config file path.
    pub fn from_name_or_path(spec: &str) -> Result<Self, ConfigError> {
        let path = Path::new(spec);
        if PRESETS.contains(&spec) {
            Self::preset(spec)
        } else if !path.exists() {
            Err(ConfigError::single(
                "",
                format!(
                    "`{spec}` is neither a preset ({}) nor an existing file",
                    PRESETS.join(", ")
                ),
            ))
        } else {
            Self::load(path)
        }
    }

    /// Seconds between coarse refreshes of a settled fleet of `live` candidates (`refresh_ms`
    /// stretched to `refresh_per_candidate_us` each).
    pub fn refresh_period_s(&self, live: usize) -> f64 {
        let per_fleet = live as f64 * self.refresh_per_candidate_us / 1e6;
        (self.refresh_ms as f64 / 1000.0).max(per_fleet)
    }

    /// Checks every field and reports every problem at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut num = |path: &str, v: f64| {
            if v.is_nan() {
                problems.push(Problem::new(path, "is NaN"));
            } else if v.is_infinite() {
                problems.push(Problem::new(path, "is infinite"));
            } else if v < 0.0 {
                problems.push(Problem::new(path, format!("is negative ({v})")));
            }
        };
        for (name, w) in self.weights.entries() {
            num(&format!("weights.{name}"), w);
        }
        for (tag, w) in &self.tag_weights {
            num(&format!("tag_weights.{tag}"), *w);
        }
        num("exponent", self.exponent);
        num("time_exponent", self.time_exponent);
        num("refresh_per_candidate_us", self.refresh_per_candidate_us);
        num("load.gate", self.load.gate);
        num("floor", self.floor);
        num("floor_period_s", self.floor_period_s);
        num("ema.success_prior", self.ema.success_prior);
        if let Some(h) = self.ema.half_life_s {
            num("ema.half_life_s", h);
        }
        num("ema.drift", self.ema.drift);
        num("ema.probe_s", self.ema.probe_s);
        num("unseen.optimism", self.unseen.optimism);
        num("window.bucket_s", self.window.bucket_s);
        num("price.exp_factor", self.price.exp_factor);
        if let Some(m) = self.price.max {
            num("price.max", m);
        }
        if let Some(m) = self.perf.min_score {
            num("perf.min_score", m);
        }
        num("ejection.base_s", self.ejection.base_s);
        num("ejection.max_s", self.ejection.max_s);
        num("ejection.max_share", self.ejection.max_share);

        let in_unit = |v: f64| v > 0.0 && v <= 1.0;
        for (path, a) in [
            ("ema.alpha", self.ema.alpha),
            ("ema.overall_alpha", self.ema.overall_alpha),
            ("ema.max_gain", self.ema.max_gain),
        ] {
            if !in_unit(a) {
                problems.push(Problem::new(
                    path,
                    format!("must be in (0, 1] (the weight of the newest sample), got {a}"),
                ));
            }
        }
        if self.exponent == 0.0 {
            problems.push(Problem::new("exponent", "must be greater than 0"));
        }
        if self.floor.is_finite() && self.floor > 1.0 {
            problems.push(Problem::new("floor", "must be at most 1"));
        }
        if self.ema.success_prior.is_finite() && self.ema.success_prior > 1.0 {
            problems.push(Problem::new("ema.success_prior", "must be at most 1"));
        }
        // Past these, the arithmetic breaks before the meaning changes: a drift whose
        // variance overflows freezes the estimate at its first sample, an optimism whose bonus
        // underflows the time factor makes every candidate look free.
        if self.ema.drift.is_finite() && self.ema.drift > MAX_DRIFT {
            problems.push(Problem::new(
                "ema.drift",
                format!(
                    "must be at most {MAX_DRIFT} (at that every sample replaces the estimate), \
                     got {}",
                    self.ema.drift
                ),
            ));
        }
        if self.unseen.optimism.is_finite() && self.unseen.optimism > MAX_OPTIMISM {
            problems.push(Problem::new(
                "unseen.optimism",
                format!(
                    "must be at most {MAX_OPTIMISM} standard deviations, got {}",
                    self.unseen.optimism
                ),
            ));
        }
        if self.ema.half_life_s == Some(0.0) {
            problems.push(Problem::new("ema.half_life_s", "must be greater than 0"));
        }
        if self.window.buckets == 0 || self.window.buckets as usize > WINDOW_RING {
            problems.push(Problem::new(
                "window.buckets",
                format!("must be between 1 and {WINDOW_RING}"),
            ));
        }
        if (0.0..MIN_WINDOW_BUCKET_S).contains(&self.window.bucket_s) {
            // The window counts buckets from the epoch in whole numbers: a bucket of a
            // nanosecond would run past the count within days.
            problems.push(Problem::new(
                "window.bucket_s",
                format!("must be at least {MIN_WINDOW_BUCKET_S} (a millisecond)"),
            ));
        }
        if self.price.exp_factor == 0.0 {
            problems.push(Problem::new("price.exp_factor", "must be greater than 0"));
        }
        if self.ejection.max_s < self.ejection.base_s {
            problems.push(Problem::new(
                "ejection.max_s",
                "must be at least ejection.base_s",
            ));
        }
        if self.ejection.max_share.is_finite() && self.ejection.max_share > 1.0 {
            problems.push(Problem::new("ejection.max_share", "must be at most 1"));
        }
        // Checked while ejection is off too: turning it on at run time must not be what
        // reveals a bad value.
        if self.ejection.consecutive_failures == 0 {
            problems.push(Problem::new(
                "ejection.consecutive_failures",
                "must be at least 1",
            ));
        }
        if self.ejection.consecutive_failures > u32::from(u16::MAX) {
            problems.push(Problem::new(
                "ejection.consecutive_failures",
                format!("must be at most {}", u16::MAX),
            ));
        }
        if self.refresh_ms == 0 {
            problems.push(Problem::new("refresh_ms", "must be at least 1"));
        }
        if let Some(p) = &self.preset {
            if !PRESETS.contains(&p.as_str()) {
                problems.push(Problem::new(
                    "preset",
                    format!(
                        "unknown preset `{p}`; expected one of {}",
                        PRESETS.join(", ")
                    ),
                ));
            }
        }
        let total: f64 = self.weights.entries().iter().map(|(_, w)| *w).sum::<f64>()
            + self.tag_weights.values().sum::<f64>();
        if total == 0.0 {
            problems.push(Problem::new(
                "weights",
                "all weights (and tag_weights) are zero: nothing to draw by; \
                 set weights.uniform = 1 for a plain uniform draw",
            ));
        } else if total.is_infinite()
            && self.weights.entries().iter().all(|(_, w)| w.is_finite())
            && self.tag_weights.values().all(|w| w.is_finite())
        {
            problems.push(Problem::new(
                "weights",
                "the weights (and tag_weights) sum past what a float holds: scale them down \
                 (only their ratios matter)",
            ));
        }
        if self.mode == Mode::Sum
            && total.is_finite()
            && total > 1.0
            && self.exponent.is_finite()
            && self.feedback.exponent.is_finite()
        {
            // A draw weight is at most total^exponent times e^feedback.exponent; past what a
            // float holds every weight is infinite and the draw silently turns uniform.
            let feedback = self.feedback.exponent.max(0.0);
            let log_max = self.exponent * total.ln() + feedback;
            if log_max > MAX_LOG_WEIGHT {
                problems.push(Problem::new(
                    "exponent",
                    format!(
                        "with weights summing to {total} the draw weights reach e^{log_max:.0}, \
                         past what a float holds (about e^{MAX_LOG_WEIGHT:.0}): lower the \
                         exponent to at most {:.1}, or scale the weights down (only their \
                         ratios matter)",
                        ((MAX_LOG_WEIGHT - feedback) / total.ln()).max(0.0)
                    ),
                ));
            }
        }
        self.check_underflow(total, &mut problems);
        self.load.check(&mut problems);
        self.feedback.check(&mut problems);
        self.share.check(&mut problems);
        self.adaptive.check(&mut problems);
        self.last_attempt.check(&mut problems);
        self.deadline.check(&mut problems);
        self.validate_variants(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems })
        }
    }
}
