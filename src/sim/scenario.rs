//! Scenario files: the TOML model, its validation, and the built-in scenarios.
//!
//! Every field is documented in `docs/scenarios.md`. Parsing goes through
//! `serde_path_to_error` on top of `toml`'s span-aware deserializer, so an error names the field
//! path (`candidates[1].success`) and the line it is on.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use super::dist::Dist;
use super::dist::{at_most, non_negative, time_ms, MAX_MS, MAX_S};
use crate::core::{CandidateInfo, FailureClass, Limits};
use crate::input::Num;
use crate::score::Config;

mod builtin;
mod caller;
mod overrides;
mod parse;
pub use builtin::BUILTIN;
pub use caller::{Caller, OnTimeout, Retry};
pub(crate) use parse::{deserialize, did_you_mean};

/// A scenario file that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "{source_name}{}{}: {message}",
    line.map(|l| format!(" line {l}")).unwrap_or_default(),
    shown_field(field)
)]
pub struct ScenarioError {
    /// Where the text came from (a path or `builtin:<name>`).
    pub source_name: String,
    /// The field path, e.g. `candidates[1].success` (`(document)` for the whole file).
    pub field: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what is expected.
    pub message: String,
}

/// `: field` for a message about one field; nothing for one about the whole file.
fn shown_field(field: &str) -> String {
    if field == "(document)" {
        String::new()
    } else {
        format!(": {field}")
    }
}

fn probability<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(de::Error::custom(format!(
            "must be a probability between 0 and 1, got {}",
            Num(v)
        )))
    }
}

fn opt_probability<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    probability(d).map(Some)
}

fn non_neg<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    non_negative("the value", f64::deserialize(d)?)
}

fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(de::Error::custom(format!("must be > 0, got {}", Num(v))))
    }
}

fn opt_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    positive(d).map(Some)
}

/// A time in milliseconds, above 0 and at most `MAX_MS` (a run reaches every time it is
/// given).
fn ms_positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    at_most("the value", positive(d)?, MAX_MS, "ms")
}

fn opt_ms_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    ms_positive(d).map(Some)
}

fn ms_non_neg<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    time_ms("the value", f64::deserialize(d)?)
}

/// A time in seconds: at most `MAX_S`.
fn s_non_neg<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    at_most("the value", non_neg(d)?, MAX_S, "s")
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if v >= 1 {
        Ok(v)
    } else {
        Err(de::Error::custom("must be at least 1"))
    }
}

fn opt_at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    at_least_one(d).map(Some)
}

/// A candidate's id: not empty (the coordinator refuses an empty one).
fn non_empty_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = String::deserialize(d)?;
    if v.is_empty() {
        Err(de::Error::custom("must not be empty"))
    } else {
        Ok(v)
    }
}

/// Perf scores: each finite and not negative, as the coordinator takes them.
fn scores_non_neg<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    let scores = BTreeMap::<String, f64>::deserialize(d)?;
    for (region, v) in &scores {
        non_negative::<D::Error>(&format!("the score of `{region}`"), *v)?;
    }
    Ok(scores)
}

fn opt_non_neg<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    non_neg(d).map(Some)
}

fn zero() -> Dist {
    Dist::Const(0.0)
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn overload() -> FailureClass {
    FailureClass::Overload
}

/// A candidate: what the coordinator may know (static info) and the hidden truth.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateSpec {
    /// Unique id; with `count > 1` the replicas are `<id>-0`, `<id>-1`, ...
    #[serde(deserialize_with = "non_empty_id")]
    pub id: String,
    /// How many identical candidates this entry stands for.
    #[serde(default = "one", deserialize_with = "at_least_one")]
    pub count: u32,
    /// Present from the start (`false`: it arrives with a `join` event).
    #[serde(default = "yes")]
    pub present: bool,
    /// Probability that an attempt succeeds (below capacity).
    #[serde(deserialize_with = "probability")]
    pub success: f64,
    /// How a failure is reported.
    #[serde(default = "overload")]
    pub failure: FailureClass,
    /// How long a failed attempt takes, ms.
    #[serde(default = "zero")]
    pub failure_ms: Dist,
    /// Connect time of a successful attempt, ms.
    #[serde(default = "zero")]
    pub connect_ms: Dist,
    /// From connect to the first byte, ms. Absent: the first byte is the end of the attempt
    /// (a request-response operation).
    #[serde(default)]
    pub ttfb_ms: Option<Dist>,
    /// From the first byte to the end (added to the transfer time), ms.
    #[serde(default = "zero")]
    pub duration_ms: Dist,
    /// Transfer bandwidth, megabits per second (`workload.bytes` are sent at this rate).
    #[serde(default, deserialize_with = "opt_positive")]
    pub bandwidth_mbps: Option<f64>,
    /// Attempts in flight it serves without extra errors.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Past capacity, each extra attempt in flight adds this much overload-failure probability.
    #[serde(default, deserialize_with = "non_neg")]
    pub overload_per_extra: f64,
    /// Static info the coordinator sees.
    #[serde(default, deserialize_with = "non_neg")]
    pub stake: f64,
    /// Static price.
    #[serde(default, deserialize_with = "non_neg")]
    pub price: f64,
    /// Perf scores by region.
    #[serde(default, deserialize_with = "scores_non_neg")]
    pub perf_scores: BTreeMap<String, f64>,
    /// Tags such as `verified`.
    #[serde(default)]
    pub tags: Vec<String>,
    /// This candidate's own in-flight limit (seen by every policy), at least 1.
    #[serde(default, deserialize_with = "opt_at_least_one")]
    pub max_in_flight: Option<u32>,
    /// Queueing: attempts served in parallel (needs `service_ms`; default 1 when it is set).
    #[serde(default, deserialize_with = "opt_at_least_one")]
    pub servers: Option<u32>,
    /// Queueing: how long one attempt holds a server, ms. Present: the candidate is a FIFO
    /// queue in front of `servers` servers (M/G/c), and an attempt's latency includes its wait.
    #[serde(default)]
    pub service_ms: Option<Dist>,
    /// Queueing: attempts that may wait (not counting those in service); an attempt finding
    /// the queue full fails fast with `overload` (after `failure_ms`). Absent: unbounded.
    #[serde(default)]
    pub queue_limit: Option<u32>,
    /// Queueing: the service rate switches at random between its base and a slower level.
    #[serde(default)]
    pub slowdown: Option<Slowdown>,
    /// Latency that grows with load past a knee (candidates without a queue).
    #[serde(default)]
    pub knee: Option<Knee>,
}

/// A service rate that changes over time: every `period_ms`, independently of every other
/// candidate and of the past, the candidate serves `factor` times slower with probability
/// `probability` (else at its base rate).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slowdown {
    /// How long one level lasts, ms.
    #[serde(deserialize_with = "ms_positive")]
    pub period_ms: f64,
    /// Service times are multiplied by this in a slow period (C3's `k`).
    #[serde(deserialize_with = "positive")]
    pub factor: f64,
    /// The chance that a period is slow.
    #[serde(default = "half", deserialize_with = "probability")]
    pub probability: f64,
}

fn half() -> f64 {
    0.5
}

/// Latency that grows with concurrency, as in Vector's adaptive concurrency test harness: an
/// attempt landing on `n` attempts in flight (itself included) takes
/// `exp^(n - start) + scale x (n - 1)` times its sampled time (the power counted only when
/// `n > start`, as 1 otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knee {
    /// Attempts in flight served without the exponential growth (default 0).
    #[serde(default)]
    pub start: u32,
    /// Latency factor per attempt in flight past `start` (at least 1; default 1, no knee).
    #[serde(default = "unit", deserialize_with = "at_least_1")]
    pub exp: f64,
    /// Latency added per attempt in flight besides the attempt itself, as a share of its
    /// sampled time: linear growth from the first attempt on (Vector's `scale`; default 0).
    #[serde(default, deserialize_with = "non_neg")]
    pub scale: f64,
}

fn unit() -> f64 {
    1.0
}

fn at_least_1<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 1.0 {
        Ok(v)
    } else {
        Err(de::Error::custom(format!(
            "must be at least 1, got {}",
            Num(v)
        )))
    }
}

/// The largest latency factor a knee applies: past it every attempt times out anyway, and the
/// times stay finite.
const KNEE_MAX_FACTOR: f64 = 1e9;

impl Knee {
    /// The latency factor for an attempt landing on `load` attempts in flight (itself
    /// included).
    pub fn factor(&self, load: u32) -> f64 {
        let past = load.saturating_sub(self.start);
        let knee = if past == 0 {
            1.0
        } else {
            self.exp.powi(past.min(i32::MAX as u32) as i32)
        };
        // `1 + scale (n - 1) + (knee - 1)` as Vector writes it, summed without the round trip
        // through `knee - 1`, so a knee alone keeps its exact power.
        (knee + self.scale * f64::from(load.saturating_sub(1))).min(KNEE_MAX_FACTOR)
    }

    /// The attempts in flight past which more add latency and no throughput, if there is
    /// such a point: `start` for a knee with an `exp` above 1 (past it, throughput falls once
    /// the power outgrows the attempts); 1 when `scale` is at least 1 alone (each attempt
    /// more adds at least a whole attempt's time, so throughput is at best flat). A `scale`
    /// under 1 alone has none: each attempt more still adds throughput, at a price in latency.
    pub fn best_concurrency(&self) -> Option<u32> {
        if self.exp > 1.0 {
            Some(self.start.max(1))
        } else if self.scale >= 1.0 {
            Some(1)
        } else {
            None
        }
    }

    /// Whether it changes any latency: an `exp` above 1 or a `scale` above 0.
    pub fn is_active(&self) -> bool {
        self.exp > 1.0 || self.scale > 0.0
    }
}

impl CandidateSpec {
    /// The static info the policies see for replica `id`.
    pub fn info(&self, id: &str) -> CandidateInfo {
        let mut info = CandidateInfo::new(id);
        info.tags = self.tags.clone();
        info.stake = self.stake;
        info.price = self.price;
        info.perf_scores = self.perf_scores.clone();
        info.max_in_flight = self.max_in_flight;
        info
    }
}

/// What a timeline event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The candidate's truth changes to the event's overrides.
    Degrade,
    /// The candidate's truth returns to its file values.
    Heal,
    /// The candidate becomes available (it was `present = false` or had left).
    Join,
    /// The candidate is removed.
    Leave,
}

/// A change at a given time.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineEvent {
    /// When, seconds of virtual time.
    #[serde(deserialize_with = "s_non_neg")]
    pub at_s: f64,
    /// What happens.
    pub action: Action,
    /// To which candidate (a replica id such as `node-3` for a `count` entry).
    pub candidate: toml::Spanned<String>,
    /// Degrade: new success probability.
    #[serde(default, deserialize_with = "opt_probability")]
    pub success: Option<f64>,
    /// Degrade: new failure class.
    #[serde(default)]
    pub failure: Option<FailureClass>,
    /// Degrade: new failure latency.
    #[serde(default)]
    pub failure_ms: Option<Dist>,
    /// Degrade: new ttfb.
    #[serde(default)]
    pub ttfb_ms: Option<Dist>,
    /// Degrade: new capacity.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Degrade: new connect time.
    #[serde(default)]
    pub connect_ms: Option<Dist>,
    /// Degrade: new duration.
    #[serde(default)]
    pub duration_ms: Option<Dist>,
    /// Degrade: new bandwidth.
    #[serde(default, deserialize_with = "opt_positive")]
    pub bandwidth_mbps: Option<f64>,
    /// Degrade: new overload probability per attempt past capacity.
    #[serde(default, deserialize_with = "opt_non_neg")]
    pub overload_per_extra: Option<f64>,
    /// Degrade: new number of servers (queueing).
    #[serde(default, deserialize_with = "opt_at_least_one")]
    pub servers: Option<u32>,
    /// Degrade: new service time (queueing; makes a candidate without one a queue).
    #[serde(default)]
    pub service_ms: Option<Dist>,
    /// Degrade: new queue limit.
    #[serde(default)]
    pub queue_limit: Option<u32>,
    /// Degrade: new time-varying service.
    #[serde(default)]
    pub slowdown: Option<Slowdown>,
    /// Degrade: new load-dependent latency.
    #[serde(default)]
    pub knee: Option<Knee>,
}

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoopKind {
    /// `workers` each run `operations` requests back to back.
    Closed,
    /// Arrivals at `rate_per_s` for `duration_s`, Poisson or evenly spaced (`arrivals`).
    Open,
}

/// How an open loop's requests are spaced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Independent arrivals (exponential gaps of mean `1 / rate_per_s`), as many users at once.
    #[default]
    Poisson,
    /// One arrival every `1 / rate_per_s` seconds, the first at 0 s, as a load generator at a
    /// fixed rate (or Vector's harness with an `interval`) sends them.
    Even,
}

/// The workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// `closed` or `open`.
    #[serde(rename = "loop")]
    pub kind: LoopKind,
    /// Closed loop: concurrent workers.
    #[serde(default)]
    pub workers: u32,
    /// Closed loop: requests per worker.
    #[serde(default)]
    pub operations: u32,
    /// Closed loop: pause between a worker's requests, ms.
    #[serde(default, deserialize_with = "ms_non_neg")]
    pub think_ms: f64,
    /// Open loop: requests per second.
    #[serde(default, deserialize_with = "non_neg")]
    pub rate_per_s: f64,
    /// Open loop: arrivals stop after this many seconds.
    #[serde(default, deserialize_with = "s_non_neg")]
    pub duration_s: f64,
    /// Open loop: how arrivals are spaced (default Poisson).
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Candidates each request may use: a random subset of this size (0: all).
    #[serde(default)]
    pub subset: u32,
    /// Further attempts after a failed one (each on a candidate not tried yet).
    #[serde(default)]
    pub retries: u32,
    /// An attempt longer than this fails as a timeout at this time, ms.
    #[serde(default, deserialize_with = "opt_ms_positive")]
    pub attempt_timeout_ms: Option<f64>,
    /// The caller's timeout, ms: a request without a first byte this long after its arrival
    /// fails as a timeout then (its running attempt is cancelled as a `timeout`).
    #[serde(default, deserialize_with = "opt_ms_positive")]
    pub timeout_ms: Option<f64>,
    /// Bytes per successful attempt (sent at the candidate's bandwidth).
    #[serde(default)]
    pub bytes: u64,
    /// How long a request stuck by a stalled policy waits before it is looked at again, ms.
    #[serde(default = "stall_default", deserialize_with = "ms_positive")]
    pub stall_ms: f64,
    /// Queueing candidates' servers piggyback their queue and service time on each success
    /// (as C3's servers do), so the coordinator's outcomes carry a
    /// [`ServerFeedback`](crate::ServerFeedback). Off: outcomes carry client-side times only.
    #[serde(default)]
    pub server_feedback: bool,
}

impl Workload {
    /// About how many requests the workload makes: `workers x operations` in a closed loop,
    /// `rate_per_s x duration_s` in an open one with room for a Poisson count's spread (four
    /// standard deviations), at most 2^22. A hint for sizing the run's lists, not a limit.
    pub(crate) fn expected_requests(&self) -> usize {
        let n = match self.kind {
            LoopKind::Closed => f64::from(self.workers) * f64::from(self.operations),
            LoopKind::Open => {
                let n = self.rate_per_s * self.duration_s;
                n + 4.0 * n.max(0.0).sqrt() + 16.0
            }
        };
        // `as` saturates, and NaN (no valid workload has one) becomes 0.
        n.clamp(0.0, f64::from(1u32 << 22)) as usize
    }
}

fn stall_default() -> f64 {
    1000.0
}

/// The coordinator config a scenario asks for: a preset name or path, or an inline table.
#[derive(Clone, Debug)]
pub struct CoordinatorSpec(pub Config);

thread_local! {
    /// The directory of the scenario file being loaded ([`Scenario::load`]): a relative config
    /// path in it is read from there.
    static SCENARIO_DIR: std::cell::RefCell<Option<std::path::PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with relative config paths resolved against `dir` (the scenario file's directory).
pub(crate) fn with_scenario_dir<T>(dir: Option<&std::path::Path>, f: impl FnOnce() -> T) -> T {
    let previous = SCENARIO_DIR.with(|d| d.replace(dir.map(std::path::Path::to_path_buf)));
    let out = f();
    SCENARIO_DIR.with(|d| *d.borrow_mut() = previous);
    out
}

/// A preset name, or a config file's path: relative to the scenario file's directory when the
/// scenario was loaded from a file and the config is there, else to the working directory.
/// Both `coordinator = "<file>"` and a `coordinator:<file>` entry of `policies` resolve so.
pub(crate) fn coordinator_config(spec: &str) -> Result<Config, crate::score::ConfigError> {
    let beside = SCENARIO_DIR.with(|d| {
        d.borrow()
            .as_ref()
            .map(|dir| dir.join(spec))
            .filter(|p| std::path::Path::new(spec).is_relative() && p.is_file())
    });
    match beside {
        Some(path) if !crate::score::PRESETS.contains(&spec) => Config::load(&path),
        _ => Config::from_name_or_path(spec),
    }
}

impl<'de> Deserialize<'de> for CoordinatorSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = toml::Value::deserialize(d)?;
        let config = match value {
            toml::Value::String(s) => coordinator_config(&s),
            other => {
                // JSON has no NaN or infinity: refuse them by path before the conversion, as a
                // config file is (it would read "must not be null").
                let problems: Vec<String> = crate::input::non_finite(&other, "coordinator")
                    .into_iter()
                    .map(|(path, x)| {
                        let what = if x.is_nan() { "is NaN" } else { "is infinite" };
                        format!("{path}: {what}")
                    })
                    .collect();
                if !problems.is_empty() {
                    return Err(de::Error::custom(format!(
                        "invalid config:\n  - {}",
                        problems.join("\n  - ")
                    )));
                }
                let json = serde_json::to_value(other).map_err(de::Error::custom)?;
                Config::from_json_value(json)
            }
        };
        config.map(CoordinatorSpec).map_err(de::Error::custom)
    }
}

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// What it models.
    #[serde(default)]
    pub description: String,
    /// Policies run when the command line names none; a `coordinator:<file>` entry's relative
    /// path is read beside the scenario file, as `coordinator` is ([`Scenario::policy_specs`]).
    #[serde(default)]
    pub policies: Vec<String>,
    /// The directory of the scenario file it was loaded from (none for a built-in or text).
    #[serde(skip)]
    source_dir: Option<std::path::PathBuf>,
    /// Width of the time-series buckets, seconds.
    #[serde(default = "bucket_default", deserialize_with = "positive")]
    pub series_bucket_s: f64,
    /// The workload.
    pub workload: Workload,
    /// Limits every policy respects (the coordinator's `Limits`).
    #[serde(default)]
    pub limits: Limits,
    /// The config of the `coordinator` policy (default: the project default).
    #[serde(default)]
    pub coordinator: Option<CoordinatorSpec>,
    /// The candidates.
    pub candidates: Vec<CandidateSpec>,
    /// Changes over time.
    #[serde(default)]
    pub timeline: Vec<TimelineEvent>,
    /// Fleet mode: several coordinators over these candidates (`docs/fleet.md`).
    #[serde(default)]
    pub fleet: Option<super::fleet::FleetSpec>,
    /// How the `coordinator` policies' callers use the coordinator (default: as documented in
    /// `docs/deploying.md`).
    #[serde(default)]
    pub caller: Caller,
}

/// The most candidates a scenario may expand to (replicas included).
pub(crate) const MAX_CANDIDATES: u64 = 1_000_000;
/// The most requests a scenario may ask for (its workload's `workers x operations`, or
/// `rate_per_s x duration_s`): about 20 times the largest built-in. A run keeps every
/// request's figures for the percentiles (about 30 bytes each with the vectors' slack), so
/// one run stays within a few hundred MB.
pub(crate) const MAX_REQUESTS: f64 = 1e7;
/// The most attempts a scenario whose caller retries fresh (`caller.retry = "fresh"`) may
/// allow (its requests x (`retries` + 1)): a fresh retry excludes no candidate, so only
/// `retries` ends a failing request's loop; 10^8 attempts run in minutes.
pub(crate) const MAX_FRESH_ATTEMPTS: f64 = 1e8;
/// The most workers a closed loop may have: each holds a pending start in the event queue
/// and its own count from the start, so a million stays within tens of MB.
pub(crate) const MAX_WORKERS: u32 = 1_000_000;
/// The narrowest time-series bucket, seconds: the series hold a row per bucket from the start
/// of the run, so a bucket of a microsecond would ask for gigabytes.
pub(crate) const MIN_BUCKET_S: f64 = 0.001;

fn bucket_default() -> f64 {
    0.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{simulate, PolicySpec};

    /// The hint covers the requests a run makes (a Poisson count included) without sizing
    /// the lists far past them.
    #[test]
    fn the_expected_requests_cover_the_run_and_little_more() {
        let policy = [PolicySpec::parse("random").unwrap()];
        for (workload, made) in [
            (
                "loop = \"open\"\nrate_per_s = 1000.0\nduration_s = 5.0",
                None,
            ),
            (
                "loop = \"closed\"\nworkers = 5\noperations = 100",
                Some(500.0),
            ),
        ] {
            let sc = Scenario::parse(
                &format!(
                    "name = \"t\"\n[workload]\n{workload}\n\
                     [[candidates]]\nid = \"c\"\ncount = 3\nsuccess = 1.0\nduration_ms = 2.0\n"
                ),
                "test",
            )
            .unwrap();
            let expected = sc.workload.expected_requests() as f64;
            for seed in 1..=10 {
                let r = simulate(&sc, &policy, &[seed], 1, None).unwrap();
                let requests = r.policies[0].requests;
                if let Some(m) = made {
                    assert_eq!(requests, m);
                }
                assert!(requests <= expected, "seed {seed}: {requests} > {expected}");
                assert!(
                    expected <= 1.2 * requests,
                    "seed {seed}: {expected} for {requests}"
                );
            }
        }
    }
}
