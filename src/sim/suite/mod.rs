//! Generated scenario suites: `selcoord simulate --suite <family>,...`.
//!
//! A family is a kind of trouble (a candidate degrades and heals, part of the fleet fails at
//! once, a slow drift, flapping, churn, a large population); the generator draws N scenarios of
//! each from a seed, with fleet sizes, speeds, failure classes and load levels varied within
//! the ranges `docs/scenarios.md` gives. Every scenario is plain scenario TOML: it runs through
//! [`Scenario::parse`] like a file, and [`Generated::text`] is what `--dump` writes.
//!
//! The suite runs every policy on every scenario (one run each, with the scenario's own seed)
//! and compares each policy with the `oracle` on the same scenario ([`SuiteReport`]).
//! Everything is a pure function of the suite seed: the same seed gives the same scenarios and
//! the same figures, whatever the thread count.
//!
//! ```
//! use selection_coordinator::sim::suite::{generate, Family};
//!
//! let a = generate(Family::DegradeHeal, 7, 0, &["coordinator".into(), "oracle".into()]).unwrap();
//! let b = generate(Family::DegradeHeal, 7, 0, &["coordinator".into(), "oracle".into()]).unwrap();
//! assert_eq!(a.text, b.text);
//! assert_eq!(a.scenario.name, "degrade-heal-0");
//! ```

mod draft;
mod families;
mod paired;
mod report;
mod worlds;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{simulate, Action, PolicyReport, PolicySpec, Progress, Scenario, ScenarioError};

pub use paired::{Paired, PairedSummary};
pub use report::{
    Detail, FamilyReport, Instance, InstanceFigures, PolicySummary, Quantiles, SuiteReport,
};
pub use worlds::{World, WorldReport};

/// The policies a suite runs when none are named: the coordinator, the oracle every figure is
/// measured against, and the baselines.
pub const DEFAULT_POLICIES: [&str; 8] = [
    "coordinator",
    "oracle",
    "p2c-peak-ewma",
    "least-loaded",
    "mongo-error-bias",
    "round-robin",
    "random",
    "p2c-opcount",
];

/// A kind of generated scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// A candidate (often the best) degrades by slowness and/or failures, then heals.
    DegradeHeal,
    /// 20-80% of the fleet fails or hangs at once, then heals.
    Outage,
    /// A candidate's first byte drifts slowly up, then down.
    Drift,
    /// A candidate alternates between good and bad every 1-10 s.
    Flap,
    /// Candidates join and leave.
    Churn,
    /// 50-2,000 candidates, subsets of 5-50, short runs: the cost of learning.
    Population,
    /// 4-12 candidates, half of them with heavy-tailed first bytes, whose means differ up to
    /// threefold; nothing changes: telling a heavy tail from a slower mean.
    HeavyTail,
}

impl Family {
    /// Every family, in the order `all` expands to.
    pub const ALL: [Family; 7] = [
        Family::DegradeHeal,
        Family::Outage,
        Family::Drift,
        Family::Flap,
        Family::Churn,
        Family::Population,
        Family::HeavyTail,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::DegradeHeal => "degrade-heal",
            Family::Outage => "outage",
            Family::Drift => "drift",
            Family::Flap => "flap",
            Family::Churn => "churn",
            Family::Population => "population",
            Family::HeavyTail => "heavy-tail",
        }
    }

    /// A family by name.
    pub fn parse(name: &str) -> Result<Family, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown suite family `{name}`; expected all or one of {}",
                    Family::ALL.map(Family::name).join(", ")
                )
            })
    }

    /// A comma-separated list of families (`all` for every one), duplicates removed, in the
    /// order given.
    pub fn parse_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<Family>, String> {
        let mut out = Vec::new();
        for n in names {
            for part in n
                .as_ref()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let fams = if part == "all" {
                    Family::ALL.to_vec()
                } else {
                    vec![Family::parse(part)?]
                };
                for f in fams {
                    if !out.contains(&f) {
                        out.push(f);
                    }
                }
            }
        }
        if out.is_empty() {
            return Err("--suite needs at least one family".into());
        }
        Ok(out)
    }

    /// A fixed number per family, so a family's scenarios do not depend on which other
    /// families run.
    fn salt(self) -> u64 {
        match self {
            Family::DegradeHeal => 1,
            Family::Outage => 2,
            Family::Drift => 3,
            Family::Flap => 4,
            Family::Churn => 5,
            Family::Population => 6,
            Family::HeavyTail => 7,
        }
    }
}

/// One generated scenario.
#[derive(Clone, Debug)]
pub struct Generated {
    /// Its family.
    pub family: Family,
    /// Its index in the family (0-based).
    pub index: usize,
    /// The seed it runs with (`--seed` reruns it from a dump).
    pub seed: u64,
    /// The scenario file's text.
    pub text: String,
    /// The parsed scenario.
    pub scenario: Scenario,
}

/// splitmix64: spreads (suite seed, family, index) over the generator's seed space.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Generates scenario `index` of `family` from the suite seed; `policies` become the file's
/// `policies` list. The same arguments always give the same text.
pub fn generate(
    family: Family,
    suite_seed: u64,
    index: usize,
    policies: &[String],
) -> Result<Generated, ScenarioError> {
    let mut rng = SmallRng::seed_from_u64(mix(
        mix(suite_seed) ^ mix(family.salt() << 32 | index as u64)
    ));
    let seed = u64::from(rng.random::<u32>());
    let name = format!("{}-{index}", family.name());
    let draft = match family {
        Family::DegradeHeal => families::degrade_heal(&mut rng, name),
        Family::Outage => families::outage(&mut rng, name),
        Family::Drift => families::drift(&mut rng, name),
        Family::Flap => families::flap(&mut rng, name),
        Family::Churn => families::churn(&mut rng, name),
        Family::Population => families::population(&mut rng, name),
        Family::HeavyTail => families::heavy_tail(&mut rng, name),
    };
    let header = format!(
        "Generated by `selcoord simulate --suite {} --seed {suite_seed}` (scenario {index}).\n\
         Rerun: selcoord simulate --scenario <this file> --seed {seed}",
        family.name()
    );
    let text = draft.to_toml(&header, policies);
    let scenario = Scenario::parse(&text, &format!("suite:{}", draft.name))?;
    Ok(Generated {
        family,
        index,
        seed,
        text,
        scenario,
    })
}

/// Generates `count` scenarios of each family.
pub fn generate_suite(
    families: &[Family],
    count: usize,
    suite_seed: u64,
    policies: &[String],
) -> Result<Vec<Generated>, ScenarioError> {
    families
        .iter()
        .flat_map(|&f| (0..count).map(move |i| (f, i)))
        .map(|(f, i)| generate(f, suite_seed, i, policies))
        .collect()
}

/// The times detection and recovery are measured from, as the report finds them: the first
/// `degrade`, and the first `heal` of a candidate degraded at or before it.
fn event_times(sc: &Scenario) -> (Option<f64>, Option<f64>) {
    let mut evs: Vec<_> = sc.timeline.iter().collect();
    evs.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let degrade = evs
        .iter()
        .find(|e| e.action == Action::Degrade)
        .map(|e| e.at_s);
    let heal = evs
        .iter()
        .find(|h| {
            h.action == Action::Heal
                && evs.iter().any(|d| {
                    d.action == Action::Degrade
                        && d.candidate.get_ref() == h.candidate.get_ref()
                        && d.at_s <= h.at_s
                })
        })
        .map(|e| e.at_s);
    (degrade, heal)
}

/// Runs every policy once on every generated scenario, `threads` runs at a time, and compares
/// each with the oracle. `oracle` is added to `policies` when it is missing.
pub fn run_suite(
    suite_seed: u64,
    scenarios: &[Generated],
    policies: &[PolicySpec],
    threads: usize,
    progress: Option<Progress<'_>>,
) -> Result<SuiteReport, String> {
    if scenarios.is_empty() || policies.is_empty() {
        return Err("nothing to run: no scenario or no policy".into());
    }
    let mut policies = policies.to_vec();
    if !policies.contains(&PolicySpec::Oracle) {
        policies.push(PolicySpec::Oracle);
    }
    // One job per run (scenario, policy), handed out in order so that every thread works at
    // once even on one scenario; a scenario's runs are folded into its figures as soon as its
    // last one is done, so only the figures stay (a run's report holds its time series).
    let n = policies.len();
    let runs = scenarios.len() * n;
    let results: Vec<Mutex<Option<Result<Instance, String>>>> =
        scenarios.iter().map(|_| Mutex::new(None)).collect();
    // Per scenario: its runs' reports so far (or the first error), and how many are missing.
    type Pending = (Vec<Option<PolicyReport>>, Option<String>, usize);
    let pending: Vec<Mutex<Pending>> = scenarios
        .iter()
        .map(|_| Mutex::new(((0..n).map(|_| None).collect(), None, n)))
        .collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let policies = &policies;
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, runs) {
            scope.spawn(|| loop {
                let job = next.fetch_add(1, Ordering::Relaxed);
                if job >= runs {
                    break;
                }
                let (s, p) = (job / n, job % n);
                let g = &scenarios[s];
                let r = simulate(&g.scenario, &policies[p..=p], &[g.seed], 1, None)
                    .and_then(|mut r| r.policies.pop().ok_or_else(|| "empty report".into()))
                    .map_err(|e| format!("{}: {e}", g.scenario.name));
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(cb) = progress {
                    cb(d, runs);
                }
                let Ok(mut slot) = pending[s].lock() else {
                    continue;
                };
                let (reports, error, missing) = &mut *slot;
                match r {
                    Ok(r) => reports[p] = Some(r),
                    Err(e) => {
                        error.get_or_insert(e);
                    }
                }
                *missing -= 1;
                if *missing > 0 {
                    continue;
                }
                let figures = match error.take() {
                    Some(e) => Err(e),
                    None => {
                        let all: Vec<PolicyReport> = reports.drain(..).flatten().collect();
                        Ok(instance(g, policies, &all))
                    }
                };
                reports.clear();
                if let Ok(mut out) = results[s].lock() {
                    *out = Some(figures);
                }
            });
        }
    });
    let mut instances = Vec::with_capacity(scenarios.len());
    for (g, slot) in scenarios.iter().zip(results) {
        instances.push(
            slot.into_inner()
                .ok()
                .flatten()
                .ok_or_else(|| format!("{}: a run did not finish", g.scenario.name))??,
        );
    }
    Ok(SuiteReport::new(suite_seed, &instances))
}

/// Scenario `g`'s figures from its runs, one per policy (in `policies`' order).
fn instance(g: &Generated, policies: &[PolicySpec], runs: &[PolicyReport]) -> Instance {
    let oracle = policies
        .iter()
        .position(|p| p.label() == "oracle")
        .map(|i| &runs[i]);
    let figures = policies
        .iter()
        .zip(runs)
        .map(|(p, r)| InstanceFigures::new(p.label(), r, oracle))
        .collect();
    let (degrade_at_s, heal_at_s) = event_times(&g.scenario);
    let queueing = g.scenario.candidates.iter().any(|c| c.service_ms.is_some());
    Instance {
        family: g.family.name().to_string(),
        scenario: g.scenario.name.clone(),
        description: g.scenario.description.clone(),
        seed: g.seed,
        degrade_at_s,
        heal_at_s,
        world: World::new(queueing, g.scenario.workload.retries > 0),
        policies: figures,
    }
}
