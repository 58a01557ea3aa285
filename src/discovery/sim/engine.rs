//! The virtual-time engine: a modelled network under one or many real catalogues.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{DiscoveryScenario, ModeReport, ScenarioError, WaitSummary};
use crate::discovery::catalogue::Catalogue;
use crate::discovery::config::DiscoveryConfig;
use crate::discovery::events::Action;
use crate::discovery::FetchError;
use crate::vocab::{CandidateId, CandidateInfo};

/// One run's raw figures.
#[derive(Debug, Default)]
pub(super) struct RunFigures {
    fetches: u64,
    refreshes: u64,
    refresh_ms: f64,
    peak: usize,
    waits_ms: Vec<f64>,
    answered: u64,
    timed_out: u64,
}

/// Averages one mode's runs over seeds (peaks and maxima: the highest).
pub(super) fn aggregate(mode: &str, runs: &[RunFigures]) -> ModeReport {
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
                let dead = rng.random::<f64>() < l.unresponsive;
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
        let ok = rng.random::<f64>() >= self.error_rate;
        // A log-normal's tail can reach past any clock: a fetch that slow never ends in the run.
        let s = (ms / 1000.0).min(super::MAX_SECONDS);
        Some((Duration::from_secs_f64(s), ok))
    }
}

/// Box–Muller: one standard normal sample from two uniforms.
fn standard_normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
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

pub(super) fn run_mode(
    s: &DiscoveryScenario,
    mode: &str,
    seed: u64,
) -> Result<RunFigures, ScenarioError> {
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
