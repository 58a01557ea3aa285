//! `livepeer-discovery`: per-request fan-out against the cached, batched catalogue, in virtual
//! time.
//!
//! Both modes drive the real [`Catalogue`](super::Catalogue); only the network is modelled. Each candidate has
//! a base response latency (log-normal around `median_ms`) with a little per-fetch jitter,
//! some candidates never answer (`unresponsive`) and some fetches fail (`error_rate`).
//!
//! - `per-request-fanout` (the old way): every stream start runs its own discovery, fetching
//!   all `n` candidates at once (one catalogue per stream with a batch as large as `n`); the
//!   stream starts when that discovery returns (the growing cutoff: 0.5 s once anyone
//!   answered).
//! - `cached` (the new way): one catalogue refreshes in the background in batches of
//!   `batch_size`; the streams arrive `warm_up_s` after it started and build their pools from
//!   the cache.
//! - `cached-cold`: the same catalogue, but the streams arrive at the instant it starts, so
//!   they wait for the first batch: the worst case of the new way.
//!
//! A stream "starts" at the first moment at least one candidate is eligible for it.

mod engine;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::config::{DiscoveryConfig, DiscoveryError, MAX_SECONDS};
use engine::{aggregate, run_mode, RunFigures};

/// The scenario kind that selects this model in a scenario file.
pub const KIND: &str = "discovery";

/// The built-in `livepeer-discovery` scenario (`scenarios/livepeer-discovery.toml`).
pub const LIVEPEER_DISCOVERY: &str = include_str!("../../../scenarios/livepeer-discovery.toml");

/// The most fetches (candidates x streams) a scenario may ask for: per-request fan-out holds a
/// catalogue entry for each, about 1 KB, so a run stays within a few hundred MB (9.9 million
/// ran out of memory).
const MAX_FETCHES: usize = 300_000;

/// The text of a discovery scenario named by `name_or_path`: the built-in
/// `livepeer-discovery`, or a file declaring `kind = "discovery"`. `None` if it names
/// something else (another kind of scenario, or a file that cannot be read).
pub fn scenario_text(name_or_path: &str) -> Option<String> {
    if name_or_path == "livepeer-discovery" {
        return Some(LIVEPEER_DISCOVERY.to_string());
    }
    // Only a regular file of a sane size is read here: a device such as `/dev/zero` or a huge
    // file is left to the selection scenario's reader, which refuses it with the reason.
    let text = crate::input::read_text(std::path::Path::new(name_or_path)).ok()?;
    DiscoveryScenario::is_discovery(&text).then_some(text)
}

/// The largest `latency.median_ms`: 1,000 s.
const MAX_MEDIAN_MS: f64 = 1e6;

/// The network the candidates answer over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LatencyModel {
    /// Median of the candidates' base response latency, milliseconds.
    pub median_ms: f64,
    /// Log-normal spread of base latencies across candidates.
    pub sigma: f64,
    /// Log-normal spread of one fetch around its candidate's base latency.
    pub jitter: f64,
    /// Share of candidates that never answer.
    pub unresponsive: f64,
    /// Probability that one fetch fails.
    pub error_rate: f64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel {
            median_ms: 80.0,
            sigma: 0.7,
            jitter: 0.1,
            unresponsive: 0.02,
            error_rate: 0.01,
        }
    }
}

/// A `kind = "discovery"` scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoveryScenario {
    /// Always `discovery`.
    pub kind: String,
    /// The scenario's name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// Known candidates.
    pub candidates: usize,
    /// Streams starting at the same instant.
    pub streams: usize,
    /// One run per seed.
    pub seeds: Vec<u64>,
    /// Seconds between the cached catalogue's start and the streams' arrival.
    pub warm_up_s: f64,
    /// The network.
    pub latency: LatencyModel,
    /// The cached catalogue's settings (`per-request-fanout` uses the same cutoffs).
    pub discovery: DiscoveryConfig,
}

impl Default for DiscoveryScenario {
    fn default() -> Self {
        DiscoveryScenario {
            kind: KIND.into(),
            name: "livepeer-discovery".into(),
            description: String::new(),
            candidates: 1000,
            streams: 100,
            seeds: vec![1],
            warm_up_s: 60.0,
            latency: LatencyModel::default(),
            discovery: DiscoveryConfig::default(),
        }
    }
}

/// A discovery scenario cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file cannot be used: its TOML does not parse, has unknown fields, or a field has
    /// an unusable value. Shown as a selection scenario's error is: the file, the field, the
    /// line and column, the line quoted with the value underlined.
    #[error(transparent)]
    File(#[from] crate::sim::ScenarioError),
    /// A field has an unusable value.
    #[error("discovery scenario: `{field}` {problem}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The discovery settings are unusable.
    #[error(transparent)]
    Config(#[from] DiscoveryError),
}

impl DiscoveryScenario {
    /// Parses and validates a scenario file's text (errors name it `discovery scenario`; see
    /// [`parse`](Self::parse) for a file's name).
    pub fn from_toml_str(text: &str) -> Result<Self, ScenarioError> {
        Ok(Self::parse(text, "discovery scenario")?)
    }

    /// Parses and validates scenario text; `source_name` (a path, or
    /// `builtin:livepeer-discovery`) is used in errors. An error is the selection scenarios'
    /// own: it names the file, the field and its line and column, and underlines the value
    /// (the enclosing table's when the field is absent).
    pub fn parse(text: &str, source_name: &str) -> Result<Self, crate::sim::ScenarioError> {
        let scenario: DiscoveryScenario = crate::sim::scenario::deserialize(text, source_name)?;
        let at = |field: &str, problem: String| {
            crate::sim::ScenarioError::at(source_name, text, field, problem)
        };
        match scenario.validate() {
            Ok(()) => Ok(scenario),
            Err(ScenarioError::Invalid { field, problem }) => Err(at(field, problem)),
            Err(ScenarioError::Config(DiscoveryError::InvalidConfig { field, problem })) => {
                Err(at(&format!("discovery.{field}"), problem))
            }
            Err(ScenarioError::File(e)) => Err(e),
        }
    }

    /// Whether a scenario file's text declares `kind = "discovery"`.
    pub fn is_discovery(text: &str) -> bool {
        toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| t.get("kind").and_then(|k| k.as_str().map(|k| k == KIND)))
            .unwrap_or(false)
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |field, problem: &str| {
            Err(ScenarioError::Invalid {
                field,
                problem: problem.to_string(),
            })
        };
        if self.kind != KIND {
            return bad("kind", "must be \"discovery\"");
        }
        if self.candidates == 0 || self.candidates > 100_000 {
            return bad("candidates", "must be between 1 and 100000");
        }
        if self.streams == 0 || self.streams > 10_000 {
            return bad("streams", "must be between 1 and 10000");
        }
        if self.candidates.saturating_mul(self.streams) > MAX_FETCHES {
            return bad(
                "streams",
                "times candidates must be at most 300000: per-request fan-out keeps a catalogue \
                 of every candidate per stream (about 1 KB each); lower streams or candidates",
            );
        }
        if self.seeds.is_empty() {
            return bad("seeds", "must list at least one seed");
        }
        if !(self.warm_up_s.is_finite() && (0.0..=MAX_SECONDS).contains(&self.warm_up_s)) {
            return bad(
                "warm_up_s",
                "must be a non-negative number of seconds, at most 1e9",
            );
        }
        let l = &self.latency;
        if !(l.median_ms.is_finite() && l.median_ms > 0.0 && l.median_ms <= MAX_MEDIAN_MS) {
            return bad(
                "latency.median_ms",
                "must be a positive number of milliseconds, at most 1e6",
            );
        }
        for (field, v) in [("latency.sigma", l.sigma), ("latency.jitter", l.jitter)] {
            if !(v.is_finite() && (0.0..=3.0).contains(&v)) {
                return bad(field, "must be between 0 and 3");
            }
        }
        for (field, v) in [
            ("latency.unresponsive", l.unresponsive),
            ("latency.error_rate", l.error_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(field, "must be a probability between 0 and 1");
            }
        }
        self.discovery.validate()?;
        Ok(())
    }
}

/// Stream start waits, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSummary {
    /// Mean over streams (and seeds).
    pub mean: f64,
    /// Longest.
    pub max: f64,
}

/// One mode's figures, averaged over seeds (peak and max: the highest over seeds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeReport {
    /// `per-request-fanout`, `cached` or `cached-cold`.
    pub policy: String,
    /// Fetches of candidate info made, per seed.
    pub discovery_fetches: u64,
    /// Refresh passes (discoveries) finished, per seed.
    pub refreshes: u64,
    /// `discovery_fetches / refreshes`.
    pub fetches_per_refresh: f64,
    /// Mean time one refresh (one discovery) took, from its first fetch to its last answer or
    /// cut, milliseconds.
    pub refresh_duration_ms: f64,
    /// The most fetches running at once.
    pub peak_concurrent_fetches: usize,
    /// From a stream's arrival to the first moment a candidate was eligible for it.
    pub stream_start_wait_ms: WaitSummary,
    /// Streams that started before the run ended, per seed.
    pub streams_started: usize,
    /// Fetches that answered in time, per seed.
    pub answered: u64,
    /// Fetches cut by the cutoff, per seed.
    pub timed_out: u64,
}

/// The `livepeer-discovery` report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiscoveryReport {
    /// The scenario's name.
    pub scenario: String,
    /// The seeds run.
    pub seeds: Vec<u64>,
    /// Known candidates.
    pub candidates: usize,
    /// Streams starting at once.
    pub streams: usize,
    /// The cached catalogue's batch size.
    pub batch_size: usize,
    /// One entry per mode.
    pub policies: Vec<ModeReport>,
}

/// Runs every mode for every seed.
pub fn run(scenario: &DiscoveryScenario) -> Result<DiscoveryReport, ScenarioError> {
    scenario.validate()?;
    let modes = ["per-request-fanout", "cached", "cached-cold"];
    let mut policies = Vec::new();
    for mode in modes {
        let runs: Vec<RunFigures> = scenario
            .seeds
            .iter()
            .map(|&seed| run_mode(scenario, mode, seed))
            .collect::<Result<_, _>>()?;
        policies.push(aggregate(mode, &runs));
    }
    Ok(DiscoveryReport {
        scenario: scenario.name.clone(),
        seeds: scenario.seeds.clone(),
        candidates: scenario.candidates,
        streams: scenario.streams,
        batch_size: scenario.discovery.batch_size,
        policies,
    })
}

/// A plain-text table of a report.
pub fn render_table(report: &DiscoveryReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} candidates, {} streams at once, batch size {}, seeds {:?}",
        report.scenario, report.candidates, report.streams, report.batch_size, report.seeds
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>9} {:>12} {:>11} {:>10} {:>12} {:>11}",
        "policy",
        "fetches",
        "refreshes",
        "per refresh",
        "refresh ms",
        "peak",
        "wait mean ms",
        "wait max ms"
    );
    for p in &report.policies {
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>9} {:>12.0} {:>11.0} {:>10} {:>12.1} {:>11.1}",
            p.policy,
            p.discovery_fetches,
            p.refreshes,
            p.fetches_per_refresh,
            p.refresh_duration_ms,
            p.peak_concurrent_fetches,
            p.stream_start_wait_ms.mean,
            p.stream_start_wait_ms.max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DiscoveryScenario {
        DiscoveryScenario {
            candidates: 200,
            streams: 10,
            seeds: vec![3],
            discovery: DiscoveryConfig {
                batch_size: 50,
                ..DiscoveryConfig::default()
            },
            ..DiscoveryScenario::default()
        }
    }

    #[test]
    fn fanout_fetches_everything_per_stream_at_once() {
        let r = run(&small()).unwrap();
        let fan = &r.policies[0];
        assert_eq!(fan.policy, "per-request-fanout");
        assert_eq!(fan.discovery_fetches, 200 * 10);
        assert_eq!(fan.peak_concurrent_fetches, 200 * 10);
        assert_eq!(fan.refreshes, 10);
        assert!(fan.stream_start_wait_ms.mean > 0.0);
    }

    #[test]
    fn cached_fetches_once_per_refresh_in_batches() {
        let r = run(&small()).unwrap();
        let cached = &r.policies[1];
        assert_eq!(cached.policy, "cached");
        assert_eq!(cached.refreshes, 1);
        assert_eq!(cached.discovery_fetches, 200);
        assert_eq!(cached.peak_concurrent_fetches, 50);
        assert_eq!(cached.streams_started, 10);
        assert_eq!(cached.stream_start_wait_ms.max, 0.0);
        let cold = &r.policies[2];
        assert!(cold.stream_start_wait_ms.mean > 0.0);
        assert!(cold.peak_concurrent_fetches <= 50);
    }

    #[test]
    fn the_builtin_scenario_parses_and_is_found_by_name() {
        let text = scenario_text("livepeer-discovery").unwrap();
        let s = DiscoveryScenario::from_toml_str(&text).unwrap();
        assert_eq!(
            (s.candidates, s.streams, s.discovery.batch_size),
            (1000, 100, 100)
        );
        assert!(scenario_text("mongo-overload").is_none());
    }

    #[test]
    fn scenario_checks_name_the_field() {
        let err = DiscoveryScenario {
            streams: 0,
            ..DiscoveryScenario::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("streams"), "{err}");
        assert!(DiscoveryScenario::is_discovery("kind = \"discovery\"\n"));
        assert!(!DiscoveryScenario::is_discovery("name = \"x\"\n"));
        let err =
            DiscoveryScenario::from_toml_str("kind = \"discovery\"\nbogus = 1\n").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    /// A scenario whose fetches would not fit in memory is refused by field, before it runs
    /// (100,000 candidates x 99 streams ran out of memory); the built-in's 100,000 pass.
    #[test]
    fn fetches_past_what_fits_are_refused() {
        let text = "kind = \"discovery\"\nname = \"d\"\nseeds = [1]\ncandidates = 100000\n\
                    streams = 99\n";
        let err = DiscoveryScenario::from_toml_str(text).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("streams") && shown.contains("300000"),
            "{shown}"
        );
        let at_cap = DiscoveryScenario {
            candidates: 3000,
            streams: 100,
            ..DiscoveryScenario::default()
        };
        at_cap.validate().unwrap();
        DiscoveryScenario::from_toml_str(LIVEPEER_DISCOVERY).unwrap();
    }
}
