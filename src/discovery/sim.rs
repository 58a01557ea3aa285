//! `livepeer-discovery`: per-request fan-out against the cached, batched catalogue, in virtual
//! time.
//!
//! Both modes drive the real [`Catalogue`]; only the network is modelled. Each candidate has
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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::catalogue::Catalogue;
use super::config::{DiscoveryConfig, DiscoveryError};
use super::events::Action;
use super::FetchError;
use crate::core::{CandidateId, CandidateInfo};

/// The scenario kind that selects this model in a scenario file.
pub const KIND: &str = "discovery";

/// The built-in `livepeer-discovery` scenario (`scenarios/livepeer-discovery.toml`).
pub const LIVEPEER_DISCOVERY: &str = include_str!("../../scenarios/livepeer-discovery.toml");

/// The text of a discovery scenario named by `name_or_path`: the built-in
/// `livepeer-discovery`, or a file declaring `kind = "discovery"`. `None` if it names
/// something else (another kind of scenario, or a file that cannot be read).
pub fn scenario_text(name_or_path: &str) -> Option<String> {
    if name_or_path == "livepeer-discovery" {
        return Some(LIVEPEER_DISCOVERY.to_string());
    }
    let text = std::fs::read_to_string(name_or_path).ok()?;
    DiscoveryScenario::is_discovery(&text).then_some(text)
}

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
    /// The TOML does not parse or has unknown fields.
    #[error("discovery scenario: {0}")]
    Parse(String),
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
    /// Parses and validates a scenario file's text.
    pub fn from_toml_str(text: &str) -> Result<Self, ScenarioError> {
        let s: DiscoveryScenario =
            toml::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        s.validate()?;
        Ok(s)
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
        if self.candidates.saturating_mul(self.streams) > 10_000_000 {
            return bad(
                "streams",
                "times candidates must stay under 10 million fetches",
            );
        }
        if self.seeds.is_empty() {
            return bad("seeds", "must list at least one seed");
        }
        if !(self.warm_up_s.is_finite() && self.warm_up_s >= 0.0) {
            return bad("warm_up_s", "must be a non-negative number of seconds");
        }
        let l = &self.latency;
        if !(l.median_ms.is_finite() && l.median_ms > 0.0) {
            return bad("latency.median_ms", "must be a positive number");
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

#[derive(Debug, Default)]
struct RunFigures {
    fetches: u64,
    refreshes: u64,
    refresh_ms: f64,
    peak: usize,
    waits_ms: Vec<f64>,
    answered: u64,
    timed_out: u64,
}

fn aggregate(mode: &str, runs: &[RunFigures]) -> ModeReport {
    let n = runs.len().max(1) as u64;
    let fetches = runs.iter().map(|r| r.fetches).sum::<u64>() / n;
    let refreshes = runs.iter().map(|r| r.refreshes).sum::<u64>() / n;
    let waits: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.waits_ms.iter().copied())
        .collect();
    ModeReport {
        policy: mode.to_string(),
        discovery_fetches: fetches,
        refreshes,
        fetches_per_refresh: if refreshes == 0 {
            0.0
        } else {
            fetches as f64 / refreshes as f64
        },
        refresh_duration_ms: {
            let total: u64 = runs.iter().map(|r| r.refreshes).sum();
            let ms: f64 = runs.iter().map(|r| r.refresh_ms).sum();
            if total == 0 {
                0.0
            } else {
                ms / total as f64
            }
        },
        peak_concurrent_fetches: runs.iter().map(|r| r.peak).max().unwrap_or(0),
        stream_start_wait_ms: WaitSummary {
            mean: if waits.is_empty() {
                0.0
            } else {
                waits.iter().sum::<f64>() / waits.len() as f64
            },
            max: waits.iter().copied().fold(0.0, f64::max),
        },
        streams_started: runs.iter().map(|r| r.waits_ms.len()).sum::<usize>() / n as usize,
        answered: runs.iter().map(|r| r.answered).sum::<u64>() / n,
        timed_out: runs.iter().map(|r| r.timed_out).sum::<u64>() / n,
    }
}

/// The hidden network: each candidate's base latency, or `None` if it never answers.
struct Network {
    base_ms: Vec<Option<f64>>,
    jitter: f64,
    error_rate: f64,
}

impl Network {
    fn new(s: &DiscoveryScenario, rng: &mut SmallRng) -> Self {
        let l = &s.latency;
        let base_ms = (0..s.candidates)
            .map(|_| {
                let dead = rng.gen::<f64>() < l.unresponsive;
                let z = standard_normal(rng);
                (!dead).then(|| l.median_ms * (l.sigma * z).exp())
            })
            .collect();
        Network {
            base_ms,
            jitter: l.jitter,
            error_rate: l.error_rate,
        }
    }

    /// When (after the start) and how a fetch of candidate `i` ends; `None`: never.
    fn fetch(&self, i: usize, rng: &mut SmallRng) -> Option<(Duration, bool)> {
        let base = self.base_ms[i]?;
        let ms = base * (self.jitter * standard_normal(rng)).exp();
        let ok = rng.gen::<f64>() >= self.error_rate;
        Some((Duration::from_secs_f64(ms / 1000.0), ok))
    }
}

/// Box–Muller: one standard normal sample from two uniforms.
fn standard_normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A fetch ends: catalogue, candidate index, fetch number, success.
    Done(usize, usize, u64, bool),
    /// A catalogue's deadline.
    Timer(usize),
    /// The streams arrive.
    Arrive,
}

/// Virtual time over a set of catalogues and a network.
struct Engine {
    base: Instant,
    now: Duration,
    seq: u64,
    heap: BinaryHeap<Reverse<(Duration, u64, Ev)>>,
    cats: Vec<Catalogue>,
    timer_at: Vec<Option<Instant>>,
    /// Running fetches: (catalogue, candidate) -> fetch number.
    live: HashMap<(usize, usize), u64>,
    index: HashMap<CandidateId, usize>,
    ids: Vec<CandidateId>,
    net: Network,
    rng: SmallRng,
    figures: RunFigures,
    /// Per catalogue: streams waiting for a first eligible candidate, and when they arrived.
    waiting: Vec<Vec<Duration>>,
}

impl Engine {
    fn at(&self) -> Instant {
        self.base + self.now
    }

    fn push(&mut self, t: Duration, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Carries out catalogue `c`'s actions and re-arms its timer.
    fn drain(&mut self, c: usize) {
        while let Some(action) = self.cats[c].poll_action() {
            match action {
                Action::Fetch(id) => {
                    let i = self.index[&id];
                    self.seq += 1;
                    let n = self.seq;
                    self.live.insert((c, i), n);
                    self.figures.fetches += 1;
                    self.figures.peak = self.figures.peak.max(self.live.len());
                    if let Some((after, ok)) = self.net.fetch(i, &mut self.rng) {
                        self.push(self.now + after, Ev::Done(c, i, n, ok));
                    }
                }
                Action::Cancel(id) => {
                    self.live.remove(&(c, self.index[&id]));
                }
                Action::Add(_) => {
                    let now = self.now;
                    for arrived in self.waiting[c].drain(..) {
                        self.figures
                            .waits_ms
                            .push((now - arrived).as_secs_f64() * 1000.0);
                    }
                }
                Action::Update(_) | Action::Remove(_) => {}
                Action::RefreshDone(r) => {
                    self.figures.refreshes += 1;
                    self.figures.refresh_ms += r.duration.as_secs_f64() * 1000.0;
                    self.figures.answered += u64::from(r.answered);
                    self.figures.timed_out += u64::from(r.timed_out);
                }
            }
        }
        let next = self.cats[c].next_deadline();
        if next != self.timer_at[c] {
            self.timer_at[c] = next;
            if let Some(t) = next {
                let t = t.saturating_duration_since(self.base).max(self.now);
                self.push(t, Ev::Timer(c));
            }
        }
    }

    fn run_until(&mut self, horizon: Duration, arrive_at: Option<Duration>, streams: usize) {
        if let Some(t) = arrive_at {
            self.push(t, Ev::Arrive);
        }
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            if t > horizon {
                break;
            }
            self.now = t;
            let now = self.at();
            match ev {
                Ev::Done(c, i, n, ok) => {
                    if self.live.get(&(c, i)) != Some(&n) {
                        continue; // cut before it answered
                    }
                    self.live.remove(&(c, i));
                    let id = self.ids[i].clone();
                    let result = if ok {
                        Ok(CandidateInfo::new(id.clone()))
                    } else {
                        Err(FetchError::Failed("refused".into()))
                    };
                    self.cats[c].fetched(&id, result, now);
                    self.drain(c);
                }
                Ev::Timer(c) => {
                    // Only the latest armed deadline counts; earlier pushes are stale.
                    if self.timer_at[c].is_some_and(|d| d <= now) {
                        self.timer_at[c] = None;
                        self.cats[c].tick(now);
                        self.drain(c);
                    }
                }
                Ev::Arrive => {
                    for _ in 0..streams {
                        if self.cats[0].demand(&[], now) > 0 {
                            self.figures.waits_ms.push(0.0);
                        } else {
                            self.waiting[0].push(self.now);
                        }
                    }
                    self.drain(0);
                }
            }
        }
    }
}

fn run_mode(s: &DiscoveryScenario, mode: &str, seed: u64) -> Result<RunFigures, ScenarioError> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let net = Network::new(s, &mut rng);
    let ids: Vec<CandidateId> = (0..s.candidates)
        .map(|i| CandidateId::new(format!("o{i:05}")))
        .collect();
    let index = ids
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    let base = Instant::now();
    let (configs, streams_per_cat, arrive_at) = match mode {
        "per-request-fanout" => {
            // One discovery per stream, everything at once, never repeated in the run.
            let c = DiscoveryConfig {
                batch_size: s.candidates,
                idle_pause_s: None,
                ..s.discovery.clone()
            };
            (vec![c; s.streams], true, None)
        }
        "cached" => (vec![s.discovery.clone()], false, Some(s.warm_up_s)),
        _ => (vec![s.discovery.clone()], false, Some(0.0)),
    };
    let n_cats = configs.len();
    let mut engine = Engine {
        base,
        now: Duration::ZERO,
        seq: 0,
        heap: BinaryHeap::new(),
        cats: Vec::with_capacity(n_cats),
        timer_at: vec![None; n_cats],
        live: HashMap::new(),
        index,
        ids: ids.clone(),
        net,
        rng: SmallRng::seed_from_u64(seed.wrapping_add(1)),
        figures: RunFigures::default(),
        waiting: vec![Vec::new(); n_cats],
    };
    for (k, config) in configs.into_iter().enumerate() {
        let cat = Catalogue::new(config, base, SmallRng::seed_from_u64(seed ^ k as u64))?;
        engine.cats.push(cat);
        if streams_per_cat {
            engine.waiting[k].push(Duration::ZERO);
        }
    }
    for k in 0..n_cats {
        engine.cats[k].set_candidates(ids.iter().cloned(), base);
        engine.drain(k);
    }
    let arrive = arrive_at.map(Duration::from_secs_f64);
    // Long enough for every discovery to finish (10 batches of up to 6 s), short of the next
    // scheduled refresh.
    let tail = Duration::from_secs_f64(
        (s.discovery.cutoff_max_s * (s.candidates.div_ceil(s.discovery.batch_size) + 1) as f64)
            .min(s.discovery.interval_s * 0.99),
    );
    let horizon = arrive.unwrap_or(Duration::ZERO).max(tail) + tail;
    engine.run_until(horizon, arrive, s.streams);
    Ok(engine.figures)
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
}
